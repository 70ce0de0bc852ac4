#!/usr/bin/env bash
# AITER_USE_SYSTEM_TRITON=1: otherwise setup.py runs install_triton.sh, which pip-uninstalls our triton and
# downloads another. A non-develop install never pip-installs flydsl (it is a host dependency here).
set -euo pipefail
source "$RECIPE_DIR/../_shared/rocm-env.sh"

export AITER_USE_SYSTEM_TRITON=1
export BUILD_TARGET=rocm
export PREBUILD_KERNELS="$AITER_PREBUILD_KERNELS"
# No .git in the work tree, so setuptools_scm needs the version given.
export SETUPTOOLS_SCM_PRETEND_VERSION="$PKG_VERSION"

"$PYTHON" -m pip install . --no-deps --no-build-isolation -vv

# `import aiter` JIT-compiles module_aiter_core at import (aiter/ops/enum.py calls compile_ops("module_aiter_core")
# at module level), in the user's process: minutes of hipcc on a first `import aiter`, `import flash_attn` (Triton
# backend) or `vllm serve`. Compile it here instead, through the same code path (compile_ops -> build_module) and
# the build's toolchain (rocm-env.sh), into the installed aiter/jit/, where get_module imports it from
# (aiter.jit.module_aiter_core) before it would build. AITER_AOT_IMPORT=1 makes aiter/__init__.py import only
# jit.core, so nothing else runs on this GPU-less machine; GPU_ARCHS (rocm-env.sh) stands for rocminfo. Run from
# $PREFIX: the source tree's own aiter/ must not shadow the installed one. The kernels other than the core still
# JIT-compile on first use, into the installed aiter/jit/ (or ~/.aiter/jit when that is read-only:
# aiter/jit/core.py get_user_jit_dir), with the toolchain rocm-sdk's activation hands hipcc.
(cd "$PREFIX" && AITER_AOT_IMPORT=1 "$PYTHON" -c "import aiter.ops.enum")
jit_dir="$(cd "$PREFIX" && AITER_AOT_IMPORT=1 "$PYTHON" -c "import aiter.jit.core as c; print(c.get_user_jit_dir())")"
if ! compgen -G "$jit_dir/module_aiter_core*.so" > /dev/null; then
    echo "aiter build.sh: module_aiter_core was not built into $jit_dir; see the compile above" >&2
    exit 1
fi
# the build tree (sources copied for hipify, ninja files, objects) stays out of the package
rm -rf "$jit_dir/build"

bash "$RECIPE_DIR/../_shared/record-patches.sh" "$PKG_NAME"
