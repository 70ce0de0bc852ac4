# rocm-sdk-devel: restore what activate-devel.sh replaced (POSIX sh: sourced by bash, zsh, dash alike).
_rocm_sdk_restore() {
    eval "_rocm_sdk_saved=\${_ROCM_SDK_OLD_$1-}"
    if [ -n "$_rocm_sdk_saved" ]; then export "$1=$_rocm_sdk_saved"; else unset "$1"; fi
    unset "_ROCM_SDK_OLD_$1" _rocm_sdk_saved
}
_rocm_sdk_restore ROCM_PATH
_rocm_sdk_restore HIP_PATH
_rocm_sdk_restore ROCM_HOME
_rocm_sdk_restore HIP_DEVICE_LIB_PATH
_rocm_sdk_restore HIPCC_COMPILE_FLAGS_APPEND
_rocm_sdk_restore HIPCC_LINK_FLAGS_APPEND
unset -f _rocm_sdk_restore
