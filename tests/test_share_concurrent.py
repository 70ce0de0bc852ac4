"""A team channel that four machines publish into, one after another, all at once, and killed midway.

Four workspaces build the test graph for gfx1151, gfx1100, gfx942 and gfx90a, each on its own, as four
machines do: each makes its own copy of the arch-neutral package (rocm-stack-check), with the same input
hash but other bytes (builds record their time and paths). Each machine's pytorch carries a quick benchmark
result (share/bench.py), which every publish must keep too. Targets are folders and a moto S3 server on
127.0.0.1; nothing else is contacted.
"""
from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from orchestrate.channel import Channel
from orchestrate.share.bench import BENCH_DIR, keep_in_local_channel
from orchestrate.share.lookup import read_lookup
from orchestrate.share.lookup import read_index
from orchestrate.share.targets import FolderStore, parse_target
from share_helpers import EXIT_WITHOUT_FINALIZING, S3_ENV, make_workspace, moto_server, orchestrate, s3_client

pytestmark = pytest.mark.timeout(300)
ARCHES = ("gfx1151", "gfx1100", "gfx942", "gfx90a")
ROUNDS = 3
BUCKET = "team"


@pytest.fixture(scope="module")
def machines(tmp_path_factory) -> dict[str, tuple[Path, Path]]:
    """arch -> (workspace, local channel), each built on its own, as on four machines."""
    built = {}
    for arch in ARCHES:
        root = tmp_path_factory.mktemp(arch)
        workspace, channel = make_workspace(root), root / "channel"
        result = orchestrate("build-all", "--workspace", str(workspace), "--channel", str(channel), "--arch", arch,
                             "--no-tests", timeout=300)
        assert result.returncode == 0, result.stderr
        keep_benchmark(channel, arch, root)
        built[arch] = (workspace, channel)
    noarch = {sha(channel / "noarch") for _, channel in built.values()}
    assert len(noarch) == len(ARCHES), "the premise: each machine's arch-neutral package has other bytes"
    return built


def keep_benchmark(channel: Path, arch: str, scratch: Path) -> None:
    """What build-all keeps when pytorch's recipe test ran the quick benchmark on this machine's GPU (the
    builds above skip the tests: running them four times costs seconds, and test_share_bench covers that)."""
    kept = scratch / "pytorch.bench.json"
    kept.write_text(json.dumps({"schema": "rocm-stack-check/bench/1", "created": "2026-11-25T12:00:00+00:00",
                                "expect_arch": arch, "platform": {"arch": arch}, "rows": [],
                                "speedup": {"passed": True, "results": []}}))
    entry = next(e for e in Channel(channel).manifest().values() if e.name == "pytorch")
    assert keep_in_local_channel(channel, kept, entry, arch)


def sha(folder: Path) -> str:
    from orchestrate.channel import sha256_of

    return sha256_of(next(folder.glob("*.conda")))


@pytest.fixture(scope="module")
def s3():
    with moto_server() as endpoint:
        yield endpoint


def publish_command(machines, arch: str, target: str) -> list[str]:
    workspace, channel = machines[arch]
    return ["publish", "--workspace", str(workspace), "--channel", str(channel), "--to", target]


def s3_env(endpoint: str) -> dict:
    return {**S3_ENV, "AWS_ENDPOINT_URL": endpoint}


@contextlib.contextmanager
def environment(env: dict):
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for key, value in saved.items():
            os.environ.pop(key) if value is None else os.environ.__setitem__(key, value)


def store_for(target: str, env: dict):
    with environment(env):
        return parse_target(target, {})


def local_channels(machines) -> list[Path]:
    return [channel for _, channel in machines.values()]


def expected_files(machines) -> set[str]:
    """Every machine's own packages, and the arch-neutral one once."""
    files = set()
    for _, channel in machines.values():
        files |= {f"{p.parent.name}/{p.name}" for p in channel.glob("*/*.conda")}
    return files


def assert_whole(store, expected: set[str], channels) -> None:
    """What a teammate relies on: the index lists every file, each whole; the lookup covers each one."""
    listed, damaged = read_index(store)
    assert not damaged
    assert set(listed) == expected
    for subdir in ("noarch", "linux-64"):  # pixi reads the .zst first: it must list the same
        raw = store.read(f"{subdir}/repodata.json.zst")
        data = json.loads(unzstd(raw) or "{}") if raw is not None else {}
        if data:
            zst = {f"{subdir}/{f}" for key in ("packages", "packages.conda") for f in data.get(key) or {}}
            assert zst == {f for f in expected if f.startswith(f"{subdir}/")}, f"{subdir}/repodata.json.zst is stale"
    for file, record in listed.items():
        assert store.size(file) == record["size"], f"{file} is not whole"
        assert store.sha256(file) == record["sha256"], f"{file} is not what the index says"
    lookup = read_lookup(store)
    assert not lookup.damaged
    for file, record in listed.items():
        assert lookup.entries[file]["sha256"] == record["sha256"], f"the lookup entry of {file} is wrong"
    manifest = json.loads(store.read("orchestrate-manifest.json"))["packages"]
    assert set(manifest) == expected, "orchestrate-manifest.json (what HTTP readers use) misses entries"
    assert_benchmarks_and_page(store, expected, channels)


def assert_benchmarks_and_page(store, expected: set[str], channels) -> None:
    """The benchmark results the publishing `channels` kept for the expected packages are there, as kept;
    the page lists every package."""
    for channel in channels:
        for path in sorted((channel / BENCH_DIR).rglob("*.json")):
            document = json.loads(path.read_text())
            if f"{document['subdir']}/{document['package']}" in expected:
                assert store.read(str(path.relative_to(channel))) == path.read_bytes(), f"{path.name} was lost"
    page, data = store.read("index.html"), store.read("channel-page.json")
    assert page is not None and data is not None, "the channel has no page"
    for file in expected:
        build = file.rsplit("-", 1)[-1].removesuffix(".conda")
        assert build.encode() in data, f"channel-page.json does not list {file}"


def run_at_once(commands: list[list[str]], env: dict) -> list[subprocess.CompletedProcess]:
    processes = [subprocess.Popen([sys.executable, "-c", EXIT_WITHOUT_FINALIZING, *command],
                                  env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True) for command in commands]
    results = []
    for process, command in zip(processes, commands):
        out, err = process.communicate(timeout=240)
        results.append(subprocess.CompletedProcess(command, process.returncode, out, err))
    return results


def test_four_machines_one_after_another_all_succeed(machines, tmp_path):
    target = (tmp_path / "team").as_uri()
    outputs = []
    for arch in ARCHES:
        result = orchestrate(*publish_command(machines, arch, target))
        assert result.returncode == 0, f"{arch}: {result.stderr}"
        outputs.append(result.stdout)
    # the first machine's arch-neutral package stays; the others' copies have the same input hash
    assert all("1 kept the channel's copy (same input hash)" in out for out in outputs[1:])
    store = FolderStore(tmp_path / "team")
    assert_whole(store, expected_files(machines), local_channels(machines))
    first_noarch = sha(machines[ARCHES[0]][1] / "noarch")
    assert {r["sha256"] for f, r in read_index(store)[0].items() if f.startswith("noarch/")} == {first_noarch}


@pytest.mark.parametrize("kind", ["folder", "s3"])
def test_four_machines_at_once_lose_nothing(machines, kind, s3, tmp_path):
    for round_ in range(ROUNDS):
        if kind == "folder":
            target, env = (tmp_path / f"round{round_}").as_uri(), {}
        else:
            s3_client(s3).create_bucket(Bucket=f"{BUCKET}{round_}")
            target, env = f"s3://{BUCKET}{round_}/stack", s3_env(s3)
        results = run_at_once([publish_command(machines, arch, target) for arch in ARCHES], env)
        for arch, result in zip(ARCHES, results):
            assert result.returncode == 0, f"round {round_}, {arch}: {result.stderr}"
            assert "published" in result.stdout
        assert_whole(store_for(target, env), expected_files(machines), local_channels(machines))
        verified = orchestrate("verify", "--from", target, env=env)  # what a teammate would run
        assert verified.returncode == 0 and "every file is there, whole and listed" in verified.stdout, verified.stderr


@pytest.mark.parametrize("kind", ["folder", "s3"])
def test_a_fresh_machine_using_the_team_channel_as_its_cache_builds_nothing(machines, kind, s3, tmp_path):
    if kind == "folder":
        target, env = (tmp_path / "team").as_uri(), {}
    else:
        s3_client(s3).create_bucket(Bucket=f"{BUCKET}-cache")
        target, env = f"s3://{BUCKET}-cache/stack", s3_env(s3)
    for result in run_at_once([publish_command(machines, arch, target) for arch in ARCHES], env):
        assert result.returncode == 0, result.stderr
    workspace = make_workspace(tmp_path / "fresh-machine")  # nothing built, nothing cached
    fresh = tmp_path / "fresh"
    result = orchestrate("build-all", "--workspace", str(workspace), "--channel", str(fresh), "--arch", "gfx1100",
                         "--no-tests", "--cache-channel", target, env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "10 from cache" in result.stdout and "built " not in result.stdout


def unzstd(raw: bytes) -> bytes | None:
    """repodata.json.zst decompressed by the zstd tool (on every CI image); None where it is missing."""
    if not shutil.which("zstd"):
        return None
    return subprocess.run(["zstd", "-dc"], input=raw, capture_output=True, check=True).stdout


def listed_files_are_whole(store) -> None:
    """The index (repodata.json and the .zst pixi reads first) lists only files that are there, whole."""
    for subdir in ("noarch", "linux-64"):
        for name in ("repodata.json", "repodata.json.zst"):
            raw = store.read(f"{subdir}/{name}")
            if raw is not None and name.endswith(".zst"):
                raw = unzstd(raw)
            if raw is None:
                continue
            data = json.loads(raw)
            for key in ("packages", "packages.conda"):
                for file, record in (data.get(key) or {}).items():
                    assert store.size(f"{subdir}/{file}") == record["size"], f"{subdir}/{name} lists {file}"


def target_for(kind: str, name: str, s3: str, tmp_path: Path) -> tuple[str, dict]:
    if kind == "folder":
        return (tmp_path / name).as_uri(), {}
    s3_client(s3).create_bucket(Bucket=f"{BUCKET}-{name}")
    return f"s3://{BUCKET}-{name}/stack", s3_env(s3)


def kill_at_random_point(command: list[str], env: dict, chooser: random.Random, packages: int) -> str:
    """Start a publish and SIGKILL it at a random point of its work: after the k-th "uploading" line it
    prints (k from 1 to all of them), then a random moment later (within the next upload, or during the
    index and lookup writes after the last one). Returns where it was."""
    process = subprocess.Popen([sys.executable, "-c", EXIT_WITHOUT_FINALIZING, *command],
                               env={**os.environ, **env, "PYTHONUNBUFFERED": "1"}, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True)
    wanted, seen = chooser.randint(1, packages), 0
    while seen < wanted:
        line = process.stdout.readline()
        if not line:
            break
        seen += line.startswith("uploading ")
    time.sleep(chooser.uniform(0, 0.2 if wanted < packages else 1.0))  # after the last: index, lookup
    process.send_signal(signal.SIGKILL)
    process.wait()
    process.stdout.close()
    return f"after upload {seen} of {packages}"


@pytest.mark.parametrize("kind", ["folder", "s3"])
def test_a_publish_killed_at_random_points_is_completed_by_the_next(machines, kind, s3, tmp_path):
    """SIGKILL at random points of two machines' publishes: the index never lists a missing or partial
    file, and running the publishes again completes the channel."""
    seed = random.randrange(1 << 30)
    chooser = random.Random(seed)
    for attempt in range(3):
        target, env = target_for(kind, f"killed{attempt}", s3, tmp_path)
        store = store_for(target, env)
        for arch in ARCHES[:2]:
            packages = len(list(machines[arch][1].glob("*/*.conda")))
            where = kill_at_random_point(publish_command(machines, arch, target), env, chooser, packages)
            try:
                listed_files_are_whole(store)
            except AssertionError as exc:
                raise AssertionError(f"seed {seed}, {arch} killed {where}: {exc}") from None
        for arch in ARCHES[:2]:
            rerun = orchestrate(*publish_command(machines, arch, target), env=env)
            assert rerun.returncode == 0, f"seed {seed}: {rerun.stderr}"
        whole = {f for f in expected_files(machines) if f.startswith("noarch/") or
                 any(a in f for a in ARCHES[:2])}
        assert_whole(store, whole, local_channels(machines))


def test_ci_builds_the_shared_packages_once_and_the_architectures_take_them(machines, tmp_path):
    """build-channel.yml's flow: `build-all --arch-neutral` builds what every architecture shares, and
    publishes it; each architecture's job uses the channel as its cache, builds only its own packages and
    publishes at once."""
    workspace, _ = machines["gfx1151"]
    target = (tmp_path / "team").as_uri()
    neutral = tmp_path / "arch-neutral"
    first = orchestrate("build-all", "--arch-neutral", "--workspace", str(workspace), "--channel", str(neutral),
                        "--no-tests", timeout=300)
    assert first.returncode == 0, first.stderr
    assert [p.name for p in neutral.glob("*/*.conda")] == [p.name for p in machines["gfx1151"][1].glob("noarch/*")
                                                          if p.suffix == ".conda"]
    assert orchestrate("publish", "--workspace", str(workspace), "--channel", str(neutral), "--to", target).returncode == 0
    channels = {arch: tmp_path / arch for arch in ARCHES[:2]}
    for arch, channel in channels.items():
        result = orchestrate("build-all", "--workspace", str(workspace), "--channel", str(channel), "--arch", arch,
                             "--no-tests", "--cache-channel", target, timeout=300)
        assert result.returncode == 0, result.stderr
        assert "rocm-stack-check" not in {line.split()[1].rsplit("-", 2)[0] for line in result.stdout.splitlines()
                                          if line.startswith("built ")}
    results = run_at_once([["publish", "--workspace", str(workspace), "--channel", str(channel), "--to", target]
                           for channel in channels.values()], {})
    assert all(r.returncode == 0 for r in results), [r.stderr for r in results]
    whole = {f"{p.parent.name}/{p.name}" for channel in channels.values() for p in channel.glob("*/*.conda")}
    assert_whole(FolderStore(tmp_path / "team"), whole, channels.values())


def test_arch_neutral_takes_no_package_names(machines):
    workspace, channel = machines["gfx1151"]
    result = orchestrate("build-all", "--arch-neutral", "--workspace", str(workspace), "--channel", str(channel),
                         "vllm")
    assert result.returncode == 2 and result.stderr.strip().count("\n") == 0
    assert "--arch-neutral picks the packages itself" in result.stderr


def test_a_different_package_under_the_same_file_name_is_refused_and_nothing_is_uploaded(machines, tmp_path):
    """A recipe change that leaves the file name alone (a comment) gives another input hash: that is another
    package, and the channel's file is never replaced by it."""
    target = tmp_path / "team"
    original_workspace, original = machines["gfx1151"]
    assert orchestrate("publish", "--workspace", str(original_workspace), "--channel", str(original),
                       "--to", target.as_uri(), "rocm-stack-check").returncode == 0
    workspace = make_workspace(tmp_path / "changed")
    recipe = workspace / "recipes" / "rocm-stack-check" / "recipe.yaml"
    recipe.write_text(recipe.read_text() + "\n# a change that alters the input hash, not the file name\n")
    changed = tmp_path / "changed-channel"
    assert orchestrate("build-all", "--workspace", str(workspace), "--channel", str(changed), "--arch", "gfx1100",
                       "--no-tests", timeout=300).returncode == 0
    assert {p.name for p in changed.glob("noarch/*.conda")} == {p.name for p in original.glob("noarch/*.conda")}
    before = {p: p.read_bytes() for p in target.rglob("*") if p.is_file() and p.name != ".orchestrate-index.lock"}
    result = orchestrate("publish", "--workspace", str(workspace), "--channel", str(changed), "--to", target.as_uri())
    assert result.returncode == 2
    assert "already has noarch/rocm-stack-check-" in result.stderr and "different content" in result.stderr
    after = {p: p.read_bytes() for p in target.rglob("*") if p.is_file() and p.name != ".orchestrate-index.lock"}
    assert after == before, "a refused publish leaves the channel exactly as it was"


def test_a_killed_publishs_old_private_copies_are_tidied_and_fresh_ones_kept(machines, tmp_path):
    """A publish killed mid-copy leaves a hidden private copy; the next publish removes it once it is a day
    old, never one that another machine may still be writing."""
    workspace, channel = machines["gfx1151"]
    target = tmp_path / "team"
    (target / "linux-64").mkdir(parents=True)
    old = target / "linux-64" / ".pytorch-x.conda.host-1-1.incoming"
    fresh = target / "noarch" / ".y.conda.host-2-2.incoming"
    fresh.parent.mkdir()
    old.write_bytes(b"half a package")
    fresh.write_bytes(b"being written")
    os.utime(old, (time.time() - 2 * 86400,) * 2)
    assert orchestrate(*publish_command(machines, "gfx1151", target.as_uri())).returncode == 0
    assert not old.exists() and fresh.exists()


def test_s3_writes_are_create_only_and_updates_compare_and_swap(s3, tmp_path, monkeypatch):
    """The two S3 primitives the above rests on, against the S3 server: a second create of a name (a
    single PUT and one in parts) is refused and the first object stays; an update that another publisher
    overtakes between its read and its write is retried on top of the other's write, which is kept."""
    from orchestrate.share import s3 as s3_module

    s3_client(s3).create_bucket(Bucket=f"{BUCKET}-primitives")
    store = store_for(f"s3://{BUCKET}-primitives/stack", s3_env(s3))
    monkeypatch.setattr(s3_module, "MULTIPART_CHUNK", 5 << 20)  # S3's smallest part: a 12 MiB file goes in 3
    big = tmp_path / "big.conda"
    big.write_bytes(os.urandom(12 << 20))
    with environment(s3_env(s3)):
        assert store.create("linux-64/big.conda", local=big)
        assert not store.create("linux-64/big.conda", data=b"another machine's bytes")
        other = tmp_path / "other.conda"
        other.write_bytes(os.urandom(12 << 20))
        assert not store.create("linux-64/big.conda", local=other)
        assert store.read("linux-64/big.conda") == big.read_bytes()

        overtaken = []

        def add(name):
            def change(current: bytes | None) -> bytes:
                names = json.loads(current) if current else []
                if name == "ours" and not overtaken:  # another publisher writes between our read and write
                    overtaken.append(True)
                    store.update("list.json", add("theirs"))
                return json.dumps(sorted(set(names) | {name})).encode()
            return change

        store.update("list.json", add("ours"))
        assert json.loads(store.read("list.json")) == ["ours", "theirs"]


def test_a_package_server_holding_another_machines_copy_gets_no_second_one(machines, monkeypatch, capsys):
    """prefix.dev cannot be reached from a test: its channel is played by the first machine's channel
    (what the server would serve). The second machine's arch-neutral package has other bytes under the
    same name and the same input hash: nothing is uploaded, and the publish succeeds."""
    from rattler_build import upload

    from orchestrate import cli
    from orchestrate.share.targets import PackageServer

    uploads = []
    monkeypatch.setattr(upload, "upload_package_to_prefix", lambda files, *a, **kw: uploads.append(files))
    served = FolderStore(machines["gfx1151"][1])
    monkeypatch.setattr(PackageServer, "reader", lambda self: served)
    workspace, channel = machines["gfx1100"]
    code = cli.main(["publish", "--workspace", str(workspace), "--channel", str(channel), "--to", "prefix://team",
                     "rocm-stack-check"])
    assert code == 0 and uploads == []
    assert "(1 as the channel's copy, same input hash)" in capsys.readouterr().out
    # a package server keeps no other files: the benchmark result stays home, said in one line
    code = cli.main(["publish", "--workspace", str(workspace), "--channel", str(channel), "--to", "prefix://team",
                     "pytorch"])
    assert code == 0 and len(uploads) == 1
    out = capsys.readouterr().out
    assert "prefix://prefix.dev/team holds packages only: 1 benchmark result(s) and the channel page stay out" in out


def test_a_publish_waits_for_the_folder_lock_and_says_for_whom(machines, tmp_path):
    from orchestrate.channel import release_lock, take_lock

    target = tmp_path / "team"
    target.mkdir()
    held = take_lock(target / ".orchestrate-index.lock", "pid 1 on buildbox (orchestrate publish, since 10:00:00)")
    command = [sys.executable, "-c", EXIT_WITHOUT_FINALIZING, *publish_command(machines, "gfx1151", target.as_uri())]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (target / "orchestrate-manifest.d").is_dir():
            time.sleep(0.2)
        time.sleep(2)
        assert process.poll() is None, "the publish must wait for the lock, not index without it"
        assert not (target / "linux-64" / "repodata.json").exists()
    finally:
        release_lock(held)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    assert "waiting for pid 1 on buildbox (orchestrate publish, since 10:00:00) to finish indexing" in out
    assert_whole(FolderStore(target), {f"{p.parent.name}/{p.name}" for p in machines["gfx1151"][1].glob("*/*.conda")},
                 [machines["gfx1151"][1]])
