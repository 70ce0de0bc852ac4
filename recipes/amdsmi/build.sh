#!/usr/bin/env bash
# rocm-sdk-core's share/amd_smi out of the wheel, patched, installed as the wheel its pyproject.toml builds.
# Needs only bash, patch and $PYTHON, the python of requirements.host (the standard library does the rest).
set -euo pipefail

tree="$SRC_DIR/amd_smi"
"$PYTHON" "$RECIPE_DIR/../_shared/rocm_wheels.py" amd-smi-tree "$tree" "$SRC_DIR/wheels/core"
for patch_path in ${ROCM_STACK_PATCHES:-}; do
    patch --forward --batch --fuzz=0 -p1 -d "$tree" -i "$RECIPE_DIR/$patch_path"
done
mkdir -p "$PREFIX/$SITE_PACKAGES"
"$PYTHON" "$RECIPE_DIR/../_shared/rocm_wheels.py" install-tree "$PREFIX/$SITE_PACKAGES" "$PREFIX/bin" "$tree"

bash "$RECIPE_DIR/../_shared/record-patches.sh" amdsmi
