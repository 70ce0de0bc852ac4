#!/usr/bin/env bash
# Install AMD's ROCm wheels into site-packages as pip would, then do what `rocm-sdk init` does at first use
# (expand the devel tree), so the installed environment is complete and works read-only. Runs $PYTHON, the python of
# requirements.host (the installer uses its standard library), never the build machine's.
set -euo pipefail

site="$PREFIX/$SITE_PACKAGES"
mkdir -p "$site"
"$PYTHON" "$RECIPE_DIR/../_shared/rocm_wheels.py" install "$site" "$PREFIX/bin" \
    "$SRC_DIR/wheels/core" "$SRC_DIR/wheels/libraries" "$SRC_DIR/wheels/devel" "$SRC_DIR/wheels/rocm"
"$PYTHON" "$RECIPE_DIR/../_shared/rocm_wheels.py" expand-devel "$site"

# Activation points ROCm-aware tools at the devel root, where `rocm-sdk path --root` points, and hipcc at the
# environment's conda GCC and sysroot (the function that finds them, _shared/conda-gcc-flags.sh, goes first).
for phase in activate deactivate; do
    mkdir -p "$PREFIX/etc/conda/$phase.d"
    helpers=()
    if [[ "$phase" == activate ]]; then helpers=("$RECIPE_DIR/../_shared/conda-gcc-flags.sh"); fi
    cat "${helpers[@]}" "$RECIPE_DIR/$phase.sh" | sed "s|@SITE_PACKAGES@|$SITE_PACKAGES|g" \
        > "$PREFIX/etc/conda/$phase.d/rocm-sdk.sh"
done

ROCM_STACK_PATCHES="" bash "$RECIPE_DIR/../_shared/record-patches.sh" rocm-sdk
