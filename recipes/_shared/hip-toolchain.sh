# shellcheck shell=bash
# The toolchain wiring every compile through ROCm's clang needs, in one place (docs/components.md, "Toolchain
# wiring"). rocm-env.sh sources it, so every recipe that builds against the SDK gets it.
#
# 1. ROCm's clang on the build environment's GCC and sysroot. TheRock's clang knows neither (its config sets
#    --rocm-path and rpaths only), so without these flags every host-side compile reads the machine's /usr headers
#    and crt files: it fails where no system g++ exists, and elsewhere builds against the machine's glibc instead
#    of conda-forge's sysroot (`__glibc >=2.28` declared, `__isoc23_*` needed on glibc 2.38+ hosts).
#    --target names conda-forge's triple, which is how clang finds a GCC installed under
#    <prefix>/lib/gcc/x86_64-conda-linux-gnu/<version> with its libstdc++ headers under
#    <prefix>/x86_64-conda-linux-gnu/include/c++/<version> (the layout of conda-forge's gcc_impl/gxx_impl); it is
#    the triple conda-forge's own clang gets from its program name (ctng-compiler-activation-feedstock
#    recipe/install-clang++.sh: x86_64-conda-linux-gnu-clang++ with `--sysroot $PREFIX/x86_64-conda-linux-gnu/sysroot`
#    in its config file), and what rock-the-conda compiles HIP with (recipes/hip/activate/hip-rocm-clang_activate.sh:
#    HIPCXX=x86_64-conda-linux-gnu-clang). It works from clang 15 (Debian's ROCm 5.2, which the tests run) to
#    TheRock's; --gcc-install-dir would need clang >= 16. With them, --rtlib=libgcc --unwindlib=libgcc: TheRock's clang
#    defaults to compiler-rt (compiler/CMakeLists.txt:92), which clang finds for this triple only in the old lib/linux
#    layout (conda-gcc-flags.sh says more; tests/test_jit_toolchain.py links both ways).
#    The flags reach every way a recipe compiles HIP: hipcc reads HIPCC_COMPILE_FLAGS_APPEND/HIPCC_LINK_FLAGS_APPEND
#    on every call (torch.utils.cpp_extension, hip_add_library, aiter's JIT), and CMake reads rocm-toolchain.cmake
#    (below) for its HIP language and for C/C++ compiled by ROCm's clang. Not CFLAGS/CXXFLAGS: conda's gcc reads
#    those too and rejects --gcc-toolchain.
# 2. Our HIP before any /opt/rocm. aotriton 0.13b and CK append /opt/rocm to the CMAKE_PREFIX_PATH *variable*
#    before find_package(hip), and CMake searches that variable before the environment's CMAKE_PREFIX_PATH (where
#    rocm-env.sh puts the SDK), so a machine's system ROCm would win. rocm-toolchain.cmake, which every CMake
#    configure reads through the CMAKE_TOOLCHAIN_FILE environment variable (CMake >= 3.21), pins <package>_DIR for
#    each CMake package the SDK ships (find_package consults <package>_DIR before any search path) and puts the SDK
#    first in the variable itself.
# Reads: ROCM_PATH (rocm-env.sh), BUILD_PREFIX, CONDA_BUILD_SYSROOT and CONDA_TOOLCHAIN_HOST (conda-forge's
#   compiler activation; defaults: $BUILD_PREFIX/x86_64-conda-linux-gnu/sysroot, x86_64-conda-linux-gnu).
# 3. HIP_PLATFORM=amd: hipcc and hip-config.cmake pick NVIDIA's platform where an nvcc is on PATH and nothing says
#    otherwise (build machines with CUDA installed).
# Exports: ROCM_CLANG_TOOLCHAIN_FLAGS, HIPCC_COMPILE_FLAGS_APPEND, HIPCC_LINK_FLAGS_APPEND, CMAKE_TOOLCHAIN_FILE,
#   HIP_PLATFORM.

# shellcheck source=conda-gcc-flags.sh
source "$(dirname "${BASH_SOURCE[0]}")/conda-gcc-flags.sh"

if [[ -z "${BUILD_PREFIX:-}" ]]; then
    echo "hip-toolchain.sh: BUILD_PREFIX is not set; source this from a recipe's build script (rattler-build sets it)" >&2
    exit 1
fi
if ! ROCM_CLANG_TOOLCHAIN_FLAGS="$(rocm_clang_toolchain_flags "$BUILD_PREFIX" \
        "${CONDA_BUILD_SYSROOT:-$BUILD_PREFIX/${CONDA_TOOLCHAIN_HOST:-x86_64-conda-linux-gnu}/sysroot}")"; then
    echo "hip-toolchain.sh: $ROCM_CLANG_TOOLCHAIN_FLAGS; add it to requirements.build" >&2
    exit 1
fi
export CMAKE_TOOLCHAIN_FILE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/rocm-toolchain.cmake"
export ROCM_CLANG_TOOLCHAIN_FLAGS
export HIPCC_COMPILE_FLAGS_APPEND="${HIPCC_COMPILE_FLAGS_APPEND:+$HIPCC_COMPILE_FLAGS_APPEND }$ROCM_CLANG_TOOLCHAIN_FLAGS"
export HIPCC_LINK_FLAGS_APPEND="${HIPCC_LINK_FLAGS_APPEND:+$HIPCC_LINK_FLAGS_APPEND }$ROCM_CLANG_TOOLCHAIN_FLAGS"
export HIP_PLATFORM=amd
