"""The REAL recipes/pytorch-prebuilt, built from synthetic AMD wheels (AMD's names and layout) served by a
loopback PEP 503 index with #sha256= fragments, for three architectures (two of one family, gfx115x, and one with no
family wheel); then installed as pixi would."""
from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest
import rattler
import yaml
from rattler_build import Stage0Recipe, ToolConfiguration, VariantConfig

from orchestrate import glibc
from orchestrate.recipes import derived_variant_keys
from prebuilt_helpers import TORCH_DEVICE_FAMILY, TRITON_LOCAL, file_url_and_sha256, torch_wheels, write_pep503_index
from source_helpers import CountingServer
from stack import package_info, solve

REPO = Path(__file__).resolve().parent.parent
RECIPE = REPO / "recipes/pytorch-prebuilt/recipe.yaml"
ARCHS = {"gfx1151": "11.5.1", "gfx1150": "11.5.0", "gfx942": "9.4.2"}
SDK = "10.1.0"  # the release AMD's wheels name; the test pins it whatever shared.yaml says today
PINS = yaml.safe_load((REPO / "variants/shared.yaml").read_text())
TORCH = PINS["prebuilt_pytorch_version"][0]
SITE = "lib/python3.12/site-packages"
# what the recipe's host and run requirements need, as tiny packages: `python` runs this test's interpreter (which
# has `packaging`), as $PYTHON of the build and as the installed environment's python
STAND_INS = {"python": "3.12.0", "packaging": "24.0", "filelock": "3.0", "typing_extensions": "4.12.0",
             "sympy": "1.13.3", "networkx": "3.0", "jinja2": "3.0", "fsspec": "2024.1.0", "setuptools": "80.0",
             "numpy": "2.0", "pillow": "11.0", "rocm-bootstrap": "0.3.0", "gcc": "14.2.0", "rocm-sdk": SDK,
             **{f"rocm-sdk-device-{a}": SDK for a in ARCHS}}
PYTHON_SCRIPT = ["mkdir -p $PREFIX/bin",
                 "printf '#!/bin/sh\\nexec %s \"$@\"\\n' > $PREFIX/bin/python" % sys.executable,
                 "chmod +x $PREFIX/bin/python"]


def lock_keys(index_url: str, arch: str) -> dict[str, str]:
    """The KEY_url/KEY_sha256/KEY_glibc variant keys as the orchestrator derives them from the lock for `arch`."""
    local = f"+rocm{SDK}"
    files = {
        "torch": ("torch", f"torch-{TORCH}{local}-cp312-cp312-linux_x86_64.whl"),
        "torch_device": (f"amd-torch-device-{arch}", f"amd_torch_device_{arch}-{TORCH}{local}-cp312-cp312-linux_x86_64.whl"),
        "triton": ("triton", f"triton-3.8.0+{TRITON_LOCAL}.rocm{SDK}-cp312-cp312-linux_x86_64.whl"),
        "torchvision": ("torchvision", f"torchvision-0.29.0a0{local}-cp312-cp312-linux_x86_64.whl"),
        "torchvision_device": (f"amd-torchvision-device-{arch}",
                               f"amd_torchvision_device_{arch}-0.29.0a0{local}-cp312-cp312-linux_x86_64.whl"),
        "torchaudio": ("torchaudio", f"torchaudio-2.11.0.3{local}-cp312-cp312-linux_x86_64.whl"),
    }
    family = TORCH_DEVICE_FAMILY[arch][1]
    if family:
        files["torch_device_family"] = (f"amd-torch-device-{family}",
                                        f"amd_torch_device_{family.replace('-', '_')}-{TORCH}{local}-cp312-cp312-linux_x86_64.whl")
    keys = {}
    for key, (project, name) in files.items():
        keys[f"{key}_url"], keys[f"{key}_sha256"] = file_url_and_sha256(index_url, project, name)
        keys[f"{key}_glibc"] = glibc.floor_or_bound(name, PINS)  # as Prebuilt.variant_keys computes it
    return keys


def variant_config(arch: str, keys: dict[str, str]) -> VariantConfig:
    config = VariantConfig.from_files([str(REPO / "variants/shared.yaml"), str(REPO / f"variants/{arch}.yaml")])
    values = {"rocm_sdk_version": SDK, "pytorch_from": "prebuilt", **keys}
    values.update(derived_variant_keys({"rocm_sdk_version": [SDK]}))
    return config.merge(VariantConfig.from_yaml("\n".join(f"{k}: [{json.dumps(v)}]" for k, v in values.items())))


def build_stand_ins(channel: Path, scratch: Path) -> None:
    for name, version in STAND_INS.items():
        recipe = scratch / name / "recipe.yaml"
        recipe.parent.mkdir(parents=True)
        recipe.write_text(yaml.safe_dump({"package": {"name": name, "version": version},
                                          "build": {"noarch": "generic", "string": "prebuilt_test_stand_in",
                                                    "script": PYTHON_SCRIPT if name == "python" else "true"}}))
        Stage0Recipe.from_file(recipe).run_build(output_dir=channel)


@pytest.fixture(scope="module")
def channel(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("prebuilt")
    # a private package cache: these packages' names (pytorch, python, ...) must not shadow other tests'
    saved_cache = os.environ.get("RATTLER_CACHE_DIR")
    os.environ["RATTLER_CACHE_DIR"] = str(tmp / "rattler-cache")
    try:
        yield build_channel(tmp)
    finally:
        os.environ.pop("RATTLER_CACHE_DIR") if saved_cache is None else os.environ.__setitem__("RATTLER_CACHE_DIR", saved_cache)


def build_channel(tmp: Path):
    write_pep503_index(tmp / "index", torch_wheels(tmp / "wheels", list(ARCHS), torch=TORCH, sdk=SDK))
    out = tmp / "channel"
    build_stand_ins(out, tmp / "stand-ins")  # the build's host environment comes from them
    built = {}
    with CountingServer(tmp / "index") as server:
        keys = {arch: lock_keys(server.url + "/simple/", arch) for arch in ARCHS}  # what `pins --lock` reads
        locked = server.downloads
        for arch in ARCHS:
            config = variant_config(arch, keys[arch])
            for variant in Stage0Recipe.from_file(RECIPE).render(config):
                result = variant.run_build(output_dir=out, channels=[out.as_uri()],
                                           tool_config=ToolConfiguration(test_strategy="skip"))
                built.setdefault(arch, []).extend(Path(p).name for p in result.packages)
        downloads = server.downloads - locked
    return out, built, downloads


def test_host_and_arch_neutral_packages_are_one_file_for_both_architectures(channel):
    out, built, _ = channel
    for name in ("pytorch-base", "triton", "torchaudio", "amd-torch-device-gfx115x"):
        archs = [a for a in ARCHS if name != "amd-torch-device-gfx115x" or TORCH_DEVICE_FAMILY[a][1] == "gfx115x"]
        files = {f for arch in archs for f in built[arch] if f.startswith(name + "-")}
        assert len(files) == 1, (name, files)
        [file] = files
        assert f"_rocm101_py312_h" in file or "-rocm101_py312_h" in file, file
    packages = sorted(p.name for p in (out / "linux-64").glob("pytorch-*.conda"))
    assert len([p for p in packages if p.startswith("pytorch-base-")]) == 1
    assert {a for a in ARCHS if any(p.startswith(f"pytorch-{TORCH}-rocm101_{a}_py312_h") for p in packages)} == set(ARCHS)


def test_only_the_locked_files_were_downloaded(channel):
    _, _, downloads = channel
    assert downloads and all(path.startswith("files/") for path in downloads)  # the build reads no index page
    assert downloads[f"files/torch-{TORCH}%2Brocm{SDK}-cp312-cp312-linux_x86_64.whl"] == 1  # once, not per arch


@pytest.mark.parametrize("arch", ARCHS)
def test_each_pytorch_installs_only_with_its_gpu_and_lands_where_pip_puts_it(channel, arch, tmp_path):
    out, _, _ = channel
    other = next(a for a in ARCHS if a != arch and TORCH_DEVICE_FAMILY[a][1] != TORCH_DEVICE_FAMILY[arch][1])
    records = solve(out, ["pytorch", "torchvision", "torchaudio"], ARCHS[arch])
    asyncio.run(rattler.install(records, target_prefix=tmp_path / "env", cache_dir=tmp_path / "pkgs"))
    got = {r.name.normalized: str(r.build) for r in records}
    assert got["pytorch"].startswith(f"rocm101_{arch}_py312_h") and got["torchvision"].startswith(f"rocm101_{arch}_")
    assert f"rocm-sdk-device-{arch}" in got and f"rocm-sdk-device-{other}" not in got
    assert "pytorch-base" in got and got["triton"].startswith("rocm101_py312_h")
    site = tmp_path / "env" / SITE
    # pip's layout: one torch/ tree with the device kpack merged in, one dist-info per wheel
    assert (site / "torch/_rocm_init.py").is_file() and (site / "torch/lib/libtorch_hip.so").is_file()
    assert (site / f"torch/.kpack/torch_{arch}.kpack").is_file()
    assert not (site / f"torch/.kpack/torch_{other}.kpack").exists()
    image_dir = yaml.safe_load((REPO / f"variants/{arch}.yaml").read_text())["aotriton_image_family"][0]
    assert (site / f"torch/lib/aotriton.images/amd-{image_dir}/flash/attn_fwd/kernel.aks2").is_file()
    assert (site / f"torchvision/.kpack/torchvision_{arch}.kpack").is_file()
    for dist in (f"torch-{TORCH}+rocm{SDK}", f"amd_torch_device_{arch}-{TORCH}+rocm{SDK}", f"torchaudio-2.11.0.3+rocm{SDK}"):
        record = (site / f"{dist}.dist-info/RECORD").read_text()
        assert (site / f"{dist}.dist-info/INSTALLER").is_file() and f"{dist}.dist-info/RECORD,," in record
    assert "torch/_rocm_init.py,sha256=" in (site / f"torch-{TORCH}+rocm{SDK}.dist-info/RECORD").read_text()
    torchrun = (tmp_path / "env/bin/torchrun").read_text()
    # relocatable, as the ROCm SDK's: the environment's own python (next to the script) runs it
    assert torchrun.startswith("#!/bin/sh\n") and '"$(dirname -- "$0")/python3.12"' in torchrun
    assert "from torch.distributed.run import main" in torchrun
    # AMD's ELF files are installed byte for byte
    assert (site / "torch/lib/libtorch_hip.so").read_bytes().startswith(b"\x7fELF stub")


def test_each_package_carries_its_wheels_licenses_and_requires_the_stacks_glibc(channel):
    """AMD tags these wheels linux_x86_64 (no manylinux promise): each package requires the stack's glibc bound,
    and carries the license files of the wheels it holds (their dist-info) in info/licenses/."""
    out, _, _ = channel
    bound = PINS["c_stdlib_version"][0]
    for name, dist in {"pytorch-base": "torch", "triton": "triton", "torchaudio": "torchaudio"}.items():
        [package] = (out / "linux-64").glob(f"{name}-[0-9]*.conda")
        index, licenses = package_info(package)
        assert f"__glibc >={bound}" in index["depends"], (package.name, index["depends"])
        [(path, text)] = licenses.items()
        assert path.startswith(f"wheel-licenses/{dist}-") and path.endswith(".dist-info/licenses/LICENSE"), licenses
        assert text == f"synthetic license of {dist}\n".encode()


@pytest.mark.parametrize("name, host, devices", [
    ("amd-torch-device-gfx1151", "torch", {"": ["amd_torch_device_gfx1151"]}),
    ("amd-torch-device-gfx115x", "torch", {"": ["amd_torch_device_gfx115x"]}),
    ("amd-torch-device-gfx942", "torch", {"": ["amd_torch_device_gfx942"]}),
    ("torchvision", "torchvision", {arch: [f"amd_torchvision_device_{arch}"] for arch in ARCHS})])
def test_a_device_package_carries_its_host_wheels_license_and_says_where_it_came_from(channel, name, host, devices):
    """AMD's device wheels carry no license file (install_wheels.py: the kpack splitter writes none): the package
    carries the license of the host wheel each was split from, and a note per device wheel naming that wheel."""
    out, _, _ = channel
    for arch, dists in devices.items():
        [package] = (out / "linux-64").glob(f"{name}-[0-9]*_{arch}_*.conda" if arch else f"{name}-[0-9]*.conda")
        index, licenses = package_info(package)
        assert f"__glibc >={PINS['c_stdlib_version'][0]}" in index["depends"], (package.name, index["depends"])
        host_dist_info = f"{host}-{TORCH if host == 'torch' else '0.29.0a0'}+rocm{SDK}.dist-info"
        host_license = f"wheel-licenses/{host_dist_info}/licenses/LICENSE"
        notes = {f"wheel-licenses/{dist}-{host_dist_info.split('-', 1)[1]}/LICENSES-FROM-HOST-WHEEL.txt" for dist in dists}
        assert set(licenses) == {host_license} | notes, licenses
        assert licenses[host_license] == f"synthetic license of {host}\n".encode()
        for note in notes:
            text = licenses[note].decode()
            assert "carries no license file of its own" in text and host_license in text, text
            assert f"{host} {host_dist_info[len(host) + 1:-len('.dist-info')]}, which it requires at exactly that version" in text


def test_no_pytorch_for_a_gpu_without_its_device_package(channel):
    out, _, _ = channel
    with pytest.raises(Exception, match="pytorch|amdgpu"):
        solve(out, ["pytorch"], "11.0.0")


def test_a_wheel_requirement_no_run_requirement_provides_fails_the_build_naming_it(tmp_path):
    from prebuilt_helpers import make_wheel
    import subprocess, sys

    wheel = make_wheel(tmp_path, "torch", f"{TORCH}+rocm{SDK}", "cp312-cp312-linux_x86_64",
                       {"torch/__init__.py": ""}, requires=["filelock", "mystery-runtime>=1"])
    result = subprocess.run([sys.executable, str(REPO / "recipes/_shared/install_wheels.py"), str(wheel)],
                            capture_output=True, text=True,
                            env={"PREFIX": str(tmp_path / "prefix"), "PYTHON_VERSION": "3.12", "SATISFIED_BY": "filelock"})
    assert result.returncode == 1 and "Traceback" not in result.stderr
    [line] = result.stderr.strip().splitlines()
    assert "mystery-runtime>=1" in line and "requirements.run" in line


def test_the_split_wheels_packages_require_rocm_bootstrap_and_triton_brings_a_c_compiler(channel):
    """AMD's splitter makes torch and torchvision require rocm-bootstrap (their real METADATA here says so, and the
    build's Requires-Dist check passed): each package requires our rocm-bootstrap package, not the SDK. Triton
    compiles its launcher on first use: its package brings gcc."""
    out, _, _ = channel
    depends = {}
    for package in (out / "linux-64").glob("*.conda"):
        index, _ = package_info(package)
        depends.setdefault(index["name"], []).append({d.split()[0] for d in index["depends"]})
    for name in ("pytorch-base", "torchvision"):
        assert depends[name] and all("rocm-bootstrap" in d for d in depends[name]), (name, depends[name])
    assert all("gcc" in d for d in depends["triton"]), depends["triton"]


def test_device_packages_of_several_gpus_install_side_by_side_and_each_pulls_its_family(channel, tmp_path):
    """torch[device-gfx1150,device-gfx1151,device-gfx942] as conda packages: one environment (solved as a GPU-less CI
    machine would, for every GPU of a team) holds the host package once, the gfx115x family package once (both
    gfx1150 and gfx1151 require it, neither holds its files), each target's kernels, and no file of two packages."""
    out, _, _ = channel
    [alone] = [solve(out, ["amd-torch-device-gfx1151"], None)]
    assert {r.name.normalized for r in alone} >= {"amd-torch-device-gfx115x", "pytorch-base", "rocm-sdk-device-gfx1151"}
    assert "amd-torch-device-gfx115x" not in {r.name.normalized for r in solve(out, ["amd-torch-device-gfx942"], None)}
    records = solve(out, [f"amd-torch-device-{a}" for a in ARCHS], None)
    asyncio.run(rattler.install(records, target_prefix=tmp_path / "env", cache_dir=tmp_path / "pkgs"))
    owners: dict[str, list[str]] = {}
    for meta in (tmp_path / "env/conda-meta").glob("*.json"):
        record = json.loads(meta.read_text())
        for path in record["files"]:
            owners.setdefault(path, []).append(record["name"])
    assert not {path: names for path, names in owners.items() if len(names) > 1}
    site = f"{SITE}/torch"
    for arch in ARCHS:
        assert owners[f"{site}/.kpack/torch_{arch}.kpack"] == [f"amd-torch-device-{arch}"]
    assert owners[f"{site}/lib/aotriton.images/amd-gfx115x/flash/attn_fwd/kernel.aks2"] == ["amd-torch-device-gfx115x"]
    assert owners[f"{site}/lib/aotriton.images/amd-gfx942/flash/attn_fwd/kernel.aks2"] == ["amd-torch-device-gfx942"]
    assert owners[f"{site}/_rocm_init.py"] == ["pytorch-base"]


def test_pytorch_holds_no_device_files_but_torchs_license(channel):
    """pytorch is torch[device-<gfx>]: it requires pytorch-base and the target's device package, holds none of
    their files (no copy of a target's or a family's kernels), and carries torch's license."""
    import asyncio as _asyncio
    from rattler.package_streaming import PackageArchive

    out, _, _ = channel
    for arch in ARCHS:
        [package] = (out / "linux-64").glob(f"pytorch-{TORCH}-rocm101_{arch}_*.conda")
        index, licenses = package_info(package)
        assert {d.split()[0] for d in index["depends"]} == {"pytorch-base", f"amd-torch-device-{arch}"}
        assert set(licenses) == {f"wheel-licenses/torch-{TORCH}+rocm{SDK}.dist-info/licenses/LICENSE"}

        async def files():
            archive = await PackageArchive.from_path(package)
            return await archive.list_files("pkg")
        assert _asyncio.run(files()) == [], arch
