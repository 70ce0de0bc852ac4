# Shared by the test recipes: writes $PREFIX/share/<package>/built-for (what a real build script would
# install), so tests can look at what landed. Usage: bash $RECIPE_DIR/../_shared/write-marker.sh NAME
set -eu
mkdir -p "$PREFIX/share/$1"
echo "${GPU_ARCH:-noarch}" > "$PREFIX/share/$1/built-for"
