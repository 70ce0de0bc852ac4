#!/usr/bin/env bash
# Install this GPU's rocm-sdk-device wheel as pip would and link its files into rocm-sdk's devel tree, as
# `rocm-sdk init` does. Runs $PYTHON (requirements.host), never the build machine's.
set -euo pipefail

site="$PREFIX/$SITE_PACKAGES"
mkdir -p "$site"
# The wheel also carries _rocm_sdk_libraries/__init__.py (its overlay folder is a Python package); rocm-sdk
# already installs that file, and two conda packages must not own one path.
# The device wheel carries no license file: it takes the SDK's, which rocm-sdk-licenses (requirements.host) installs.
ROCM_WHEELS_SKIP="_rocm_sdk_libraries/__init__.py" LICENSES_FROM="$PREFIX/share/licenses/rocm-sdk" \
    "$PYTHON" "$RECIPE_DIR/../_shared/rocm_wheels.py" install "$site" "$PREFIX/bin" "$SRC_DIR/wheels/device"
"$PYTHON" "$RECIPE_DIR/../_shared/rocm_wheels.py" link-device "$site"

# PyTorch refuses aotriton's kernels on arches aotriton marks experimental unless this is set; only those
# arches get it, so supported arches keep PyTorch's default behaviour.
if [[ "$AOTRITON_EXPERIMENTAL" == "1" ]]; then
    for phase in activate deactivate; do
        mkdir -p "$PREFIX/etc/conda/$phase.d"
        cp "$RECIPE_DIR/$phase.sh" "$PREFIX/etc/conda/$phase.d/rocm-sdk-device-aotriton-experimental.sh"
    done
fi

ROCM_STACK_PATCHES="" bash "$RECIPE_DIR/../_shared/record-patches.sh" "rocm-sdk-device-$GPU_ARCH"
