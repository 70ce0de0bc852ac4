#!/usr/bin/env bash
# Record which of our patches went into a package, so an installed environment can say what it runs.
#
# Usage (in a recipe's build script, after the build):
#   bash "$RECIPE_DIR/../_shared/record-patches.sh" <package-name>
# Reads:
#   ROCM_STACK_PATCHES  space-separated patch paths exactly as the recipe lists them in source.patches
#                       (relative to the recipe folder, e.g. ../../patches/aotriton/0001-x.patch);
#                       declare it in build.script.env from the same context variable the patch list
#                       uses, so the two cannot drift. Empty means "no patches" and is recorded as such.
# Writes: $PREFIX/share/rocm-stack/patches/<package-name>.txt, one line per patch:
#   <file name>  sha256=<hash of the patch file>  <the patch header's "Why:" line>
set -euo pipefail

package_name="${1:?usage: record-patches.sh <package-name>}"
record_dir="$PREFIX/share/rocm-stack/patches"
record_file="$record_dir/$package_name.txt"
mkdir -p "$record_dir"

{
    echo "# Patches applied to $package_name by this repository's recipe (recipes/$package_name or its parent)."
    patches_listed="${ROCM_STACK_PATCHES:-}"
    if [[ -z "${patches_listed// /}" ]]; then
        echo "# none"
    fi
    for patch_path in $patches_listed; do
        patch_file="$RECIPE_DIR/$patch_path"
        if [[ ! -f "$patch_file" ]]; then
            echo "record-patches.sh: listed patch not found: $patch_file" >&2
            exit 1
        fi
        why_line="$(grep -m1 '^Why:' "$patch_file" || echo 'Why: (no header)')"
        checksum="$(sha256sum "$patch_file" | cut -d' ' -f1)"
        echo "$(basename "$patch_file")  sha256=$checksum  $why_line"
    done
} > "$record_file"
