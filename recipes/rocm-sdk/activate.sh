# rocm-sdk: point ROCm-aware tools at this environment's ROCm: the expanded devel tree in site-packages, the
# root `rocm-sdk path --root` prints. Only plain exports, so activation stays instant; previous values are kept
# for deactivate.sh.
export _ROCM_SDK_OLD_ROCM_PATH="${ROCM_PATH-}"
export _ROCM_SDK_OLD_HIP_PATH="${HIP_PATH-}"
export _ROCM_SDK_OLD_HIP_DEVICE_LIB_PATH="${HIP_DEVICE_LIB_PATH-}"
export ROCM_PATH="$CONDA_PREFIX/@SITE_PACKAGES@/_rocm_sdk_devel"
export HIP_PATH="$ROCM_PATH"
# clang stops searching for device libraries once ROCM_PATH is set, so name them explicitly
export HIP_DEVICE_LIB_PATH="$ROCM_PATH/lib/llvm/amdgcn/bitcode"
# hipcc, amdclang, rocm-sdk, ... are console scripts in $CONDA_PREFIX/bin, already on PATH.
