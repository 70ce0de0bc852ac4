#!/usr/bin/env bash
# Install one PyPI wheel's files into $PREFIX, unchanged (recipes/pypi/recipe.yaml).
set -euo pipefail
"$BUILD_PREFIX/bin/python" "$RECIPE_DIR/install_wheel.py" "$SRC_DIR/$WHEEL" "$PREFIX" "$SITE_PACKAGES"
