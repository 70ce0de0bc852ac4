#!/usr/bin/env bash
# Install AMD's ROCm wheels into site-packages as pip would: ROCM_SDK_PART=runtime (rocm-sdk) installs
# rocm-sdk-core, rocm-sdk-libraries and the `rocm` selector, as `pip install "rocm[libraries]"`; devel
# (rocm-sdk-devel) installs rocm-sdk-devel and does what `rocm-sdk init` does at first use (expand the devel tree),
# so the installed environment is complete and works read-only. Runs $PYTHON, the python of requirements.host
# (the installer uses its standard library), never the build machine's.
set -euo pipefail

site="$PREFIX/$SITE_PACKAGES"
mkdir -p "$site"
case "$ROCM_SDK_PART" in
    runtime)
        "$PYTHON" "$RECIPE_DIR/../_shared/rocm_wheels.py" install "$site" "$PREFIX/bin" \
            "$SRC_DIR/wheels/core" "$SRC_DIR/wheels/libraries" "$SRC_DIR/wheels/rocm"
        # The SDK's license files (rocm-sdk-licenses, requirements.host), which only the devel tree carries: the
        # runtime wheels' files come from the same components, and may carry no license file of their own.
        mkdir -p "$SRC_DIR/wheel-licenses/rocm-sdk-licenses"
        cp -R "$PREFIX/share/licenses/rocm-sdk/." "$SRC_DIR/wheel-licenses/rocm-sdk-licenses/"
        scripts=(rocm-sdk activate.sh deactivate.sh)
        helpers=()
        ;;
    devel)
        "$PYTHON" "$RECIPE_DIR/../_shared/rocm_wheels.py" install "$site" "$PREFIX/bin" "$SRC_DIR/wheels/devel"
        "$PYTHON" "$RECIPE_DIR/../_shared/rocm_wheels.py" expand-devel "$site"
        scripts=(rocm-sdk-devel activate-devel.sh deactivate-devel.sh)
        # the function that finds the environment's conda GCC and sysroot for hipcc goes first
        helpers=("$RECIPE_DIR/../_shared/conda-gcc-flags.sh")
        ;;
    *)
        echo "rocm-sdk/build.sh: ROCM_SDK_PART is '$ROCM_SDK_PART', not runtime or devel" >&2
        exit 1
        ;;
esac

name="${scripts[0]}"
mkdir -p "$PREFIX/etc/conda/activate.d" "$PREFIX/etc/conda/deactivate.d"
cat "${helpers[@]}" "$RECIPE_DIR/${scripts[1]}" | sed "s|@SITE_PACKAGES@|$SITE_PACKAGES|g" \
    > "$PREFIX/etc/conda/activate.d/$name.sh"
sed "s|@SITE_PACKAGES@|$SITE_PACKAGES|g" "$RECIPE_DIR/${scripts[2]}" > "$PREFIX/etc/conda/deactivate.d/$name.sh"

ROCM_STACK_PATCHES="" bash "$RECIPE_DIR/../_shared/record-patches.sh" "$name"
