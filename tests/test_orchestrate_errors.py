"""Every bad input: one clear line that names the fix, a non-zero exit, the channel exactly as before."""
from __future__ import annotations

import fcntl
import os

import pytest

from conftest import run_subprocess


@pytest.fixture
def built(orchestrate, channel):
    """A channel that already holds a package, so 'untouched' means something."""
    assert orchestrate("build", "rocm-sdk", "--arch", "gfx1151").code == 0
    return channel.snapshot()


def assert_one_line_error(result, *fragments: str) -> None:
    assert result.code != 0
    lines = [l for l in result.err.splitlines() if l.strip()]
    assert len(lines) == 1, result.err
    assert lines[0].startswith("error: ")
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def test_unknown_architecture(orchestrate, channel, built):
    result = orchestrate("build-all", "--arch", "gfx9999")
    assert_one_line_error(result, "unknown architecture 'gfx9999'", "gfx1151", "gfx908")
    assert channel.snapshot() == built


def test_no_architecture_and_no_gpu_lists_the_known_ones(orchestrate, monkeypatch):
    monkeypatch.setattr("orchestrate.detect.detect_gpu_arch", lambda: None)
    result = orchestrate("plan")
    assert_one_line_error(result, "no AMD GPU found", "--arch", "gfx1103, gfx1150, gfx1151")


def test_unknown_package(orchestrate, channel, built):
    result = orchestrate("build", "pytorch-rocm", "--arch", "gfx1151")
    assert_one_line_error(result, "unknown package pytorch-rocm", "pytorch")
    assert channel.snapshot() == built


def test_recipe_that_is_not_yaml_names_file_and_line(orchestrate, workspace, channel, built):
    recipe = workspace / "recipes/vllm/recipe.yaml"
    lines = recipe.read_text().splitlines()
    lines.insert(3, "  version: [unclosed")
    recipe.write_text("\n".join(lines) + "\n")
    result = orchestrate("build-all", "--arch", "gfx1151")
    assert_one_line_error(result, f"{recipe}:", "fix the YAML")
    assert channel.snapshot() == built


def test_recipe_that_is_not_a_valid_recipe(orchestrate, workspace, channel, built):
    recipe = workspace / "recipes/vllm/recipe.yaml"
    recipe.write_text(recipe.read_text().replace("package:\n  name: vllm\n", "package:\n  nam: vllm\n"))
    result = orchestrate("build-all", "--arch", "gfx1151")
    assert_one_line_error(result, f"{recipe}:2: not a valid recipe", "nam")
    assert channel.snapshot() == built


def test_missing_patch(orchestrate, workspace, channel, built):
    (workspace / "patches/aotriton/0001-add-gfx908-target.patch").unlink()
    result = orchestrate("build-all", "--arch", "gfx1151")
    assert_one_line_error(result, "0001-add-gfx908-target.patch does not exist", "aotriton")
    assert channel.snapshot() == built


def test_dependency_cycle_is_named(orchestrate, workspace, channel, built):
    recipe = workspace / "recipes/triton-rocm/recipe.yaml"
    recipe.write_text(recipe.read_text().replace("host: [rocm-sdk]", "host: [rocm-sdk, vllm]"))
    result = orchestrate("build-all", "--arch", "gfx1151")
    assert_one_line_error(result, "dependency cycle:", "remove one of these requirements")
    cycle = result.err.split("dependency cycle: ")[1].split(":")[0].split(" -> ")
    assert cycle[0] == cycle[-1] and {"triton", "vllm"} <= set(cycle)
    assert channel.snapshot() == built


def test_unreachable_source_fails_fast(orchestrate, workspace, channel, built):
    recipe = workspace / "recipes/composable-kernel/recipe.yaml"
    text = recipe.read_text().replace(
        "build:\n",
        "source:\n  url: http://127.0.0.1:9/composable_kernel.tar.gz\n  sha256: '" + "ab" * 32 + "'\nbuild:\n", 1)
    recipe.write_text(text)
    result = orchestrate("build", "composable-kernel", "--arch", "gfx1151")
    assert result.code == 1
    assert "FAILED composable-kernel" in result.err
    assert "source http://127.0.0.1:9/composable_kernel.tar.gz cannot be reached" in result.err
    assert channel.snapshot() == built


def test_unwritable_channel(orchestrate, workspace, tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the channel's parent should be")
    result = orchestrate("build-all", "--arch", "gfx1151", "--channel", blocker / "channel")
    assert_one_line_error(result, "is not writable", "--channel")
    assert blocker.read_text().startswith("a file")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through permissions")
def test_read_only_channel(orchestrate, tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    result = orchestrate("build-all", "--arch", "gfx1151", "--channel", ro)
    assert_one_line_error(result, "is not writable")


def test_folder_that_is_not_a_channel(orchestrate, tmp_path):
    folder = tmp_path / "photos"
    folder.mkdir()
    (folder / "holiday.jpg").write_bytes(b"\xff\xd8")
    result = orchestrate("build-all", "--arch", "gfx1151", "--channel", folder)
    assert_one_line_error(result, "is not a conda channel", "--channel")
    assert sorted(p.name for p in folder.iterdir()) == ["holiday.jpg"]


def test_second_orchestration_on_a_channel_is_refused(workspace, channel, built):
    with open(channel.path / ".orchestrate.lock", "r+") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        held.write(f"pid {os.getpid()} (orchestrate build-all, since 12:00:00)")
        held.flush()
        result = run_subprocess("build-all", "--arch", "gfx1151", cwd=workspace)
    assert result.returncode == 2
    assert f"in use by pid {os.getpid()} (orchestrate build-all" in result.stderr
    assert channel.snapshot() == built


def test_stale_variant_files(orchestrate, workspace):
    (workspace / "variants/gfx1151.yaml").write_text("gpu_arch: [gfx1151]\n")
    result = orchestrate("plan", "--arch", "gfx1151")
    assert_one_line_error(result, "gfx1151.yaml out of date", "orchestrate variants --write")
    assert orchestrate("variants", "--write").code == 0
    assert orchestrate("plan", "--arch", "gfx1151").code == 0


def test_bad_variant_override(orchestrate):
    assert_one_line_error(orchestrate("plan", "--arch", "gfx1151", "--variant", "nonsense"), "KEY=VALUE")
    assert_one_line_error(orchestrate("plan", "--arch", "gfx1151", "--variant", "colour=red"),
                          "unknown variant key 'colour'")


# Each bad argument is refused where it is parsed (orchestrate/options.py: one checker per kind), before
# anything runs: argparse's usage-error exit 2, one line that names the value and what to pass instead.
BAD_ARGUMENTS = {
    "no jobs": (["build-all", "--arch", "gfx1151", "--jobs", "0"], "'0'"),
    "negative jobs": (["build-all", "--arch", "gfx1151", "-j", "-3"], "'-3'"),
    "jobs not a number": (["build", "rocm-sdk", "--arch", "gfx1151", "--jobs", "four"], "'four'"),
    "port too high": (["serve", "--port", "99999"], "'99999'"),
    "negative port": (["serve", "--port", "-1"], "'-1'"),
    "channel neither folder nor URL": (["consumer-manifest", "--channel", "::::"], "'::::'"),
    "local channel neither folder nor URL": (["page", "--channel", "::::"], "'::::'"),
    "publish target with a scheme and no //": (["publish", "--to", "S3:bucket"], "'S3:bucket'"),
    "channel URL no client reads": (["consumer-manifest", "--channel", "ftp://host/stack"], "ftp://"),
    "channel that is a file": (["consumer-manifest", "--channel", "a-file"], "'a-file'"),
    "publish target without //": (["publish", "--to", "s3:team/stack"], "'s3:team/stack'"),
    "verify source without //": (["verify", "--from", "https:/host/stack"], "'https:/host/stack'"),
    "cache channel host without scheme": (["build-all", "--arch", "gfx1151", "--cache-channel", "cache:8000/stack"],
                                          "'cache:8000/stack'"),
    "S3 endpoint without scheme": (["verify", "--from", "s3://team/stack", "--s3-endpoint-url", "minio:9000"],
                                   "'minio:9000'"),
    "local channel given a URL": (["build-all", "--arch", "gfx1151", "--channel", "https://host/stack"],
                                  "'https://host/stack'"),
    "workspace that is a file": (["plan", "--workspace", "a-file"], "'a-file'"),
    "workspace that does not exist": (["pins", "--workspace", "no-such-folder"], "'no-such-folder'"),
    "source cache that is a file": (["fetch", "--source-cache", "a-file"], "'a-file'"),
    "page target without //": (["page", "--to", "s3:team/stack"], "'s3:team/stack'"),
    "page install URL no client reads": (["page", "--url", "ftp://host/stack"], "ftp://"),
    "lint workspace that does not exist": (["lint", "--workspace", "no-such-folder"], "'no-such-folder'"),
    "negative age": (["clean", "--superseded", "-1"], "'-1'"),
    "age not a number": (["clean", "--superseded", "nan"], "'nan'"),
    "no time to look up": (["pins", "--timeout", "0"], "'0'"),
    "negative download time": (["pypi", "add", "flydsl==0.1", "--timeout", "-5"], "'-5'"),
    "source channel written wrong": (["plan", "--source-channel", "s3:team/mirror"], "'s3:team/mirror'"),
    "source channel left empty": (["fetch", "--source-channel", ""], "''"),
}


@pytest.mark.parametrize("name", BAD_ARGUMENTS)
def test_a_bad_argument_is_one_line_and_writes_nothing(workspace, capsys, monkeypatch, name):
    from orchestrate.cli import main

    arguments, value = BAD_ARGUMENTS[name]
    monkeypatch.chdir(workspace)
    (workspace / "a-file").write_text("not a folder")
    before = sorted(workspace.rglob("*"))
    with pytest.raises(SystemExit) as stopped:
        main(arguments)
    captured = capsys.readouterr()
    assert stopped.value.code == 2
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), captured.err
    assert value in lines[0] and ": pass " in lines[0], lines[0]
    assert not captured.out
    assert sorted(workspace.rglob("*")) == before  # no channel, no pixi.toml, no work folder
    assert not (workspace / "pixi.toml").exists()


def test_a_folder_given_with_a_tilde_or_a_colon_in_its_name_is_that_folder(orchestrate, workspace, monkeypatch):
    """bash leaves `~` in `--workspace=~/ws`; a timestamped folder's name has colons. Both name the folder the user
    meant (the page command says which folder holds no channel), not `./~/ws` or "neither a folder nor a URL"."""
    monkeypatch.setenv("HOME", str(workspace.parent))
    result = orchestrate("plan", "--arch", "gfx1151", f"--workspace=~/{workspace.name}")
    assert result.code == 0, result.err
    assert_one_line_error(orchestrate("page", "--channel=~/ch"), f"{(workspace.parent / 'ch').as_uri()} holds no channel")
    assert_one_line_error(orchestrate("page", "--channel", "ch-2026-11-25T16:00"),
                          f"{(workspace / 'ch-2026-11-25T16:00').as_uri()} holds no channel")
    assert not (workspace / "~").exists()


def test_a_job_count_below_one_in_orchestrate_toml(orchestrate, workspace):
    with open(workspace / "orchestrate.toml", "a") as config:
        config.write("max_jobs = 0\n")
    assert_one_line_error(orchestrate("plan", "--arch", "gfx1151"), "max_jobs = 0", "max_jobs = 4")


def test_an_s3_endpoint_without_scheme_from_the_environment(orchestrate, monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", "minio:9000")
    assert_one_line_error(orchestrate("verify", "--from", "s3://team/stack"), "'minio:9000'", "$AWS_ENDPOINT_URL",
                          "http://")


@pytest.mark.parametrize("arguments", [["publish", "--to", "file:///srv/team", "--s3-region", "eu-central-1"],
                                       ["verify", "--from", "http://buildbox:8765", "--s3-endpoint-url", "http://minio:9000"],
                                       ["verify", "--no-s3-path-style"], ["page", "--s3-region", "eu-central-1"]],
                         ids=["publish to a folder", "verify over http", "verify the local channel", "page locally"])
def test_an_s3_flag_for_a_channel_that_is_not_s3_is_refused_not_ignored(orchestrate, arguments):
    result = orchestrate(*arguments)
    assert result.code == 2 and result.err.count("\n") == 1, result.err
    assert "goes with an s3:// channel" in result.err and "drop it" in result.err
