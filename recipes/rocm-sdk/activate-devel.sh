# rocm-sdk-devel: point ROCm-aware tools at this environment's ROCm: the expanded devel tree in site-packages, the
# root `rocm-sdk path --root` prints. Only plain exports, so activation stays instant; previous values are kept
# for deactivate-devel.sh.
export _ROCM_SDK_OLD_ROCM_PATH="${ROCM_PATH-}"
export _ROCM_SDK_OLD_HIP_PATH="${HIP_PATH-}"
export _ROCM_SDK_OLD_HIP_DEVICE_LIB_PATH="${HIP_DEVICE_LIB_PATH-}"
export ROCM_PATH="$CONDA_PREFIX/@SITE_PACKAGES@/_rocm_sdk_devel"
export HIP_PATH="$ROCM_PATH"
# ROCM_HOME too: aiter's JIT and torch.utils.cpp_extension take the ROCm root from ROCM_HOME before ROCM_PATH
# (aiter/jit/utils/cpp_extension.py _find_rocm_home at aiter de07f388; torch's the same), then call
# $ROCM_HOME/bin/hipcc. A shell's ROCM_HOME=/opt/rocm would otherwise compile the JIT with the machine's ROCm.
export _ROCM_SDK_OLD_ROCM_HOME="${ROCM_HOME-}"
export ROCM_HOME="$ROCM_PATH"
# clang stops searching for device libraries once ROCM_PATH is set, so name them explicitly
export HIP_DEVICE_LIB_PATH="$ROCM_PATH/lib/llvm/amdgcn/bitcode"
# hipcc, amdclang, rocm-sdk, ... are console scripts in $CONDA_PREFIX/bin, already on PATH.
# ROCm's clang on this environment's conda GCC and sysroot, where it holds them (aiter's `gxx` run requirement
# brings both): aiter compiles its kernels with hipcc on first use, torch's cpp_extension builds with it too. The
# same flags builds get (recipes/_shared/hip-toolchain.sh); rocm_clang_toolchain_flags comes from
# _shared/conda-gcc-flags.sh, which build.sh puts at the top of this script. Without a conda GCC: nothing added.
export _ROCM_SDK_OLD_HIPCC_COMPILE_FLAGS_APPEND="${HIPCC_COMPILE_FLAGS_APPEND-}"
export _ROCM_SDK_OLD_HIPCC_LINK_FLAGS_APPEND="${HIPCC_LINK_FLAGS_APPEND-}"
if _rocm_sdk_flags="$(rocm_clang_toolchain_flags "$CONDA_PREFIX" \
        "$CONDA_PREFIX/${CONDA_TOOLCHAIN_HOST:-x86_64-conda-linux-gnu}/sysroot")"; then
    export HIPCC_COMPILE_FLAGS_APPEND="${HIPCC_COMPILE_FLAGS_APPEND:+$HIPCC_COMPILE_FLAGS_APPEND }$_rocm_sdk_flags"
    export HIPCC_LINK_FLAGS_APPEND="${HIPCC_LINK_FLAGS_APPEND:+$HIPCC_LINK_FLAGS_APPEND }$_rocm_sdk_flags"
fi
unset _rocm_sdk_flags
unset -f rocm_clang_toolchain_flags
