"""Several GPUs at once: `--arch gfx942,gfx950` (and orchestrate.toml's list, $ORCHESTRATE_ARCH) in plan, build-all,
fetch and consumer-manifest, and the pixi platform written for each GPU."""
from __future__ import annotations

import argparse
import json
import re
import tomllib

import pytest

from orchestrate.arch_list import arch_list
from orchestrate.architectures import ArchitectureTable
from orchestrate.share.consumer import PIXI_MIN_VERSION
from conftest import REPO
from share_helpers import orchestrate as child

SCHEMA = REPO / "tests" / "data" / "pixi" / "schema-v0.77.0.json"  # its source and date: SOURCE.md beside it


def plan_titles(out: str) -> list[str]:
    return re.findall(r"^Plan for (\S+) ", out, re.M)


def test_a_plan_for_two_gpus_is_a_plan_for_each_and_names_what_they_share(orchestrate):
    result = orchestrate("plan", "--arch", "gfx942,gfx1151")
    assert result.code == 0, result.err
    assert plan_titles(result.out) == ["gfx942", "gfx1151"]
    assert "gfx942_ck_" in result.out and "gfx1151_triton_" in result.out
    shared = result.out.strip().splitlines()[-1]
    assert "2 architectures (gfx942, gfx1151) in one channel" in shared and "rocm-stack-check" in shared
    assert "each architecture's own: gfx942 9, gfx1151 9" in shared


def test_a_wrong_list_is_one_line_before_anything_is_planned(orchestrate, workspace, monkeypatch):
    result = child("plan", "--workspace", str(workspace), "--arch", "gfx942,gfx942")  # argparse's error exits
    assert result.returncode == 2 and result.stderr == ("error: argument --arch: 'gfx942,gfx942' names gfx942 twice: "
                                                        "pass each architecture once (see `orchestrate plan --help`)\n")
    with pytest.raises(argparse.ArgumentTypeError, match="'gfx942,,gfx950' is not an architecture list: pass e.g."):
        arch_list("gfx942,,gfx950")  # the same checker, for every flag and key that takes the list
    result = orchestrate("plan", "--arch", "gfx942,gfx9500")
    assert result.code == 2 and "unknown architecture 'gfx9500'" in result.err and "Plan for" not in result.out
    assert len(result.err.strip().splitlines()) == 1
    monkeypatch.setenv("ORCHESTRATE_ARCH", "gfx1100, gfx1151")
    assert plan_titles(orchestrate("plan").out) == ["gfx1100", "gfx1151"]
    monkeypatch.setenv("ORCHESTRATE_ARCH", "gfx1100,")
    refused = orchestrate("plan")
    assert refused.code == 2 and refused.err.startswith("error: $ORCHESTRATE_ARCH: 'gfx1100,' is not an architecture list")


def test_orchestrate_toml_takes_a_list(orchestrate, workspace):
    toml = workspace / "orchestrate.toml"
    toml.write_text(toml.read_text() + '\narch = ["gfx1100", "gfx950"]\n' if "arch" not in toml.read_text()
                    else re.sub(r"(?m)^arch = .*$", 'arch = ["gfx1100", "gfx950"]', toml.read_text()))
    assert plan_titles(orchestrate("plan").out) == ["gfx1100", "gfx950"]
    assert plan_titles(orchestrate("plan", "--arch", "gfx942").out) == ["gfx942"]  # the flag wins
    toml.write_text(re.sub(r"(?m)^arch = .*$", 'arch = ["gfx1100", "gfx1100"]', toml.read_text()))
    result = orchestrate("plan")
    assert result.code == 2 and "orchestrate.toml: arch" in result.err and "twice" in result.err


def test_fetch_and_build_all_take_the_list(orchestrate, workspace):
    dry = orchestrate("build-all", "--arch", "gfx1151,gfx1100", "--dry-run")
    assert dry.code == 0 and plan_titles(dry.out) == ["gfx1151", "gfx1100"]
    fetched = orchestrate("fetch", "--arch", "gfx1151,gfx1100")
    assert fetched.code == 0, fetched.err
    both = orchestrate("fetch", "--arch", "gfx1151,gfx1100", "--all-archs")
    assert both.code == 2 and "--arch and --all-archs exclude each other" in both.err


def validate(text: str) -> dict:
    import jsonschema

    manifest = tomllib.loads(text)
    jsonschema.validate(manifest, json.loads(SCHEMA.read_text()))
    return manifest


def test_consumer_manifest_writes_a_pixi_platform_per_gpu_and_the_pixi_that_reads_them(orchestrate, workspace):
    result = orchestrate("consumer-manifest", "--channel", "http://lab:8765", "--arch", "gfx942,gfx1151", "--print")
    assert result.code == 0, result.err
    manifest = validate(result.out)
    table = ArchitectureTable.load(workspace / "variants")
    platforms = manifest["workspace"]["platforms"]
    assert platforms == [{"name": gfx, "platform": "linux-64", "amdgpu": gfx} for gfx in ("gfx942", "gfx1151")]
    assert all(p["amdgpu"] in table.architectures for p in platforms)  # the schema (0.77) does not check amdgpu
    assert manifest["workspace"]["requires-pixi"] == f">={PIXI_MIN_VERSION}" == ">=0.82.0"
    # several platforms: no build pin, each platform's solve picks its GPU's builds
    assert all(spec == "*" for spec in manifest["dependencies"].values())
    one = validate(orchestrate("consumer-manifest", "--channel", "http://lab:8765", "--arch", "gfx1151", "--print").out)
    assert one["workspace"]["platforms"] == [{"name": "gfx1151", "platform": "linux-64", "amdgpu": "gfx1151"}]
    assert one["dependencies"]["pytorch"] == {"version": "*", "build": "*gfx1151*"}
    typo = orchestrate("consumer-manifest", "--channel", "http://lab:8765", "--arch", "gfx942,gfx1152x", "--print")
    assert typo.code == 2 and "unknown architecture 'gfx1152x'" in typo.err


def test_our_pixi_toml_requires_the_pixi_of_the_gpu_platforms_and_the_docs_say_it_once():
    pixi = tomllib.loads((REPO / "pixi.toml").read_text())
    assert pixi["workspace"]["requires-pixi"] == f">={PIXI_MIN_VERSION}"
    validate((REPO / "pixi.toml").read_text())
    stated = {}
    for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for found in re.findall(r"pixi (\d+\.\d+\.\d+) or newer|pixi ?(?:>=|≥) ?(\d+\.\d+(?:\.\d+)?)", page.read_text()):
            stated.setdefault(next(v for v in found if v), []).append(page.name)
    assert set(stated) == {PIXI_MIN_VERSION} and set(stated[PIXI_MIN_VERSION]) == {"sharing.md"}, stated
    dockerfile = (REPO / "docs" / "getting-started.md").read_text().split("```dockerfile", 1)[1]
    assert f"FROM ghcr.io/prefix-dev/pixi:{PIXI_MIN_VERSION}" in dockerfile


def test_without_arch_a_machine_with_two_gpus_builds_for_the_one_pixi_installs_for(tmp_path):
    """rattler reports the GPU with the most compute units (ties: the highest ISA) as __amdgpu_arch; detection picks
    the same, so that `build-all` on a Strix Halo with an RX 7900 eGPU builds what `pixi install` then wants."""
    from orchestrate import detect

    nodes = tmp_path / "nodes"
    for node, (version, simds) in enumerate([(0, 0), (110501, 80), (110000, 192)]):
        (nodes / str(node)).mkdir(parents=True)
        (nodes / str(node) / "properties").write_text(f"gfx_target_version {version}\nsimd_count {simds}\nsimd_per_cu 2\n")
    assert detect.detect_gpus(nodes) == [("gfx1151", 40), ("gfx1100", 96)]
    assert detect.detect_gpu_arch(nodes) == "gfx1100"
    assert detect.solver_gpu([("gfx1100", 40), ("gfx1151", 40)]) == "gfx1151"  # a tie: the highest ISA


def _add_recipe(workspace, name: str, requirements: str) -> None:
    """A package whose build string does not name the GPU (no gpu_arch in it or its variant), as a user's own
    recipe may be written."""
    folder = workspace / "recipes" / name
    folder.mkdir()
    (folder / "recipe.yaml").write_text(f"""package:
  name: {name}
  version: "1.0.0"
build:
  string: h${{{{ hash }}}}_${{{{ build_number }}}}
  script:
    content:
      - mkdir -p $PREFIX/share/{name} && echo built > $PREFIX/share/{name}/marker
requirements:
{requirements}
tests:
  - script:
      - test -f $PREFIX/share/{name}/marker
""")


def test_a_package_one_file_name_for_two_gpus_is_built_once_and_never_replaced(orchestrate, workspace, channel):
    """A package that only runs with a GPU's package (a run requirement) is one package for every GPU: the second
    GPU finds it up to date. One built against a GPU's package under a file name without the GPU would be built
    twice under one name, the second replacing the first: build-all refuses before any build, naming the recipe."""
    _add_recipe(workspace, "runs-with-sdk", "  run: [rocm-sdk]")
    result = orchestrate("build", "runs-with-sdk", "--arch", "gfx942,gfx950")
    assert result.code == 0, result.err
    assert [e.arch for e in channel.manifest().values() if e.name == "runs-with-sdk"] == ["gfx942"]
    assert not list((channel.path / ".superseded").rglob("runs-with-sdk-*")), "the second GPU replaced the first's"
    assert re.search(r"runs-with-sdk\s+\S+\s+\S+\s+up to date", orchestrate("plan", "--arch", "gfx950").out)

    _add_recipe(workspace, "built-with-sdk", "  host: [rocm-sdk]\n  run: [rocm-sdk]")
    before = channel.snapshot()
    plan = orchestrate("plan", "--arch", "gfx942,gfx950")
    assert "built-with-sdk-1.0.0-h" in plan.err and "for gfx942 and gfx950 from different inputs" in plan.err
    refused = orchestrate("build-all", "--arch", "gfx942,gfx950")
    assert refused.code == 2 and "recipes/built-with-sdk's build string the GPU" in refused.err
    assert "Traceback" not in refused.err and channel.snapshot() == before
