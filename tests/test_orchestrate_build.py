"""End to end: the test graph (tests/workspace) built with real py-rattler-build builds into a real
channel, installed with py-rattler, rebuilt only where inputs changed."""
from __future__ import annotations

import json
import re
import shutil
import tomllib
from pathlib import Path

import pytest

from orchestrate.architectures import ARCH_OVERRIDE_ENV, GPU_OVERRIDE_ENV, override_hint
from orchestrate.channel import read_provenance
from conftest import REPO
from stack import detected_virtual_packages, install, solve, solve_with

GRAPH = ["rocm-sdk", "rocm-stack-check", "composable-kernel", "triton", "aotriton", "pytorch",
         "aiter", "flash-attn", "vllm"]


def states(out: str) -> dict[str, list[str]]:
    """package -> results, from the plain summary/plan table."""
    found: dict[str, list[str]] = {}
    for line in out.splitlines():
        m = re.match(r"^(?:\d+\s+)?([a-z][a-z0-9-]+)\s+\S+\s+\S+\s+(up to date|built|failed|blocked|not built|will build|skipped|from cache)\b", line)
        if m and m.group(1) in GRAPH:
            found.setdefault(m.group(1), []).append(m.group(2))
    return found


def test_plan_orders_by_dependency_and_explains_skips(orchestrate):
    result = orchestrate("plan", "--arch", "gfx908")
    assert result.code == 0, result.err
    order = [name for name in states(result.out)]
    for before, after in [("rocm-sdk", "triton"), ("triton", "pytorch"), ("pytorch", "vllm"),
                          ("rocm-stack-check", "pytorch"), ("pytorch", "flash-attn")]:
        assert order.index(before) < order.index(after)
    s = states(result.out)
    assert s["aotriton"] == ["skipped"] and s["aiter"] == ["skipped"] and s["flash-attn"] == ["skipped"]
    assert s["pytorch"] == ["will build"] and s["vllm"] == ["will build"]
    aotriton_line = next(l for l in result.out.splitlines() if " aotriton " in l)
    assert "aotriton has no gfx908 target" in aotriton_line
    pytorch_line = next(l for l in result.out.splitlines() if " pytorch " in l)
    assert "new" in pytorch_line and "without aotriton" in pytorch_line


def test_build_all_then_install_what_landed(orchestrate, workspace, tmp_path):
    result = orchestrate("build-all", "--arch", "gfx1151", "--jobs", "3")
    assert result.code == 0, result.err
    s = states(result.out)
    assert all(v == ["built"] for k, v in s.items() if k != "flash-attn"), s
    assert s["flash-attn"] == ["built", "built"]  # one per backend

    prefix = tmp_path / "env"
    builds = install(workspace / "channel", ["vllm", "flash-attn", "aotriton"], "11.5.1", prefix)
    assert builds["pytorch"].startswith("gfx1151_")
    # both backends are in the channel: the table's default for gfx1151 wins, the other is there when named
    assert (prefix / "share/flash-attn/backend").read_text().strip() == "triton"
    index = json.loads((workspace / "channel/linux-64/repodata.json").read_text())
    repodata = {**index.get("packages", {}), **index.get("packages.conda", {})}
    features = {r["build"].split("_")[1]: r.get("track_features", "") for r in repodata.values()
                if r["name"] == "flash-attn"}
    assert not features["triton"] and features["ck"], features  # what makes the solver prefer triton
    ck = {r.name.normalized: str(r.build) for r in solve(workspace / "channel", ["flash-attn * *_ck_*"], "11.5.1")}
    assert ck["flash-attn"].startswith("gfx1151_ck_")
    assert "patched for the test graph" in (prefix / "share/aotriton/kernels.txt").read_text()
    assert (prefix / "share/pytorch/max-jobs").read_text().strip() == "3"  # knob reached the script


def test_up_to_date_build_touches_nothing(orchestrate, channel):
    assert orchestrate("build-all", "--arch", "gfx1151").code == 0
    before = channel.snapshot()
    result = orchestrate("build-all", "--arch", "gfx1151")
    assert result.code == 0
    assert set(sum(states(result.out).values(), [])) == {"up to date"}
    assert channel.snapshot() == before


def test_patch_change_rebuilds_exactly_the_package_and_its_dependents(orchestrate, workspace, channel):
    assert orchestrate("build-all", "--arch", "gfx1151").code == 0
    old_pytorch = next((channel.path / "linux-64").glob("pytorch-[0-9]*.conda")).read_bytes()
    patch = workspace / "patches/aotriton/0001-add-gfx908-target.patch"
    patch.write_text(patch.read_text().replace("patched for the test graph", "patched for the test graph again"))
    plan = orchestrate("plan", "--arch", "gfx1151")
    rebuilt = {k for k, v in states(plan.out).items() if "will build" in v}
    assert rebuilt == {"aotriton", "pytorch", "aiter", "flash-attn", "vllm"}
    assert "patch changed" in next(l for l in plan.out.splitlines() if " aotriton " in l)
    assert "dependency will be rebuilt: aotriton" in next(l for l in plan.out.splitlines() if " pytorch " in l)

    result = orchestrate("build-all", "--arch", "gfx1151")
    assert result.code == 0
    built = [k for k, v in states(result.out).items() for state in v if state == "built"]
    assert sorted(built) == sorted(["aotriton", "pytorch", "aiter", "flash-attn", "flash-attn", "vllm"])
    # the replaced package is kept, not lost
    kept = list((channel.path / ".superseded").rglob("pytorch-[0-9]*.conda"))
    assert len(kept) == 1 and kept[0].read_bytes() == old_pytorch


def test_shared_script_change_rebuilds_its_users(orchestrate, workspace):
    assert orchestrate("build-all", "--arch", "gfx1151").code == 0
    script = workspace / "recipes/_shared/write-marker.sh"
    script.write_text(script.read_text() + "\n# changed\n")
    plan = orchestrate("plan", "--arch", "gfx1151")
    assert {k for k, v in states(plan.out).items() if "will build" in v} == set(GRAPH) - {"aotriton"} | {"aotriton"}
    assert "script changed" in next(l for l in plan.out.splitlines() if " rocm-sdk " in l)


def test_package_records_its_inputs_and_patches(orchestrate, channel):
    assert orchestrate("build-all", "--arch", "gfx1151").code == 0
    package = next((channel.path / "linux-64").glob("aotriton-*.conda"))
    record = read_provenance(package)
    entry = channel.manifest()[f"linux-64/{package.name}"]
    assert record["input_hash"] == entry.input_hash
    assert record["gpu_arch"] == "gfx1151"
    assert [p["file"] for p in record["patches"]] == ["patches/aotriton/0001-add-gfx908-target.patch"]


def test_failure_keeps_channel_and_resume_builds_only_the_rest(orchestrate, workspace, channel):
    assert orchestrate("build", "rocm-sdk", "--arch", "gfx1151").code == 0
    before = channel.snapshot()
    recipe = workspace / "recipes/triton-rocm/recipe.yaml"
    good = recipe.read_text()
    recipe.write_text(good.replace("content:\n", "content:\n      - echo broken on purpose; exit 3\n"))
    result = orchestrate("build-all", "--arch", "gfx1151")
    assert result.code == 1
    assert "FAILED triton" in result.err and "full log:" in result.err
    log = Path(re.search(r"full log: (\S+)", result.err).group(1))
    assert "broken on purpose" in log.read_text()
    s = states(result.out)
    assert s["triton"] == ["failed"] and s["pytorch"] == ["blocked"]
    assert s["composable-kernel"] in (["built"], ["not built"])
    assert channel.snapshot() == before or s["composable-kernel"] == ["built"]
    assert not any("triton" in f for f in channel.snapshot())

    recipe.write_text(good)
    again = orchestrate("build-all", "--arch", "gfx1151")
    assert again.code == 0
    s = states(again.out)
    assert s["rocm-sdk"] == ["up to date"] and s["triton"] == ["built"]


def test_keep_going_builds_everything_that_does_not_need_the_failure(orchestrate, workspace):
    recipe = workspace / "recipes/aotriton/recipe.yaml"
    recipe.write_text(recipe.read_text().replace("content:\n", "content:\n      - exit 4\n"))
    result = orchestrate("build-all", "--arch", "gfx1151", "--keep-going")
    assert result.code == 1
    s = states(result.out)
    assert s["aotriton"] == ["failed"]
    assert s["pytorch"] == ["blocked"] and s["vllm"] == ["blocked"] and s["flash-attn"] == ["blocked"] * 2
    assert s["rocm-sdk"] == s["triton"] == s["composable-kernel"] == s["rocm-stack-check"] == ["built"]


def test_without_keep_going_the_run_stops_at_the_first_failure(orchestrate, workspace):
    recipe = workspace / "recipes/rocm-sdk/recipe.yaml"
    recipe.write_text(recipe.read_text().replace("content:\n", "content:\n      - exit 5\n"))
    result = orchestrate("build-all", "--arch", "gfx1151")
    assert result.code == 1
    s = states(result.out)
    assert s["rocm-sdk"] == ["failed"] and s["rocm-stack-check"] == ["not built"]


def test_build_named_package_builds_what_it_needs_only(orchestrate):
    result = orchestrate("build", "pytorch", "--arch", "gfx1151")
    assert result.code == 0
    assert set(states(result.out)) == {"rocm-sdk", "rocm-stack-check", "triton", "aotriton", "pytorch"}


def test_dry_run_builds_nothing(orchestrate, channel):
    result = orchestrate("build-all", "--arch", "gfx1151", "--dry-run")
    assert result.code == 0 and "will build" in result.out
    assert not channel.path.exists()


def test_one_channel_two_architectures_resolves_per_machine(orchestrate, workspace):
    both = orchestrate("build-all", "--arch", "gfx1151,gfx1100")  # one command, one channel (--arch takes a list)
    assert both.code == 0, both.err
    assert re.findall(r"^Summary for (\S+)", both.out, re.M) == ["gfx1151", "gfx1100"]
    assert states(both.out)["rocm-stack-check"] == ["built", "up to date"]  # the same for both: built once
    listing = orchestrate("list")
    assert "gfx1100: 9 package(s), gfx1151: 9 package(s), noarch: 1 package(s)" in listing.out
    for isa, arch in (("11.5.1", "gfx1151"), ("11.0.0", "gfx1100")):
        builds = {r.name.normalized: str(r.build) for r in solve(workspace / "channel", ["vllm"], isa)}
        assert builds["pytorch"].startswith(arch + "_") and builds["rocm-sdk"].startswith(arch + "_")
    with pytest.raises(Exception, match="(?i)cannot solve|incompatible|no candidates"):
        solve(workspace / "channel", ["vllm"], "9.4.2")  # an MI300X: nothing here is built for it


def test_opt_in_variant_builds_aotriton_for_mi100(orchestrate):
    plan = orchestrate("plan", "--arch", "gfx908", "--variant", "aotriton_mi100_fa=true")
    assert plan.code == 0
    assert states(plan.out)["aotriton"] == ["will build"]
    refused = orchestrate("plan", "--arch", "gfx1151", "--variant", "aotriton_mi100_fa=true")
    assert refused.code == 2 and "not offered for gfx1151" in refused.err


def test_multi_output_recipe_outputs_are_ordered_and_built(orchestrate, workspace, tmp_path):
    """Edges come from each output's own requirements, also when one recipe has several outputs."""
    folder = workspace / "recipes/torch-extras"
    folder.mkdir()
    (folder / "recipe.yaml").write_text("""\
recipe:
  name: torch-extras
  version: "1.0"
build:
  string: ${{ gpu_arch }}_h${{ hash }}_${{ build_number }}
outputs:
  - package:
      name: torchvision
    requirements:
      host: [pytorch]
      run: [pytorch]
      run_constraints: ["__amdgpu_arch ==${{ amdgpu_isa }}"]
    build:
      script: [mkdir -p $PREFIX/share/tv, echo ok > $PREFIX/share/tv/ok]
  - package:
      name: torchaudio
    requirements:
      host: [torchvision]
      run: [torchvision]
      run_constraints: ["__amdgpu_arch ==${{ amdgpu_isa }}"]
    build:
      script: [mkdir -p $PREFIX/share/ta, echo ok > $PREFIX/share/ta/ok]
""")
    vllm = workspace / "recipes/vllm/recipe.yaml"
    vllm.write_text(vllm.read_text().replace("    - pytorch\n    - if: aiter", "    - pytorch\n    - torchaudio\n    - if: aiter"))
    plan = orchestrate("plan", "--arch", "gfx1151")
    names = [l.split()[1] for l in plan.out.splitlines() if l[:1].isdigit()]
    assert names.index("pytorch") < names.index("torchvision") < names.index("torchaudio") < names.index("vllm")
    result = orchestrate("build", "vllm", "--arch", "gfx1151")
    assert result.code == 0, result.err
    builds = install(workspace / "channel", ["vllm", "torchaudio"], "11.5.1", tmp_path / "env")
    assert builds["torchaudio"].startswith("gfx1151_") and (tmp_path / "env/share/ta/ok").exists()


def test_a_hard_gpu_requirement_refuses_other_machines(orchestrate, workspace, tmp_path, monkeypatch):
    """The rocm-stack metapackage's pattern: `run: __amdgpu_arch` with only a package_contents test,
    which rattler-build runs without solving an environment."""
    folder = workspace / "recipes/rocm-stack"
    folder.mkdir()
    (folder / "recipe.yaml").write_text(
        (REPO / "recipes/rocm-stack/recipe.yaml").read_text()
        .replace("${{ torch_version }}", "2.13.0").replace("${{ rocm_sdk_version }}", "7.14.0")
        .replace("${{ torch_builds }}", "${{ gpu_arch }}_*")  # the test graph's builds name the arch only
        .replace("${{ vllm_version }}", "0.11.0").replace("${{ flash_attn_version }}", "2.8.3")
        .replace("context:\n", "context:\n  test_graph: true  # every other key is dropped below\n"))
    # the test graph has no torchvision/torchaudio, no SDK device package and no prebuilt/source pins
    recipe = folder / "recipe.yaml"
    recipe.write_text("".join(l for l in recipe.read_text().splitlines(True) if not re.match(
        r"\s*(- torch(vision|audio)|- rocm-sdk-device-|- pytorch-rocm |(prebuilt|torch_version|vision_version|audio_version|torch_builds):)", l)))
    shutil.copy(REPO / "LICENSE", workspace)  # the recipe names the repository's license
    assert orchestrate("build", "rocm-stack", "--arch", "gfx1151").code == 0
    assert orchestrate("build", "rocm-stack", "--arch", "gfx1100").code == 0
    # consumer-manifest reads the GPUs the channel serves from its rocm-stack builds: one pixi platform each
    manifest = tomllib.loads(orchestrate("consumer-manifest", "--channel", str(workspace / "channel"), "--print").out)
    assert [p["amdgpu"] for p in manifest["workspace"]["platforms"]] == ["gfx1100", "gfx1151"]  # in the table's order
    builds = install(workspace / "channel", ["rocm-stack"], "11.5.1", tmp_path / "env")
    assert builds["rocm-stack"].startswith("gfx1151_") and builds["vllm"].startswith("gfx1151_")
    assert builds["flash-attn"].startswith("gfx1151_triton_")  # with the stack: the default backend
    gfx1100 = {r.name.normalized: str(r.build) for r in solve(workspace / "channel", ["rocm-stack"], "11.0.0")}
    assert gfx1100["flash-attn"].startswith("gfx1100_triton_")
    for other in (None, "9.4.2"):  # no GPU, or a GPU nothing was built for
        with pytest.raises(Exception, match="(?i)cannot solve|incompatible|no candidates"):
            solve(workspace / "channel", ["rocm-stack"], other)
    # Where no GPU is seen (a container build, CI), the hint doctor and the consumer manifest print, applied as
    # its text reads, makes the solver detect that GPU and pick its builds.
    for key in (GPU_OVERRIDE_ENV, ARCH_OVERRIDE_ENV):
        monkeypatch.delenv(key, raising=False)
    if any(v.name.normalized.startswith("__amdgpu") for v in detected_virtual_packages()):
        pytest.skip("this machine has an AMD GPU: the no-GPU hint cannot be tested here")

    def apply(hint: str) -> None:
        for key in (GPU_OVERRIDE_ENV, ARCH_OVERRIDE_ENV):
            monkeypatch.delenv(key, raising=False)
        for assignment in hint.split():
            key, _, value = assignment.partition("=")
            monkeypatch.setenv(key, value)

    for isa, arch in (("11.5.1", "gfx1151"), ("11.0.0", "gfx1100")):
        apply(override_hint(isa))
        records = solve_with(workspace / "channel", ["rocm-stack"], detected_virtual_packages())
        builds = {r.name.normalized: str(r.build) for r in records}
        assert builds["rocm-stack"].startswith(arch + "_") and builds["vllm"].startswith(arch + "_"), builds
    apply(f"{ARCH_OVERRIDE_ENV}=11.5.1")  # the old hint: the ISA alone is dropped where no GPU is detected
    with pytest.raises(Exception, match="(?i)cannot solve|incompatible|no candidates"):
        solve_with(workspace / "channel", ["rocm-stack"], detected_virtual_packages())


def test_a_rebuild_is_tested_and_used_as_built_not_as_cached(orchestrate, workspace, tmp_path, monkeypatch):
    """rattler's package cache keys by name-version-build, which a script change keeps: the rebuilt package's
    tests (and dependents) must see the new files, not the copy cached when the old one was installed."""
    monkeypatch.setenv("RATTLER_CACHE_DIR", str(tmp_path / "rattler-cache"))
    recipe = workspace / "recipes/rocm-sdk/recipe.yaml"
    recipe.write_text(recipe.read_text().replace("content:\n", "content:\n      - mkdir -p $PREFIX/share && echo first > $PREFIX/share/edition\n", 1)
                      + "  - script:\n      - grep -q first $PREFIX/share/edition\n")
    assert orchestrate("build", "rocm-sdk", "--arch", "gfx1151").code == 0
    install(workspace / "channel", ["rocm-sdk"], "11.5.1", tmp_path / "env")  # caches the first build
    recipe.write_text(recipe.read_text().replace("first", "second"))
    rebuilt = orchestrate("build-all", "--arch", "gfx1151")
    assert rebuilt.code == 0, rebuilt.err
    install(workspace / "channel", ["pytorch"], "11.5.1", tmp_path / "env2")
    assert (tmp_path / "env2/share/edition").read_text().strip() == "second"
