# rocm-sdk-device: aotriton marks this GPU "experimental"; PyTorch uses its Flash/memory-efficient SDPA
# kernels here only with this set (otherwise it warns and falls back to the math kernel).
export _ROCM_SDK_OLD_TORCH_ROCM_AOTRITON_ENABLE_EXPERIMENTAL="${TORCH_ROCM_AOTRITON_ENABLE_EXPERIMENTAL-}"
export TORCH_ROCM_AOTRITON_ENABLE_EXPERIMENTAL=1
