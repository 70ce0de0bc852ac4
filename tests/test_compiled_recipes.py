"""The source path's compiled recipes against upstream at their pins (issue 30, findings 5-8): their build
scripts run here down to the call of upstream's build, on an SDK laid out as AMD's wheels lay it out, with a
stand-in `python` that records what the build would be given; and their rendered recipes say what upstream reads.

What runs here: pytorch-rocm's, torchaudio-rocm's, torchvision-rocm's and vllm's build scripts up to upstream's
build command (PyTorch looks for RCCL in site-packages/_rocm_sdk_libraries/lib and the devel tree's CMake
package, keeps the ROCm root in CMAKE_PREFIX_PATH, writes torch/_rocm_init.py, which preloads from the SDK);
what only a real build on a ROCm machine shows: that upstream's CMake takes them (docs/components.md)."""
from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from orchestrate.architectures import GENERATED_HEADER
from orchestrate.recipes import derived_variant_keys
from prebuilt_helpers import VERSION, conda_gcc_layout
from test_recipe_scripts import REPO, install_rocm_sdk, rendered_env, rendered_output

ARCH = "gfx1151"
SOURCE = {"pytorch_from": "source"}
SITE = "lib/python3.12/site-packages"
# Stands for `$PYTHON`: records each call's environment and arguments where upstream's build would start, and
# runs anything else (the recipes' own helper scripts) with this interpreter on the prefix's site-packages.
PYTHON_STAND_IN = """#!/bin/bash
case "$1 $2" in
  "-m pip"|"setup.py bdist_wheel"|"tools/amd_build/build_amd.py "*|"tools/use_existing_torch.py "*)
    n=$(ls "$CALLS" | grep -c "\\.args$")
    env > "$CALLS/$n.env"; printf '%s\\n' "$@" > "$CALLS/$n.args"
    if [[ "$1" == setup.py ]]; then mkdir -p "${3#--dist-dir=}" && touch "${3#--dist-dir=}/vllm-0.0-py3-none-any.whl"; fi
    exit 0 ;;
esac
PYTHONPATH="$PREFIX/lib/python3.12/site-packages" exec {python} "$@"
"""


@pytest.fixture(scope="module")
def sdk(tmp_path_factory):
    """A prefix with rocm-sdk and rocm-sdk-device-<arch> installed by their own build scripts (synthetic AMD wheels),
    plus RCCL as AMD's wheels ship it: librccl in _rocm_sdk_libraries/lib (TheRock rocm_sdk _dist_info.py
    LibraryEntry("rccl", "libraries", "librccl.so*")), a relative link to it and its CMake package in the devel
    tree (TheRock's devel tarball: runtime files as relative symlinks, devel-only files such as lib/cmake)."""
    prefix = install_rocm_sdk(ARCH, tmp_path_factory.mktemp("sdk"))
    site = prefix / SITE
    (site / "_rocm_sdk_libraries/lib/librccl.so.1").write_bytes(b"\x7fELF synthetic librccl\n")
    (site / "_rocm_sdk_devel/lib/librccl.so.1").symlink_to("../../_rocm_sdk_libraries/lib/librccl.so.1")
    (site / "_rocm_sdk_devel/lib/cmake/rccl").mkdir(parents=True)
    (site / "_rocm_sdk_devel/lib/cmake/rccl/rccl-config.cmake").write_text("set(rccl_FOUND TRUE)\n")
    return prefix


def run_build(recipe: str, env: dict, prefix: Path, tmp_path: Path, content: str | None = None) -> list[tuple[dict, list]]:
    """The recipe's build script (or script content) with $PYTHON standing in; returns each recorded call."""
    calls, src = tmp_path / "calls", tmp_path / "src"
    calls.mkdir()
    src.mkdir(exist_ok=True)
    python = tmp_path / "python"
    python.write_text(PYTHON_STAND_IN.replace("{python}", shlex.quote(sys.executable)))
    python.chmod(0o755)
    # the build environment conda-forge's compilers make: recipes/_shared/hip-toolchain.sh stops without it
    build_prefix = tmp_path / "build_env"
    if not build_prefix.exists():
        conda_gcc_layout(build_prefix)
    full = {"PATH": os.environ["PATH"], "PREFIX": str(prefix), "BUILD_PREFIX": str(build_prefix),
            "SRC_DIR": str(src), "SP_DIR": str(prefix / SITE),
            "RECIPE_DIR": str(REPO / "recipes" / recipe), "PYTHON": str(python), "CALLS": str(calls),
            "PKG_NAME": recipe, "PKG_VERSION": "0.0", **env}
    command = ["bash", "-c", content] if content else ["bash", str(REPO / "recipes" / recipe / "build.sh")]
    result = subprocess.run(command, env=full, cwd=src, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    recorded = []
    for n in range(len(list(calls.glob("*.args")))):
        pairs = (line.split("=", 1) for line in (calls / f"{n}.env").read_text().splitlines() if "=" in line)
        recorded.append((dict(pairs), (calls / f"{n}.args").read_text().splitlines()))
    return recorded


def pip_env(calls: list[tuple[dict, list]]) -> dict:
    """The environment upstream's build gets: that of the `pip install` call."""
    [env] = [env for env, args in calls if args[:2] == ["-m", "pip"]]
    return env


def script_of(rendered: dict) -> tuple[dict, str]:
    script = rendered["build"]["script"]
    content = script["content"]
    return {k: str(v) for k, v in script["env"].items()}, content if isinstance(content, str) else "\n".join(content)


# -- PyTorch (finding 5) ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def pytorch_build(sdk, tmp_path_factory):
    (sdk / SITE / "torch").mkdir(exist_ok=True)  # what `pip install .` leaves (the stand-in installs nothing)
    env = rendered_env(ARCH, "pytorch", SOURCE)
    return run_build("pytorch-rocm", env, sdk, tmp_path_factory.mktemp("pytorch"))


def test_source_pytorch_looks_for_rccl_where_the_sdk_puts_it(sdk, pytorch_build):
    env = pip_env(pytorch_build)
    devel = sdk / SITE / "_rocm_sdk_devel"
    assert (env["USE_RCCL"], env["USE_NCCL"], env["USE_SYSTEM_NCCL"]) == ("1", "1", "1")
    # PyTorch's cmake/External/rccl.cmake: find_package(rccl) in CONFIG mode, from the devel tree
    assert env["rccl_ROOT"] == str(devel) == env["ROCM_PATH"]
    assert (Path(env["rccl_ROOT"]) / "lib/cmake/rccl/rccl-config.cmake").is_file()


def test_pytorch_without_rccl_in_the_sdk_builds_gloo_only_and_says_where_it_looked(sdk, tmp_path):
    site = sdk / SITE
    (sdk / SITE / "torch").mkdir(exist_ok=True)
    moved = tmp_path / "librccl.so.1"
    (site / "_rocm_sdk_libraries/lib/librccl.so.1").rename(moved)
    try:
        # librccl where the old script looked ($PREFIX/lib) does not count: AMD's wheels never put it there
        (sdk / "lib").mkdir(exist_ok=True)
        (sdk / "lib/librccl.so.1").write_bytes(b"\x7fELF elsewhere\n")
        calls = run_build("pytorch-rocm", rendered_env(ARCH, "pytorch", SOURCE), sdk, tmp_path)
    finally:
        moved.rename(site / "_rocm_sdk_libraries/lib/librccl.so.1")
        (sdk / "lib/librccl.so.1").unlink()
    env = pip_env(calls)
    assert (env["USE_RCCL"], env["USE_NCCL"]) == ("0", "0") and "rccl_ROOT" not in env


def test_pytorch_keeps_the_rocm_root_first_and_reads_roctracer_from_the_sdk(sdk, pytorch_build):
    env = pip_env(pytorch_build)
    devel = sdk / SITE / "_rocm_sdk_devel"
    assert env["CMAKE_PREFIX_PATH"].split(":") == [str(devel), str(sdk)]
    assert f"-I{devel}/include/roctracer" in env["CXXFLAGS"].split()
    assert f"-I{sdk}/include/roctracer" not in env["CXXFLAGS"]
    # HIPified sources first, then the one build (TheRock's order), with the arch the recipe renders
    assert [args[0] for _, args in pytorch_build] == ["tools/amd_build/build_amd.py", "-m"]
    assert env["PYTORCH_ROCM_ARCH"] == ARCH


def test_source_pytorch_gets_a_rocm_init_that_preloads_from_the_sdk(sdk, pytorch_build):
    """torch/__init__.py (2.14.1) runs torch._rocm_init.initialize() when the file exists; ours must call
    rocm_sdk.initialize_process with libraries this SDK has and its version, and work in the prefix."""
    init = sdk / SITE / "torch/_rocm_init.py"
    text = init.read_text()
    assert "rocm_sdk.initialize_process(" in text and f"check_version={VERSION!r}" in text
    # the synthetic rocm_sdk knows three of TheRock's preloads; the others are left out, not left to fail
    assert "preload_shortnames=['amdhip64', 'hipblas', 'rocm-openblas']" in text
    code = f"import importlib.util as u; s = u.spec_from_file_location('ri', {str(init)!r}); m = u.module_from_spec(s); " \
           "s.loader.exec_module(m); m.initialize(); import rocm_sdk; print('ok')"
    out = subprocess.run([sys.executable, "-c", code], env={"PYTHONPATH": str(sdk / SITE)}, capture_output=True, text=True)
    assert out.stdout.strip() == "ok", out.stderr


# -- torchaudio, torchvision (finding 6) -----------------------------------------------------------------------

def test_torchaudio_builds_as_therock_does_with_what_2_11_still_reads(sdk, tmp_path):
    rendered = rendered_output(ARCH, "torchaudio", SOURCE)
    calls = run_build("torchaudio-rocm", *script_of(rendered)[:1], sdk, tmp_path, script_of(rendered)[1])
    env = pip_env(calls)
    assert (env["USE_ROCM"], env["USE_CUDA"], env["USE_OPENMP"]) == ("1", "0", "1")
    # sox and FFmpeg left torchaudio before 2.11: nothing to switch off, nothing to build against
    assert "BUILD_SOX" not in env and "USE_FFMPEG" not in env
    host = [str(r).split()[0] for r in rendered["requirements"]["host"]]
    assert "ffmpeg" not in host and "sox" not in host


def test_torchvision_finds_png_jpeg_and_webp_in_the_host_prefix(sdk, tmp_path):
    rendered = rendered_output(ARCH, "torchvision", SOURCE)
    host = {str(r).split()[0] for r in rendered["requirements"]["host"]}
    assert {"libpng", "libjpeg-turbo", "libwebp-base"} <= host
    calls = run_build("torchvision-rocm", *script_of(rendered)[:1], sdk, tmp_path, script_of(rendered)[1])
    env = pip_env(calls)
    # setup.py (v0.29.1) searches TORCHVISION_INCLUDE, BUILD_PREFIX, CONDA_PREFIX, /usr/include: not $PREFIX
    assert (env["TORCHVISION_INCLUDE"], env["TORCHVISION_LIBRARY"]) == (f"{sdk}/include", f"{sdk}/lib")
    assert (env["FORCE_CUDA"], env["TORCHVISION_USE_NVJPEG"]) == ("1", "0")
    tests = str(rendered["tests"])
    assert "decode_webp" in tests and "decode_jpeg" in tests and "decode_png" in tests


# -- triton, aotriton (finding 7) ------------------------------------------------------------------------------

def test_triton_builds_the_llvm_its_llvm_info_names_from_tritons_fork():
    rendered = rendered_output(ARCH, "triton", SOURCE)
    [llvm] = [s for s in rendered["source"] if s.get("target_directory") == "llvm-project"]
    assert llvm["git"] == "https://github.com/triton-lang/llvm-project.git"
    assert "mlir;lld;clang" in (REPO / "recipes/triton-rocm/build.sh").read_text()
    [check] = [t for t in rendered["tests"] if "script" in t and "python compile_check.py" in t["script"]]
    assert check["files"]["recipe"] == ["compile_check.py"]
    upstreams = yaml.safe_load((REPO / "variants/upstreams.yaml").read_text())
    assert upstreams["components"]["triton"]["checks"][0]["file"] == "cmake/llvm-info.json"


# -- variant files, vLLM, aiter (finding 8) --------------------------------------------------------------------

def test_variant_file_header_names_the_command_that_builds_and_the_keys_only_it_adds():
    header = GENERATED_HEADER.format(arch=ARCH)
    assert f"orchestrate build RECIPE --arch {ARCH}" in header
    for key in derived_variant_keys({"rocm_sdk_version": ["10.1.0"]}):
        assert key in header
    assert (REPO / f"variants/{ARCH}.yaml").read_text().startswith(header)
    # the recipes do use a key only the orchestrator computes, so plain `rattler-build -m` cannot render them
    recipes = "".join(p.read_text() for p in (REPO / "recipes").glob("*/recipe.yaml"))
    assert "${{ rocm_tag }}" in recipes


def test_vllm_keeps_commons_protobuf_exclusions():
    run = [str(r) for r in rendered_output(ARCH, "vllm")["requirements"]["run"]]
    [protobuf] = [r for r in run if r.split()[0] == "protobuf"]
    # requirements/common.txt at v0.33.0 (the sdist): protobuf >= 5.29.6, !=6.30.*, ... (not on s390x)
    assert protobuf == ("protobuf >=5.29.6,!=6.30.*,!=6.31.*,!=6.32.*,!=6.33.0.*,!=6.33.1.*,!=6.33.2.*,"
                        "!=6.33.3.*,!=6.33.4.*")


def test_vllm_builds_a_wheel_as_upstream_does_without_the_rocm_version_suffix(sdk, tmp_path):
    kernels = tmp_path / "src/_deps/rocm-triton/python/triton_kernels/triton_kernels"
    kernels.mkdir(parents=True)
    (kernels / "__init__.py").write_text("")
    calls = run_build("vllm", rendered_env(ARCH, "vllm"), sdk, tmp_path)
    steps = [args for _, args in calls]
    assert steps[0][0] == "tools/use_existing_torch.py"
    assert steps[1] == ["setup.py", "bdist_wheel", f"--dist-dir={tmp_path}/src/vllm-dist"]
    assert steps[2][:2] == ["-m", "pip"] and "--no-index" in steps[2] and "--no-deps" in steps[2]
    assert steps[2][-1] == f"{tmp_path}/src/vllm-dist/vllm-0.0-py3-none-any.whl"
    env = calls[1][0]
    assert (env["VLLM_SKIP_VERSION_SUFFIX"], env["VLLM_TARGET_DEVICE"]) == ("1", "rocm")


def test_aiter_brings_hipkittens_so_no_module_hk_build_clones_it():
    sources = rendered_output("gfx942", "aiter")["source"]
    [hk] = [s for s in sources if s.get("target_directory") == "3rdparty/HipKittens"]
    # aiter/jit/core.py clone_3rdparty at de07f388: this URL and commit, skipped when the folder exists
    assert hk["git"] == "https://github.com/HazyResearch/HipKittens.git"
    assert hk["rev"] == "d3cd9b31cb0ff611ff64b5701f57ccdeb7712f39"


@pytest.mark.parametrize("package", ["pytorch", "torchvision", "torchaudio", "triton", "vllm", "flash-attn"])
def test_compiled_packages_tests_load_their_extensions_after_import_torch(package):
    """Each compiled recipe's test imports its compiled code the way a user's process does."""
    overrides = None if package in ("vllm", "flash-attn") else SOURCE
    expected = {"pytorch": "amdsmi_init", "torchvision": "import io, torch, torchvision.io",
                "torchaudio": "torch.ops.torchaudio._lfilter_core_loop", "triton": "python compile_check.py",
                "vllm": "python check_import_path.py", "flash-attn": "import torch, flash_attn_2_cuda"}
    backend = "ck" if package == "flash-attn" else None
    assert expected[package] in str(rendered_output(ARCH, package, overrides, backend)["tests"])


def test_vllms_test_runs_vllms_own_import_path_not_a_named_op():
    """vLLM 0.33 moved rms_norm from vllm._C to vllm._C_stable_libtorch and a test naming it failed on every arch;
    the recipe test runs the platform's import_kernels() and the serve path instead (recipes/vllm/check_import_path.py,
    run against vLLM 0.33.0's sdist by tests/test_upstream_contract.py)."""
    tests = rendered_output(ARCH, "vllm")["tests"]
    [check] = [t for t in tests if "script" in t and "python check_import_path.py" in str(t["script"])]
    assert check["script"]["env"] == {"VLLM_CHECK_GPU_ARCH": ARCH}
    assert "torch.ops." not in str(tests)
    script = (REPO / "recipes/vllm/check_import_path.py").read_text()
    assert ".import_kernels()" in script and "_get_backend_priorities(" in script


def test_aotriton_links_the_liblzma_its_recipe_declares_not_therocks_bundled_one(sdk, tmp_path):
    """Two liblzma.pc in the build: TheRock's bundled sysdeps (rocm-env.sh puts them on PKG_CONFIG_PATH) and the host
    environment's xz, which the recipe requires. aotriton's configure must resolve the declared one."""
    sysdeps = sdk / SITE / "_rocm_sdk_devel/lib/rocm_sysdeps/lib/pkgconfig"
    ours = sdk / "lib/pkgconfig"
    for folder, name in ((sysdeps, "rocm_sysdeps_lzma"), (ours, "lzma")):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "liblzma.pc").write_text(f"prefix={folder.parent.parent}\nlibdir=${{prefix}}/lib\nName: liblzma\n"
                                           f"Description: stand-in\nVersion: 5.8.1\nLibs: -L${{libdir}} -l{name}\n")
    tools = tmp_path / "tools"
    tools.mkdir()
    # cmake and ninja stand in: record what pkg-config answers for liblzma where aotriton's configure would ask
    (tools / "cmake").write_text(f'#!/bin/sh\npkg-config --libs liblzma > "{tmp_path}/lzma.txt"\n')
    (tools / "ninja").write_text("#!/bin/sh\nexit 0\n")
    for tool in ("cmake", "ninja"):
        (tools / tool).chmod(0o755)
    (tmp_path / "src/aiter").mkdir(parents=True)
    (tmp_path / "src/aiter/README").write_text("aiter at its tag\n")
    env = {**rendered_env(ARCH, "aotriton", SOURCE), "PATH": f"{tools}:{os.environ['PATH']}", "AITER_TAG": "v0"}
    try:
        run_build("aotriton", env, sdk, tmp_path)
    finally:
        shutil.rmtree(ours)
        (sysdeps / "liblzma.pc").unlink()
    assert (tmp_path / "lzma.txt").read_text().split() == [f"-L{sdk}/lib", "-llzma"]


def test_source_triton_requires_this_stacks_sdk_release():
    run = [str(r) for r in rendered_output(ARCH, "triton", SOURCE)["requirements"]["run"]]
    sdk = [r for r in run if r.split()[0] == "rocm-sdk"]
    assert sdk and all(len(r.split()) == 2 and r.split()[1].endswith(".*") for r in sdk), sdk


def test_vllm_builds_with_rocms_setuptools_bound():
    """requirements/rocm.txt at v0.33.0: setuptools>=78.1.1,<80.0.0, tighter than pyproject's and common.txt's <81."""
    host = [str(r) for r in rendered_output(ARCH, "vllm")["requirements"]["host"]]
    assert "setuptools >=78.1.1,<80.0.0" in host


def test_vllm_activation_applies_its_images_runtime_settings_and_keeps_the_users(sdk, tmp_path):
    """vLLM's ROCm image sets HIP_FORCE_DEV_KERNARG=1 and TOKENIZERS_PARALLELISM=false for `vllm serve`; the build
    installs an activation that does the same unless the user chose, and deactivation gives the old values back."""
    from test_recipe_scripts import activated
    kernels = tmp_path / "src/_deps/rocm-triton/python/triton_kernels/triton_kernels"
    kernels.mkdir(parents=True)
    (kernels / "__init__.py").write_text("")
    prefix = tmp_path / "prefix"
    shutil.copytree(sdk, prefix, symlinks=True)
    run_build("vllm", rendered_env(ARCH, "vllm"), prefix, tmp_path)
    env = activated(prefix)
    assert (env["HIP_FORCE_DEV_KERNARG"], env["TOKENIZERS_PARALLELISM"]) == ("1", "false")
    restored = activated(prefix, deactivate=True)
    assert "HIP_FORCE_DEV_KERNARG" not in restored and "TOKENIZERS_PARALLELISM" not in restored
    kept = subprocess.run(["bash", "-c", f'export HIP_FORCE_DEV_KERNARG=0; . "{prefix}/etc/conda/activate.d/vllm.sh"; '
                                         f'echo "$HIP_FORCE_DEV_KERNARG"'], capture_output=True, text=True, check=True)
    assert kept.stdout.strip() == "0"
