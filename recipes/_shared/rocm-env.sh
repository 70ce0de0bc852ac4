# shellcheck shell=bash
# ROCm build environment for recipes that compile against our rocm-sdk packages. The one place that knows
# where AMD's ROCm wheels put the SDK in a conda prefix (recipes/rocm-sdk, recipes/rocm-sdk-device).
#
# Usage (in a recipe's build script):   source "$RECIPE_DIR/../_shared/rocm-env.sh"
# Needs in requirements.host: rocm-sdk-devel (the devel tree; it requires rocm-sdk) and rocm-sdk-device-${{ gpu_arch }} (this GPU's kernels).
# Reads (declare them in build.script.env):
#   GPU_ARCH           the target, e.g. gfx1151, or several separated by "," (gfx942,gfx950: one build with every
#                      target's device code, for one environment on a machine with several GPUs; orchestrate/arch_set.py)
#   MAX_JOBS, COMPILER_LAUNCHER   see build-knobs.sh, which this script sources
# Layout (pip's, TheRock docs/packaging/python_packaging.md): $PREFIX/lib/python3.X/site-packages/
#   _rocm_sdk_devel/        the full SDK tree, `rocm-sdk path --root` (bin include lib share), expanded at
#                           build time; files shipped by the runtime wheels are relative symlinks into
#   _rocm_sdk_core/         compiler (lib/llvm/bin/clang), HIP runtime, hipcc, device bitcode
#   _rocm_sdk_libraries/    math/ML libraries, plus this GPU's kernel packs from rocm-sdk-device-<gfx>
# Exports:
#   ROCM_PATH ROCM_HOME HIP_PATH         the ROCm root (the devel tree)
#   HIP_DEVICE_LIB_PATH                  clang skips its device-lib search once ROCM_PATH is set
#   HIP_CLANG_PATH                       ROCm's clang folder, for builds that call it directly (PyTorch)
#   PATH                                 ROCm's bin first (hipcc, hipconfig, amdclang)
#   CMAKE_PREFIX_PATH                    + the ROCm root, whose lib/cmake holds hip, rocblas, ... (`rocm-sdk path --cmake`)
#   CPPFLAGS CXXFLAGS LDFLAGS            + TheRock's bundled sysdeps (libdrm headers for rocm_smi's kfd_ioctl.h)
#   PKG_CONFIG_PATH                      + sysdeps pkg-config (liblzma for aotriton)
#   PYTORCH_ROCM_ARCH GPU_ARCHS AMDGPU_TARGETS   the arch(s), under the names torch/flash-attn/aiter/CK read (each takes
#                                        a ";" list: torch's PYTORCH_ROCM_ARCH, flash-attn's and aiter's GPU_ARCHS.split(";"))
#   ROCM_CMAKE_ARGS                      -D flags selecting the arch and ROCm root for plain CMake projects
#   HIPCC_*_FLAGS_APPEND CMAKE_TOOLCHAIN_FILE   hip-toolchain.sh: ROCm's clang on conda's GCC and sysroot, and
#                                        CMake on the SDK's HIP before any /opt/rocm

if [[ -z "${GPU_ARCH:-}" ]]; then
    echo "rocm-env.sh: GPU_ARCH is not set; add 'GPU_ARCH: \${{ gpu_arch }}' to build.script.env" >&2
    exit 1
fi
rocm_devel_roots=("$PREFIX"/lib/python3*/site-packages/_rocm_sdk_devel)
if [[ ${#rocm_devel_roots[@]} -ne 1 || ! -x "${rocm_devel_roots[0]}/bin/hipcc" ]]; then
    echo "rocm-env.sh: no ROCm SDK under \$PREFIX ($PREFIX/lib/python3*/site-packages/_rocm_sdk_devel/bin/hipcc missing); add rocm-sdk-devel to requirements.host" >&2
    exit 1
fi
IFS=',' read -r -a rocm_targets <<< "$GPU_ARCH"
for rocm_target in "${rocm_targets[@]}"; do
    if ! compgen -G "$PREFIX/lib/python3*/site-packages/rocm_sdk_device_${rocm_target}-*.dist-info" > /dev/null; then
        echo "rocm-env.sh: no $rocm_target device code under \$PREFIX; add rocm-sdk-device-\${{ gpu_arch }} to requirements.host" >&2
        exit 1
    fi
done
unset rocm_targets rocm_target

# shellcheck source=build-knobs.sh
source "$(dirname "${BASH_SOURCE[0]}")/build-knobs.sh"

export ROCM_PATH="${rocm_devel_roots[0]}"
unset rocm_devel_roots
export ROCM_HOME="$ROCM_PATH"
export HIP_PATH="$ROCM_PATH"
export HIP_DEVICE_LIB_PATH="$ROCM_PATH/lib/llvm/amdgcn/bitcode"
export HIP_CLANG_PATH="$ROCM_PATH/lib/llvm/bin"
# shellcheck source=hip-toolchain.sh
source "$(dirname "${BASH_SOURCE[0]}")/hip-toolchain.sh"
export PATH="$ROCM_PATH/bin:$PATH"
export CMAKE_PREFIX_PATH="$ROCM_PATH${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"

rocm_sysdeps="$ROCM_PATH/lib/rocm_sysdeps"
export CPPFLAGS="${CPPFLAGS:-} -I$rocm_sysdeps/include"
export CXXFLAGS="${CXXFLAGS:-} -I$rocm_sysdeps/include"
export LDFLAGS="${LDFLAGS:-} -L$rocm_sysdeps/lib"
export PKG_CONFIG_PATH="$rocm_sysdeps/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
unset rocm_sysdeps

rocm_target_list="${GPU_ARCH//,/;}"  # the ";" list every consumer below takes (and CMake's list form)
export PYTORCH_ROCM_ARCH="$rocm_target_list"
export GPU_ARCHS="$rocm_target_list"
export AMDGPU_TARGETS="$rocm_target_list"
export ROCM_CMAKE_ARGS="-DROCM_PATH=$ROCM_PATH -DGPU_TARGETS=$rocm_target_list -DAMDGPU_TARGETS=$rocm_target_list -DCMAKE_HIP_ARCHITECTURES=$rocm_target_list"
unset rocm_target_list
