#!/usr/bin/env bash
# Build PyTorch for ROCm for exactly $GPU_ARCH.
set -euo pipefail
source "$RECIPE_DIR/../_shared/rocm-env.sh"   # ROCm paths, PYTORCH_ROCM_ARCH=$GPU_ARCH, MAX_JOBS, launcher

export USE_ROCM=1 USE_CUDA=0 USE_MPI=0 USE_NUMA=0 USE_KINETO=1 USE_GLOO=1 BUILD_TEST=0
export BLAS=OpenBLAS OpenBLAS_HOME="$PREFIX"
export CMAKE_PREFIX_PATH="$PREFIX"
export CXXFLAGS="$CXXFLAGS -I$PREFIX/include/roctracer -Wno-error=maybe-uninitialized -Wno-error=uninitialized -Wno-error=restrict"
export PYTORCH_BUILD_NUMBER=0
# TheRock leaves out RCCL on some iGPU families (gfx1150/1152/1153); build distributed without it there.
if compgen -G "$PREFIX/lib/librccl.so*" >/dev/null; then
    export USE_RCCL=1 USE_NCCL=1 USE_SYSTEM_NCCL=1 NCCL_ROOT_DIR="$PREFIX"
else
    echo "pytorch-rocm: no librccl in this ROCm; building without RCCL (gloo only)"
    export USE_RCCL=0 USE_NCCL=0
fi

if [[ "$WITH_AOTRITON" == "1" ]]; then
    # Use our aotriton (kernels for this arch only) instead of downloading release tarballs. PyTorch 2.14's
    # cmake/External/aotriton.cmake then links <prefix>/lib/libaotriton_v2.so and itself installs
    # libaotriton_v2*.so* and lib/aotriton.images from the prefix into the wheel's torch/lib (its
    # scikit-build-core install rules), which is where aotriton finds its images at run time. So nothing is
    # copied here (a second copy would only duplicate those rules). The recipe tests check the result.
    export AOTRITON_INSTALLED_PREFIX="$PREFIX/opt/aotriton"
    export USE_FLASH_ATTENTION=1 USE_MEM_EFF_ATTENTION=1
else
    echo "pytorch-rocm: aotriton does not support $GPU_ARCH; building WITHOUT Flash/memory-efficient SDPA (math kernel only)"
    export USE_FLASH_ATTENTION=0 USE_MEM_EFF_ATTENTION=0
fi
echo "pytorch-rocm: USE_ROCM_CK_SDPA=$USE_ROCM_CK_SDPA USE_FBGEMM_GENAI=$USE_FBGEMM_GENAI MAX_JOBS=$MAX_JOBS"

# ROCm builds compile HIPified sources; the tarball ships the CUDA originals.
"$PYTHON" tools/amd_build/build_amd.py

"$PYTHON" -m pip install . -vv --no-build-isolation --no-deps

bash "$RECIPE_DIR/../_shared/record-patches.sh" pytorch-rocm
