#!/usr/bin/env bash
# Build triton's pinned LLVM, then triton against it with downloads switched off.
set -euo pipefail
source "$RECIPE_DIR/../_shared/build-knobs.sh"

llvm_install="$SRC_DIR/llvm-install"
# The target list and projects triton's own LLVM builds use (triton scripts/build-llvm-project.sh), plus clang:
# triton >= 3.8.0 builds its GSan runtime with the clang++ of the LLVM prefix (third_party/nvidia/CMakeLists.txt
# find_program(... NO_DEFAULT_PATH), as nixpkgs' triton-llvm for 3.8 notes).
cmake -S "$SRC_DIR/llvm-project/llvm" -B "$SRC_DIR/llvm-build" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_INSTALL_PREFIX="$llvm_install" \
    -DLLVM_ENABLE_PROJECTS="mlir;lld;clang" \
    -DLLVM_TARGETS_TO_BUILD="host;NVPTX;AMDGPU" \
    -DLLVM_ENABLE_ASSERTIONS=ON \
    -DLLVM_INSTALL_UTILS=ON \
    -DLLVM_BUILD_TOOLS=ON \
    -DLLVM_INCLUDE_TESTS=OFF -DLLVM_INCLUDE_BENCHMARKS=OFF -DLLVM_INCLUDE_EXAMPLES=OFF \
    -DMLIR_ENABLE_BINDINGS_PYTHON=OFF \
    -DLLVM_PARALLEL_LINK_JOBS=2
cmake --build "$SRC_DIR/llvm-build" --target install

cd "$SRC_DIR/triton"
export TRITON_OFFLINE_BUILD=1
export LLVM_SYSPATH="$llvm_install"
export JSON_SYSPATH="$PREFIX"
export PYBIND11_SYSPATH="$PREFIX"
# Proton (the profiler) wants CUPTI/rocprofiler headers; not needed to compile kernels.
export TRITON_BUILD_PROTON=OFF
export TRITON_BUILD_WITH_CCACHE=OFF
export TRITON_HOME="$SRC_DIR/triton-home"
# Keep triton's CMake from picking up ROCm's bundled LLVM from the environment (TheRock#1999).
export TRITON_APPEND_CMAKE_ARGS="-DCMAKE_FIND_USE_CMAKE_ENVIRONMENT_PATH=FALSE"
"$PYTHON" -m pip install . -vv --no-build-isolation --no-deps

bash "$RECIPE_DIR/../_shared/record-patches.sh" triton-rocm
