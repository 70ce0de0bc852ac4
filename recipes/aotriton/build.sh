#!/usr/bin/env bash
# Configure and build aotriton for one arch with every network fetch of its CMake neutralized.
set -euo pipefail
source "$RECIPE_DIR/../_shared/rocm-env.sh"
# liblzma from the host environment's xz (requirements.host; its run_exports make it a run requirement), found first:
# rocm-env.sh also puts TheRock's bundled sysdeps on PKG_CONFIG_PATH, and with two liblzma.pc which one aotriton's
# pkg-config picks, and so what it links, would stand on the order of -L flags.
export PKG_CONFIG_PATH="$PREFIX/lib/pkgconfig:$PKG_CONFIG_PATH"

build_dir="$SRC_DIR/aotriton-build"
# Any pip call inside aotriton's venv must be satisfied from the host env or fail loudly.
export PIP_NO_INDEX=1
# Since 0.13b the configure step also pip-installs aotriton's own codegen package from source; with build
# isolation pip would try to download setuptools. pip reads this variable inverted: "0" turns isolation
# OFF, "1" leaves it on.
export PIP_NO_BUILD_ISOLATION=0

# aotriton clones aiter into <build>/v3src/aiter unless a git checkout at the tag named in
# third_party/aiter.txt is already there (checked with `git describe --tags --exact-match`).
aiter_dir="$build_dir/v3src/aiter"
mkdir -p "$build_dir/v3src"
cp -a "$SRC_DIR/aiter" "$aiter_dir"
if ! git -C "$aiter_dir" describe --tags --exact-match HEAD 2>/dev/null | grep -qx "$AITER_TAG"; then
    rm -rf "$aiter_dir/.git"
    git -C "$aiter_dir" init -q
    git -C "$aiter_dir" add -A
    git -C "$aiter_dir" -c user.name=rocm-stack -c user.email=rocm-stack@localhost commit -q -m "aiter $AITER_TAG (pinned source)"
    git -C "$aiter_dir" tag "$AITER_TAG"
fi

cmake -S "$SRC_DIR/aotriton" -B "$build_dir" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_INSTALL_PREFIX="$PREFIX/opt/aotriton" \
    -DPython3_EXECUTABLE="$PYTHON" \
    -DAOTRITON_TARGET_ARCH="$GPU_ARCHS" \
    -DAOTRITON_GPU_BUILD_TIMEOUT=0 \
    -DAOTRITON_NO_PYTHON=ON \
    -DAOTRITON_USE_TORCH=OFF \
    -DAOTRITON_NOIMAGE_MODE=OFF \
    -DAOTRITON_INHERIT_SYSTEM_SITE_TRITON=ON \
    -DVENV_DIR="$build_dir/venv"
# aotriton's README: `ninja install` runs the whole build; a separate `ninja` would repeat it.
ninja -C "$build_dir" "$NINJA_JOBS_FLAG" install

bash "$RECIPE_DIR/../_shared/record-patches.sh" aotriton
