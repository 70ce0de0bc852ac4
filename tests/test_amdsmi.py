"""recipes/amdsmi built by the orchestrator from a synthetic rocm-sdk-core wheel whose _rocm_sdk_core/share/amd_smi
holds real amdsmi bindings (PyPI's amdsmi 7.0.2 through tests/real_metadata.py: downloaded once, cached, checked
by sha256) and whose _rocm_sdk_core/lib holds a stand-in libamd_smi compiled here with cc, exporting every function the real wrapper
binds at import (read from that wrapper). Installed beside the rocm-sdk package it needs, `import amdsmi` opens the
SDK's library with no LD_LIBRARY_PATH or ROCM_PATH, and the bindings as the SDK ships them do not."""
from __future__ import annotations

import ast
import io
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from prebuilt_helpers import make_index
from real_metadata import AMDSMI, wheel_file
from source_helpers import CountingServer
from stack import install
from test_rocm_sdk_split import ARCHS, PYTHON_STAND_IN, SITE, _orchestrate, _write_lock, real_recipes_workspace

REPO = Path(__file__).resolve().parent.parent
# ROCm 7.0.x's library major (the 7.0.2 bindings' own), under rocm-sdk-core's lib/ like libamdhip64.so.7
LIBRARY = "_rocm_sdk_core/lib/libamd_smi.so.26"
# What the SDK's share/amd_smi/pyproject.toml says: rocm-systems projects/amdsmi/py-interface/pyproject.toml.in
# at 3cf83e7a, its @amd_smi_lib_WHEEL_VERSION@ filled in for the bindings above.
PYPROJECT = """[build-system]
requires = ["setuptools>=59.0"]
build-backend = "setuptools.build_meta"

[project]
name = "amdsmi"
authors = [
    {name = "AMD", email = "amd-smi.support@amd.com"},
]
version = "7.0.2"
license = {file = "amdsmi/LICENSE"}
readme = {file = "amdsmi/README.md", content-type = "text/markdown"}
description = "AMDSMI Python LIB - AMD GPU Monitoring Library"
requires-python = ">=3.6"

[tool.setuptools]
packages = ["amdsmi"]
"""
# conda-forge's patch (GNU patch), reduced to this machine's
PATCH_STAND_IN = """package: {name: patch, version: "2.7.6"}
build:
  noarch: generic
  script:
    - mkdir -p $PREFIX/bin
    - printf '#!/bin/sh\\nexec /usr/bin/patch "$@"\\n' > $PREFIX/bin/patch
    - chmod +x $PREFIX/bin/patch
"""


def stand_in_library(wrapper: str, folder: Path) -> bytes:
    """A libamd_smi exporting every function amdsmi_wrapper.py binds at import, each returning
    AMDSMI_STATUS_SUCCESS (0) and writing nothing: amdsmi_init succeeds and no processor is found."""
    symbols = sorted(set(re.findall(r"_libraries\['libamd_smi\.so'\]\.(\w+)", wrapper)))
    assert "amdsmi_init" in symbols and "amdsmi_get_processor_handles" in symbols
    source = folder / "amd_smi_stand_in.c"
    source.write_text("".join(f"int {name}(void) {{ return 0; }}\n" for name in symbols))
    library = folder / "libamd_smi.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-Wl,-soname,libamd_smi.so.26", "-o", str(library), str(source)], check=True)
    return library.read_bytes()


def sdk_amd_smi_files(folder: Path) -> dict[str, tuple[bytes, bool]]:
    """rocm-sdk-core's share/amd_smi tree (pyproject.toml, amdsmi/ with its LICENSE) and lib/libamd_smi."""
    tree = "_rocm_sdk_core/share/amd_smi/"
    files = {tree + "pyproject.toml": (PYPROJECT.encode(), False)}
    with zipfile.ZipFile(io.BytesIO(wheel_file(AMDSMI))) as wheel:
        for name in wheel.namelist():
            if name.startswith("amdsmi/") and name.endswith(".py") and name != "amdsmi/setup.py":
                files[tree + name] = (wheel.read(name), False)
        files[tree + "amdsmi/LICENSE"] = (wheel.read("amdsmi-7.0.2.dist-info/licenses/LICENSE"), False)
        wrapper = wheel.read("amdsmi/amdsmi_wrapper.py").decode()
    files[LIBRARY] = (stand_in_library(wrapper, folder), True)
    return files


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    """amdsmi built through `orchestrate build` and installed with the rocm-sdk it requires."""
    tmp = tmp_path_factory.mktemp("amdsmi")
    workspace = real_recipes_workspace(tmp, ("rocm-sdk", "amdsmi"),
                                       {"python": PYTHON_STAND_IN.format(python=sys.executable), "patch": PATCH_STAND_IN})
    shutil.copytree(REPO / "patches" / "amdsmi", workspace / "patches" / "amdsmi")
    index = make_index(tmp / "index", list(ARCHS), core_extra=sdk_amd_smi_files(tmp))
    with CountingServer(index.root) as server:
        index.url = server.url + "/"
        _write_lock(workspace, index)
        result = _orchestrate(workspace, "build", "amdsmi", "--arch", "gfx1151", "--no-tests")
        assert result.returncode == 0, result.stdout + result.stderr
    installed = tmp / "env"
    install(workspace / "channel", ["amdsmi"], "11.5.1", installed)
    return installed


def _python(prefix: Path, code: str, **env: str) -> subprocess.CompletedProcess:
    # no LD_LIBRARY_PATH, no ROCM_PATH: what a user's `python` in the environment has without activation
    return subprocess.run([str(prefix / "bin/python3.12"), "-c", code], capture_output=True, text=True, cwd=prefix,
                          env={"PATH": f"{prefix}/bin:/usr/bin:/bin", **env})


def test_import_amdsmi_opens_the_sdks_libamd_smi_without_library_paths(prefix):
    result = _python(prefix, "import amdsmi, amdsmi.amdsmi_wrapper as w\n"
                             "amdsmi.amdsmi_init()\n"
                             "print(w.location, len(amdsmi.amdsmi_get_processor_handles()))")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.split() == [str(prefix / SITE / LIBRARY), "0"]  # vLLM's check: no GPU here
    assert not list((prefix / SITE / "amdsmi").glob("*.so*"))  # the SDK's library, not a copy


def test_the_sdks_library_comes_first_even_with_rocm_path_set(prefix, tmp_path):
    """rocm-sdk's activation sets ROCM_PATH to the devel tree; a second libamd_smi there must not be opened."""
    (tmp_path / "lib").mkdir()
    shutil.copy(prefix / SITE / LIBRARY, tmp_path / "lib/libamd_smi.so")
    result = _python(prefix, "import amdsmi.amdsmi_wrapper as w; print(w.location)", ROCM_PATH=str(tmp_path))
    assert result.stdout.split() == [str(prefix / SITE / LIBRARY)], result.stdout + result.stderr


def test_the_bindings_as_the_sdk_ships_them_find_no_library(prefix):
    """What the patch is for: the same tree, unpatched (rocm-sdk installs it under share/amd_smi), fails."""
    shipped = prefix / SITE / "_rocm_sdk_core/share/amd_smi"
    result = _python(prefix, f"import sys; sys.path.insert(0, {str(shipped)!r}); import amdsmi; print(amdsmi.__file__)")
    assert result.returncode != 0 and "libamd_smi.so" in result.stdout + result.stderr


def test_the_package_records_its_patch_and_version(prefix):
    record = (prefix / "share/rocm-stack/patches/amdsmi.txt").read_text()
    assert "0001-load-libamd_smi-from-rocm-sdk-core.patch  sha256=" in record
    assert (prefix / SITE / "amdsmi-7.0.2.dist-info/METADATA").read_text().startswith("Metadata-Version")


# TheRock's loader: find_smi_library as rocm-systems projects/amdsmi/py-interface/amdsmi_wrapper.py has it at
# 08514a6c9271cdfad4ef6e45a60d20cb027ea3df (verbatim, from its comment block to `raise err`): a "# 0." step that
# opens lib/libamd_smi.so relative to _rocm_sdk_core/share/amd_smi, so find_smi_library sits 4 lines lower than in
# PyPI's 7.0.2 wrapper and `possible_locations = []` is followed by "# 0.", not "# 1.".
THEROCK_LOADER = '''# libamd_smi.so can be located in several different places.
# Look for it with below priority:
# 0. Relative to amdsmi_wrapper.py in TheRock:
#    `amdsmi_wrapper.py` is located in
#    `_rocm_sdk_core/share/amd_smi/amdsmi`, libraries are in
#    `_rocm_sdk_core/lib`.
# 1. ROCM_HOME/ROCM_PATH environment variables
#    - ROCM_HOME/lib
#    - ROCM_PATH/lib (usually set to /opt/rocm/)
# 2. Decided by the linker
#    - LD_LIBRARY_PATH env var
#    - defined path in /etc/ld.so.conf.d/
# 3. Relative to amdsmi_wrapper.py
#    - parent directory
#    - current directory
def find_smi_library():
    err = OSError("Could not load libamd_smi.so")
    possible_locations = []
    # 0.
    libamd_smi_path = Path(__file__).resolve().parent.parent.parent.parent / "lib/libamd_smi.so.26"
    possible_locations.append(libamd_smi_path)
    # 1.
    rocm_path = os.getenv("ROCM_HOME", os.getenv("ROCM_PATH"))
    if rocm_path:
        possible_locations.append(os.path.join(rocm_path, "lib/libamd_smi.so"))
    # 2.
    possible_locations.append("libamd_smi.so")
    # 3.
    libamd_smi_parent_dir = Path(__file__).resolve().parent / "libamd_smi.so"
    libamd_smi_cwd = Path.cwd() / "libamd_smi.so"
    possible_locations.append(libamd_smi_parent_dir)
    possible_locations.append(libamd_smi_cwd)

    for location in possible_locations:
        try:
            lib = ctypes.CDLL(location)
            return lib, location
        except OSError as e:
            err = e
            continue
    raise err
'''


def _patched_loader(wrapper: str, tmp_path: Path) -> str:
    """The wrapper after build.sh's own patch command (read from build.sh, so a lost --fuzz=0 shows here)."""
    command = re.search(r'^\s*(patch .*) -d "\$tree" -i "\$RECIPE_DIR/\$patch_path"$',
                        (REPO / "recipes/amdsmi/build.sh").read_text(), re.M).group(1).split()
    (tmp_path / "amdsmi").mkdir()
    (tmp_path / "amdsmi/amdsmi_wrapper.py").write_text(wrapper)
    for patch in sorted((REPO / "patches/amdsmi").glob("*.patch")):
        subprocess.run([*command, "-d", str(tmp_path), "-i", str(patch)], check=True, capture_output=True)
    return (tmp_path / "amdsmi/amdsmi_wrapper.py").read_text()


@pytest.mark.parametrize("layout", ["pypi-7.0.2", "therock-08514a6c"])
def test_the_patch_puts_the_sdks_library_first_in_both_loader_layouts(layout, tmp_path):
    """PyPI's 7.0.2 loader and TheRock's (rocm-systems 08514a6c, what rocm-sdk-core ships): the patched
    find_smi_library compiles and tries the SDK's library before anything else. With one line of context and
    patch's default fuzz, the hunk once landed at its stated line in TheRock's layout, inside the comment block
    above the function: an IndentationError at `import amdsmi`, and no GPU for vLLM."""
    with zipfile.ZipFile(io.BytesIO(wheel_file(AMDSMI))) as wheel:
        wrapper = wheel.read("amdsmi/amdsmi_wrapper.py").decode()
    if layout.startswith("therock"):
        start = wrapper.index("# libamd_smi.so can be located")
        end = wrapper.index("    raise err\n", start) + len("    raise err\n")
        wrapper = wrapper[:start] + THEROCK_LOADER + wrapper[end:]
    patched = _patched_loader(wrapper, tmp_path)
    module = compile(patched, "amdsmi_wrapper.py", "exec", flags=ast.PyCF_ONLY_AST)
    loader = next(node for node in module.body if isinstance(node, ast.FunctionDef) and node.name == "find_smi_library")
    body = ast.get_source_segment(patched, loader)
    assert body.index("possible_locations[:0] = ") < body.index("for location in possible_locations:")
    assert "_rocm_sdk_core" in ast.get_source_segment(patched, loader.body[-3])  # the try block, just before the loop
