#!/usr/bin/env bash
# AITER_USE_SYSTEM_TRITON=1: otherwise setup.py runs install_triton.sh, which pip-uninstalls our triton and
# downloads another. A non-develop install never pip-installs flydsl (it is a host dependency here).
set -euo pipefail
source "$RECIPE_DIR/../_shared/rocm-env.sh"

export AITER_USE_SYSTEM_TRITON=1
export BUILD_TARGET=rocm
export PREBUILD_KERNELS="$AITER_PREBUILD_KERNELS"
# No .git in the work tree, so setuptools_scm needs the version given.
export SETUPTOOLS_SCM_PRETEND_VERSION="$PKG_VERSION"

"$PYTHON" -m pip install . --no-deps --no-build-isolation -vv

bash "$RECIPE_DIR/../_shared/record-patches.sh" "$PKG_NAME"
