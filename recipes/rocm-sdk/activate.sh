# rocm-sdk: point ROCm-aware tools at this environment's ROCm (installed directly under the prefix).
# Only plain exports, so activation stays instant. Previous values are kept for deactivate.sh.
export _ROCM_SDK_OLD_ROCM_PATH="${ROCM_PATH-}"
export _ROCM_SDK_OLD_HIP_PATH="${HIP_PATH-}"
export _ROCM_SDK_OLD_HIP_DEVICE_LIB_PATH="${HIP_DEVICE_LIB_PATH-}"
export ROCM_PATH="$CONDA_PREFIX"
export HIP_PATH="$CONDA_PREFIX"
# clang stops searching for device libraries once ROCM_PATH is set, so name them explicitly
export HIP_DEVICE_LIB_PATH="$CONDA_PREFIX/lib/llvm/amdgcn/bitcode"
# $CONDA_PREFIX/bin is already on PATH after activation; nothing to add for hipcc/amdclang.
