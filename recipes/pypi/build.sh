#!/usr/bin/env bash
# Install one PyPI wheel's files into $PREFIX, unchanged (recipes/pypi/recipe.yaml), with the recipes' one wheel
# installer. No SATISFIED_BY: the package's run requirements are translated from this wheel's own Requires-Dist.
set -euo pipefail
cd "$SRC_DIR"
"$PYTHON" "$RECIPE_DIR/../_shared/install_wheels.py" "$WHEEL"
