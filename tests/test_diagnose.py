"""A build that fails because a channel, a source or a package is missing says which, in its one FAILED
line: real builds of the test graph against servers on 127.0.0.1 (and closed ports there)."""
from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest
from rattler.index import index_fs

from orchestrate import channels, diagnose, resolve
from source_helpers import CountingServer, make_git_repo

FIX_CHANNEL = "check the network or a proxy, or set source_channels to a mirror in orchestrate.toml"


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def empty_channel(folder: Path) -> Path:
    for subdir in ("noarch", "linux-64"):
        (folder / subdir).mkdir(parents=True)
    asyncio.run(index_fs(folder, write_shards=False))
    return folder


def use_channels(workspace: Path, *channels: str) -> None:
    listed = ", ".join(f'"{c}"' for c in channels)
    (workspace / "orchestrate.toml").write_text(f"source_channels = [{listed}]\n")


def require(workspace: Path, spec: str) -> None:
    """composable-kernel's host environment also needs `spec`, which is not one of our packages."""
    recipe = workspace / "recipes/composable-kernel/recipe.yaml"
    recipe.write_text(recipe.read_text().replace("host: [rocm-sdk]", f"host: [rocm-sdk, \"{spec}\"]"))


def with_source(workspace: Path, source_yaml: str) -> None:
    recipe = workspace / "recipes/composable-kernel/recipe.yaml"
    recipe.write_text(recipe.read_text().replace("build:\n", f"source:\n{source_yaml}build:\n", 1))


def failed_line(result, package: str) -> str:
    lines = [l for l in result.err.splitlines() if l.startswith(f"FAILED {package}")]
    assert result.code == 1 and len(lines) == 1, result.err
    return lines[0]


@pytest.fixture
def channel_breaks_after_presolve(monkeypatch):
    """The channels answered the pre-solve (resolve.py) and fail only when rattler-build asks: the build's
    own error must still name the cause. (The pre-solve's messages: test_orchestrate_resolve.py.)"""
    monkeypatch.setattr(resolve, "check_plan", lambda plan, options: resolve.Resolution())


def test_an_unreachable_channel_is_named(orchestrate, workspace, channel_breaks_after_presolve):
    dead = f"http://127.0.0.1:{closed_port()}/conda-forge"
    use_channels(workspace, dead)
    require(workspace, "zlib")
    result = orchestrate("build", "composable-kernel", "--arch", "gfx1151")
    line = next(l for l in result.err.splitlines() if l.startswith("FAILED "))
    assert f"{dead} cannot be reached: {FIX_CHANNEL}" in line
    assert "Failed to resolve dependencies" not in line


def test_a_package_in_no_channel_is_named(orchestrate, workspace, tmp_path, channel_breaks_after_presolve):
    mirror = empty_channel(tmp_path / "mirror")
    use_channels(workspace, str(mirror))
    require(workspace, "no-such-package >=1")
    line = failed_line(orchestrate("build", "composable-kernel", "--arch", "gfx1151"), "composable-kernel")
    assert "no-such-package >=1 (needed by composable-kernel) is in none of the channels" in line
    assert str(mirror) in line and "source_channels" in line


def test_a_folder_that_is_no_channel_is_named(orchestrate, workspace, tmp_path, channel_breaks_after_presolve):
    served = tmp_path / "served"
    (served / "just-files").mkdir(parents=True)
    require(workspace, "zlib")
    with CountingServer(served) as server:
        use_channels(workspace, f"{server.url}/just-files")
        result = orchestrate("build", "composable-kernel", "--arch", "gfx1151")
    line = next(l for l in result.err.splitlines() if l.startswith("FAILED "))
    assert f"{server.url}/just-files is not a conda channel (no noarch/repodata.json" in line


def test_a_missing_source_file_names_package_and_url(orchestrate, workspace, tmp_path):
    served = tmp_path / "served"
    served.mkdir()
    with CountingServer(served) as server:
        url = f"{server.url}/composable_kernel-1.3.0.tar.gz"
        with_source(workspace, f"  url: {url}\n  sha256: '{'ab' * 32}'\n")
        line = failed_line(orchestrate("build", "composable-kernel", "--arch", "gfx1151"), "composable-kernel")
    assert f"composable-kernel's source {url} is not there (HTTP 404): fix the URL in the recipe" in line


def test_an_unreachable_source_names_package_and_url(orchestrate, workspace):
    url = f"http://127.0.0.1:{closed_port()}/composable_kernel-1.3.0.tar.gz"
    with_source(workspace, f"  url: {url}\n  sha256: '{'ab' * 32}'\n")
    line = failed_line(orchestrate("build", "composable-kernel", "--arch", "gfx1151"), "composable-kernel")
    assert f"composable-kernel's source {url} cannot be reached" in line and "orchestrate fetch" in line


def test_an_unreachable_git_source_names_package_and_url(orchestrate, workspace):
    url = f"http://127.0.0.1:{closed_port()}/composable_kernel.git"
    with_source(workspace, f"  git: {url}\n  rev: '{'a' * 40}'\n")
    line = failed_line(orchestrate("build", "composable-kernel", "--arch", "gfx1151"), "composable-kernel")
    assert f"composable-kernel's git source {url} cannot be reached" in line


def test_a_missing_git_commit_is_not_called_unreachable(orchestrate, workspace, tmp_path):
    repo = tmp_path / "ck-repo"
    make_git_repo(repo, {"README": "ck\n"})
    with_source(workspace, f"  git: {repo.as_uri()}\n  rev: '{'a' * 40}'\n")
    line = failed_line(orchestrate("build", "composable-kernel", "--arch", "gfx1151"), "composable-kernel")
    assert "cannot be reached" not in line


def test_channel_names_are_what_the_user_wrote():
    """`conda-forge` is how users write https://conda.anaconda.org/conda-forge, and how errors name it."""
    names = channels.display_names(["conda-forge", "http://127.0.0.1:9/mirror/"])
    assert names["https://conda.anaconda.org/conda-forge"] == "conda-forge"
    url = "https://conda.anaconda.org/conda-forge/linux-64/repodata_shards.msgpack.zst"
    assert channels.name_of(url, names) == "conda-forge"
    assert channels.name_of("http://127.0.0.1:9/mirror/noarch/repodata.json", names) == "http://127.0.0.1:9/mirror/"


def test_channel_names_are_never_folders(tmp_path, monkeypatch):
    """rattler's rule: names (also with a slash) are channels under the alias; ./, .., ~/, / and file:// are
    folders. A folder named like the channel in the current directory changes nothing."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "conda-forge").mkdir()
    for name in ("conda-forge", "bioconda", "my-org/label", "https://conda.anaconda.org/conda-forge", "s3://b/c"):
        assert channels.local_folder(name) is None, name
    assert channels.local_folder("./mirror") == tmp_path / "mirror"
    assert channels.local_folder("/srv/channel") == Path("/srv/channel")
    assert channels.local_folder("file:///srv/channel") == Path("/srv/channel")
    assert channels.local_folder("~/channel") == Path.home() / "channel"
    assert channels.anchored("./mirror", Path("/ws")) == "/ws/mirror"
    assert channels.anchored("conda-forge", Path("/ws")) == "conda-forge"


def test_the_log_names_the_last_environment_solved():
    log = ["  Platform: linux-64 [__unix=0=0, __glibc=2.36=0]", "  Channels: ", "   - file:///w/out/",
           "   - http://127.0.0.1:9/c/", "  Specs:", "   - a", "other line",
           "  Platform: linux-64 [__unix=0=0, __glibc=2.36=0]", "  Channels:", "   - file:///w/out/",
           "  Specs:", "   - b >=1", "Retry attempt #0. Sleeping 1s before the next attempt"]
    channels, specs, platform, virtual = diagnose._last_solve_request(log)
    assert channels == ["file:///w/out/"] and specs == ["b >=1"]
    assert platform == "linux-64" and virtual == ["__unix=0=0", "__glibc=2.36=0"]


def test_a_failing_recipe_test_is_still_called_that(orchestrate, workspace, tmp_path):
    """Test environments are solved too; with the channels answering, a failing test is the test."""
    use_channels(workspace, str(empty_channel(tmp_path / "mirror")))
    recipe = workspace / "recipes/composable-kernel/recipe.yaml"
    # A version of its own: rattler's package cache would otherwise hand the test an earlier build's files.
    recipe.write_text(recipe.read_text().replace('= "${{ gpu_arch }}"', '= "another-arch"')
                      .replace('version: "1.3.0"', 'version: "1.3.0.9"'))
    line = failed_line(orchestrate("build", "composable-kernel", "--arch", "gfx1151"), "composable-kernel")
    assert "the recipe's tests failed" in line
