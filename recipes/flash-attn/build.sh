#!/usr/bin/env bash
# FLASH_ATTENTION_FORCE_BUILD: never download a prebuilt wheel. Patch 0001: no submodule update and no pip
# install of third_party/aiter (CK is our second source, aiter our host dependency).
set -euo pipefail
source "$RECIPE_DIR/../_shared/build-knobs.sh"

export BUILD_TARGET=rocm
export FLASH_ATTENTION_FORCE_BUILD=TRUE
# a local version takes letters, digits and ".": several targets (gfx942,gfx950) are joined by "."
export FLASH_ATTN_LOCAL_VERSION="$FLASH_ATTN_BACKEND.${GPU_ARCH//,/.}"

case "$FLASH_ATTN_BACKEND" in
    ck)
        # rocm-env.sh exports GPU_ARCHS, the ";" list of targets setup.py's generate.py/--offload-arch get.
        source "$RECIPE_DIR/../_shared/rocm-env.sh"
        export FLASH_ATTENTION_TRITON_AMD_ENABLE=FALSE
        ;;
    triton)
        export FLASH_ATTENTION_TRITON_AMD_ENABLE=TRUE
        for phase in activate deactivate; do
            mkdir -p "$PREFIX/etc/conda/$phase.d"
            cp "$RECIPE_DIR/$phase-triton.sh" "$PREFIX/etc/conda/$phase.d/flash-attn-triton.sh"
        done
        ;;
    *)
        echo "flash-attn build.sh: unknown FLASH_ATTN_BACKEND '$FLASH_ATTN_BACKEND'" >&2
        exit 1
        ;;
esac

"$PYTHON" -m pip install . --no-deps --no-build-isolation -vv

bash "$RECIPE_DIR/../_shared/record-patches.sh" "$PKG_NAME"
