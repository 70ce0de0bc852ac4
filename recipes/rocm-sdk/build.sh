#!/usr/bin/env bash
# Install TheRock's tree under $PREFIX and the activation scripts (see recipe.yaml for the layout).
set -euo pipefail

cp -a "$SRC_DIR/therock/." "$PREFIX/"

for phase in activate deactivate; do
    mkdir -p "$PREFIX/etc/conda/$phase.d"
    cp "$RECIPE_DIR/$phase.sh" "$PREFIX/etc/conda/$phase.d/rocm-sdk.sh"
done
# PyTorch refuses aotriton's kernels on arches aotriton marks experimental unless this is set;
# only those arches get it, so supported arches keep PyTorch's default behaviour.
if [[ "$AOTRITON_EXPERIMENTAL" == "1" ]]; then
    cp "$RECIPE_DIR/activate-aotriton-experimental.sh" "$PREFIX/etc/conda/activate.d/rocm-sdk-aotriton-experimental.sh"
    cp "$RECIPE_DIR/deactivate-aotriton-experimental.sh" "$PREFIX/etc/conda/deactivate.d/rocm-sdk-aotriton-experimental.sh"
fi

ROCM_STACK_PATCHES="" bash "$RECIPE_DIR/../_shared/record-patches.sh" rocm-sdk
