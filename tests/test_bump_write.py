"""`orchestrate pins --bump --write` writes a run whole or not at all, edits values and never the comments that
cite them, and locks AMD's artifacts from the index its decisions read (tests/upstream_world.py's world)."""
from __future__ import annotations

import errno
import os
import signal
from pathlib import Path

import pytest
import yaml

from orchestrate import package_index, web
from orchestrate.bump import write
from orchestrate.bump.decide import HELD, MOVES, Edit, Group, Row
from orchestrate.cli import main
from orchestrate.stops import Stopped
from test_pins_bump import bump, closed_port, rows, workspace, world  # noqa: F401 (fixtures)
from upstream_world import snapshot


def failing_third_replace(monkeypatch, workspace: Path, failure: BaseException | None) -> list[str]:
    """os.replace inside the workspace, recorded; the third raises `failure`."""
    done, real = [], os.replace

    def replace(source, target, *args, **kwargs):
        if Path(target).is_relative_to(workspace):
            done.append(str(Path(target).relative_to(workspace)))
            if failure is not None and len(done) == 3:
                raise failure
        return real(source, target, *args, **kwargs)
    monkeypatch.setattr(os, "replace", replace)
    return done


def test_a_run_is_written_whole_or_not_at_all_and_comments_keep_the_old_pin(world, workspace, capsys, monkeypatch):
    world.aiter_release()
    world.pypi("torchvision", "0.29.2", ["torch==2.14.1"])  # the torch group writes too: four files in all
    world.archive("pytorch/vision/archive/refs/tags/v0.29.2.tar.gz", "torchvision 0.29.2")
    recipe = workspace / "recipes" / "aiter" / "recipe.yaml"
    old_commit = yaml.safe_load(recipe.read_text())["context"]["aiter_commit"]
    citation = f"  # ROCm/aiter tag v0.1.20.post1 = {old_commit} (git ls-remote)"
    recipe.write_text(recipe.read_text().replace(f"  aiter_commit: {old_commit}", f"{citation}\n  aiter_commit: {old_commit}"))
    before = snapshot(workspace)
    for failure in (OSError(errno.ENOSPC, "No space left on device"), Stopped(signal.SIGINT)):
        done = failing_third_replace(monkeypatch, workspace, failure)
        code, out, err = bump(capsys, world, workspace, "--json", "--write")
        assert code != 0 and done[3:] == done[1::-1], done  # the third failed; the two before it were put back
        assert snapshot(workspace) == before, failure
        assert not [p for p in workspace.rglob(".*") if p.is_file()], "temporary files left behind"
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err

    done = failing_third_replace(monkeypatch, workspace, None)
    code, out, _ = bump(capsys, world, workspace, "--json", "--write")
    found = rows(out)
    assert code == 0 and found["aiter"]["decision"] == found["torchvision"]["decision"] == MOVES
    assert len(done) == 4 and done[-1] == "variants/shared.yaml"  # what the next run reads goes last
    text = recipe.read_text()
    new_commit = yaml.safe_load(text)["context"]["aiter_commit"]
    assert new_commit == world.commits["aiter-v0.1.21"] != old_commit
    assert citation in text  # the comment still cites the old commit: it is the old pin's evidence
    assert f"recipes/aiter/recipe.yaml:{text.splitlines().index(citation) + 1}: {citation.strip()}" in found["aiter"]["evidence"]


def test_the_prebuilt_lock_reads_the_index_the_decisions_read(world, workspace, capsys, monkeypatch):
    world.torch_215()
    monkeypatch.setenv("ORCHESTRATE_AMD_INDEX", world.amd_index)
    for name in ("prebuilt.yaml", "prebuilt-lock.yaml"):  # the declared index is another one, which is down
        path = workspace / "variants" / name
        path.write_text(path.read_text().replace(world.amd_index, f"http://127.0.0.1:{closed_port()}/"))
    before = snapshot(workspace)
    real = package_index.read_project

    def device_pages_down(index, project, timeout):
        if project.startswith("rocm-sdk-device-"):  # read by the lock only, after the decisions
            raise web.Unreachable("Connection refused")
        return real(index, project, timeout)
    monkeypatch.setattr(package_index, "read_project", device_pages_down)
    code, out, _ = bump(capsys, world, workspace, "--json", "--write")
    found = rows(out)
    assert code == 3, found["rocm-sdk"]
    assert found["rocm-sdk"]["decision"] == "unknown" and "the prebuilt lock could not be written: cannot reach " \
        f"{world.amd_index}" in found["rocm-sdk"]["reason"]
    assert snapshot(workspace) == before

    monkeypatch.setattr(package_index, "read_project", real)
    code, out, _ = bump(capsys, world, workspace, "--json", "--write")
    assert code == 0 and rows(out)["rocm-sdk"]["decision"] == MOVES
    lock = yaml.safe_load((workspace / "variants" / "prebuilt-lock.yaml").read_text())
    assert lock["index"] == world.amd_index  # the lock names the index it was read from
    assert lock["artifacts"]["torch"]["file"] == "torch-2.15.0+rocm10.2.0-cp312-cp312-linux_x86_64.whl"
    assert world.requests.count("/amd/torch/") == 2  # once per run: the lock reused the decisions' page


def test_a_literal_with_an_empty_part_is_not_written(tmp_path):
    """The aotriton edit `aiter_tag: {tag}` with a tag that could not be read would write `aiter_tag: v0.2v0.1.11`."""
    recipe = tmp_path / "recipes" / "aotriton" / "recipe.yaml"
    recipe.parent.mkdir(parents=True)
    recipe.write_text("context:\n  aiter_tag: v0.1.11\n")
    row = Row("aotriton", "0.13b", MOVES, "0.14b")
    group = Group("torch", [row], [Edit("literal", "recipes/aotriton/recipe.yaml", "aiter_tag: ", "aiter_tag: v0.2")])
    assert write.apply(tmp_path, [group], world=None) == []
    assert row.decision == HELD and "has an empty part" in row.reason and recipe.read_text().endswith("v0.1.11\n")


def test_prove_without_write_is_a_usage_error(capsys):
    capsys.readouterr()
    assert main(["pins", "--bump", "--prove"]) == 2
    assert capsys.readouterr().err.strip() == "error: --prove proves the set --write writes: add --write"


def test_a_failed_proof_of_a_partial_result_exits_1_and_says_both(world, workspace, capsys, monkeypatch):
    from orchestrate.bump import prove
    monkeypatch.setenv("ORCHESTRATE_AMD_INDEX", f"http://127.0.0.1:{closed_port()}/")
    monkeypatch.setattr(prove, "prove", lambda *args, **kwargs: [prove.Proof("fetch", "failed", "a patch no longer applies")])
    code, out, err = bump(capsys, world, workspace, "--json", "--write", "--prove")
    assert code == 1 and rows(out)["rocm-sdk"]["decision"] == "unknown"
    assert err.strip() == "a proof failed, and the result is partial (some upstream could not be read): exit 1"
