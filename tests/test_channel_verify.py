"""What a channel holds can be trusted: a damaged package is never "up to date", and every file the team
reads is readable by the team (the umask's mode, not tempfile's 0600)."""
from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

ARCH = "gfx1151"


@pytest.fixture(params=[0o022, 0o027], ids=["umask 022", "umask 027"])
def umask(request):
    """Run under this umask, restored after; yields the mode a plain create gives (0644 under 022)."""
    old = os.umask(request.param)
    try:
        yield oct(0o666 & ~request.param)
    finally:
        os.umask(old)


@pytest.fixture
def built(orchestrate, channel):
    result = orchestrate("build-all", "--arch", ARCH, "--no-tests", "-q")
    assert result.code == 0, result.err
    return channel


def package(channel, name: str) -> Path:
    """The package file of `name` in a Channel or a channel folder."""
    root = getattr(channel, "path", channel)
    return next(p for p in root.glob("*/*.conda") if p.name.startswith(f"{name}-"))


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

    status = orchestrate("status", "-q")
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
    assert orchestrate("status", "-q").out.count("gfx1151: 9 package(s)") == 1


def test_build_replaces_a_deleted_package_and_says_why(orchestrate, built):
    channel = built
    package(channel, "vllm").unlink()
    result = orchestrate("build", "vllm", "--arch", ARCH, "--no-tests", "-q")
    assert result.code == 0, result.err
    line = row(result.out.split("Summary for")[1], "vllm")
    assert " built " in line and "missing from channel" in line
    assert package(channel, "vllm").is_file()


def test_local_channel_and_folder_publish_are_readable_by_the_team(orchestrate, workspace, umask, tmp_path):
    result = orchestrate("build-all", "--arch", ARCH, "--no-tests", "-q")
    assert result.code == 0, result.err
    local = modes(workspace / "channel")
    assert any(f.endswith(".conda") for f in local) and "orchestrate-manifest.json" in local
    assert any(f.endswith("repodata.json") for f in local)
    assert set(local.values()) == {umask}, local

    shared = tmp_path / "shared"
    result = orchestrate("publish", "--to", shared.as_uri())
    assert result.code == 0, result.err
    published = modes(shared)
    assert any(f.endswith(".conda") for f in published)
    assert set(published.values()) == {umask}, published


def test_build_all_gives_packages_of_older_runs_the_umask_mode(orchestrate, built, umask):
    channel = built
    triton = package(channel, "triton")
    triton.chmod(0o600)  # what earlier versions left in every channel
    assert orchestrate("build-all", "--arch", ARCH, "--no-tests", "-q").code == 0
    assert oct(stat.S_IMODE(triton.stat().st_mode)) == umask


# -- orchestrate verify -----------------------------------------------------------------------------------

def damage_truncated(channel) -> str:
    triton = package(channel, "triton")
    truncate(triton)
    return f"linux-64/{triton.name}"


def damage_deleted(channel) -> str:
    vllm = package(channel, "vllm")
    vllm.unlink()
    return f"linux-64/{vllm.name}"


def damage_unlisted(channel) -> str:
    stray = channel.path / "noarch" / "stray-1.0-h0_0.conda"
    stray.write_bytes(package(channel, "rocm-stack-check").read_bytes())
    return "noarch/stray-1.0-h0_0.conda"


def damage_wrong_entry(channel) -> str:
    manifest_path = channel.path / "orchestrate-manifest.json"
    manifest = json.loads(manifest_path.read_text())
    file = f"linux-64/{package(channel, 'pytorch').name}"
    manifest["packages"][file]["sha256"] = "0" * 64
    manifest_path.write_text(json.dumps(manifest))
    return file


def damage_index(channel) -> str:
    (channel.path / "linux-64" / "repodata.json").write_text('{"packages.conda": {"broken')
    return "linux-64/repodata.json"


DAMAGES = {
    # name: (damage, what the line says, the fix it names)
    "truncated package": (damage_truncated, "but the index lists", "orchestrate build-all --arch gfx1151"),
    "deleted package": (damage_deleted, "but not there", "orchestrate build-all --arch gfx1151"),
    "unlisted file": (damage_unlisted, "not listed in noarch/repodata.json", "orchestrate build-all"),
    "manifest entry with the wrong sha256": (damage_wrong_entry, "the build-cache lookup records sha256 000000000000",
                                             ".superseded/"),
    "damaged repodata.json": (damage_index, "does not parse", "orchestrate build-all"),
}


def problem_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if " — " in line]


def test_verify_a_clean_channel_exits_0(orchestrate, built):
    result = orchestrate("verify")
    assert result.code == 0, result.out + result.err
    assert "10 package(s) and 10 lookup entries checked; every file is there" in result.out
    assert not problem_lines(result.out)


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_verify_names_each_problem_and_its_fix_works(orchestrate, built, damage):
    channel = built
    do, says, fix = DAMAGES[damage]
    file = do(channel)
    result = orchestrate("verify")
    assert result.code == 1, result.out + result.err
    [line] = problem_lines(result.out)
    assert line.startswith(f"{file}: ") and says in line and fix in line, line
    assert "Traceback" not in result.out + result.err
    assert "1 problem(s)" in result.err

    if "folder, then run" in line:  # the fix says to move the package aside first
        kept = channel.path / ".superseded" / "by-hand" / file
        kept.parent.mkdir(parents=True)
        (channel.path / file).rename(kept)
    rebuilt = orchestrate("build-all", "--arch", ARCH, "--no-tests", "-q")
    assert rebuilt.code == 0, rebuilt.err
    after = orchestrate("verify")
    assert after.code == 0, after.out


def test_verify_json_for_scripts(orchestrate, built):
    channel = built
    truncated, deleted = damage_truncated(channel), damage_deleted(channel)
    result = orchestrate("verify", "--json")
    assert result.code == 1
    report = json.loads(result.out)
    assert report["ok"] is False and report["packages"] == 10
    assert {(p["file"], p["kind"]) for p in report["problems"]} == {(truncated, "damaged"), (deleted, "missing")}
    assert all(p["fix"] for p in report["problems"])

    quick = orchestrate("verify", "--json", "--channel", str(channel.path), "--quick")
    assert quick.code == 1 and json.loads(quick.out)["notes"] == ["--quick: sizes compared, sha256 not"]
    missing = orchestrate("verify", "--json", "--channel", str(channel.path / "nowhere"))
    assert missing.code == 2 and "does not exist" in json.loads(missing.out)["error"]


@pytest.mark.parametrize("where", ["not a channel", "missing folder", "unreachable http", "s3 without endpoint"])
def test_verify_what_cannot_be_read_is_one_line(orchestrate, tmp_path, where):
    from share_helpers import free_port

    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "readme.txt").write_text("not a channel")
    argument = {"not a channel": ["--channel", tmp_path / "notes"],
                "missing folder": ["--from", (tmp_path / "nowhere").as_uri()],
                "unreachable http": ["--from", f"http://127.0.0.1:{free_port()}/channel"],
                "s3 without endpoint": ["--from", "s3://team/stack", "--s3-endpoint-url",
                                        f"http://127.0.0.1:{free_port()}"]}[where]
    result = orchestrate("verify", *argument)
    assert result.code == 2, result.out + result.err
    lines = [line for line in result.err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.err
    assert "Traceback" not in result.err
    assert [p.name for p in (tmp_path / "notes").iterdir()] == ["readme.txt"]  # left as it was


def test_verify_a_published_folder(orchestrate, built, tmp_path):
    shared = tmp_path / "shared"
    assert orchestrate("publish", "--to", shared.as_uri()).code == 0
    clean = orchestrate("verify", "--from", shared.as_uri())
    assert clean.code == 0, clean.out + clean.err

    file = damage_truncated(shared)
    result = orchestrate("verify", "--from", shared.as_uri())
    assert result.code == 1
    [line] = problem_lines(result.out)
    assert line.startswith(f"{file}: size 100 but the index lists")
    assert f"orchestrate publish --to {shared.as_uri()}" in line
    assert orchestrate("publish", "--to", shared.as_uri()).code == 0  # what the line says to do
    assert orchestrate("verify", "--from", shared.as_uri()).code == 0


def test_verify_an_s3_channel(orchestrate, built, monkeypatch):
    from share_helpers import S3_ENV, moto_server, s3_client

    with moto_server() as endpoint:
        client = s3_client(endpoint)
        client.create_bucket(Bucket="team")
        for name, value in {**S3_ENV, "AWS_ENDPOINT_URL": endpoint}.items():
            monkeypatch.setenv(name, value)
        assert orchestrate("publish", "--to", "s3://team/stack").code == 0
        clean = orchestrate("verify", "--from", "s3://team/stack", "--json")
        assert clean.code == 0, clean.out
        assert json.loads(clean.out)["packages"] == 10 and json.loads(clean.out)["entries"] == 10

        file = f"linux-64/{package(built, 'aiter').name}"
        client.delete_object(Bucket="team", Key=f"stack/{file}")
        client.put_object(Bucket="team", Key="stack/noarch/stray-1.0-h0_0.conda", Body=b"not a package")
        flipped = f"linux-64/{package(built, 'triton').name}"
        body = bytearray(package(built, "triton").read_bytes())
        body[500] ^= 1  # same size, other bytes: only the sha256 tells
        client.put_object(Bucket="team", Key=f"stack/{flipped}", Body=bytes(body))
        result = orchestrate("verify", "--from", "s3://team/stack")
        assert result.code == 1
        lines = problem_lines(result.out)
        assert len(lines) == 3, result.out
        assert lines[0].startswith(f"{file}: listed in linux-64/repodata.json but not there")
        assert "orchestrate publish --to s3://team/stack" in lines[0]
        assert lines[1].startswith(f"{flipped}: sha256 ") and "remove it there, then publish it again" in lines[1]
        assert lines[2].startswith("noarch/stray-1.0-h0_0.conda: not listed in noarch/repodata.json")
        assert orchestrate("verify", "--from", "s3://team/stack", "--quick").out.count(" — ") == 2


def test_verify_over_http_names_a_damaged_package(built, tmp_path):
    import sys

    from share_helpers import free_port, orchestrate as child, running

    file = damage_truncated(built)
    port = free_port()
    command = [sys.executable, "-m", "orchestrate", "serve", "--channel", str(built.path), "--port", str(port)]
    with running(command, port):
        result = child("verify", "--from", f"http://127.0.0.1:{port}", cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    [line] = problem_lines(result.stdout)
    assert line.startswith(f"{file}: size 100 but the index lists")
    assert f"`orchestrate publish --to` the folder or bucket behind http://127.0.0.1:{port}" in line
    assert "cannot list its files (HTTP)" in result.stdout


def test_build_all_takes_a_truncated_package_again_from_the_cache_and_says_why(orchestrate, built, tmp_path):
    shared = tmp_path / "shared"
    assert orchestrate("publish", "--to", shared.as_uri()).code == 0
    pytorch = package(built, "pytorch")
    truncate(pytorch)
    result = orchestrate("build-all", "--arch", ARCH, "--no-tests", "-q", "--cache-channel", shared.as_uri())
    assert result.code == 0, result.err
    line = row(result.out.split("Summary for")[1], "pytorch")
    assert "from cache" in line and "damaged in channel: size differs from manifest" in line
    assert f"same input hash in {shared.as_uri()}" in line
    assert pytorch.read_bytes() == package(shared, "pytorch").read_bytes()
    assert orchestrate("verify").code == 0


def test_verify_names_a_damaged_manifest(orchestrate, built):
    (built.path / "orchestrate-manifest.json").write_text('{"packages": {')
    result = orchestrate("verify", "--json")
    assert result.code == 1
    [problem] = json.loads(result.out)["problems"]
    assert problem["file"] == "orchestrate-manifest.json" and problem["kind"] == "damaged-lookup"
    assert "restore it from a backup" in problem["fix"]


def test_verify_says_when_a_build_is_writing_the_channel(orchestrate, built):
    built.lock("orchestrate build-all (a test)")
    try:
        result = orchestrate("verify")
    finally:
        built.unlock()
    assert result.code == 2 and "is in use by" in result.err and "Traceback" not in result.err


def test_publish_leaves_a_damaged_package_behind_and_says_so(orchestrate, built, tmp_path):
    shared = tmp_path / "shared"
    file = damage_truncated(built)
    result = orchestrate("publish", "--to", shared.as_uri())
    assert result.code == 0, result.err
    assert f"not publishing {file}: damaged in channel: size differs from manifest" in result.err
    assert not (shared / file).exists()
    assert orchestrate("verify", "--from", shared.as_uri()).code == 0
