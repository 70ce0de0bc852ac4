# rocm-sdk (rocm[libraries]): what AMD's runtime needs in the user's environment. It needs no ROCM_PATH: AMD's
# torch finds the SDK's libraries through rocm_sdk (_rocm_init). What hipcc and ROCm-aware build tools need
# (ROCM_PATH, HIP_PATH, HIP_DEVICE_LIB_PATH, hipcc's conda GCC flags) is rocm-sdk-devel's activation
# (activate-devel.sh), so an environment without the devel tree sets none of it and reports nothing missing.
