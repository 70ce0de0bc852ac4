"""What a channel holds can be trusted: a damaged package is never "up to date", and every file the team
reads is readable by the team (the umask's mode, not tempfile's 0600)."""
from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

ARCH = "gfx1151"


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


@pytest.fixture
def built(orchestrate, channel):
    result = orchestrate("build-all", "--arch", ARCH, "--no-tests", "-q")
    assert result.code == 0, result.err
    return channel


def package(channel, name: str) -> Path:
    return next(p for p in channel.path.glob("*/*.conda") if p.name.startswith(f"{name}-"))


def truncate(path: Path, keep: int = 100) -> None:
    data = path.read_bytes()
    path.write_bytes(data[:keep])


def row(out: str, name: str) -> str:
    return next(line for line in out.splitlines() if line.split()[:1] == [name] or f" {name} " in line)


def modes(folder: Path) -> dict[str, str]:
    """Mode of every package, index and manifest file under folder (.superseded/ and the lock aside)."""
    return {str(p.relative_to(folder)): oct(stat.S_IMODE(p.stat().st_mode)) for p in folder.rglob("*")
            if p.is_file() and (p.suffix in (".conda", ".json", ".zst") or p.name.endswith(".tar.bz2"))
            and ".superseded" not in p.parts}


def test_build_all_rebuilds_a_truncated_package_and_says_why(orchestrate, built):
    channel = built
    triton = package(channel, "triton")
    truncate(triton)

    status = orchestrate("status", "--arch", ARCH, "-q")
    assert status.code == 0
    assert "damaged in channel" in row(status.out, "triton")
    assert "gfx1151: 8 package(s)" in status.out and "1 missing or damaged" in status.out

    plan = orchestrate("plan", "--arch", ARCH, "-q")
    assert "will build" in row(plan.out, "triton")
    assert "damaged in channel: size differs from manifest" in row(plan.out, "triton")

    result = orchestrate("build-all", "--arch", ARCH, "--no-tests", "-q")
    assert result.code == 0, result.err
    assert "moved linux-64/" + triton.name + " to .superseded/" in result.out
    line = row(result.out.split("Summary for")[1], "triton")
    assert " built " in line and "damaged in channel: size differs from manifest" in line
    assert "1 built, 9 up to date" in result.out  # its dependents have the same input hashes: kept
    assert triton.stat().st_size == channel.manifest()[f"linux-64/{triton.name}"].package_bytes > 100
    [kept] = channel.path.glob(f".superseded/*/linux-64/{triton.name}")  # nothing built is deleted
    assert kept.stat().st_size == 100
    assert orchestrate("status", "--arch", ARCH, "-q").out.count("gfx1151: 9 package(s)") == 1


def test_build_all_replaces_a_deleted_package_and_says_why(orchestrate, built):
    channel = built
    package(channel, "vllm").unlink()
    result = orchestrate("build-all", "--arch", ARCH, "--no-tests", "-q")
    assert result.code == 0, result.err
    line = row(result.out.split("Summary for")[1], "vllm")
    assert " built " in line and "missing from channel" in line
    assert package(channel, "vllm").is_file()


def test_local_channel_and_folder_publish_are_readable_by_the_team(orchestrate, workspace, umask_022, tmp_path):
    result = orchestrate("build-all", "--arch", ARCH, "--no-tests", "-q")
    assert result.code == 0, result.err
    local = modes(workspace / "channel")
    assert any(f.endswith(".conda") for f in local) and "orchestrate-manifest.json" in local
    assert any(f.endswith("repodata.json") for f in local)
    assert set(local.values()) == {"0o644"}, local

    shared = tmp_path / "shared"
    result = orchestrate("publish", "--to", shared.as_uri())
    assert result.code == 0, result.err
    published = modes(shared)
    assert any(f.endswith(".conda") for f in published)
    assert set(published.values()) == {"0o644"}, published


def test_build_all_gives_packages_of_older_runs_the_umask_mode(orchestrate, built, umask_022):
    channel = built
    triton = package(channel, "triton")
    triton.chmod(0o600)  # what earlier versions left in every channel
    assert orchestrate("build-all", "--arch", ARCH, "--no-tests", "-q").code == 0
    assert oct(stat.S_IMODE(triton.stat().st_mode)) == "0o644"
