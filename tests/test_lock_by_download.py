"""The first networked run against AMD's index as TheRock publishes it (issue 36): its page generator
(build_tools/packaging/python/manage_structured.py, render_package_page at TheRock 89553ce3) writes no #sha256=
fragment unless --include-checksums, and links each file by its quoted name in the project's own folder. Served
from 127.0.0.1: `pins --lock` downloads each chosen file once, locks its computed sha256 and size, and leaves it in
the source cache, so fetch and build download nothing again; a file it cannot lock stops only the packages that
need it, which are named."""
from __future__ import annotations

import hashlib
import html
import time
from pathlib import Path
from urllib.parse import quote

import pytest
import yaml

from source_helpers import CountingServer, sourced_recipe
from test_prebuilt_lock import LOCAL, PREBUILT_YAML, ROCM, amd_files, amd_workspace, run, wheel_bytes  # noqa: F401


def therock_page(project: str, names: list[str]) -> str:
    """A project page as render_package_page(pkg) writes it by default (skip_checksum=True)."""
    lines = ["<!DOCTYPE html>", "<html>", "  <body>", f"    <h1>Links for {project}</h1>"]
    lines += [f'    <a href="{quote(name)}">{html.escape(name)}</a><br/>' for name in sorted(names)]
    return "\n".join(lines + ["  </body>", "</html>", f"<!--TIMESTAMP {int(time.time())}-->"])


def therock_index(root: Path, files: dict[str, list[str]]) -> dict[str, str]:
    """root/simple/<project>/ holding index.html and its files; returns file name -> sha256."""
    digests = {}
    for project, names in files.items():
        folder = root / "simple" / project
        folder.mkdir(parents=True)
        for name in names:
            data = wheel_bytes(name)
            (folder / name).write_bytes(data)
            digests[name] = hashlib.sha256(data).hexdigest()
        (folder / "index.html").write_text(therock_page(project, names))
    return digests


@pytest.fixture
def therock(amd_workspace, tmp_path):  # noqa: F811
    root = tmp_path / "therock-index"
    digests = therock_index(root, amd_files())
    with CountingServer(root) as server:
        server.index, server.digests = f"{server.url}/simple/", digests
        (amd_workspace / "variants" / "prebuilt.yaml").write_text(PREBUILT_YAML.format(index=server.index))
        yield server


def file_downloads(server) -> dict[str, int]:
    """GETs of each file the index serves (a listed file it does not serve is asked for again by each lock)."""
    return {path: n for path, n in server.downloads.items() if (server.root / path.replace("%2B", "+")).is_file()
            and not path.endswith("/")}


def test_lock_by_download_against_therocks_default_pages_then_fetch_and_build_download_nothing_again(
        therock, run, amd_workspace):  # noqa: F811
    torch = f"torch-{LOCAL}-cp312-cp312-linux_x86_64.whl"
    (therock.root / "simple" / "torch" / torch).unlink()  # listed on its page, not served: cannot be locked
    locked = run("pins", "--lock")
    assert locked.code == 1
    assert "torch: the index lists" in locked.err and "HTTP 404" in locked.err
    lock = yaml.safe_load((amd_workspace / "variants" / "prebuilt-lock.yaml").read_text())["artifacts"]
    core = f"rocm_sdk_core-{ROCM}-py3-none-linux_x86_64.whl"
    entry = lock["rocm_sdk_core"]
    assert entry == {"file": core, "url": f"{therock.index}rocm-sdk-core/{core}", "sha256": therock.digests[core],
                     "size": len(wheel_bytes(core)), "evidence": f"computed from download {entry['evidence'][-10:]}"}
    assert "torch" not in lock
    downloaded = file_downloads(therock)
    assert downloaded and set(downloaded.values()) == {1}  # each chosen file once

    fetched = run("fetch", "--arch", "gfx1151", "-q")
    assert fetched.code == 2
    assert "error: pytorch: " in fetched.err and "has no sha256" in fetched.err
    assert "not locked: pytorch will not be fetched" in fetched.err
    assert "Traceback" not in fetched.err
    states = {line.split()[1]: line.split()[0] for line in fetched.out.splitlines() if line.split()[:1] in
              (["cached"], ["fetched"], ["FAILED"])}
    assert states.get("rocm-sdk") == "cached" and states.get("rocm-sdk-device-gfx1151") == "cached", fetched.out
    assert file_downloads(therock) == downloaded  # fetch took them from the source cache

    built = run("build-all", "--arch", "gfx1151", "-q")
    assert built.code == 1, built.err
    assert "not locked: pytorch, rocm-stack will not be built" in built.err
    summary = {line.split()[0]: line for line in built.out.splitlines() if " skip " not in line and line.split()}
    assert " built " in summary["rocm-sdk"] and " built " in summary["rocm-sdk-device-gfx1151"]
    assert " blocked " in summary["pytorch"] and "has no sha256" in summary["pytorch"]
    assert " blocked " in summary["rocm-stack"] and "needs pytorch, whose files are not locked" in summary["rocm-stack"]
    assert file_downloads(therock) == downloaded  # and the build did not download them again either


def test_a_hand_seeded_entry_takes_the_index_url_and_keeps_its_evidence(therock, run, amd_workspace):  # noqa: F811
    core = f"rocm_sdk_core-{ROCM}-py3-none-linux_x86_64.whl"
    guessed = f"{therock.url}/somewhere/else/{core}"
    (amd_workspace / "variants" / "prebuilt-lock.yaml").write_text(yaml.safe_dump({
        "index": therock.index, "artifacts": {"rocm_sdk_core": {
            "file": core, "url": guessed, "sha256": therock.digests[core], "evidence": "a public table, 2026-10-07"}}}))
    assert run("pins", "--lock").code == 0
    entry = yaml.safe_load((amd_workspace / "variants" / "prebuilt-lock.yaml").read_text())["artifacts"]["rocm_sdk_core"]
    assert entry["url"] == f"{therock.index}rocm-sdk-core/{core}" and entry["evidence"] == "a public table, 2026-10-07"
    assert f"simple/rocm-sdk-core/{core}" not in therock.downloads  # its sha256 came from the evidence


def test_a_tarball_locked_by_download_is_unpacked_into_the_cache_as_rattler_build_unpacks_it(
        orchestrate, workspace, tmp_path):
    from orchestrate.prebuilt import download_into_cache
    from orchestrate.sources import SourceCache

    with sourced_recipe(workspace, tmp_path) as upstream:
        url = f"{upstream.url}/upstream-1.0.tar.gz"
        digest, size = download_into_cache(url, SourceCache(workspace / ".orchestrate/sources"), 10)
        assert digest == upstream.sha256 and size == (tmp_path / "upstream" / "upstream-1.0.tar.gz").stat().st_size
        result = orchestrate("fetch", "--arch", "gfx1151", "sourced")
        assert result.code == 0, result.err
        assert any(line.startswith("cached") and "upstream-1.0.tar.gz" in line for line in result.out.splitlines())
        assert upstream.downloads["upstream-1.0.tar.gz"] == 1  # the patch applied to the tree unpacked here


def test_with_amds_index_unreachable_fetch_and_build_all_go_on_with_what_needs_no_unlocked_file(
        run, amd_workspace, tmp_path):  # noqa: F811
    """The first run on a machine that cannot reach AMD's index: the lock cannot be completed, which is said once;
    a package whose own sources are pinned is still fetched and built, and the ones that need AMD's files are named."""
    (amd_workspace / "variants" / "prebuilt.yaml").write_text(PREBUILT_YAML.format(index="http://127.0.0.1:9/simple/"))
    with sourced_recipe(amd_workspace, tmp_path) as upstream:
        fetched = run("fetch", "--arch", "gfx1151", "sourced", "rocm-sdk", "-q")
        assert fetched.code == 2 and "Traceback" not in fetched.err
        assert "cannot reach http://127.0.0.1:9/simple/" in fetched.err
        assert "not locked: rocm-sdk will not be fetched" in fetched.err
        assert any(line.split()[:2] == ["fetched", "sourced"] for line in fetched.out.splitlines()), fetched.out
        built = run("build-all", "sourced", "rocm-sdk", "--arch", "gfx1151", "-q")
        assert built.code == 1, built.err
        assert "not locked: rocm-sdk, rocm-sdk-device-gfx1151, pytorch, rocm-stack will not be built" in built.err
        assert "error: rocm-stack: needs pytorch, whose files are not locked" in built.err
        assert [p.name for p in (amd_workspace / "channel" / "linux-64").glob("sourced-*.conda")]
        assert not list((amd_workspace / "channel").rglob("rocm-sdk-*.conda"))
        assert upstream.downloads["upstream-1.0.tar.gz"] == 1


def test_a_builds_own_lock_downloads_only_its_architectures_files(therock, run, amd_workspace):  # noqa: F811
    """fetch (as build-all) locking first for gfx1151 downloads gfx1151's device wheels, not every GPU's: those of
    gfx908 stay unlocked, said in one line, until a full `pins --lock`."""
    fetched = run("fetch", "--arch", "gfx1151", "-q")
    assert fetched.code == 0, fetched.err
    downloaded = {path.rsplit("/", 1)[-1] for path in file_downloads(therock)}
    assert any("gfx1151" in name for name in downloaded) and not any("gfx908" in name for name in downloaded)
    assert "not locked: 2 file(s) of other architectures (no sha256 on the index" in fetched.out
    lock = yaml.safe_load((amd_workspace / "variants" / "prebuilt-lock.yaml").read_text())["artifacts"]
    assert "gfx908" not in lock["rocm_sdk_device"] and "gfx1151" in lock["rocm_sdk_device"]
    assert run("pins", "--lock", "--arch", "gfx1151").code == 0  # the same: nothing more is downloaded
    assert {path.rsplit("/", 1)[-1] for path in file_downloads(therock)} == downloaded
    assert run("pins", "--lock").code == 0  # a full lock downloads the rest, once each
    assert set(file_downloads(therock).values()) == {1} and any("gfx908" in path for path in file_downloads(therock))
