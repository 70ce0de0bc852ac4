"""A new user's first hour (issue 39): the habits pixi and rattler-build users bring (--version, a --help that names
the manual, "did you mean" for every typo), the sharing steps a teammate needs, and housekeeping that keeps a
machine's disk."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from orchestrate import __version__, clean
from orchestrate.options import Options
from orchestrate.share.consumer import render_manifest
from orchestrate.share.targets import parse_target
from orchestrate.errors import UserError
from test_user_paths import orchestrate
from stack import REPO


def test_version_prints_the_version():
    result = orchestrate("--version", cwd=REPO)
    assert result.code == 0 and result.out.strip() == f"orchestrate {__version__}"


def test_help_names_the_manual_and_the_page_for_a_failed_build():
    result = orchestrate("--help", cwd=REPO)
    assert result.code == 0
    for page in ("docs/index.md", "docs/reference.md", "docs/failed-builds.md"):
        assert page in result.out and (REPO / page).is_file(), page


@pytest.mark.parametrize("arguments, said", [
    (["--variant", "pytorch_form=source"], "did you mean pytorch_from? (--variant pytorch_from=source)"),
    (["--variant", "Flash-Attn-Backend=ck"], "did you mean flash_attn_backend?"),
    (["--arch", "GFX1151"], "unknown architecture 'GFX1151' (did you mean gfx1151?)"),
    (["--arch", "gfx11"], "(gfx11 is a family: did you mean gfx1100, gfx1101, gfx1102, gfx1103, gfx1150, gfx1151, gfx1152 or gfx1153?)"),
    (["--arch", "gfx94"], "(gfx94 is a family: did you mean gfx942?)"),
], ids=["variant key typo", "variant key spelt otherwise", "upper-case arch", "family gfx11", "family gfx94"])
def test_a_typo_gets_a_did_you_mean_in_one_line(arguments, said):
    args = arguments if "--arch" in arguments else ["--arch", "gfx1151", *arguments]
    result = orchestrate("plan", *args, cwd=REPO)
    assert result.code == 2 and said in result.err and len(result.err.strip().splitlines()) == 1, result.err


def test_a_plan_keeps_a_variant_key_spelt_right():
    assert orchestrate("plan", "--arch", "gfx1151", "--variant", "pytorch_from=prebuilt", cwd=REPO).code == 0


def test_fetch_names_a_pypi_package_by_its_name_not_the_recipe_they_share():
    from orchestrate.recipes import Output

    def output(name, recipe):
        return Output(name=name, version="1", build_string="h0_0", recipe_name=recipe,
                      recipe_path=REPO / "recipes" / recipe / "recipe.yaml", variant={}, rendered={}, rendered_variant=None)
    assert output("conch-triton-kernels", "pypi").source_name == "conch-triton-kernels"
    assert output("pytorch", "pytorch-rocm").source_name == "pytorch-rocm"


@pytest.mark.parametrize("channel, step", [
    ("s3://bucket/rocm-stack", "AWS_ACCESS_KEY_ID"),
    ("https://conda.example.org/rocm-stack", "pixi auth login conda.example.org --token"),
])
def test_consumer_manifest_names_the_credentials_step_before_pixi_install(channel, step):
    text = render_manifest(channel, None, {})
    assert step in text and text.index(step) < text.index("[workspace]")
    assert text.splitlines()[1].startswith("# Written by `orchestrate consumer-manifest`")  # still what marks it ours


def test_consumer_manifest_for_s3_compatible_storage_names_pixi_auth_login(monkeypatch):
    """With s3-options in the manifest pixi reads its own auth store, not AWS_* variables."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://minio.lab:9000")
    text = render_manifest("s3://bucket/rocm-stack", None, {})
    assert "[workspace.s3-options.bucket]" in text
    assert "pixi auth login s3://bucket --s3-access-key-id KEY_ID --s3-secret-access-key SECRET" in text


def test_a_folder_or_loopback_channel_needs_no_credentials(tmp_path):
    for channel in (str(tmp_path), "http://127.0.0.1:8765"):
        assert "pixi auth login" not in render_manifest(channel, None, {})


def test_consumer_manifest_takes_the_teammates_workspace_name(tmp_path):
    project = tmp_path / "team-app"
    project.mkdir()
    result = orchestrate("consumer-manifest", "--channel", str(tmp_path), "--print", cwd=project)
    assert result.code == 0 and 'name = "team-app"' in result.out, result.err
    result = orchestrate("consumer-manifest", "--channel", str(tmp_path), "--print", "--name", "llm-serving", cwd=project)
    assert 'name = "llm-serving"' in result.out


def test_publish_to_a_relative_path_names_the_whole_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError) as refused:
        parse_target("bucket/rocm", {}).check()
    said = str(refused.value)
    assert f"target folder bucket/rocm ({tmp_path / 'bucket' / 'rocm'}) cannot be made" in said
    assert "a bucket is written s3://bucket/rocm" in said


def test_clean_keeps_each_packages_newest_log_and_every_benchmark_result(tmp_path):
    options = Options(workspace=tmp_path, channel=tmp_path / "channel")
    logs = options.logs_dir
    logs.mkdir(parents=True)
    names = ["vllm-gfx1151_h1234567_0-20261130-101500.log", "vllm-gfx1151_h1234567_0-20261201-090000.log",
             "vllm-gfx1151_h1234567_0-20261201-090000.bench.json", "pytorch-gfx1151_habcdef0_0-20261129-080000.log",
             "vllm-gfx1100_h7654321_0-20261128-080000.log", "notes.log"]
    for name in names:
        (logs / name).write_text("x" * 100)
    removed = clean.clean(options, __import__("orchestrate.channel").channel.Channel(options.channel), None)
    assert [p.name for p in removed.logs] == ["vllm-gfx1151_h1234567_0-20261130-101500.log"]
    assert sorted(os.listdir(logs)) == sorted(names[1:])
    assert any("removed 1 older build log(s)" in line for line in removed.lines())


def test_the_compiler_cache_outlives_the_work_folder_and_changes_no_input_hash(tmp_path, monkeypatch):
    """A build's HOME is its work folder: ccache's default cache there went with it, so the retry after a failure
    compiled from zero. The orchestrator hands the scripts a folder outside it; where it is changes no package."""
    import subprocess

    from orchestrate.input_hash import hashable_recipe
    from orchestrate.runner import set_build_knobs

    for knob in ("MAX_JOBS", "COMPILER_LAUNCHER", "CCACHE_DIR"):  # set_build_knobs sets them: restored after
        monkeypatch.delenv(knob, raising=False)
    monkeypatch.setenv("SCCACHE_DIR", str(tmp_path / "mine"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    set_build_knobs(Options(workspace=tmp_path, channel=tmp_path / "channel", compiler_launcher="ccache"))
    assert os.environ["CCACHE_DIR"] == str(tmp_path / "home" / ".cache" / "ccache")
    assert os.environ["SCCACHE_DIR"] == str(tmp_path / "mine")  # the user's own stays
    for recipe in ("vllm", "pytorch-rocm", "flash-attn", "aiter"):  # every recipe that takes the launcher
        text = (REPO / "recipes" / recipe / "recipe.yaml").read_text()
        assert 'CCACHE_DIR: ${{ env.get("CCACHE_DIR", default="") }}' in text, recipe
    stage1 = {"build": {"script": {"env": {"CCACHE_DIR": "/home/a/.cache/ccache", "MAX_JOBS": "8"}}}}
    other = {"build": {"script": {"env": {"CCACHE_DIR": "/home/b/.cache/ccache", "MAX_JOBS": "2"}}}}
    assert hashable_recipe(stage1) == hashable_recipe(other)
    # build-knobs.sh: the folder reaches the compiler cache; an empty one is the tool's own default, not ""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "ccache").write_text("#!/bin/sh\n")
    (bin_dir / "ccache").chmod(0o755)
    knobs = REPO / "recipes" / "_shared" / "build-knobs.sh"
    for given, seen in (("/cache/here", "/cache/here"), ("", "unset")):
        done = subprocess.run(["bash", "-c", f'source {knobs}; echo "${{CCACHE_DIR-unset}} $CMAKE_CXX_COMPILER_LAUNCHER"'],
                              env={"PATH": f"{bin_dir}:/usr/bin:/bin", "COMPILER_LAUNCHER": "ccache", "CCACHE_DIR": given},
                              capture_output=True, text=True, timeout=30)
        assert done.stdout.split() == [seen, "ccache"], done.stderr


def test_a_first_run_stopped_in_its_checks_leaves_no_channel_folder(tmp_path):
    """Exit 2 changed nothing, says when-something-fails.md: a first build-all whose source channel cannot be
    reached left channel/.orchestrate.lock behind, a channel folder where there was none."""
    from stack import make_workspace

    workspace = make_workspace(tmp_path)
    result = orchestrate("build-all", "--arch", "gfx1151", "--source-channel", "http://127.0.0.1:9/nowhere",
                         cwd=workspace)
    assert result.code == 2 and "cannot be reached" in result.err, result.err
    assert not (workspace / "channel").exists()
