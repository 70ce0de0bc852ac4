#!/usr/bin/env bash
set -euo pipefail
site="$PREFIX/lib/python3.12/site-packages"
core="$site/_rocm_sdk_core"
llvm=/usr/lib/llvm-15
debian_lib=/usr/lib/x86_64-linux-gnu
mkdir -p "$core/lib/llvm/bin" "$core/lib/llvm/lib/clang" "$core/lib/llvm/amdgcn" "$core/include" "$core/share/hip" \
    "$core/lib/cmake/hip" "$core/bin"

# LLVM's install layout: the binary is clang-<major>, clang and clang++ link to it (Debian's hipcc calls clang-15)
cp "$(readlink -f "$llvm/bin/clang")" "$core/lib/llvm/bin/clang-${llvm##*-}"
ln -s "clang-${llvm##*-}" "$core/lib/llvm/bin/clang"
ln -s "clang-${llvm##*-}" "$core/lib/llvm/bin/clang++"
for tool in lld ld.lld clang-offload-bundler llvm-link llvm-objcopy; do ln -s "$llvm/bin/$tool" "$core/lib/llvm/bin/$tool"; done
for library in "$llvm"/lib/libclang-cpp.so.* "$llvm"/lib/libLLVM-*.so*; do ln -s "$library" "$core/lib/llvm/lib/"; done
for resource in "$llvm"/lib/clang/*; do ln -s "$resource" "$core/lib/llvm/lib/clang/"; done
ln -s "$debian_lib/amdgcn/bitcode" "$core/lib/llvm/amdgcn/bitcode"
for library in "$debian_lib"/libamdhip64.so*; do ln -s "$library" "$core/lib/"; done
ln -s /usr/include/hip "$core/include/hip"
ln -s /usr/include/hsa "$core/include/hsa"
cp /usr/share/hip/version "$core/share/hip/version"
for config in /usr/lib/x86_64-linux-gnu/cmake/hip/*.cmake; do
    sed -e 's|/../../../../"|/../../../"|' -e 's|/lib/x86_64-linux-gnu\([/"]\)|/lib\1|g' "$config" > "$core/lib/cmake/hip/$(basename "$config")"
done
# hip-config.cmake's own dependencies (find_dependency AMDDeviceLibs, amd_comgr, hsa-runtime64), in the SDK as
# TheRock ships them (lib/cmake/<package>, the libraries in lib/, the bitcode in lib/llvm/amdgcn/bitcode), so the
# build proves they resolve from the SDK too, not from the machine's /usr.
for package in amd_comgr hsa-runtime64; do
    mkdir -p "$core/lib/cmake/$package"
    for config in /usr/lib/x86_64-linux-gnu/cmake/$package/*.cmake; do
        sed -e 's|/lib/x86_64-linux-gnu\([/"]\)|/lib\1|g' "$config" > "$core/lib/cmake/$package/$(basename "$config")"
    done
done
for library in "$debian_lib"/libamd_comgr.so* "$debian_lib"/libhsa-runtime64.so*; do ln -s "$library" "$core/lib/"; done
# the targets files climb from their folder to the prefix one get_filename_component(... PATH) per level: Debian's
# lib/x86_64-linux-gnu/cmake/<package> is one level deeper than the SDK's lib/cmake/<package>
for targets in hip/hip-targets.cmake amd_comgr/amd_comgr-targets.cmake hsa-runtime64/hsa-runtime64Targets.cmake; do
    python3 - "$core/lib/cmake/$targets" <<'PY'
import sys
path = sys.argv[1]
text = open(path).read()
step = 'get_filename_component(_IMPORT_PREFIX "${_IMPORT_PREFIX}" PATH)\n'
assert text.count(step) == 4, text.count(step)
open(path, "w").write(text.replace(step, "", 1))
PY
done
mkdir -p "$core/lib/cmake/AMDDeviceLibs"
sed -e 's|/lib/x86_64-linux-gnu/amdgcn/|/lib/llvm/amdgcn/|g' /usr/lib/cmake/AMDDeviceLibs/AMDDeviceLibsConfig.cmake \
    > "$core/lib/cmake/AMDDeviceLibs/AMDDeviceLibsConfig.cmake"
cp /usr/bin/hipcc.pl /usr/bin/hipconfig.pl /usr/bin/hipvars.pm "$core/bin/"
ln -s hipcc.pl "$core/bin/hipcc"
ln -s hipconfig.pl "$core/bin/hipconfig"

devel="$site/_rocm_sdk_devel"
mkdir -p "$devel"
for part in bin include lib share; do ln -s "../_rocm_sdk_core/$part" "$devel/$part"; done
mkdir -p "$site/rocm_sdk_device_gfx90a-5.2.0.dist-info"
printf 'Metadata-Version: 2.1\nName: rocm-sdk-device-gfx90a\nVersion: 5.2.0\n' > "$site/rocm_sdk_device_gfx90a-5.2.0.dist-info/METADATA"
