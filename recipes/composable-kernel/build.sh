#!/usr/bin/env bash
# Library-only CK build for one arch. GPU_ARCHS (not GPU_TARGETS) selects CK's library-only mode:
# no examples, tests or tutorials, and dissimilar archs are handled per target.
#
# Every instance family (GEMM, conv, ... and MHA where CK has it), not TheRock's conv-only build: TheRock builds CK
# for its one in-tree consumer, MIOpen, which needs the convolution instances; nothing of this stack links this
# package (flash-attn and aiter compile their own pinned CK trees), so it exists for a user's own code, which may
# link any family. It is built only on request (`orchestrate build composable-kernel`; rocm-stack does not require
# it), so the hours the full set costs are spent only by whoever asked for it.
set -euo pipefail
source "$RECIPE_DIR/../_shared/rocm-env.sh"

# A CK instance compile can take several GB; linking the big instance libraries more. The compile pool
# follows MAX_JOBS, the link pool gets a quarter of it (at least one).
link_jobs=$(( MAX_JOBS / 4 > 0 ? MAX_JOBS / 4 : 1 ))

# DL kernels are the dot-instruction path for archs with neither XDL nor WMMA (gfx103x), for which the table
# builds no CK (composable_kernel: no, as TheRock); DPP kernels are off by default upstream, and both were turned off
# for gfx115x by rock-the-conda and
# everywhere by nixpkgs. FP8 instances on archs without FP8 "produce unusably slow kernels" (nixpkgs).
cmake -S . -B build -G Ninja ${CMAKE_ARGS:-} \
    -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_INSTALL_PREFIX="$PREFIX" \
    -DCMAKE_PREFIX_PATH="$PREFIX" \
    -DCMAKE_CXX_COMPILER="$ROCM_PATH/lib/llvm/bin/clang++" \
    -DCMAKE_C_COMPILER="$ROCM_PATH/lib/llvm/bin/clang" \
    -DCMAKE_HIP_COMPILER="$ROCM_PATH/lib/llvm/bin/clang++" \
    -DBUILD_SHARED_LIBS=ON \
    -DGPU_ARCHS="$GPU_ARCHS" \
    -DBUILD_MHA_LIB="$BUILD_MHA_LIB" \
    -DBUILD_DEV=OFF \
    -DBUILD_TESTING=OFF \
    -DBUILD_CK_PROFILER=OFF \
    -DENABLE_CLANG_CPP_CHECKS=OFF \
    -DCK_TIME_KERNEL=OFF \
    -DDISABLE_DL_KERNELS=ON \
    -DDISABLE_DPP_KERNELS=ON \
    -DCK_USE_FP8_ON_UNSUPPORTED_ARCH=OFF \
    -DCK_PARALLEL_COMPILE_JOBS="$MAX_JOBS" \
    -DCK_PARALLEL_LINK_JOBS="$link_jobs"
cmake --build build --parallel "$MAX_JOBS"
cmake --install build

bash "$RECIPE_DIR/../_shared/record-patches.sh" "$PKG_NAME"
