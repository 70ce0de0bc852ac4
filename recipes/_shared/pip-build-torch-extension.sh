#!/usr/bin/env bash
# Build and install a Python package with HIP extensions against the host env's PyTorch, for one arch.
#
# Usage (as a recipe's whole build script, run from the source dir):
#   bash "$RECIPE_DIR/../_shared/pip-build-torch-extension.sh" <package-name>
# Reads: GPU_ARCH, MAX_JOBS, COMPILER_LAUNCHER (see rocm-env.sh), ROCM_STACK_PATCHES (see
#   record-patches.sh); any package-specific knobs (FORCE_CUDA, BUILD_*, ...) pass through unchanged.
# Does: rocm-env.sh (ROCM_HOME, PYTORCH_ROCM_ARCH=$GPU_ARCH, MAX_JOBS) -> `pip install .` without
#   build isolation or dependency resolution (the recipe's host env is the build env) -> patch record.
set -euo pipefail
package_name="${1:?usage: pip-build-torch-extension.sh <package-name>}"
shared_dir="$(dirname "${BASH_SOURCE[0]}")"
source "$shared_dir/rocm-env.sh"
"$PYTHON" -m pip install . -vv --no-build-isolation --no-deps
bash "$shared_dir/record-patches.sh" "$package_name"
