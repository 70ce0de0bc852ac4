"""One environment for several GPUs: the repository's recipes rendered for the set gfx942,gfx950 (fat builds named by
the set, per-target device packages from each member), and py-rattler solving `rocm-stack` for it on a machine with
either GPU (CONDA_OVERRIDE_AMDGPU_ARCH), refusing it on a machine with neither."""
from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import shutil
import tomllib
from pathlib import Path

import pytest
from rattler import Platform, VirtualPackage, VirtualPackageOverrides, solve

from orchestrate.arch_set import ARCH_LIST_KEY, arch_set, render_set
from orchestrate.architectures import ArchitectureTable
from orchestrate.options import Options
from orchestrate.resolve import write_plan_channel
from orchestrate.plan_sources import unlocked_urls
from conftest import REPO

TABLE = ArchitectureTable.load(REPO / "variants")
RANK = {"no": 0, "experimental": 1, "yes": 2}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    options = Options(workspace=REPO, channel=tmp_path_factory.mktemp("channel"),
                      source_cache=tmp_path_factory.mktemp("sources"))
    pair = arch_set(TABLE, ["gfx950", "gfx942"])  # any order: the table's is the set's
    return pair, [o for o in render_set(options, TABLE, pair) if not o.skipped]


def run_of(output) -> list[str]:
    return [str(r) for r in (output.rendered.get("requirements") or {}).get("run") or [] if isinstance(r, str)]


def test_a_set_has_what_every_member_has_and_says_why_not(rendered):
    pair, _ = rendered
    assert pair.name == "multi_gfx942_gfx950" and pair.isa_spec == "==9.4.2|==9.5.0"
    mixed = arch_set(TABLE, ["gfx1151", "gfx942"]).architecture()
    a, b = TABLE.get("gfx942"), TABLE.get("gfx1151")
    for name, cap in mixed.capabilities.items():
        expected = min(a.capabilities[name].value, b.capabilities[name].value, key=RANK.__getitem__)
        assert cap.value == expected, name
        lacking = [m.capabilities[name].why for m in (a, b) if m.capabilities[name].value != "yes"]
        assert all(why in cap.why for why in lacking if why), name
    assert pair.variant_keys()[ARCH_LIST_KEY] == ["gfx942,gfx950"]  # rocm-env.sh: PYTORCH_ROCM_ARCH=gfx942;gfx950
    with pytest.raises(Exception, match="at least two architectures"):
        arch_set(TABLE, ["gfx942"])


def test_the_stack_for_a_set_requires_each_targets_device_packages_and_either_gpu(rendered):
    pair, outputs = rendered
    by_name = {}
    for o in outputs:
        by_name.setdefault(o.name, []).append(o)
    [stack] = by_name["rocm-stack"]
    run = run_of(stack)
    assert stack.build_string.startswith("multi_gfx942_gfx950_h")
    assert "__amdgpu_arch ==9.4.2|==9.5.0" in run
    assert {"rocm-sdk-device-gfx942 10.1.0.*", "rocm-sdk-device-gfx950 10.1.0.*"} <= set(run)
    assert any(r.startswith("pytorch ") and r.endswith("rocm101_multi_gfx942_gfx950_*") for r in run)
    [vision] = by_name["torchvision"]  # AMD's torchvision merges its device wheel: every member's, in one package
    device_wheels = [s["file_name"] for s in vision.rendered["source"] if "device" in s["file_name"]]
    assert device_wheels == ["torchvision-device-gfx942.whl", "torchvision-device-gfx950.whl"]
    assert vision.rendered["build"]["script"]["content"].endswith(" ".join(["torchvision.whl", *device_wheels]))
    assert "rocm-sdk-device-gfx942 rocm-sdk-device-gfx950" in vision.rendered["build"]["script"]["env"]["SATISFIED_BY"]
    for source in vision.rendered["source"]:  # each is locked, or known unlocked: never downloaded unchecked
        assert source["sha256"] != "0" * 64 or source["url"] in unlocked_urls(vision), source
    [torch] = by_name["pytorch"]  # AMD's wheels: pytorch-base once, each target's device package
    assert {"amd-torch-device-gfx942", "amd-torch-device-gfx950", "pytorch-base"} <= torch.requires
    # no package is built for the set that belongs to one target: each member's own render builds those, once
    assert not [o.name for o in outputs if "multi_" in o.name]
    assert {"amd-torch-device-gfx942", "amd-torch-device-gfx950", "rocm-sdk-device-gfx950"} <= set(by_name)
    # one fat build: the compiled packages' scripts get the list (rocm-env.sh: PYTORCH_ROCM_ARCH, GPU_ARCHS)
    for name in ("vllm", "aiter", "composable-kernel"):
        [compiled] = by_name[name]
        assert compiled.rendered["build"]["script"]["env"]["GPU_ARCH"] == "gfx942,gfx950", name
        assert {"rocm-sdk-device-gfx942", "rocm-sdk-device-gfx950"} <= compiled.requires, name
    [aiter] = by_name["aiter"]  # its test's GPU_ARCHS, which aiter's JIT splits at ";"
    assert [t["script"]["env"]["GPU_ARCHS"] for t in aiter.rendered["tests"] if "env" in t.get("script", {})] == ["gfx942;gfx950"]
    for o in outputs:  # what a GPU of either target may install beside the other's device code
        constraints = [str(c) for c in (o.rendered.get("requirements") or {}).get("run_constraints") or []]
        assert not [c for c in constraints if c.startswith("__amdgpu_arch ==") and "|" not in c], o.label


def plan_records(outputs):
    """The rendered packages as the channel will hold them, their requirements outside this plan (python, numpy,
    __glibc) left out: what is solved is how the GPU architectures tie together."""
    names = {o.name for o in outputs}

    def keep(spec) -> bool:
        name = str(spec).split()[0] if isinstance(spec, str) else next(iter(spec.values()))["name"]
        return name in names or name == "__amdgpu_arch"

    kept = []
    for o in outputs:
        reqs = dict(o.rendered.get("requirements") or {})
        reqs = {k: [s for s in reqs.get(k) or [] if keep(s)] for k in ("run", "run_constraints")}
        kept.append(dataclasses.replace(o, rendered={**o.rendered, "requirements": reqs}))
    return kept


@pytest.mark.parametrize("isa, solves", [("9.4.2", True), ("9.5.0", True), ("11.5.1", False)])
def test_rocm_stack_for_the_set_solves_on_a_machine_with_either_gpu(rendered, tmp_path, monkeypatch, isa, solves):
    _, outputs = rendered
    write_plan_channel(plan_records(outputs), tmp_path / "channel")
    monkeypatch.setenv("CONDA_OVERRIDE_AMDGPU", "0")
    monkeypatch.setenv("CONDA_OVERRIDE_AMDGPU_ARCH", isa)
    virtual = [v.into_generic() for v in VirtualPackage.detect(VirtualPackageOverrides.from_env())]

    def install(specs):
        return asyncio.run(solve([(tmp_path / "channel").as_uri()], specs, platforms=[Platform("linux-64"), Platform("noarch")],
                                 virtual_packages=virtual))
    if not solves:
        with pytest.raises(Exception, match="rocm-stack"):
            install(["rocm-stack"])
        return
    records = {r.name.normalized: r for r in install(["rocm-stack"])}
    assert str(records["rocm-stack"].build).startswith("multi_gfx942_gfx950_")
    assert {"rocm-sdk-device-gfx942", "rocm-sdk-device-gfx950", "amd-torch-device-gfx942", "amd-torch-device-gfx950",
            "pytorch-base"} <= set(records)
    assert "_multi_gfx942_gfx950_" in str(records["pytorch"].build) and "_multi_gfx942_gfx950_" in str(records["vllm"].build)


DEVICE_RECIPE = """\
# a target's device code, named by its target like rocm-sdk-device-<gfx>: one file of its own
package:
  name: rocm-sdk-device-${{ gpu_arch }}
  version: "7.14.0"
build:
  string: ${{ gpu_arch }}_h${{ hash }}_${{ build_number }}
  script:
    env:
      GPU_ARCH: ${{ gpu_arch }}
    content:
      - mkdir -p $PREFIX/share/rocm-sdk-device && echo "$GPU_ARCH" > $PREFIX/share/rocm-sdk-device/$GPU_ARCH
requirements:
  run: [rocm-sdk]
tests:
  - package_contents:
      files:
        - share/rocm-sdk-device/${{ gpu_arch }}
"""


def add_stack_and_device_recipes(workspace: Path) -> None:
    """The real rocm-stack recipe in the test graph (as tests/test_orchestrate_build.py puts it there, its SDK device
    requirement kept), and a per-target device package for it to require."""
    (workspace / "recipes/rocm-sdk-device").mkdir()
    (workspace / "recipes/rocm-sdk-device/recipe.yaml").write_text(DEVICE_RECIPE)
    stack = (REPO / "recipes/rocm-stack/recipe.yaml").read_text()
    stack = (stack.replace("${{ torch_version }}", "2.13.0").replace("${{ rocm_sdk_version }}", "7.14.0")
             .replace("${{ torch_builds }}", "${{ gpu_arch }}_*").replace("${{ vllm_version }}", "0.11.0")
             .replace("${{ flash_attn_version }}", "2.8.3").replace("context:\n", "context:\n  test_graph: true\n"))
    stack = "".join(line for line in stack.splitlines(True) if not re.match(
        r"\s*(- torch(vision|audio)|- pytorch-rocm |(prebuilt|torch_version|vision_version|audio_version|torch_builds):)", line))
    (workspace / "recipes/rocm-stack").mkdir()
    (workspace / "recipes/rocm-stack/recipe.yaml").write_text(stack)
    shutil.copy(REPO / "LICENSE", workspace)


def test_build_all_for_one_environment_builds_the_set_once_and_it_installs_on_either_gpu(orchestrate, workspace,
                                                                                           tmp_path, monkeypatch):
    """The test graph with rocm-stack built for gfx942,gfx1151 as one set: every compiled package once, named by the
    set, each GPU's device package beside the other's; py-rattler installs rocm-stack on a machine with either GPU,
    no file claimed by two packages, and refuses it on a machine with neither."""
    from rattler import install

    add_stack_and_device_recipes(workspace)
    assert orchestrate("build-all", "--arch", "gfx942").code == 0  # one GPU's builds first: the set's are newer
    result = orchestrate("build-all", "--arch", "gfx1151,gfx942", "--one-environment")
    assert result.code == 0, result.err
    built = sorted(p.name for p in (workspace / "channel").glob("*/*.conda")  # the set's, beside gfx942's own
                   if "-gfx942_" not in p.name or p.name.startswith("rocm-sdk-device-"))
    assert {"rocm-sdk-device-gfx942", "rocm-sdk-device-gfx1151"} <= {name.rsplit("-", 2)[0] for name in built}, built
    shared = [name for name in built if "gfx" in name and not name.startswith("rocm-sdk-device-")]
    assert "rocm-stack-2.13.0-multi_gfx942_gfx1151_" in " ".join(shared)
    assert all("multi_gfx942_gfx1151_" in name for name in shared), shared
    manifest = orchestrate("consumer-manifest", "--channel", str(workspace / "channel"), "--print")
    assert 'amdgpu = "gfx942"' in manifest.out and 'amdgpu = "gfx1151"' in manifest.out  # a pixi platform for each
    pinned = tomllib.loads(orchestrate("consumer-manifest", "--channel", str(workspace / "channel"), "--arch",
                                       "gfx1151,gfx942", "--one-environment", "--print").out)
    assert {p["amdgpu"] for p in pinned["workspace"]["platforms"]} == {"gfx942", "gfx1151"}
    assert pinned["dependencies"]["rocm-stack"] == {"version": "*", "build": "*multi_gfx942_gfx1151*"}
    monkeypatch.setenv("CONDA_OVERRIDE_AMDGPU", "0")
    for isa, env in (("9.4.2", "mi300"), ("11.5.1", "strix"), ("10.3.0", None)):
        monkeypatch.setenv("CONDA_OVERRIDE_AMDGPU_ARCH", isa)
        virtual = [v.into_generic() for v in VirtualPackage.detect(VirtualPackageOverrides.from_env())]
        solving = solve([(workspace / "channel").as_uri()], ["rocm-stack * multi_gfx942_gfx1151_*"],  # the set, asked for
                        platforms=[Platform("linux-64"), Platform("noarch")], virtual_packages=virtual)
        if env is None:  # a machine with neither GPU: the set is refused, not installed
            with pytest.raises(Exception, match="__amdgpu_arch"):
                asyncio.run(solving)
            continue
        records = asyncio.run(solving)
        asyncio.run(install(records, target_prefix=tmp_path / env, cache_dir=tmp_path / "pkgs"))
        owners: dict[str, list[str]] = {}
        for meta in (tmp_path / env / "conda-meta").glob("*.json"):
            record = json.loads(meta.read_text())
            for path in record["files"]:
                owners.setdefault(path, []).append(record["name"])
        assert not {path: owned for path, owned in owners.items() if len(owned) > 1}
        assert owners["share/rocm-sdk-device/gfx942"] == ["rocm-sdk-device-gfx942"]
        assert owners["share/rocm-sdk-device/gfx1151"] == ["rocm-sdk-device-gfx1151"]
        # one build of each compiled package, for both GPUs: the list its build script got
        assert (tmp_path / env / "share/pytorch/built-for").read_text().strip() == "gfx942,gfx1151"
        stack = json.loads((tmp_path / env / "share/rocm-stack/stack.json").read_text())
        assert stack == {"gpu_arch": "gfx942,gfx1151", "amdgpu_isa": "9.4.2|11.5.1"}

    # the same channel also holds gfx942's own builds (older): a one-GPU machine keeps them, a machine with both asks
    # for the set
    monkeypatch.setenv("CONDA_OVERRIDE_AMDGPU_ARCH", "9.4.2")
    virtual = [v.into_generic() for v in VirtualPackage.detect(VirtualPackageOverrides.from_env())]
    for spec, build in (("rocm-stack", "gfx942_h"), ("rocm-stack * multi_gfx942_gfx1151_*", "multi_gfx942_gfx1151_")):
        records = asyncio.run(solve([(workspace / "channel").as_uri()], [spec], virtual_packages=virtual,
                                    platforms=[Platform("linux-64"), Platform("noarch")]))
        assert {r.name.normalized: str(r.build) for r in records}["rocm-stack"].startswith(build), spec


def test_plan_for_one_environment_is_one_plan_for_the_set_and_a_wrong_set_is_one_line(orchestrate):
    result = orchestrate("plan", "--arch", "gfx1151,gfx942", "--one-environment")
    assert result.code == 0, result.err
    assert re.findall(r"^Plan for (\S+) ", result.out, re.M) == ["multi_gfx942_gfx1151"]
    alone = orchestrate("plan", "--arch", "gfx942", "--one-environment")
    assert alone.code == 2 and alone.err.strip().splitlines() == [
        "error: one environment for several GPUs needs at least two architectures (got gfx942): pass e.g. "
        "--arch gfx942,gfx950"]
    none = orchestrate("plan", "--one-environment")  # no list given, none in orchestrate.toml: not one GPU's plan
    assert none.code == 2 and "needs at least two architectures (got none)" in none.err
    typo = orchestrate("plan", "--arch", "gfx942,gfx9500", "--one-environment")
    assert typo.code == 2 and typo.err.startswith("error: unknown architecture 'gfx9500' (did you mean gfx950?)")


def test_a_recipe_that_cannot_be_rendered_for_a_set_is_one_line_naming_the_set(orchestrate, workspace):
    odd = workspace / "recipes/odd"
    odd.mkdir()
    (odd / "recipe.yaml").write_text('package: {name: odd, version: "1"}\nrequirements:\n  run:\n'
                                     "    - odd-runtime ==${{ amdgpu_isa }}\n")  # one ISA only: no set has one
    assert orchestrate("plan", "--arch", "gfx942").code == 0
    result = orchestrate("plan", "--arch", "gfx942,gfx1151", "--one-environment")
    assert result.code == 2 and len(result.err.strip().splitlines()) == 1, result.err
    assert result.err.startswith(f"error: {odd / 'recipe.yaml'} rendered for multi_gfx942_gfx1151 (one environment for "
                                 "gfx942, gfx1151): not a valid recipe")
