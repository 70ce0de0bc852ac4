# vllm: the runtime settings of vLLM's own ROCm image (docker/Dockerfile.rocm, final stage, at v0.33.0) that concern
# `vllm serve` here, each applied or declined with why (docs/recipe-review.md, check 10; the SDK-wide ones of
# Dockerfile.rocm_base are rocm-sdk's activation's). A value the user set is kept; deactivate.sh gives back the old.
# - Applied: HIP_FORCE_DEV_KERNARG=1 ("Performance environment variable"): HIP passes kernel arguments in device
#   memory, the setting vLLM's ROCm images are tuned and tested with.
# - Applied: TOKENIZERS_PARALLELISM=false: vLLM forks its engine-core and worker processes after tokenizers ran.
# - Declined: SAFETENSORS_FAST_GPU=1: nothing in vLLM 0.33.0 reads it (grep of the sdist), and we found no reader
#   elsewhere to say what it changes.
# - Declined: PYTORCH_NVML_BASED_CUDA_CHECK=1: vLLM sets it itself at import (vllm/env_override.py:164).
# - Declined: HSA_ENABLE_IPC_MODE_LEGACY=1 and UCX_ROCM_*_SIGPOOL_MAX_ELEMS: for UCX's rocm_ipc (NIXL KV transfer),
#   which this stack does not ship.
# - Declined: MIOPEN_DEBUG_CONV_DIRECT=0, MIOPEN_DEBUG_CONV_GEMM=0 (pytorch/pytorch#169857, 3D convolutions): they
#   change every torch program of the environment, not vLLM's alone; vLLM's image holds vLLM only.
# - Declined: KINETO_CONFIG with ROCTRACER_MAX_EVENTS: profiling only.
export _VLLM_OLD_HIP_FORCE_DEV_KERNARG="${HIP_FORCE_DEV_KERNARG-}"
export HIP_FORCE_DEV_KERNARG="${HIP_FORCE_DEV_KERNARG:-1}"
export _VLLM_OLD_TOKENIZERS_PARALLELISM="${TOKENIZERS_PARALLELISM-}"
export TOKENIZERS_PARALLELISM="${TOKENIZERS_PARALLELISM:-false}"
