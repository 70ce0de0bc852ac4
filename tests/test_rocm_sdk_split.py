"""The real rocm-sdk and rocm-sdk-device recipes built by the orchestrator from synthetic AMD 10.1.0 wheels on a
loopback index (tests/prebuilt_helpers.py), for two architectures: one host package shared by both, a device
package per GPU that installs only on that GPU, and an installed environment where rocm_sdk, torch's
_rocm_init and the source recipes' rocm-env.sh find everything, read-only."""
from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from orchestrate import runner
from orchestrate.options import Options
from prebuilt_helpers import TORCH_ROCM_INIT, VERSION, conda_gcc_layout, make_index, sha256_of
from source_helpers import CountingServer
from stack import install, make_workspace, package_info, solve

REPO = Path(__file__).resolve().parent.parent
ARCHS = {"gfx1151": "11.5.1", "gfx1100": "11.0.0"}
HOST_KEYS = ("rocm_sdk_core", "rocm_sdk_libraries", "rocm_sdk_devel", "rocm")
SITE = "lib/python3.12/site-packages"

# conda-forge's python, reduced to what the build and the installed tree need here: bin/python3.12 (the console
# scripts run it) runs this test's interpreter on the prefix's site-packages, and bin/python, the same, is the
# recipes' $PYTHON (requirements.host).
PYTHON_STAND_IN = """package: {{name: python, version: "3.12.0"}}
build:
  noarch: generic
  script:
    - mkdir -p $PREFIX/bin
    - printf '#!/bin/sh\\nPYTHONPATH="$(dirname "$0")/../lib/python3.12/site-packages" exec {python} "$@"\\n' > $PREFIX/bin/python3.12
    - chmod +x $PREFIX/bin/python3.12
    - cp $PREFIX/bin/python3.12 $PREFIX/bin/python
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Both architectures built once through `orchestrate build`; yields (workspace, index, outputs)."""
    tmp = tmp_path_factory.mktemp("split")
    workspace = real_recipes_workspace(tmp, ("rocm-sdk", "rocm-sdk-device"),
                                       {"python": PYTHON_STAND_IN.format(python=sys.executable)})
    index = make_index(tmp / "index", list(ARCHS))
    with CountingServer(index.root) as server:
        index.url = server.url + "/"
        _write_lock(workspace, index)
        outputs = {}
        for arch in ARCHS:
            result = _orchestrate(workspace, "build", f"rocm-sdk-device-{arch}", "rocm-sdk-devel", "--arch", arch,
                                  "--no-tests")
            assert result.returncode == 0, result.stdout + result.stderr
            outputs[arch] = result.stdout
        yield workspace, index, outputs, server


def real_recipes_workspace(root: Path, recipes: tuple[str, ...], stand_ins: dict[str, str]) -> Path:
    """A test workspace whose recipes are these real ones (with _shared), stand-in recipes (name: recipe.yaml text)
    for what they need from conda-forge, and the real shared pins."""
    workspace = make_workspace(root)
    shutil.rmtree(workspace / "recipes")
    (workspace / "recipes").mkdir()
    for recipe in (*recipes, "_shared"):
        shutil.copytree(REPO / "recipes" / recipe, workspace / "recipes" / recipe)
    for name, text in stand_ins.items():
        (workspace / "recipes" / name).mkdir()
        (workspace / "recipes" / name / "recipe.yaml").write_text(text)
    shutil.copy(REPO / "variants/shared.yaml", workspace / "variants/shared.yaml")
    return workspace


def _orchestrate(workspace: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("ORCHESTRATE_ARCH", None)
    return subprocess.run([sys.executable, "-m", "orchestrate", args[0], "--quiet", *args[1:]], cwd=workspace, env=env,
                          capture_output=True, text=True, timeout=300)


def _write_lock(workspace: Path, index, device_sha256: dict[str, str] | None = None) -> None:
    """The complete lock for the synthetic index, in variants/prebuilt(-lock).yaml, as `pins --lock` writes it;
    `device_sha256` replaces an architecture's device hash (a file that does not match its lock)."""
    declared = yaml.safe_load((REPO / "variants/prebuilt.yaml").read_text())
    declared["index"] = index.url
    (workspace / "variants/prebuilt.yaml").write_text(yaml.safe_dump(declared, sort_keys=False))
    artifacts = {key: {"file": index.files[key].name, "url": index.url + index.files[key].name,
                       "sha256": sha256_of(index.files[key])} for key in HOST_KEYS}
    artifacts["rocm_sdk_device"] = {
        arch: {"file": index.files[f"rocm_sdk_device:{arch}"].name,
               "url": index.url + index.files[f"rocm_sdk_device:{arch}"].name,
               "sha256": (device_sha256 or {}).get(arch) or sha256_of(index.files[f"rocm_sdk_device:{arch}"])}
        for arch in ARCHS}
    (workspace / "variants/prebuilt-lock.yaml").write_text(yaml.safe_dump({"index": index.url, "artifacts": artifacts}))


def _packages(workspace: Path, pattern: str) -> list[Path]:
    return sorted((workspace / "channel").glob(f"*/{pattern}"))


def test_one_host_package_serves_both_architectures(built):
    workspace, index, outputs, server = built
    [host] = _packages(workspace, "rocm-sdk-10.1.0-*.conda")
    assert _packages(workspace, f"rocm-sdk-device-gfx1151-{VERSION}-gfx1151_*.conda")
    assert _packages(workspace, f"rocm-sdk-device-gfx1100-{VERSION}-gfx1100_*.conda")
    assert server.downloads[index.files["rocm_sdk_core"].name] == 1  # built once, for gfx1151
    records = {arch: solve(workspace / "channel", [f"rocm-sdk-device-{arch}"], isa) for arch, isa in ARCHS.items()}
    picked = {arch: [(str(r.build), r.sha256.hex()) for r in recs if r.name.normalized == "rocm-sdk"]
              for arch, recs in records.items()}
    assert picked["gfx1151"] == picked["gfx1100"] == [(host.name.split("-")[-1][:-len(".conda")], sha256_of(host))]


def test_the_sdk_packages_carry_the_wheels_licenses_and_require_the_stacks_glibc(built):
    """AMD's SDK wheels are linux_x86_64 (no manylinux promise): the stack's bound; their dist-info licenses. The
    device wheel has none (install_wheels.py says why): its package carries the SDK's, from rocm-sdk-licenses,
    and a note naming that package and the requirement that makes them apply."""
    workspace, *_ = built
    bound = yaml.safe_load((REPO / "variants/shared.yaml").read_text())["c_stdlib_version"][0]
    [host] = _packages(workspace, f"rocm-sdk-{VERSION}-*.conda")
    index, licenses = package_info(host)
    assert f"__glibc >={bound}" in index["depends"], (host.name, index["depends"])
    assert {path.split("/")[1].split("-")[0] for path in licenses} == {"rocm_sdk_core", "rocm_sdk_libraries", "rocm"}
    # and the license files of the SDK's components, which only the devel tree carries (share/doc/<component>/):
    # the runtime takes them from rocm-sdk-licenses, the devel package from its tree
    assert licenses["wheel-licenses/rocm-sdk-licenses/hip/LICENSE.md"] == b"synthetic license of HIP\n", licenses
    [devel] = _packages(workspace, f"rocm-sdk-devel-{VERSION}-*.conda")
    index, licenses = package_info(devel)
    assert f"__glibc >={bound}" in index["depends"] and any(d.startswith("rocm-sdk ==") for d in index["depends"])
    hip = f"wheel-licenses/rocm_sdk_devel-{VERSION}.dist-info/_rocm_sdk_devel/share/doc/hip/LICENSE.md"
    assert licenses[hip] == b"synthetic license of HIP\n", licenses
    sdk_license = f"wheel-licenses/rocm-sdk-licenses-{VERSION}/hip/LICENSE.md"
    for arch in ARCHS:
        [device] = _packages(workspace, f"rocm-sdk-device-{arch}-{VERSION}-*.conda")
        index, licenses = package_info(device)
        assert f"__glibc >={bound}" in index["depends"], (device.name, index["depends"])
        note = f"wheel-licenses/rocm_sdk_device_{arch}-{VERSION}.dist-info/LICENSES-FROM-HOST-WHEEL.txt"
        assert set(licenses) == {sdk_license, note}, licenses
        assert licenses[sdk_license] == b"synthetic license of HIP\n"
        text = licenses[note].decode()
        assert f"rocm-sdk-device-{arch} {VERSION} carries no license file of its own" in text
        assert f"the conda package rocm-sdk-licenses {VERSION}" in text and "share/licenses/rocm-sdk/" in text
        assert "it requires rocm-sdk-libraries at exactly that version" in text and sdk_license in text


def test_the_sdks_license_files_are_one_noarch_package_for_every_architecture(built):
    """rocm-sdk-licenses: built once (the second architecture finds it up to date), the devel tree's
    share/doc/<component>/ files in share/licenses/rocm-sdk/<component>/ and in its own info/licenses/."""
    workspace, _, outputs, _ = built
    [package] = _packages(workspace, f"rocm-sdk-licenses-{VERSION}-*.conda")
    assert package.parent.name == "noarch"
    info, licenses = package_info(package)
    assert info["license"] == "MIT AND Apache-2.0 WITH LLVM-exception AND BSD-3-Clause"
    assert licenses == {f"wheel-licenses/rocm_sdk_devel-{VERSION}.dist-info/_rocm_sdk_devel/share/doc/hip/LICENSE.md":
                        b"synthetic license of HIP\n"}
    assert [f for f in _package_files(package) if not f.startswith("info/")] == ["share/licenses/rocm-sdk/hip/LICENSE.md"]
    second = [line.split() for line in outputs["gfx1100"].splitlines() if line.startswith("rocm-sdk-licenses ")]
    assert second == [["rocm-sdk-licenses", VERSION, package.name.split("-")[-1][:-len(".conda")], "up", "to", "date"]]


def _package_files(package: Path) -> list[str]:
    import asyncio
    from rattler.package_streaming import PackageArchive

    async def read():
        return await (await PackageArchive.from_path(package)).list_files("pkg")
    return sorted(asyncio.run(read()))


def test_the_device_packages_of_several_gpus_install_side_by_side_on_either(built):
    """A machine with an RX 7900 and a Strix Halo holds both GPUs' device code in one environment (what requires the
    GPU is pytorch and rocm-stack): neither device package refuses the other's GPU."""
    workspace, *_ = built
    both = ["rocm-sdk-device-gfx1100", "rocm-sdk-device-gfx1151"]
    for isa in ("11.0.0", "11.5.1"):
        assert set(both) <= {r.name.normalized for r in solve(workspace / "channel", both, isa)}


@pytest.fixture(scope="module")
def installed(built, tmp_path_factory):
    workspace, *_ = built
    prefix = tmp_path_factory.mktemp("env") / "prefix"
    install(workspace / "channel", ["rocm-sdk-device-gfx1151", "rocm-sdk-devel"], "11.5.1", prefix)
    # what a read-only shared environment looks like: nothing below may write into it
    for path in [prefix, *prefix.rglob("*")]:
        if not path.is_symlink():
            path.chmod(path.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    yield prefix
    for path in [prefix, *prefix.rglob("*")]:
        if not path.is_symlink():
            path.chmod(path.stat().st_mode | stat.S_IWUSR)


def _run(prefix: Path, *command: str) -> str:
    return subprocess.run(command, capture_output=True, text=True, check=True, cwd=prefix,
                          env={"PATH": f"{prefix}/bin:/usr/bin:/bin"}).stdout.strip()


def test_the_runtime_alone_holds_no_devel_tree_and_torch_finds_its_libraries(built, tmp_path):
    """A PyTorch user's environment (rocm[libraries] and the device package): no devel tree, no headers, nothing that
    only compiles; torch's _rocm_init finds the libraries, and activation sets no ROCm path and says nothing."""
    workspace, *_ = built
    prefix = tmp_path / "prefix"
    install(workspace / "channel", ["rocm-sdk-device-gfx1151"], "11.5.1", prefix)
    site = prefix / SITE
    assert not (site / "_rocm_sdk_devel/__init__.py").exists() and not (site / "rocm_sdk_devel").exists()
    assert not list(site.rglob("*.cmake"))  # (core keeps HIP's runtime headers, as TheRock's core wheel does)
    code = TORCH_ROCM_INIT.format(version=VERSION) + "\nprint('\\n'.join(map(str, initialize())))"
    assert _run(prefix, f"{prefix}/bin/python3.12", "-c", code).splitlines()[0].endswith("libamdhip64.so.7")
    activated = subprocess.run(["bash", "-c", f'export CONDA_PREFIX="{prefix}"; '
                                f'for f in "{prefix}"/etc/conda/activate.d/*.sh; do . "$f"; done; env'],
                               capture_output=True, text=True, check=True, env={"PATH": "/usr/bin:/bin"})
    assert activated.stderr == "" and "ROCM_PATH=" not in activated.stdout and "HIP_PATH=" not in activated.stdout


def test_rocm_sdk_finds_the_initialized_devel_tree_read_only(installed):
    prefix = installed
    root = prefix / SITE / "_rocm_sdk_devel"
    assert _run(prefix, f"{prefix}/bin/rocm-sdk", "path", "--root") == str(root)
    assert (Path(_run(prefix, f"{prefix}/bin/rocm-sdk", "path", "--cmake")) / "hip/hip-config.cmake").is_file()
    assert _run(prefix, f"{prefix}/bin/rocm-sdk", "version") == VERSION
    assert not list((prefix / SITE / "rocm_sdk_devel").glob("_devel.tar*"))
    # hipcc on PATH is core's console script; it runs the devel tree's hipcc (a link into _rocm_sdk_core)
    assert _run(prefix, f"{prefix}/bin/hipcc", "--version").startswith("hipcc (synthetic ROCm")


def test_pip_sees_every_rocm_distribution(installed):
    code = ("import importlib.metadata as m, sys; "
            "print(sorted((d.metadata['Name'], d.version) for d in m.distributions(path=[sys.argv[1]])))")
    names = _run(installed, sys.executable, "-c", code, str(installed / SITE))
    assert names == str(sorted((n, VERSION) for n in (
        "rocm", "rocm-sdk-core", "rocm-sdk-devel", "rocm-sdk-device-gfx1151", "rocm-sdk-libraries")))


def test_torch_rocm_init_finds_the_libraries(installed):
    code = TORCH_ROCM_INIT.format(version=VERSION) + "\nprint('\\n'.join(map(str, initialize())))"
    found = _run(installed, f"{installed}/bin/python3.12", "-c", code).splitlines()
    assert found == [f"{installed / SITE}/_rocm_sdk_core/lib/libamdhip64.so.7",
                     f"{installed / SITE}/_rocm_sdk_libraries/lib/libhipblas.so.3"]


def test_device_files_are_in_the_libraries_overlay_and_linked_into_devel(installed):
    site = installed / SITE
    kpack = site / "_rocm_sdk_libraries/.kpack/blas_lib_gfx1151.kpack"
    assert kpack.read_text() == "kernels for gfx1151\n"
    linked = site / "_rocm_sdk_devel/.kpack/blas_lib_gfx1151.kpack"
    assert linked.is_symlink() and linked.resolve() == kpack.resolve()
    assert not list(site.rglob("*gfx1100*"))
    assert not (site / "_rocm_sdk_libraries/.devel_links").exists()


def test_rocm_env_finds_hipcc_clang_and_cmake_configs(installed, tmp_path):
    build_prefix = conda_gcc_layout(tmp_path / "build_env")
    script = (f'export PREFIX="{installed}" BUILD_PREFIX="{build_prefix}" GPU_ARCH=gfx1151; '
              f'source "{REPO}/recipes/_shared/rocm-env.sh"; '
              'command -v hipcc; echo "$HIP_CLANG_PATH"; echo "${CMAKE_PREFIX_PATH%%:*}"; echo "$HIP_DEVICE_LIB_PATH"; '
              'echo "$HIPCC_COMPILE_FLAGS_APPEND"; echo "$CMAKE_TOOLCHAIN_FILE"')
    hipcc, clang_dir, cmake_prefix, bitcode, clang_flags, toolchain = _run(installed, "bash", "-c", script).splitlines()
    root = installed / SITE / "_rocm_sdk_devel"
    assert hipcc == f"{root}/bin/hipcc" and os.access(hipcc, os.X_OK)
    assert Path(clang_dir, "clang").is_file()
    assert Path(cmake_prefix, "lib/cmake/hip/hip-config.cmake").is_file()
    assert Path(bitcode, "ockl.bc").is_file()
    assert clang_flags.split() == ["--target=x86_64-conda-linux-gnu", f"--gcc-toolchain={build_prefix}",
                                   f"--sysroot={build_prefix}/x86_64-conda-linux-gnu/sysroot",
                                   "--start-no-unused-arguments", "--rtlib=libgcc", "--unwindlib=libgcc",
                                   "--end-no-unused-arguments"]
    assert toolchain == str(REPO / "recipes/_shared/rocm-toolchain.cmake")


@pytest.mark.parametrize("sysroot, cxx, says", [
    (True, True, None),
    (False, True, "no C library headers in the sysroot"),
    # conda-forge's `gcc` alone (what triton requires), or an older gcc_impl: C only
    (True, False, "the GCC 14.3.0 at "),
])
def test_rocm_env_stops_on_a_build_env_without_conda_gcc_or_sysroot(installed, tmp_path, sysroot, cxx, says):
    build_prefix = conda_gcc_layout(tmp_path / "build_env", sysroot=sysroot, cxx=cxx)
    if says is None:  # the compiler itself missing
        shutil.rmtree(build_prefix / "lib/gcc")
        says = "no single GCC installation at"
    script = (f'export PREFIX="{installed}" BUILD_PREFIX="{build_prefix}" GPU_ARCH=gfx1151; '
              f'source "{REPO}/recipes/_shared/rocm-env.sh"')
    result = subprocess.run(["bash", "-c", script], capture_output=True, text=True)
    assert result.returncode != 0
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("hip-toolchain.sh: " + says) and "requirements.build" in line
    if not cxx:
        assert "has no libstdc++ headers" in line and "compiler('cxx')" in line


@pytest.mark.parametrize("targets", ["gfx1100", "gfx1151,gfx1100"])  # one target, or a set's list (one environment, two GPUs)
def test_rocm_env_names_the_missing_device_package(installed, targets):
    script = f'export PREFIX="{installed}" GPU_ARCH="{targets}"; source "{REPO}/recipes/_shared/rocm-env.sh"'
    result = subprocess.run(["bash", "-c", script], capture_output=True, text=True)
    assert result.returncode != 0
    assert result.stderr.strip().splitlines() == [
        "rocm-env.sh: no gfx1100 device code under $PREFIX; add rocm-sdk-device-${{ gpu_arch }} to requirements.host"]


def test_a_hash_mismatch_names_url_expected_and_actual(built):
    workspace, index, _, _ = built
    wrong = "0" * 63 + "1"
    _write_lock(workspace, index, device_sha256={"gfx1100": wrong})
    try:
        result = _orchestrate(workspace, "build", "rocm-sdk-device-gfx1100", "--arch", "gfx1100", "--no-tests")
    finally:
        _write_lock(workspace, index)
    assert result.returncode != 0
    wheel = index.files["rocm_sdk_device:gfx1100"]
    for part in (wheel.name, wrong, sha256_of(wheel)):
        assert part in result.stdout + result.stderr


def test_unlocked_artifacts_reach_the_runner_as_empty_lock_keys():
    """Recipe side of "no hash, no download": every SDK source takes url and sha256 from one lock key pair, so
    an artifact the lock lacks arrives as KEY_sha256 == "" (which the runner refuses)."""
    options = Options(workspace=REPO, channel=Path("/nonexistent/channel"), arch="gfx1151", source_channels=[])
    steps = {s.output.name: s.output for s in runner.make_plan(options).steps}
    for name, keys in (("rocm-sdk", ("rocm_sdk_core", "rocm_sdk_libraries", "rocm")),
                       ("rocm-sdk-devel", ("rocm_sdk_devel",)), ("rocm-sdk-licenses", ("rocm_sdk_devel",)),
                       ("rocm-sdk-device-gfx1151", ("rocm_sdk_device",))):
        output = steps[name]
        urls = [str(s["url"]) for s in output.rendered["source"]]
        assert urls == [output.variant[f"{key}_url"] for key in keys]
        for key in keys:
            assert f"{key}_sha256" in output.variant


def test_host_recipe_renders_the_same_for_every_architecture():
    from orchestrate.architectures import ArchitectureTable
    seen = set()
    for arch in ArchitectureTable.load(REPO / "variants").names():
        options = Options(workspace=REPO, channel=Path("/nonexistent/channel"), arch=arch, source_channels=[])
        [host] = [s.output for s in runner.make_plan(options).steps if s.output.name == "rocm-sdk"]
        seen.add((host.version, host.build_string, host.input_hash))
        assert "gpu_arch" not in host.variant
    assert len(seen) == 1
