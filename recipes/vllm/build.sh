#!/usr/bin/env bash
set -euo pipefail
source "$RECIPE_DIR/../_shared/rocm-env.sh"

export VLLM_TARGET_DEVICE=rocm
# setup.py get_vllm_version() appends "+rocm<ver>" to the version unless this is set (v0.33.0 setup.py, envs.py):
# the installed metadata then says the conda package's version, as pip and `vllm --version` report it.
export VLLM_SKIP_VERSION_SUFFIX=1
# The sdist carries PKG-INFO, but say the version anyway (vcs-versioning is what setuptools-scm >= 10
# delegates to), so no versioning tool goes looking for a .git.
export SETUPTOOLS_SCM_PRETEND_VERSION="$PKG_VERSION"
export VCS_VERSIONING_PRETEND_VERSION="$PKG_VERSION"
# CMake would otherwise FetchContent ROCm/triton from the network.
export TRITON_KERNELS_SRC_DIR="$SRC_DIR/_deps/rocm-triton/python/triton_kernels/triton_kernels"
test -f "$TRITON_KERNELS_SRC_DIR/__init__.py"

# The Rust part (the vllm-rs frontend binary; tools/build_rust.py at v0.33.0 has no other extension, its
# vllm._rust_tool_parser entry is commented out) is an optional setuptools-rust extension: with no Rust compiler in
# the build env, setup.py skips it. It needs a nightly toolchain (rust-toolchain.toml) plus crates from the network.
# Without it: no VLLM_USE_RUST_FRONTEND; the Python frontend and every tool parser work.
unset VLLM_REQUIRE_RUST_FRONTEND

# Strip torch/torchvision/torchaudio/torchcodec pins from requirements and pyproject: torch is our
# pytorch package (the script moved to tools/ in vLLM 0.33).
"$PYTHON" tools/use_existing_torch.py

# Upstream's ROCm build is `setup.py bdist_wheel` (docker/Dockerfile.rocm at v0.33.0; its ROCm docs: "Currently,
# `pip install .` does not work for ROCm when installing vLLM from source"), so build the wheel the same way and
# install it with pip from that file alone (no index, no dependencies: the recipe's requirements are the env).
"$PYTHON" setup.py bdist_wheel --dist-dir="$SRC_DIR/vllm-dist"
"$PYTHON" -m pip install --no-deps --no-index -vv "$SRC_DIR"/vllm-dist/vllm-*.whl

# the runtime settings of vLLM's ROCm image, applied or declined (activate.sh says which and why)
for phase in activate deactivate; do
    mkdir -p "$PREFIX/etc/conda/$phase.d"
    cp "$RECIPE_DIR/$phase.sh" "$PREFIX/etc/conda/$phase.d/vllm.sh"
done

bash "$RECIPE_DIR/../_shared/record-patches.sh" "$PKG_NAME"
