# shellcheck shell=bash
# ROCm build environment for recipes that compile against our rocm-sdk package.
#
# Usage (in a recipe's build script):   source "$RECIPE_DIR/../_shared/rocm-env.sh"
# Needs: rocm-sdk in requirements.host (its files live directly under $PREFIX, see recipes/rocm-sdk).
# Reads (declare them in build.script.env):
#   GPU_ARCH           the one target, e.g. gfx1151 (required; we build for exactly one arch)
#   MAX_JOBS, COMPILER_LAUNCHER   see build-knobs.sh, which this script sources
# Exports:
#   ROCM_PATH ROCM_HOME HIP_PATH         the ROCm root (= $PREFIX)
#   HIP_DEVICE_LIB_PATH                  clang skips its device-lib search once ROCM_PATH is set
#   HIP_CLANG_PATH                       ROCm's clang, for builds that call it directly (PyTorch)
#   PATH                                 ROCm's bin first
#   CMAKE_PREFIX_PATH                    ROCm's cmake packages (hip, rocblas, ...)
#   CPPFLAGS CXXFLAGS LDFLAGS            + TheRock's bundled sysdeps (libdrm headers for rocm_smi's kfd_ioctl.h)
#   PKG_CONFIG_PATH                      + sysdeps pkg-config (liblzma for aotriton)
#   PYTORCH_ROCM_ARCH GPU_ARCHS AMDGPU_TARGETS   the arch, under the names torch/flash-attn/aiter/CK read
#   ROCM_CMAKE_ARGS                      -D flags selecting the arch and ROCm root for plain CMake projects

if [[ -z "${GPU_ARCH:-}" ]]; then
    echo "rocm-env.sh: GPU_ARCH is not set; add 'GPU_ARCH: \${{ gpu_arch }}' to build.script.env" >&2
    exit 1
fi
if [[ ! -x "$PREFIX/bin/hipconfig" ]]; then
    echo "rocm-env.sh: no ROCm under \$PREFIX ($PREFIX/bin/hipconfig missing); is rocm-sdk in requirements.host?" >&2
    exit 1
fi

# shellcheck source=build-knobs.sh
source "$(dirname "${BASH_SOURCE[0]}")/build-knobs.sh"

export ROCM_PATH="$PREFIX"
export ROCM_HOME="$PREFIX"
export HIP_PATH="$PREFIX"
export HIP_DEVICE_LIB_PATH="$PREFIX/lib/llvm/amdgcn/bitcode"
export HIP_CLANG_PATH="$PREFIX/lib/llvm/bin"
export PATH="$PREFIX/bin:$PATH"
export CMAKE_PREFIX_PATH="$PREFIX${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"

rocm_sysdeps="$PREFIX/lib/rocm_sysdeps"
export CPPFLAGS="${CPPFLAGS:-} -I$rocm_sysdeps/include"
export CXXFLAGS="${CXXFLAGS:-} -I$rocm_sysdeps/include"
export LDFLAGS="${LDFLAGS:-} -L$rocm_sysdeps/lib"
export PKG_CONFIG_PATH="$rocm_sysdeps/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
unset rocm_sysdeps

export PYTORCH_ROCM_ARCH="$GPU_ARCH"
export GPU_ARCHS="$GPU_ARCH"
export AMDGPU_TARGETS="$GPU_ARCH"
export ROCM_CMAKE_ARGS="-DROCM_PATH=$ROCM_PATH -DGPU_TARGETS=$GPU_ARCH -DAMDGPU_TARGETS=$GPU_ARCH -DCMAKE_HIP_ARCHITECTURES=$GPU_ARCH"
