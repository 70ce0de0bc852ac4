"""`orchestrate pins --bump [--write]` in a loopback upstream world (tests/upstream_world.py): PyPI's JSON API
and its files, AMD's index, git repositories with tags and raw files at tags, all on 127.0.0.1."""
from __future__ import annotations

import json
import re
import socket

import pytest
import yaml

from orchestrate.cli import main
from upstream_world import (REPO, REPRESENTATIVE_ARCHS, World, bump_workspace, git, preimage, sha256, snapshot,
                            stand_in_channel)

TORCH_GROUP_215 = {"vllm": ("0.33.0", "0.34.0"), "pytorch": ("2.14.1", "2.15.0"), "triton": ("3.8.0", "3.9.0"),
                   "aotriton": ("0.13b", "0.14b"), "torchvision": ("0.29.1", "0.30.0"),
                   "torchaudio": ("2.11.0", "2.12.0"), "rocm-sdk": ("10.1.0", "10.2.0"),
                   "pytorch-amd": ("2.14.0", "2.15.0"), "triton-amd": ("3.8.0", "3.9.0"),
                   "torchvision-amd": ("0.29.0a0", "0.30.0a0"), "torchaudio-amd": ("2.11.0.3", "2.12.0.1")}
VLLM_033_RULE = "vllm 0.33.0 requires torch==2.14.0 (vllm-0.33.0-py3-none-any.whl METADATA (range read))"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    found = World(tmp_path_factory.mktemp("world"))
    yield found
    found.close()


@pytest.fixture
def workspace(world, tmp_path, monkeypatch):
    monkeypatch.delenv("ORCHESTRATE_AMD_INDEX", raising=False)
    world.baseline()
    return bump_workspace(world, tmp_path / "ws")


def bump(capsys, world: World, workspace, *args: str):
    capsys.readouterr()
    code = main(["pins", "--workspace", str(workspace), "--bump", "--timeout", "5", "--pypi-url", world.pypi_url,
                 "--git-base", str(world.git_base), "--raw-base", world.raw_base, *args])
    out, err = capsys.readouterr()
    return code, out, err


def rows(out: str) -> dict[str, dict]:
    return {row["name"]: row for row in json.loads(out)}


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_whole_torch_group_moves_and_write_records_what_it_computed(world, tmp_path, capsys, monkeypatch):
    # its --prove plans every architecture of the table twice: seven that stand for the 26 (test_bump_prove plans all)
    monkeypatch.delenv("ORCHESTRATE_AMD_INDEX", raising=False)
    world.baseline()
    workspace = bump_workspace(world, tmp_path / "ws", REPRESENTATIVE_ARCHS)
    world.torch_215()
    world.aiter_release()
    channel = stand_in_channel(workspace, workspace.parent / "conda-forge")
    (workspace / "orchestrate.toml").write_text(f'source_channels = ["{channel}"]\n')
    before = snapshot(workspace)
    report = workspace.parent / "report.md"
    code, out, err = bump(capsys, world, workspace, "--json", "--write", "--prove", "--report", str(report))
    assert code == 0, out + err
    found = rows(out)
    assert {name: (r["pinned"], r["to"]) for name, r in found.items() if r["decision"] == "moves"} == \
        {**TORCH_GROUP_215, "aiter": ("0.1.20.post1", "0.1.21"), "flydsl": ("0.3.1", "0.5.0")}
    assert all(found[name]["group"] == "torch" and found[name]["files"] for name in TORCH_GROUP_215)
    # PyPI's JSON says vLLM 0.34.0 wants torch 2.14.0; its wheel's METADATA (read by range requests) says 2.15.0
    assert "vllm 0.34.0 requires torch==2.15.0 (vllm-0.34.0-py3-none-any.whl METADATA (range read))" in found["pytorch"]["reason"]
    assert any("vllm-0.34.0" in path for path in world.ranges)
    # the sdist --write downloads anyway says the same on ROCm
    assert "vllm-0.34.0.tar.gz CMakeLists.txt TORCH_SUPPORTED_VERSION_ROCM 2.15.0 agrees" in found["vllm"]["reason"]
    assert found["triton"]["reason"].startswith("torch-2.15.0-cp312-cp312-manylinux_2_28_x86_64.whl METADATA")
    assert "pytorch/pytorch cmake/External/aotriton.cmake at v2.15.0" in found["aotriton"]["reason"]
    assert found["pytorch"]["notes_url"] == "https://github.com/pytorch/pytorch/releases/tag/v2.15.0"

    after = snapshot(workspace)
    shared = after["variants/shared.yaml"]
    assert 'pytorch_version: ["2.15.0"]' in shared and 'rocm_sdk_version: ["10.2.0"]' in shared
    assert [line for line in shared.splitlines() if line.startswith("#")] == \
           [line for line in before["variants/shared.yaml"].splitlines() if line.startswith("#")]  # comments kept
    archive = world.files["/github/pytorch/pytorch/releases/download/v2.15.0/pytorch-v2.15.0.tar.gz"]
    assert f"sha256: {sha256(archive)}" in after["recipes/pytorch-rocm/recipe.yaml"]
    assert sha256(world.files["/github/pytorch/vision/archive/refs/tags/v0.30.0.tar.gz"]) in after["recipes/torchvision-rocm/recipe.yaml"]
    vllm_sdist = world.files["/files/vllm-0.34.0.tar.gz"]
    assert f"vllm_sdist_sha256: {sha256(vllm_sdist)}" in after["recipes/vllm/recipe.yaml"]
    assert yaml.safe_load(after["recipes/vllm/recipe.yaml"])["context"]["triton_kernels_commit"] == world.commits["rocm-triton-0.34"]
    triton = yaml.safe_load(after["recipes/triton-rocm/recipe.yaml"])["context"]
    assert triton["triton_commit"] == world.commits["triton-3.9"] and triton["llvm_commit"] == world.commits["llvm-b"]
    assert yaml.safe_load(after["recipes/aotriton/recipe.yaml"])["context"]["aotriton_commit"] == world.commits["aotriton-0.14b"]
    lock = yaml.safe_load(after["variants/prebuilt-lock.yaml"])["artifacts"]
    assert lock["torch"]["file"] == "torch-2.15.0+rocm10.2.0-cp312-cp312-linux_x86_64.whl"
    assert lock["torch"]["sha256"] == sha256(lock["torch"]["file"].encode())  # the index's #sha256= fragment
    assert "+gitabcdef12.rocm" in after["variants/prebuilt.yaml"]
    aiter = yaml.safe_load(after["recipes/aiter/recipe.yaml"])["context"]
    assert aiter["aiter_commit"] == world.commits["aiter-v0.1.21"] and aiter["ck_commit"] == world.commits["ck-1.4"]
    flydsl = yaml.safe_load(after["variants/pypi.yaml"])["packages"]["flydsl"]
    assert flydsl["version"] == "0.5.0" and flydsl["sha256"] == sha256(world.files["/files/flydsl-0.5.0-py3-none-any.whl"])
    assert 'flydsl_version: ["0.5.0"]' in after["variants/shared.yaml"]
    changed = {path for path in after if after[path] != before[path]}
    assert changed == {f for r in found.values() for f in r["files"]}
    assert found["aiter"]["files"] == ["recipes/aiter/recipe.yaml", "variants/pypi.yaml", "variants/shared.yaml"]
    assert not any(path.startswith(("recipes/flash-attn", "recipes/composable-kernel")) for path in changed)

    # the comments that cite the old pins, for the reviewer to rewrite: each in a file written, each naming it
    for name, (old, _) in TORCH_GROUP_215.items():
        for line in found[name]["evidence"]:
            where, number, comment = line.split(":", 2)
            assert where in found[name]["files"] and comment.strip().startswith("#")
            assert old in comment or re.search(r"\b[0-9a-f]{8}([0-9a-f]{32})?\b", comment), line  # the version, or the old commit (short or full)
    evidence = found["pytorch"]["evidence"]
    assert any(line.startswith("variants/shared.yaml:") and "pytorch v2.14.1 release tarball" in line for line in evidence)
    assert any(line.startswith("recipes/pytorch-rocm/recipe.yaml:") and "v2.14.1" in line for line in evidence)
    body = report.read_text().split("## Evidence to update")[1].split("## Held")[0]
    old_kernels = world.commits["rocm-triton-0.33"][:8]  # vLLM's old triton_kernels commit, cited by its short form
    assert any(old_kernels in line for line in found["vllm"]["evidence"])
    assert "- **pytorch** (2.14.1 → 2.15.0):" in body and f"  - `{evidence[0]}`" in body

    code, out, _ = bump(capsys, world, workspace, "--json", "--write")  # a second run changes nothing
    assert code == 0 and snapshot(workspace) == after
    assert not [name for name, r in rows(out).items() if r["decision"] == "moves"]

    # the written set proven as a maintainer would: every source of every plan downloaded from the world and
    # checked (the moved archives, AMD's new wheels, the git commits) with every patch applied; every
    # architecture planned on both PyTorch paths; every environment solved against a channel with what they need
    proven = report.read_text().split("## What was proven")[1].split("## How to review")[0]
    assert "- **passed** fetch: " in proven and "every checksum and commit matched, every patch applied" in proven
    # where AMD publishes no PyTorch (the table's prebuilt_torch: no, gfx900 and gfx906) the source path is the only one
    source_only = [arch for arch, row in yaml.safe_load((workspace / "variants/architectures.yaml").read_text())[
        "architectures"].items() if row["prebuilt_torch"]["value"] == "no"]
    plans = 2 * len(REPRESENTATIVE_ARCHS) - len(source_only)
    assert f"- **passed** plan: {plans} plan(s): {len(REPRESENTATIVE_ARCHS)} architecture(s) on prebuilt and source; " \
           "source only: " in proven
    assert all(f"{arch} (AMD publishes no PyTorch for {arch} (" in proven for arch in source_only) and source_only
    assert f"- **passed** solve: every environment of {plans} plan(s) solves against {channel}" in proven
    downloaded = set(world.requests)
    assert {"/github/pytorch/pytorch/releases/download/v2.15.0/pytorch-v2.15.0.tar.gz", "/files/vllm-0.34.0.tar.gz",
            "/amd-files/torch-2.15.0+rocm10.2.0-cp312-cp312-linux_x86_64.whl",
            "/amd-files/rocm_sdk_device_gfx1151-10.2.0-py3-none-linux_x86_64.whl"} <= downloaded


def test_a_failed_download_holds_the_group_and_writes_none_of_it(world, workspace, capsys):
    world.torch_215(vllm_rocm_requires=("conch-triton-kernels==1.3",))
    world.pypi("conch-triton-kernels", "1.3", [])
    del world.files["/github/pytorch/audio/archive/refs/tags/v2.12.0.tar.gz"]
    before = snapshot(workspace)
    code, out, _ = bump(capsys, world, workspace, "--json", "--write")
    found = rows(out)
    # the repack vLLM 0.34.0 needs moves with it: held with the group, not written next to vLLM 0.33.0
    for name in (*TORCH_GROUP_215, "conch-triton-kernels"):
        assert found[name]["decision"] == "held" and found[name]["files"] == []
        assert "cannot download" in found[name]["reason"] and "v2.12.0.tar.gz" in found[name]["reason"]
        assert "nothing of the torch group was written" in found[name]["reason"]
    assert snapshot(workspace) == before


def test_torch_is_held_while_no_vllm_allows_it(world, workspace, capsys):
    world.torch_215(vllm_allows=False)
    world.pypi("conch-triton-kernels", "1.3", [])
    before = snapshot(workspace)
    code, out, _ = bump(capsys, world, workspace, "--json")
    found = rows(out)
    assert code == 0
    # a PyPI repack moves within what vLLM's ROCm build installs (its sdist's requirements/rocm.txt)
    assert found["conch-triton-kernels"]["decision"] == "held" and \
        "vllm-0.33.0.tar.gz requirements/rocm.txt requires conch-triton-kernels==1.2.1" in found["conch-triton-kernels"]["reason"]
    for name in ("pytorch", "triton", "aotriton", "torchvision", "torchaudio", "rocm-sdk"):
        assert found[name]["decision"] == "held" and VLLM_033_RULE in found[name]["reason"], found[name]
    assert "torchvision 0.30.0 requires torch==2.15.0" in found["torchvision"]["reason"]
    assert "AMD's ROCm 10.2.0 ships torch 2.15.0+rocm10.2.0" in found["rocm-sdk"]["reason"]
    assert found["vllm"]["decision"] == "current"
    assert snapshot(workspace) == before  # no --write: no file changes

    code, out, _ = bump(capsys, world, workspace)
    line = next(line for line in out.splitlines() if line.startswith("pytorch "))
    assert f"held at 2.14.1: {VLLM_033_RULE}" in line


def test_vllms_rocm_torch_minimum_from_its_sdist_shows_a_disagreement_and_holds_the_group(world, workspace, capsys):
    world.torch_215(vllm_rocm_torch="2.16.0")
    code, out, _ = bump(capsys, world, workspace, "--json")
    found = rows(out)
    disagreement = "vllm-0.34.0.tar.gz CMakeLists.txt TORCH_SUPPORTED_VERSION_ROCM 2.16.0 disagrees: it is the minimum on ROCm"
    for name in TORCH_GROUP_215:
        assert found[name]["decision"] == "held", found[name]
        assert "vllm 0.34.0's ROCm build needs torch >= 2.16.0" in found[name]["reason"] and disagreement in found[name]["reason"]
    assert code == 0


def test_a_new_aotriton_ci_commit_under_the_same_label_moves_the_recipe_and_is_patch_checked(world, workspace, capsys):
    """PyTorch moves __AOTRITON_CI_COMMIT without renaming __AOTRITON_VER: the commit moves (patch-checked), and
    a CI commit that is no tag's commit is pinned as PyTorch builds it, saying so (not unknown)."""
    world.torch_215()
    gfx908 = preimage((REPO / "patches" / "aotriton" / "0001-gfx908-experimental-target.patch").read_text())
    good = world._commit("ROCm/aotriton", {"README": "a CI commit past 0.14b\n"})
    bad = world._commit("ROCm/aotriton", {path: "# rewritten upstream\n" for path in gfx908})
    pytorch, tagged = world.git_base / "pytorch" / "pytorch", world.commits["pytorch-v2.15.0"]
    cmake = '  set(__AOTRITON_VER "0.13b")\n  set(__AOTRITON_CI_COMMIT "{}")\n'
    try:
        for commit in (bad, good):
            retagged = world._commit("pytorch/pytorch", {"cmake/External/aotriton.cmake": cmake.format(commit)})
            git("tag", "-f", "-a", "-m", "v2.15.0", "v2.15.0", retagged, cwd=pytorch)
            code, out, err = bump(capsys, world, workspace, "--json", *(["--write"] if commit == good else []))
            found = rows(out)
            if commit == bad:
                assert found["aotriton"]["decision"] == "held" and found["pytorch"]["decision"] == "held"
                assert "patch 0001-gfx908-experimental-target.patch no longer applies to aotriton 0.13b" in \
                    found["aotriton"]["reason"], found["aotriton"]
    finally:
        git("tag", "-f", "-a", "-m", "v2.15.0", "v2.15.0", tagged, cwd=pytorch)
    aotriton = found["aotriton"]
    assert code == 0 and aotriton["decision"] == "moves" and found["pytorch"]["decision"] == "moves", aotriton
    assert f"commit {world.commits['aotriton-0.13b'][:12]} → {good[:12]}" in aotriton["reason"]
    assert f"pinned to that CI commit, as PyTorch builds it (tag 0.13b is {world.commits['aotriton-0.13b'][:12]})" \
        in aotriton["reason"]
    context = yaml.safe_load((workspace / "recipes" / "aotriton" / "recipe.yaml").read_text())["context"]
    assert context["aotriton_commit"] == good
    assert context["aotriton_tree"] == git("rev-parse", f"{good}^{{tree}}", cwd=world.git_base / "ROCm" / "aotriton")
    assert 'aotriton_version: ["0.13b"]' in (workspace / "variants" / "shared.yaml").read_text()


def test_a_bump_section_lacking_a_key_is_one_line_naming_it(world, workspace, capsys):
    upstreams = workspace / "variants" / "upstreams.yaml"
    upstreams.write_text(upstreams.read_text().replace("    torchaudio-amd: torchaudio\n", ""))
    code, out, err = bump(capsys, world, workspace, "--json")
    assert code == 2 and out == "" and "Traceback" not in err
    assert err.strip() == f"error: {upstreams} lacks bump.amd.torchaudio-amd: restore it from the project's " \
                          "variants/upstreams.yaml"


def test_only_what_counts_is_read_a_dev_build_a_test_requirement_an_ungrouped_component(world, workspace, capsys):
    """A dev build on AMD's index is no release (its a0 pre-releases are); vLLM's rocm-test.txt is not what its
    ROCm build installs; a component in no bump group that is no PyPI repack is unknown, not a mangled edit."""
    world.amd_file("torchvision", "torchvision-0.30.0.dev20261101+rocm10.1.0-cp312-cp312-linux_x86_64.whl")
    world.pypi("vllm", "0.33.0", ["torch==2.14.0", "torchaudio==2.11.0"], rocm_requires=["conch-triton-kernels==1.2.1"],
               torch_rocm="2.14.0", sdist_files={"requirements/rocm-test.txt": "xgrammar==0.2.8\n"})
    world.pypi("xgrammar", "0.2.9", [])
    world.pypi("flydsl", "0.4.0", ["numpy"])
    upstreams = workspace / "variants" / "upstreams.yaml"
    component = "  flydsl:\n    version: flydsl_version\n"
    assert component in upstreams.read_text()
    upstreams.write_text(upstreams.read_text().replace(
        component, "  flydsl-source:\n    version: flydsl_version\n    recipe: null\n    releases:\n"
                   "      - pypi: flydsl\n" + component))
    code, out, err = bump(capsys, world, workspace, "--json")
    found = rows(out)
    assert found["torchvision-amd"]["decision"] == "current" and found["torchvision-amd"]["to"] is None
    assert found["xgrammar"]["decision"] == "moves" and found["xgrammar"]["to"] == "0.2.9", found["xgrammar"]
    assert found["flydsl-source"]["decision"] == "unknown"
    assert found["flydsl-source"]["reason"].startswith("not in a bump group (flydsl_version is no pypi.yaml: entry)")
    assert code == 3 and "Traceback" not in err


def test_a_flash_attn_commit_that_breaks_our_patch_holds_its_group(world, workspace, capsys):
    world.pypi("flash-attn", "2.9.0", ["torch"])
    before = snapshot(workspace)
    code, out, _ = bump(capsys, world, workspace, "--json", "--write")
    found = rows(out)
    for name in ("flash-attn", "composable-kernel"):
        assert found[name]["decision"] == "held" and found[name]["files"] == []
        assert "patch 0001-use-preinstalled-aiter-and-ck.patch no longer applies to flash-attn 2.9.0" in found[name]["reason"]
    assert code == 0 and snapshot(workspace) == before


def test_an_unreachable_upstream_leaves_its_group_unwritten_and_the_result_partial(world, workspace, capsys, monkeypatch):
    world.torch_215()
    monkeypatch.setenv("ORCHESTRATE_AMD_INDEX", f"http://127.0.0.1:{closed_port()}/")
    before = snapshot(workspace)
    code, out, _ = bump(capsys, world, workspace, "--json", "--write")
    found = rows(out)
    assert code == 3
    assert found["rocm-sdk"]["decision"] == "unknown" and "cannot reach http://127.0.0.1:" in found["rocm-sdk"]["reason"]
    for name in ("pytorch", "vllm", "triton", "torchvision"):
        assert found[name]["decision"] == "held" and "the torch group moves whole and rocm-sdk could not be read" \
            in found[name]["reason"]
    assert snapshot(workspace) == before


def hold(workspace, key: str, value: str, reason: str) -> None:
    shared = workspace / "variants" / "shared.yaml"
    line = f'{key}: ["{value}"]'
    assert line in shared.read_text()
    shared.write_text(shared.read_text().replace(line, f"{line}  # hold: {reason}"))


def test_a_held_companion_holds_the_torch_group(world, workspace, capsys):
    """torchvision 0.29.1 requires torch==2.14.1: held, it keeps torch (and so the whole group) where it is."""
    world.torch_215()
    hold(workspace, "torchvision_version", "0.29.1", "waiting for the ABI check")
    code, out, _ = bump(capsys, world, workspace, "--json")
    found = rows(out)
    assert code == 0
    why = "torchvision is held (torchvision_version: hold: waiting for the ABI check) and torchvision 0.29.1 requires " \
          "torch==2.14.1 (torchvision-0.29.1-py3-none-any.whl METADATA (range read))"
    for name in TORCH_GROUP_215:
        assert found[name]["decision"] == "held" and found[name]["to"] is None, found[name]
    for name in ("vllm", "pytorch", "triton", "aotriton", "torchaudio"):
        assert why in found[name]["reason"], found[name]
    assert found["torchvision"]["reason"].startswith("hold: waiting for the ABI check")


def test_amd_lagging_pypi_is_a_decision_the_newest_coherent_vllm_moves(world, workspace, capsys):
    """AMD's index has no torch 2.15 for any stable ROCm: vLLM 0.34.0 (torch 2.15) is passed over for 0.33.1
    (torch 2.14, which AMD ships); the repacks follow 0.33.1, not 0.34.0; the result is complete."""
    world.torch_215(amd_ships=False, vllm_rocm_requires=("conch-triton-kernels==1.3",))
    world.pypi("conch-triton-kernels", "1.3", [])
    world.pypi("vllm", "0.33.1", ["torch==2.14.0"], rocm_requires=["conch-triton-kernels==1.2.1"], torch_rocm="2.14.0")
    world.pypi("torchvision", "0.29.2", ["torch==2.14.1"])
    code, out, err = bump(capsys, world, workspace, "--json")
    found = rows(out)
    assert code == 0 and not [n for n, r in found.items() if r["decision"] == "unknown"], out + err
    assert (found["vllm"]["decision"], found["vllm"]["to"]) == ("moves", "0.33.1")
    assert (found["torchvision"]["decision"], found["torchvision"]["to"]) == ("moves", "0.29.2")
    lag = f"vllm 0.34.0 requires torch==2.15.0 (vllm-0.34.0-py3-none-any.whl METADATA (range read)); AMD's index " \
          f"has no torch 2.15.0+rocm for a stable ROCm yet (read at {world.amd_index})"
    for name in ("pytorch", "triton", "aotriton", "torchaudio"):
        assert found[name]["decision"] == "held" and lag in found[name]["reason"], found[name]
    assert found["rocm-sdk"]["decision"] == "current"
    conch = found["conch-triton-kernels"]
    assert conch["decision"] == "held", conch
    assert "vllm-0.33.1.tar.gz requirements/rocm.txt requires conch-triton-kernels==1.2.1" in conch["reason"]


def test_amd_lagging_holds_the_group_when_no_older_vllm_fits(world, workspace, capsys):
    """No vLLM between: the group is held naming AMD's index, and so is a repack only vLLM 0.34.0 would take."""
    world.torch_215(amd_ships=False, vllm_rocm_requires=("conch-triton-kernels==1.3",))
    world.pypi("conch-triton-kernels", "1.3", [])
    code, out, _ = bump(capsys, world, workspace, "--json")
    found = rows(out)
    assert code == 0
    for name in ("vllm", "pytorch", "triton", "aotriton", "torchvision", "torchaudio"):
        assert found[name]["decision"] == "held", found[name]
        assert f"AMD's index has no torch 2.15.0+rocm for a stable ROCm yet (read at {world.amd_index})" in found[name]["reason"]
    assert found["conch-triton-kernels"]["decision"] == "held"
    assert "vllm-0.33.0.tar.gz requirements/rocm.txt requires conch-triton-kernels==1.2.1" in found["conch-triton-kernels"]["reason"]


def test_a_held_rocm_holds_the_group_not_unknown(world, workspace, capsys):
    world.torch_215()
    hold(workspace, "rocm_sdk_version", "10.1.0", "gfx1151 regressed on 10.2")
    code, out, _ = bump(capsys, world, workspace, "--json")
    found = rows(out)
    assert code == 0
    assert found["rocm-sdk"]["decision"] == "held" and found["rocm-sdk"]["reason"].startswith("hold: gfx1151 regressed on 10.2")
    for name in ("vllm", "pytorch", "triton", "aotriton", "torchvision", "torchaudio", "pytorch-amd"):
        assert found[name]["decision"] == "held", found[name]
    assert "AMD's index has no torch 2.15.0+rocm for a stable ROCm it may take (rocm_sdk_version: hold: gfx1151 " \
           "regressed on 10.2)" in found["pytorch"]["reason"]


def test_an_unreachable_newer_vllm_is_unknown_not_a_refusal(world, workspace, capsys):
    world.torch_215(vllm_rocm_requires=("conch-triton-kernels==1.3",))
    world.pypi("conch-triton-kernels", "1.3", [])
    dead = f"http://127.0.0.1:{closed_port()}/files/"

    def unreachable(version: str) -> None:
        document = world.json["/pypi/vllm/json"]
        for entry in document["releases"][version]:
            entry["url"] = dead + entry["filename"]
        world.files["/pypi/vllm/json"] = json.dumps(document).encode()

    unreachable("0.34.0")
    code, out, _ = bump(capsys, world, workspace, "--json")
    found = rows(out)
    assert code == 3
    assert found["vllm"]["decision"] == "unknown" and "vllm 0.34.0's requirements could not be read: cannot reach " \
        f"{dead}vllm-0.34.0-py3-none-any.whl" in found["vllm"]["reason"]
    for name in TORCH_GROUP_215:
        assert found[name]["decision"] == "unknown" and "vllm 0.34.0's requirements could not be read" in found[name]["reason"]
    # the result pins vLLM 0.33.0: the repacks stay within what it requires
    assert found["conch-triton-kernels"]["decision"] == "held"

    unreachable("0.33.0")  # no vLLM's metadata can be read: the repacks vLLM would constrain are unknown
    code, out, _ = bump(capsys, world, workspace, "--json")
    conch = rows(out)["conch-triton-kernels"]
    assert code == 3 and conch["decision"] == "unknown" and "what vLLM requires of conch-triton-kernels could not be read" \
        in conch["reason"], conch


def test_a_vllm_move_that_cannot_be_read_whole_writes_nothing_of_the_group(world, workspace, capsys):
    """vLLM 0.33.1 (same torch) whose Dockerfile.rocm no longer names its triton_kernels commit as we read it,
    next to a torchvision that could move: neither vLLM's version nor its checksum is written without it."""
    world.pypi("vllm", "0.33.1", ["torch==2.14.0"], rocm_requires=["conch-triton-kernels==1.2.1"], torch_rocm="2.14.0",
               kernels_arg="TRITON_KERNELS_REF")
    world.pypi("torchvision", "0.29.2", ["torch==2.14.1"])
    world.archive("pytorch/vision/archive/refs/tags/v0.29.2.tar.gz", "vision 0.29.2")
    before = snapshot(workspace)
    code, out, _ = bump(capsys, world, workspace, "--json", "--write")
    found = rows(out)
    assert code == 3
    assert found["vllm"]["decision"] == "unknown" and "docker/Dockerfile.rocm has no match" in found["vllm"]["reason"]
    assert found["torchvision"]["decision"] == "held" and found["torchvision"]["files"] == []
    assert "the torch group moves whole and vllm could not be read" in found["torchvision"]["reason"]
    assert snapshot(workspace) == before


def test_a_malformed_wheel_is_an_unknown_row_naming_it_and_the_result_partial(world, workspace, capsys):
    """A wheel whose zip directory was cut short (a broken upload or a proxy) is read as nothing: vLLM's row
    says which file could not be read and why, no traceback, nothing written, exit 3."""
    wheel = "/files/vllm-0.33.0-py3-none-any.whl"
    data = world.files[wheel]
    eocd = data.rfind(b"PK\x05\x06")
    directory = int.from_bytes(data[eocd + 16:eocd + 20], "little")
    world.files[wheel] = data[:directory + 20] + data[eocd:]  # a directory entry cut short
    before = snapshot(workspace)
    code, out, err = bump(capsys, world, workspace, "--json", "--write")
    vllm = rows(out)["vllm"]
    assert code == 3 and "Traceback" not in err
    assert vllm["decision"] == "unknown" and "vllm-0.33.0-py3-none-any.whl is not a readable wheel (its zip directory" \
        in vllm["reason"], vllm
    assert snapshot(workspace) == before


def test_a_held_pin_stays_with_its_reason(world, workspace, capsys):
    """`# hold:` on a pin's line, in variants/shared.yaml and in variants/pypi.yaml."""
    world.pypi("torchvision", "0.29.2", ["torch==2.14.1"])
    world.pypi("model-hosting-container-standards", "0.1.17", [])
    code, out, _ = bump(capsys, world, workspace, "--json")
    assert rows(out)["torchvision"]["decision"] == "moves"
    assert rows(out)["model-hosting-container-standards"]["decision"] == "moves"
    shared = workspace / "variants" / "shared.yaml"
    shared.write_text(shared.read_text().replace('torchvision_version: ["0.29.1"]',
                                                 'torchvision_version: ["0.29.1"]  # hold: waiting for the ABI check'))
    table = workspace / "variants" / "pypi.yaml"
    entry = "model-hosting-container-standards:\n    pypi: model-hosting-container-standards\n    version: 0.1.16"
    assert entry in table.read_text()
    table.write_text(table.read_text().replace(entry, entry + "  # hold: vLLM's serving API changed in 0.1.17"))
    before = snapshot(workspace)
    docs = workspace / "docs" / "versions.md"
    docs.parent.mkdir()
    docs.write_text("# Versions\n<!-- checked-against-upstream:start -->\nSTALE LIST\n<!-- checked-against-upstream:end -->\nafter\n")
    report = workspace / "report.md"
    code, out, _ = bump(capsys, world, workspace, "--json", "--write", "--report", str(report), "--docs")
    row = rows(out)["torchvision"]
    assert code == 0 and row["decision"] == "held" and row["hold"] == "waiting for the ABI check"
    assert row["reason"].startswith("hold: waiting for the ABI check") and snapshot(workspace) == before
    repack = rows(out)["model-hosting-container-standards"]
    assert repack["decision"] == "held" and repack["hold"] == "vLLM's serving API changed in 0.1.17"
    assert repack["reason"].startswith("hold: vLLM's serving API changed in 0.1.17") and repack["files"] == []
    assert "torchvision" in report.read_text()  # the PR body (orchestrate/bump/report.py renders it)
    block = docs.read_text().split("<!-- checked-against-upstream:start -->")[1].split("<!-- checked-against-upstream:end -->")[0]
    assert "torchvision: held at 0.29.1 (group torch): hold: waiting for the ABI check" in block
    assert "STALE LIST" not in block and docs.read_text().endswith("after\n")


def test_pins_reads_vllms_torch_from_the_wheel_not_the_json_api(world, workspace, capsys):
    """The report's fixes: PyPI's JSON API answered torch==2.13.0 for vLLM 0.33.0, whose wheel METADATA says
    2.14.0; AMD's index is compared with the prebuilt torch pin; an unlocked artifact says so."""
    world.pypi("vllm", "0.33.0", ["torch==2.14.0"], json_requires=["torch==2.13.0"])
    capsys.readouterr()
    main(["pins", "--workspace", str(workspace), "--timeout", "5", "--pypi-url", world.pypi_url,
          "--git-base", str(world.git_base)])
    out = capsys.readouterr().out
    coupling = next(line for line in out.splitlines() if line.startswith("vllm <-> pytorch"))
    assert "needs torch==2.14.0 (vllm-0.33.0-py3-none-any.whl metadata)" in coupling and "2.13.0" not in coupling
    assert "torch 2.14.*+rocm10.1.*" in out and "2.14.0+rocm10.1.0" in out and "2.14.1+rocm" not in out
    assert "sha256:00000000" not in out and "(not locked: `orchestrate pins --lock`)" in out
    main(["pins", "--json", "--workspace", str(workspace), "--timeout", "5", "--pypi-url", world.pypi_url,
          "--git-base", str(world.git_base)])
    rocm_sdk = next(r for r in json.loads(capsys.readouterr().out)["components"] if r["component"] == "rocm-sdk")
    assert rocm_sdk["source"]["sha256"] is None and rocm_sdk["source"]["locked"] is False


def test_bump_options_without_bump_are_a_usage_error(capsys):
    capsys.readouterr()
    assert main(["pins", "--write"]) == 2
    assert capsys.readouterr().err.strip() == "error: --write works with --bump only: add --bump"


def test_aiter_is_coupled_to_the_aiter_vllms_rocm_images_build(world, workspace, capsys):
    """vLLM's docker/Dockerfile.rocm_base AITER_BRANCH is a floor whose tag must resolve to a commit."""
    world.aiter_release()
    code, out, _ = bump(capsys, world, workspace, "--json")
    aiter = rows(out)["aiter"]
    assert aiter["decision"] == "moves" and aiter["to"] == "0.1.21"
    assert (f"vllm 0.33.0 builds aiter v0.1.20.post1 = {world.commits['aiter-v0.1.20.post1'][:12]} "
            "(vllm-0.33.0.tar.gz docker/Dockerfile.rocm_base)") in aiter["reason"]
    # vLLM 0.33.0's own file names v0.1.26, a tag ROCm/aiter does not have here: unknown, naming the file
    world.pypi("vllm", "0.33.0", ["torch==2.14.0", "torchaudio==2.11.0"], rocm_requires=["conch-triton-kernels==1.2.1"],
               torch_rocm="2.14.0", sdist_files={"docker/Dockerfile.rocm_base": 'ARG AITER_BRANCH="v0.1.26"\n'})
    code, out, _ = bump(capsys, world, workspace, "--json")
    aiter = rows(out)["aiter"]
    assert aiter["decision"] == "unknown" and rows(out)["flydsl"]["decision"] == "held"
    assert aiter["reason"] == ("vllm 0.33.0 builds aiter v0.1.26 (vllm-0.33.0.tar.gz docker/Dockerfile.rocm_base), "
                               "which ROCm/aiter has no release tag for: its commit cannot be verified")
