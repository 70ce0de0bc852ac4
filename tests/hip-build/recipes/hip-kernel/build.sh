#!/usr/bin/env bash
set -euo pipefail
source "$RECIPE_DIR/../_shared/rocm-env.sh"

cmake -S . -B build -G Ninja \
    -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_INSTALL_PREFIX="$PREFIX" \
    -DCMAKE_CXX_COMPILER="$ROCM_PATH/lib/llvm/bin/clang++" \
    $ROCM_CMAKE_ARGS \
    -DDECOY_ROCM="$DECOY_ROCM"
cmake --build build
cmake --install build
# What the compiler itself said each object read (its -MD output, which ninja keeps in .ninja_deps).
mkdir -p "$PREFIX/share/hip-kernel"
ninja -C build -t deps > "$PREFIX/share/hip-kernel/compile-deps.txt"
cp build/hip_DIR.txt build/hip_dependency_DIRs.txt "$PREFIX/share/hip-kernel/"
# The same kernel through hipcc, as torch's cpp_extension compiles extensions (one --offload-arch per target of
# PYTORCH_ROCM_ARCH, split at ";" as _get_rocm_arch_flags does; rocm-env.sh sets it; conda's GCC and sysroot from
# HIPCC_*_FLAGS_APPEND).
offload_archs=()
IFS=';' read -r -a rocm_archs <<< "$PYTORCH_ROCM_ARCH"
for rocm_arch in "${rocm_archs[@]}"; do offload_archs+=("--offload-arch=$rocm_arch"); done
hipcc "${offload_archs[@]}" -fPIC -shared -MD -MF hipcc.d -o "$PREFIX/lib/libhipkernel_hipcc.so" kernel.hip
cp hipcc.d "$PREFIX/share/hip-kernel/hipcc-deps.txt"
