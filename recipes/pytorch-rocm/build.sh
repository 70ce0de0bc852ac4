#!/usr/bin/env bash
# Build PyTorch for ROCm for exactly $GPU_ARCH.
set -euo pipefail
source "$RECIPE_DIR/../_shared/rocm-env.sh"   # ROCm paths, PYTORCH_ROCM_ARCH=$GPU_ARCH, MAX_JOBS, launcher

export USE_ROCM=1 USE_CUDA=0 USE_MPI=0 USE_NUMA=0 USE_KINETO=1 USE_GLOO=1 BUILD_TEST=0
export BLAS=OpenBLAS OpenBLAS_HOME="$PREFIX"
# Keep the ROCm root rocm-env.sh put first (`rocm-sdk path --cmake`'s parent, as TheRock's build_prod_wheels.py
# sets CMAKE_PREFIX_PATH); the host prefix comes after it, for openblas and the python packages.
export CMAKE_PREFIX_PATH="$CMAKE_PREFIX_PATH:$PREFIX"
# roctracer.h for Kineto lives in the SDK's include/roctracer (TheRock build_prod_wheels.py at 89553ce3:
# add_env_compiler_flags(env, "CXXFLAGS", f"-I{rocm_dir / 'include' / 'roctracer'}")), not in $PREFIX/include.
export CXXFLAGS="$CXXFLAGS -I$ROCM_PATH/include/roctracer -Wno-error=maybe-uninitialized -Wno-error=uninitialized -Wno-error=restrict"
export PYTORCH_BUILD_NUMBER=0
# RCCL lives where AMD's wheels put it: the library in site-packages/_rocm_sdk_libraries/lib (TheRock rocm_sdk
# _dist_info.py: LibraryEntry("rccl", "libraries", "librccl.so*")), its CMake package in the devel tree's
# lib/cmake/rccl. PyTorch 2.14 finds it only as a CMake package: cmake/External/rccl.cmake runs
# find_package(rccl REQUIRED) when USE_SYSTEM_NCCL is on, and LoadHIP.cmake appends ROCM_PATH to
# CMAKE_PREFIX_PATH; rccl_ROOT (read by find_package, policy CMP0074) names the tree explicitly as well.
# Some iGPU families ship no RCCL (TheRock therock_amdgpu_targets.cmake excludes it for gfx1103/115[0,2,3]):
# distributed is then gloo only, and the build says so.
rocm_sdk_libraries="$(dirname "$ROCM_PATH")/_rocm_sdk_libraries/lib"
if compgen -G "$rocm_sdk_libraries/librccl.so*" >/dev/null && [[ -f "$ROCM_PATH/lib/cmake/rccl/rccl-config.cmake" ]]; then
    export USE_RCCL=1 USE_NCCL=1 USE_SYSTEM_NCCL=1 rccl_ROOT="$ROCM_PATH"
    echo "pytorch-rocm: RCCL from $rocm_sdk_libraries (CMake package $ROCM_PATH/lib/cmake/rccl)"
else
    echo "pytorch-rocm: no RCCL in this ROCm ($rocm_sdk_libraries/librccl.so* with $ROCM_PATH/lib/cmake/rccl/rccl-config.cmake); building without RCCL (gloo only)"
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

# torch/__init__.py (v2.14.1) imports torch._rocm_init when it exists and calls its initialize() before loading
# libtorch: the hook AMD's wheels use to preload the SDK's libraries from site-packages with RTLD_GLOBAL
# (TheRock external-builds/pytorch/build_prod_wheels.py get_rocm_init_contents). Written after the install,
# straight into site-packages: scikit-build-core leaves the git-ignored file out of the wheel (TheRock adds
# -Cwheel.force-include for it), and a conda package takes the prefix's files, not the wheel's RECORD.
"$PYTHON" "$RECIPE_DIR/write_rocm_init.py" "$SP_DIR/torch/_rocm_init.py"

bash "$RECIPE_DIR/../_shared/record-patches.sh" pytorch-rocm
