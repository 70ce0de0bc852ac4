#!/usr/bin/env bash
# A .pth entry to rocm-sdk's own _rocm_sdk_core/share/amd_smi and the amdsmi distribution's metadata (why:
# write_path_entry.py). Needs only $PYTHON, the python of requirements.host (standard library).
set -euo pipefail

mkdir -p "$PREFIX/$SITE_PACKAGES"
"$PYTHON" "$RECIPE_DIR/write_path_entry.py" "$SRC_DIR/wheels/core" "$PREFIX/$SITE_PACKAGES" "$SRC_DIR/amd_smi/amdsmi/LICENSE"

bash "$RECIPE_DIR/../_shared/record-patches.sh" amdsmi
