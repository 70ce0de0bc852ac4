"""The real recipes' scripts, run here down to the last layer that needs no ROCm: rocm-sdk's and
rocm-sdk-device's install from synthetic AMD wheels (rocm-sdk-licenses' files in the device's host environment)
and activation (with the env each architecture's rendered recipe gives it), flash-attn's backend switch,
and the shared patch record."""
from __future__ import annotations

import copy
import functools
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from orchestrate import runner
from orchestrate.architectures import ArchitectureTable
from orchestrate.options import Options
from prebuilt_helpers import conda_gcc_layout, write_device_wheel, write_host_artifacts

REPO = Path(__file__).resolve().parent.parent
TABLE = ArchitectureTable.load(REPO / "variants")


@functools.lru_cache(maxsize=None)
def _plan(arch: str, overrides: tuple) -> list:
    options = Options(workspace=REPO, channel=Path("/nonexistent/channel"), arch=arch, source_channels=[],
                      variant_overrides=dict(overrides))
    return [step.output for step in runner.make_plan(options).steps]


def rendered_output(arch: str, package: str, overrides: dict | None = None, backend: str | None = None) -> dict:
    for o in _plan(arch, tuple(sorted((overrides or {}).items()))):
        if o.name == package and (backend is None or o.variant.get("flash_attn_backend") == backend):
            return copy.deepcopy(o.rendered)
    raise AssertionError(f"{package} not in the plan for {arch}")


def rendered_env(arch: str, package: str, overrides: dict | None = None, backend: str | None = None) -> dict:
    rendered = rendered_output(arch, package, overrides, backend)
    return {k: str(v) for k, v in (rendered["build"]["script"].get("env") or {}).items()}


def run_build_script(recipe: str, env: dict, prefix: Path, src: Path, content: str | None = None) -> None:
    """recipes/<recipe>/build.sh, or the output's script `content` where the recipe gives one; $PYTHON is the
    python of requirements.host, as rattler-build sets it (here this test's interpreter)."""
    full = {"PATH": os.environ["PATH"], "PREFIX": str(prefix), "SRC_DIR": str(src), "PYTHON": sys.executable,
            "RECIPE_DIR": str(REPO / "recipes" / recipe), **env}
    command = ["bash", "-c", content] if content else ["bash", str(REPO / "recipes" / recipe / "build.sh")]
    subprocess.run(command, env=full, check=True, capture_output=True, text=True)


def install_host_package(recipe: str, rendered: dict, prefix: Path, src: Path) -> None:
    """An output as rattler-build's host environment holds it: its files, and the conda-meta record naming them
    (what install_wheels.py reads to tell whose license folder it is given)."""
    before = {p for p in prefix.rglob("*") if p.is_file()}
    run_build_script(recipe, {}, prefix, src, rendered["build"]["script"]["content"])
    files = sorted(str(p.relative_to(prefix)) for p in prefix.rglob("*") if p.is_file() and p not in before)
    package = rendered["package"]
    (prefix / "conda-meta").mkdir(exist_ok=True)
    (prefix / "conda-meta" / f"{package['name']}-{package['version']}.json").write_text(
        json.dumps({"name": package["name"], "version": str(package["version"]), "files": files}))


def activated(prefix: Path, *, deactivate: bool = False) -> dict:
    """The environment after sourcing the prefix's activation (and optionally deactivation) scripts."""
    script = f'export CONDA_PREFIX="{prefix}"; export HIP_PATH=/opt/old-hip; ' \
             f'for f in "{prefix}"/etc/conda/activate.d/*.sh; do . "$f"; done; '
    if deactivate:
        script += f'for f in "{prefix}"/etc/conda/deactivate.d/*.sh; do . "$f"; done; '
    script += "env -0"
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True,
                         env={"PATH": os.environ["PATH"]}).stdout
    return dict(item.split("=", 1) for item in out.split("\0") if "=" in item)


def install_rocm_sdk(arch: str, tmp_path: Path, overrides: dict | None = None, with_devel: bool = True) -> Path:
    """Run rocm-sdk's (with rocm-sdk-devel's, unless `with_devel` is False) and rocm-sdk-device's build scripts on
    synthetic AMD wheels laid out as rattler-build downloads them (one folder per source; the `rocm` sdist unpacked
    without its top folder)."""
    src, prefix = tmp_path / "src", tmp_path / "prefix"
    artifacts = {**write_host_artifacts(tmp_path / "index"), "rocm_sdk_device": write_device_wheel(tmp_path / "index", arch)}
    for folder, key in (("core", "rocm_sdk_core"), ("libraries", "rocm_sdk_libraries"), ("devel", "rocm_sdk_devel"),
                        ("device", "rocm_sdk_device")):
        (src / "wheels" / folder).mkdir(parents=True)
        shutil.copy(artifacts[key], src / "wheels" / folder)
    with tarfile.open(artifacts["rocm"]) as sdist:
        for member in sdist.getmembers():
            member.name = member.name.split("/", 1)[1]
            sdist.extract(member, src / "wheels" / "rocm")
    prefix.mkdir()
    install_host_package("rocm-sdk", rendered_output(arch, "rocm-sdk-licenses", overrides), prefix, src)
    run_build_script("rocm-sdk", rendered_env(arch, "rocm-sdk", overrides), prefix, src)
    if with_devel:
        run_build_script("rocm-sdk", rendered_env(arch, "rocm-sdk-devel", overrides), prefix, src)
    run_build_script("rocm-sdk-device", rendered_env(arch, f"rocm-sdk-device-{arch}", overrides), prefix, src)
    return prefix


# The activation depends on the architecture through its row's aotriton value (AOTRITON_EXPERIMENTAL) and its
# device wheel's files: one architecture of each GPU series (ISA major.minor) and aotriton value runs the real
# scripts (test_recipes renders every recipe for every architecture)
ACTIVATION_ARCHS = list({(a.isa.rsplit(".", 1)[0], a.capabilities["aotriton"].value): a.name
                         for a in reversed(TABLE.architectures.values())}.values())[::-1]


@pytest.mark.parametrize("arch", ACTIVATION_ARCHS)
def test_rocm_sdk_activation_sets_what_the_stack_needs_and_nothing_that_slows_it(arch, tmp_path):
    prefix = install_rocm_sdk(arch, tmp_path)
    env = activated(prefix)
    root = prefix / "lib/python3.12/site-packages/_rocm_sdk_devel"
    assert env["ROCM_PATH"] == env["HIP_PATH"] == env["ROCM_HOME"] == str(root)
    assert env["HIP_DEVICE_LIB_PATH"] == f"{root}/lib/llvm/amdgcn/bitcode"
    assert (Path(env["HIP_DEVICE_LIB_PATH"]) / "ockl.bc").is_file()
    experimental = TABLE.get(arch).capabilities["aotriton"].value == "experimental"
    assert (env.get("TORCH_ROCM_AOTRITON_ENABLE_EXPERIMENTAL") == "1") == experimental
    assert "AMD_SERIALIZE_KERNEL" not in env and "HIP_LAUNCH_BLOCKING" not in env
    assert (prefix / "bin" / "hipconfig").exists()
    assert "# none" in (prefix / "share/rocm-stack/patches/rocm-sdk.txt").read_text()


def test_activation_points_hipcc_at_the_environments_conda_gcc_and_sysroot(tmp_path):
    """aiter compiles kernels with hipcc in the user's environment, whose gxx brings conda's GCC and sysroot: the
    SDK's activation hands hipcc the flags builds get (recipes/_shared/conda-gcc-flags.sh), and takes them back."""
    prefix = install_rocm_sdk("gfx1151", tmp_path)
    assert "HIPCC_COMPILE_FLAGS_APPEND" not in activated(prefix)  # no conda GCC here yet: nothing added
    conda_gcc_layout(prefix)
    env = activated(prefix)
    flags = ["--target=x86_64-conda-linux-gnu", f"--gcc-toolchain={prefix}",
             f"--sysroot={prefix}/x86_64-conda-linux-gnu/sysroot", "--start-no-unused-arguments",
             "--rtlib=libgcc", "--unwindlib=libgcc", "--end-no-unused-arguments"]
    assert env["HIPCC_COMPILE_FLAGS_APPEND"].split() == flags == env["HIPCC_LINK_FLAGS_APPEND"].split()
    assert "rocm_clang_toolchain_flags" not in subprocess.run(
        ["bash", "-c", f'export CONDA_PREFIX="{prefix}"; . "{prefix}/etc/conda/activate.d/rocm-sdk-devel.sh"; declare -F'],
        capture_output=True, text=True, check=True).stdout
    restored = activated(prefix, deactivate=True)
    assert "HIPCC_COMPILE_FLAGS_APPEND" not in restored and "HIPCC_LINK_FLAGS_APPEND" not in restored


def test_activation_applies_vllms_runtime_fixes_and_keeps_the_users_values(tmp_path):
    """vLLM's ROCm image sets ROCPROFILER_QUEUE_INTERPOSITION=0 (a hang at HSA teardown) and HSA_NO_SCRATCH_RECLAIM=1
    (RCCL); the SDK's activation sets both unless the user has, and deactivation gives back what was there.
    Its other fixes are declined in recipes/rocm-sdk/activate.sh, each with why."""
    prefix = install_rocm_sdk("gfx1151", tmp_path)
    env = activated(prefix)
    assert (env["ROCPROFILER_QUEUE_INTERPOSITION"], env["HSA_NO_SCRATCH_RECLAIM"]) == ("0", "1")
    restored = activated(prefix, deactivate=True)
    assert "ROCPROFILER_QUEUE_INTERPOSITION" not in restored and "HSA_NO_SCRATCH_RECLAIM" not in restored
    script = (f'export CONDA_PREFIX="{prefix}" ROCPROFILER_QUEUE_INTERPOSITION=1; . "{prefix}/etc/conda/activate.d/rocm-sdk.sh"; '
              f'echo "$ROCPROFILER_QUEUE_INTERPOSITION"; . "{prefix}/etc/conda/deactivate.d/rocm-sdk.sh"; '
              'echo "$ROCPROFILER_QUEUE_INTERPOSITION"')
    kept = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True, env={"PATH": os.environ["PATH"]})
    assert kept.stdout.split() == ["1", "1"]
    declined = (REPO / "recipes/rocm-sdk/activate.sh").read_text()
    assert "Declined: rocm_sdk's preload with rtld_global=False" in declined and "Declined: the librocm_smi64.so.7" in declined


def test_deactivation_restores_the_previous_environment(tmp_path):
    prefix = install_rocm_sdk("gfx1150", tmp_path)
    env = activated(prefix, deactivate=True)
    assert env["HIP_PATH"] == "/opt/old-hip"
    assert not env.get("ROCM_PATH") and not env.get("ROCM_HOME") and not env.get("TORCH_ROCM_AOTRITON_ENABLE_EXPERIMENTAL")


def test_mi100_opt_in_enables_experimental_aotriton(tmp_path):
    prefix = install_rocm_sdk("gfx908", tmp_path, {"aotriton_mi100_fa": "true"})
    assert activated(prefix)["TORCH_ROCM_AOTRITON_ENABLE_EXPERIMENTAL"] == "1"


def test_flash_attn_triton_build_switches_its_backend_on_at_activation(tmp_path):
    env = rendered_env("gfx1151", "flash-attn", backend="triton")
    assert env["FLASH_ATTN_BACKEND"] == "triton"
    prefix = tmp_path / "prefix"
    prefix.mkdir()
    run_build_script("flash-attn", {**env, "PYTHON": "true", "PKG_NAME": "flash-attn"}, prefix, tmp_path)
    assert activated(prefix)["FLASH_ATTENTION_TRITON_AMD_ENABLE"] == "TRUE"
    assert "FLASH_ATTENTION_TRITON_AMD_ENABLE" not in activated(prefix, deactivate=True)


def test_flash_attn_ck_build_is_a_separate_variant():
    assert rendered_env("gfx1151", "flash-attn", backend="ck")["FLASH_ATTN_BACKEND"] == "ck"


def test_patch_record_names_each_applied_patch(tmp_path):
    patch = "../../patches/aotriton/0001-gfx908-experimental-target.patch"
    env = {"PATH": os.environ["PATH"], "PREFIX": str(tmp_path), "RECIPE_DIR": str(REPO / "recipes/aotriton"),
           "ROCM_STACK_PATCHES": patch}
    subprocess.run(["bash", str(REPO / "recipes/_shared/record-patches.sh"), "aotriton"], env=env, check=True)
    record = (tmp_path / "share/rocm-stack/patches/aotriton.txt").read_text()
    assert "0001-gfx908-experimental-target.patch  sha256=" in record and "Why:" in record


@pytest.mark.parametrize("arch", ["gfx90a", "gfx942"])
def test_gfx90a_torch_device_package_leaves_out_the_xnack_kpacks_vllm_deletes(arch, tmp_path):
    """vLLM's ROCm image deletes torch_gfx90a:xnack+/xnack-.kpack after installing torch[device-gfx90a] ("ASAN
    artifacts that cause hipErrorInvalidImage on MI250", Dockerfile.rocm_base:125-127 at v0.33.0). The rendered
    amd-torch-device-gfx90a script installs the device wheel without them (and without RECORD lines for them), keeps
    the generic kpack; another architecture's xnack variant is kept, as vLLM keeps it."""
    from prebuilt_helpers import torch_device_wheels

    rendered = rendered_output(arch, f"amd-torch-device-{arch}")
    [wheel] = [w for name, w in torch_device_wheels(tmp_path / "wheels", arch, "2.14.0+rocm10.1.0", "10.1.0").items()
               if name == f"amd-torch-device-{arch}"]
    # the same wheel with AMD's xnack variants beside the generic kpack, as the splitter names them
    import zipfile
    src, prefix = tmp_path / "src", tmp_path / "prefix"
    src.mkdir()
    with zipfile.ZipFile(wheel) as original, zipfile.ZipFile(src / "torch-device.whl", "w") as copy_:
        for info in original.infolist():
            copy_.writestr(info, original.read(info))
        for variant in ("xnack+", "xnack-"):
            copy_.writestr(f"torch/.kpack/torch_{arch}:{variant}.kpack", b"kpack " + variant.encode())
    env = {k: str(v) for k, v in rendered["build"]["script"]["env"].items()}
    env.pop("SATISFIED_BY")  # the Requires-Dist check is the channel test's (test_pytorch_prebuilt.py)
    env.pop("LICENSES_FROM")
    full = {"PATH": os.environ["PATH"], "PREFIX": str(prefix), "PYTHON": sys.executable,
            "RECIPE_DIR": str(REPO / "recipes/pytorch-prebuilt"), **env}
    script = rendered["build"]["script"]["content"].replace("${{ install_wheels }}", rendered["context"]["install_wheels"])
    done = subprocess.run(["bash", "-c", script], env=full, cwd=src,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    kpacks = sorted(p.name for p in (prefix / "lib/python3.12/site-packages/torch/.kpack").iterdir())
    record = next((prefix / "lib/python3.12/site-packages").glob("amd_torch_device_*.dist-info/RECORD")).read_text()
    if arch == "gfx90a":
        assert kpacks == ["torch_gfx90a.kpack"] and ":xnack" not in record
        assert done.stdout.count("left out (SKIP_FILES_MATCHING)") == 2
    else:
        assert kpacks == [f"torch_{arch}.kpack", f"torch_{arch}:xnack+.kpack", f"torch_{arch}:xnack-.kpack"]


def test_device_links_without_the_devel_tree_are_a_folder_no_reader_takes_for_one(tmp_path):
    """rocm-sdk-device links its files into _rocm_sdk_devel/ (as `rocm-sdk init` does) whether or not rocm-sdk-devel
    is installed. Without it, that folder must not pass for a devel tree with any reader of one (at our pins):
    TheRock's console scripts need the `rocm_sdk_devel` module first (rocm_sdk_core/_cli.py _get_module_path), and so
    does `rocm-sdk path` (rocm_sdk/_devel.py get_devel_root); aiter takes _rocm_sdk_devel only with bin/hipconfig
    and include/ (aiter/jit/utils/cpp_extension.py _find_rocm_home, _find_rocm_devel_include at de07f388); torch
    reads _rocm_sdk_core. And every link resolves to the device package's own file, so none dangles."""
    prefix = install_rocm_sdk("gfx942", tmp_path, with_devel=False)
    site = prefix / "lib/python3.12/site-packages"
    devel = site / "_rocm_sdk_devel"
    links = [p for p in devel.rglob("*") if p.is_symlink()]
    assert links and all(p.resolve().is_file() and p.resolve().is_relative_to(site / "_rocm_sdk_libraries") for p in links)
    assert not (site / "rocm_sdk_devel").exists() and not (devel / "__init__.py").exists()
    assert not (devel / "bin").exists() and not (devel / "include").exists()
