# rocm-sdk: restore what activate.sh replaced (POSIX sh: sourced by bash, zsh, dash alike); rocm-sdk-devel
# restores its own settings (deactivate-devel.sh).
_rocm_sdk_restore() {
    eval "_rocm_sdk_saved=\${_ROCM_SDK_OLD_$1-}"
    if [ -n "$_rocm_sdk_saved" ]; then export "$1=$_rocm_sdk_saved"; else unset "$1"; fi
    unset "_ROCM_SDK_OLD_$1" _rocm_sdk_saved
}
_rocm_sdk_restore ROCPROFILER_QUEUE_INTERPOSITION
_rocm_sdk_restore HSA_NO_SCRATCH_RECLAIM
unset -f _rocm_sdk_restore
