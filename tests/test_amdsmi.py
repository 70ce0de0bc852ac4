"""recipes/amdsmi built by the orchestrator from a synthetic rocm-sdk-core wheel whose _rocm_sdk_core/share/amd_smi holds
real amdsmi bindings (PyPI's amdsmi 7.0.2 through tests/real_metadata.py: downloaded once, cached, checked by sha256)
with TheRock's loader in place of PyPI's, generated for ROCm 10's libamd_smi.so.27, and whose _rocm_sdk_core/lib holds
a stand-in libamd_smi compiled here with cc, exporting every function the real wrapper binds at import (read from that
wrapper). Installed beside the rocm-sdk package it needs, `import amdsmi` runs the SDK's own tree in place (the
package's .pth) and opens the SDK's library with no LD_LIBRARY_PATH or ROCM_PATH, with either loader rocm-systems has
shipped: find_smi_library() (08514a6c) and the generated _load_library() that replaced it in July 2026."""
from __future__ import annotations

import io
import os
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
# ROCm 10's library major (rocm-sdk-core 10.x: libamd_smi.so.27), under rocm-sdk-core's lib/ like libamdhip64.so.7
LIBRARY = "_rocm_sdk_core/lib/libamd_smi.so.27"
TREE = "_rocm_sdk_core/share/amd_smi"

# TheRock's first loader: find_smi_library as rocm-systems projects/amdsmi/py-interface/amdsmi_wrapper.py has it at
# 08514a6c9271cdfad4ef6e45a60d20cb027ea3df (verbatim, from its comment block to `raise err`, with the library major
# of ROCm 10's header, 27, where 08514a6c's says 26): a "# 0." step that opens lib/libamd_smi.so.<major> relative to
# _rocm_sdk_core/share/amd_smi/amdsmi, before ROCM_HOME/ROCM_PATH and the linker path.
FIND_SMI_LIBRARY = """# libamd_smi.so can be located in several different places.
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
    libamd_smi_path = Path(__file__).resolve().parent.parent.parent.parent / "lib/libamd_smi.so.27"
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
"""

# The loader that replaced it (rocm-systems PR #7914, July 2026; reverted in #9339, relanded in #9340): the block
# projects/amdsmi/tools/generator.py (read at 07d5ab99) writes in place of clang2py's
# `_libraries['libamd_smi.so'] = ctypes.CDLL(...)` line, reduced to its code (comments and docstrings left out), with
# the major generator.py parses from amdsmi.h's AMDSMI_LIB_VERSION_MAJOR filled in as ROCm 10's 27. Its order:
# AMDSMI_LIB_OVERRIDE; a wheel's bundled libamd_smi_python.so; <root>/lib/<SONAME> relative to this file (TheRock's
# relocatable tree); the bare SONAME through the linker. When nothing loads, the import still succeeds and the first
# call raises.
LOAD_LIBRARY = """from pathlib import Path

_libraries = {}

_AMDSMI_LIB_SONAME = "libamd_smi.so.27"

_AMDSMI_ALLOW_SYSTEM_FALLBACK = True


def _load_library():
    mode = getattr(ctypes, "RTLD_LOCAL", 0)

    override = os.getenv("AMDSMI_LIB_OVERRIDE")
    if override:
        return ctypes.CDLL(override, mode=mode), override

    bundled = Path(__file__).resolve().parent / "libamd_smi_python.so"
    if bundled.exists():
        return ctypes.CDLL(str(bundled), mode=mode), str(bundled)

    if not _AMDSMI_ALLOW_SYSTEM_FALLBACK:
        raise OSError("bundled libamd_smi_python.so is missing from this amdsmi wheel")

    here = Path(__file__).resolve()
    if len(here.parents) > 3:
        relocatable = here.parents[3] / "lib" / _AMDSMI_LIB_SONAME
        if relocatable.exists():
            try:
                return ctypes.CDLL(str(relocatable), mode=mode), str(relocatable)
            except OSError:
                pass

    return ctypes.CDLL(_AMDSMI_LIB_SONAME, mode=mode), _AMDSMI_LIB_SONAME


class _MissingLibrary:
    __slots__ = ("_err",)

    def __init__(self, err=None):
        object.__setattr__(self, "_err", err)

    def _raise(self):
        raise OSError(f"AMD SMI shared library could not be loaded.\\nUnderlying error: {self._err}")

    def __getattr__(self, name):
        if not name.startswith("amdsmi_"):
            raise AttributeError(name)
        return _MissingLibrary(self._err)

    def __setattr__(self, name, value):
        pass

    def __call__(self, *args, **kwargs):
        self._raise()


try:
    _libraries['libamd_smi.so'], _loaded_lib_path = _load_library()
except OSError as _load_err:
    _libraries['libamd_smi.so'] = _MissingLibrary(_load_err)
    _loaded_lib_path = None


#Add support for amdsmi_free_name_value_pairs
amdsmi_free_name_value_pairs = _libraries['libamd_smi.so'].amdsmi_free_name_value_pairs
amdsmi_free_name_value_pairs.restype = None
amdsmi_free_name_value_pairs.argtypes = [ctypes.POINTER(None)]
"""


def therock_wrapper(loader: str) -> str:
    """PyPI 7.0.2's generated wrapper with its loader swapped for one of TheRock's (the bindings are the same
    ctypeslib output; only the loading block differs between the layouts)."""
    with zipfile.ZipFile(io.BytesIO(wheel_file(AMDSMI))) as wheel:
        wrapper = wheel.read("amdsmi/amdsmi_wrapper.py").decode()
    if loader == "find_smi_library":
        start = wrapper.index("# libamd_smi.so can be located")
        end = wrapper.index("    raise err\n", start) + len("    raise err\n")
        return wrapper[:start] + FIND_SMI_LIBRARY + wrapper[end:]
    start = wrapper.index("_libraries = {}\nfrom pathlib import Path\n")
    end = wrapper.index("amdsmi_free_name_value_pairs.argtypes = [ctypes.POINTER(None)]\n", start)
    return wrapper[:start] + LOAD_LIBRARY + wrapper[end + len("amdsmi_free_name_value_pairs.argtypes = [ctypes.POINTER(None)]\n"):]


LOADERS = ("find_smi_library", "_load_library")


def stand_in_library(wrapper: str, folder: Path) -> bytes:
    """A libamd_smi exporting every function amdsmi_wrapper.py binds at import, each returning
    AMDSMI_STATUS_SUCCESS (0) and writing nothing: amdsmi_init succeeds and no processor is found."""
    symbols = sorted(set(re.findall(r"_libraries\['libamd_smi\.so'\]\.(\w+)", wrapper)))
    assert "amdsmi_init" in symbols and "amdsmi_get_processor_handles" in symbols
    source = folder / "amd_smi_stand_in.c"
    source.write_text("".join(f"int {name}(void) {{ return 0; }}\n" for name in symbols))
    library = folder / "libamd_smi.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-Wl,-soname,libamd_smi.so.27", "-o", str(library), str(source)], check=True)
    return library.read_bytes()


def sdk_amd_smi_files(folder: Path) -> dict[str, tuple[bytes, bool]]:
    """rocm-sdk-core's share/amd_smi tree (pyproject.toml, amdsmi/ with its LICENSE, the generated _load_library()
    loader) and lib/libamd_smi.so.27."""
    files = {f"{TREE}/pyproject.toml": (PYPROJECT.encode(), False)}
    with zipfile.ZipFile(io.BytesIO(wheel_file(AMDSMI))) as wheel:
        for name in wheel.namelist():
            if name.startswith("amdsmi/") and name.endswith(".py") and name != "amdsmi/setup.py":
                files[f"{TREE}/{name}"] = (wheel.read(name), False)
        files[f"{TREE}/amdsmi/LICENSE"] = (wheel.read("amdsmi-7.0.2.dist-info/licenses/LICENSE"), False)
    wrapper = therock_wrapper("_load_library")
    files[f"{TREE}/amdsmi/amdsmi_wrapper.py"] = (wrapper.encode(), False)
    files[LIBRARY] = (stand_in_library(wrapper, folder), True)
    return files


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    """amdsmi built through `orchestrate build` and installed with the rocm-sdk it requires."""
    tmp = tmp_path_factory.mktemp("amdsmi")
    workspace = real_recipes_workspace(tmp, ("rocm-sdk", "amdsmi"), {"python": PYTHON_STAND_IN.format(python=sys.executable)})
    index = make_index(tmp / "index", list(ARCHS), core_extra=sdk_amd_smi_files(tmp))
    with CountingServer(index.root) as server:
        index.url = server.url + "/"
        _write_lock(workspace, index)
        result = _orchestrate(workspace, "build", "amdsmi", "--arch", "gfx1151", "--no-tests")
        assert result.returncode == 0, result.stdout + result.stderr
    installed = tmp / "env"
    install(workspace / "channel", ["amdsmi"], "11.5.1", installed)
    return installed


@pytest.fixture(params=LOADERS)
def loader_prefix(request, prefix):
    """The installed environment with the SDK's wrapper carrying one of TheRock's two loaders (the file is replaced,
    not written through: the package cache may hard-link it)."""
    wrapper = prefix / SITE / TREE / "amdsmi/amdsmi_wrapper.py"
    wrapper.unlink()
    wrapper.write_text(therock_wrapper(request.param))
    return prefix


def _python(prefix: Path, code: str, **env: str) -> subprocess.CompletedProcess:
    """The environment's python as a user starts it, with no LD_LIBRARY_PATH and no ROCM_PATH. The python stand-in
    reaches site-packages through PYTHONPATH, which skips .pth files; site.addsitedir is what a real python's site
    module runs on its own site-packages at startup."""
    startup = f"import site; site.addsitedir({str(prefix / SITE)!r})\n"
    return subprocess.run([sys.executable, "-c", startup + code], capture_output=True, text=True, cwd=prefix,
                          env={"PATH": f"{prefix}/bin:/usr/bin:/bin", **env})


def test_import_amdsmi_runs_the_sdks_tree_and_opens_its_libamd_smi_without_library_paths(loader_prefix):
    result = _python(loader_prefix, "import amdsmi, amdsmi.amdsmi_wrapper as w\n"
                                    "amdsmi.amdsmi_init()\n"
                                    "print(amdsmi.__file__, len(amdsmi.amdsmi_get_processor_handles()))\n"
                                    "print(*sorted({l.split()[-1] for l in open('/proc/self/maps') if 'libamd_smi' in l}))")
    assert result.returncode == 0, result.stdout + result.stderr
    bindings, handles, opened = result.stdout.split()
    assert Path(bindings) == loader_prefix / SITE / TREE / "amdsmi/__init__.py"
    assert handles == "0"  # vLLM's check: no GPU here
    assert Path(opened) == loader_prefix / SITE / LIBRARY


def test_the_sdks_library_comes_first_even_with_rocm_path_set(loader_prefix, tmp_path):
    """rocm-sdk's activation sets ROCM_PATH to the devel tree; a second libamd_smi there must not be opened."""
    (tmp_path / "lib").mkdir()
    shutil.copy(loader_prefix / SITE / LIBRARY, tmp_path / "lib/libamd_smi.so")
    result = _python(loader_prefix, "import amdsmi\n"
                                    "print(*sorted({l.split()[-1] for l in open('/proc/self/maps') if 'libamd_smi' in l}))",
                     ROCM_PATH=str(tmp_path))
    assert result.stdout.split() == [str(loader_prefix / SITE / LIBRARY)], result.stdout + result.stderr


def test_the_recipes_own_check_passes_here_and_names_a_shadowing_amdsmi(loader_prefix, tmp_path):
    check = REPO / "recipes/amdsmi/check_amdsmi.py"
    run_check = f"import runpy; runpy.run_path({str(check)!r}, run_name='__main__')"
    passed = _python(loader_prefix, run_check)
    assert passed.returncode == 0 and f"amdsmi opened {loader_prefix / SITE / LIBRARY}" in passed.stdout, \
        passed.stdout + passed.stderr
    shadow = tmp_path / "site/amdsmi"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("")
    shadowed = _python(loader_prefix, f"import sys; sys.path.insert(0, {str(shadow.parent)!r})\n" + run_check)
    assert shadowed.returncode != 0 and "another amdsmi" in shadowed.stderr, shadowed.stdout + shadowed.stderr


def test_the_package_is_a_path_entry_and_metadata_with_no_patch(prefix):
    site = prefix / SITE
    assert (site / "amdsmi-rocm-sdk.pth").read_text() == TREE + "\n"
    assert not (site / "amdsmi").exists()  # no copy beside the SDK's
    metadata = (site / "amdsmi-7.0.2.dist-info/METADATA").read_text()
    assert "Name: amdsmi\nVersion: 7.0.2\n" in metadata  # the SDK tree's pyproject.toml, as pip would record it
    assert (prefix / "share/rocm-stack/patches/amdsmi.txt").read_text().splitlines()[-1] == "# none"
    assert not (REPO / "patches/amdsmi").exists()
