"""One source cache for every build and architecture, `orchestrate fetch`, and `build-all --offline`,
against an HTTP server on 127.0.0.1 that counts downloads and a local git repository."""
from __future__ import annotations

import re
import shutil

from source_helpers import sourced_recipe

TARBALL = "upstream-1.0.tar.gz"


def source_states(out: str) -> list[str]:
    return [m.group(1) for m in re.finditer(r"^(fetched|cached|FAILED|not checked|local)\s+sourced\s", out, re.M)]


def built_files(workspace, name="sourced"):
    return sorted(p.name for p in (workspace / "channel/linux-64").glob(f"{name}-*.conda"))


def test_a_source_downloads_once_for_every_architecture_and_rebuild(orchestrate, workspace, tmp_path):
    with sourced_recipe(workspace, tmp_path) as upstream:
        assert orchestrate("build", "sourced", "--arch", "gfx1151").code == 0
        assert orchestrate("build", "sourced", "--arch", "gfx1100").code == 0
        recipe = workspace / "recipes/sourced/recipe.yaml"
        recipe.write_text(recipe.read_text().replace("cp kernels.txt", "cp -v kernels.txt"))  # a script change
        rebuilt = orchestrate("build", "sourced", "--arch", "gfx1151")
        assert rebuilt.code == 0
        assert "recipe changed" in next(l for l in rebuilt.out.splitlines() if l.startswith("sourced "))
        assert upstream.downloads[TARBALL] == 1
        assert len(built_files(workspace)) == 2  # two architectures; the rebuild replaced its own file...
        assert len(list((workspace / "channel/.superseded").rglob("sourced-*.conda"))) == 1  # ...kept aside
        cache = workspace / ".orchestrate/sources"
        assert any(cache.glob("*_extracted")) and (cache / "git").is_dir()


def test_source_cache_folder_can_be_shared_between_workspaces(orchestrate, workspace, tmp_path):
    shared = tmp_path / "team-sources"
    with sourced_recipe(workspace, tmp_path) as upstream:
        assert orchestrate("build", "sourced", "--arch", "gfx1151", "--source-cache", shared).code == 0
        other_channel = tmp_path / "other-channel"
        (workspace / "orchestrate.toml").write_text(f'source_channels = []\nsource_cache = "{shared}"\n')
        assert orchestrate("build", "sourced", "--arch", "gfx1151", "--channel", other_channel).code == 0
        assert upstream.downloads[TARBALL] == 1
        assert not (workspace / ".orchestrate/sources").exists()


def test_fetch_fills_the_cache_then_offline_builds_need_no_network(orchestrate, workspace, tmp_path, channel):
    with sourced_recipe(workspace, tmp_path) as upstream:
        first = orchestrate("fetch", "--all-archs", "sourced")
        assert first.code == 0, first.err
        assert source_states(first.out) == ["fetched", "fetched"], first.out  # url + git, once for 10 archs
        assert upstream.downloads[TARBALL] == 1
        again = orchestrate("fetch", "--arch", "gfx1201", "sourced")
        assert source_states(again.out) == ["cached", "cached"]
        assert upstream.downloads[TARBALL] == 1
        assert not channel.path.exists()  # fetch builds nothing
    shutil.rmtree(upstream.repo)  # no network, no upstream repository: only the cache is left
    result = orchestrate("build", "sourced", "--arch", "gfx1151", "--offline")
    assert result.code == 0, result.err
    [package] = built_files(workspace)
    assert package.startswith("sourced-1.0-gfx1151_")


def test_offline_build_names_every_missing_source_before_building(orchestrate, workspace, tmp_path, channel):
    with sourced_recipe(workspace, tmp_path) as upstream:
        result = orchestrate("build-all", "--arch", "gfx1151", "--offline")
        assert result.code == 2
        [line] = result.err.strip().splitlines()
        assert "2 source(s) are not in the source cache" in line
        assert f"sourced ({upstream.url}/{TARBALL})" in line and f"git {upstream.repo.as_uri()}" in line
        assert "orchestrate fetch --arch gfx1151" in line
        assert upstream.downloads[TARBALL] == 0
    assert not channel.path.exists() or channel.snapshot() == {}


def test_fetch_names_a_wrong_checksum_with_expected_and_actual(orchestrate, workspace, tmp_path):
    with sourced_recipe(workspace, tmp_path) as upstream:
        recipe = workspace / "recipes/sourced/recipe.yaml"
        recipe.write_text(recipe.read_text().replace(upstream.sha256, "0" * 64))
        result = orchestrate("fetch", "--arch", "gfx1151", "sourced")
    assert result.code == 2
    failed = next(l for l in result.out.splitlines() if l.startswith("FAILED"))
    assert f"{upstream.url}/{TARBALL}" in failed and "expected " + "0" * 64 in failed
    assert f"actual {upstream.sha256}" in failed and "recipes/sourced/recipe.yaml" in failed
    assert "not checked" in result.out  # the git source after it
    assert "1 source(s) failed" in result.err


def test_fetch_names_a_patch_that_does_not_apply_and_its_hunk(orchestrate, workspace, tmp_path):
    with sourced_recipe(workspace, tmp_path):
        patch = workspace / "patches/sourced/0001-patch-kernels.patch"
        patch.write_text(patch.read_text().replace("-upstream kernels", "-kernels of another release"))
        result = orchestrate("fetch", "--arch", "gfx1151", "sourced")
        built = orchestrate("build", "sourced", "--arch", "gfx1151")  # a build says the same, not "build failed"
    assert result.code == 2
    failed = next(l for l in result.out.splitlines() if l.startswith("FAILED"))
    assert "patch 0001-patch-kernels.patch does not apply" in failed
    assert "hunk #1" in failed and "@@ -1 +1 @@" in failed and "rebase the patch" in failed
    assert built.code == 1
    assert "FAILED sourced-1.0-gfx1151_" in built.err
    assert "patch 0001-patch-kernels.patch does not apply to sourced's source: error applying hunk #1" in built.err


def test_fetch_names_a_commit_or_url_that_cannot_be_fetched(orchestrate, workspace, tmp_path):
    with sourced_recipe(workspace, tmp_path) as upstream:
        recipe = workspace / "recipes/sourced/recipe.yaml"
        recipe.write_text(recipe.read_text().replace(upstream.commit, "1" * 40))
        result = orchestrate("fetch", "--arch", "gfx1151", "sourced")
        assert result.code == 2
        failed = next(l for l in result.out.splitlines() if l.startswith("FAILED"))
        assert f"commit {'1' * 40} not found in {upstream.repo.as_uri()}: fix the rev" in failed
        recipe.write_text(recipe.read_text().replace(upstream.url, "http://127.0.0.1:9"))
        result = orchestrate("fetch", "--arch", "gfx1151", "sourced")
    failed = next(l for l in result.out.splitlines() if l.startswith("FAILED"))
    assert failed.startswith("FAILED      sourced  http://127.0.0.1:9/") and "cannot be reached: check the network" in failed


def test_a_source_cache_that_cannot_be_written_is_one_line_before_anything_runs(orchestrate, workspace, tmp_path,
                                                                                 channel):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    for command in (["build-all", "--arch", "gfx1151"], ["fetch", "--arch", "gfx1151"]):
        result = orchestrate(*command, "--source-cache", blocker / "sources")
        assert result.code == 2
        [line] = result.err.strip().splitlines()
        assert f"source cache {blocker / 'sources'} is not a folder you can write" in line and "--source-cache DIR" in line
    assert not channel.path.exists() or channel.package_files() == []
