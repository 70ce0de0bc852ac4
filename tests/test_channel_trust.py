"""A shared channel is untrusted input (issue 31): a teammate with write access plants files in it, and the victim
reads it with `page`, `verify`, `build-all --cache-channel` (its cache layer) and `serve`. Each test plants its
attack in a channel in tmp_path, keeps a canary (the victim's ~/.bashrc and a credentials file) outside both the
channel and the victim's channel, and asserts what the victim's files and output show: no file outside changes,
no canary content leaks in, no command reaches the install snippet, no traceback, and `verify` names every bad
file. Nothing here builds: the channel is page_helpers' hand-written one (publish's side: test_share_bench)."""
from __future__ import annotations

import http.client
import json
import os
import shutil
import socket
import struct
import tempfile
import threading
import time
from pathlib import Path

import pytest

from orchestrate.channel import Channel, ManifestEntry
from orchestrate.cli import main
from orchestrate.share.bench import bench_path, encode_record, record_path, stem
from orchestrate.share.cache import RemoteCache
from orchestrate.share.lookup import entry_path
from orchestrate.share.store import FolderStore
from orchestrate.share.untrusted import MAX_BENCH_RESULTS, PLAIN_PATH, Refused, shown
from orchestrate.ui import Reporter
from page_helpers import H100_BENCH, write_channel

REPO = Path(__file__).resolve().parent.parent
SECRET = "CANARY-7f3e-do-not-leak"
PAYLOAD = "PWNED"  # what a planted command would write; it must reach no page, snippet or file
NESTED = b"[" * 3000 + b"]" * 3000  # 6 KB: Python's json gives a RecursionError on it


class World:
    """The victim's home (canaries), the team channel the attacker writes, and the victim's own channel."""

    def __init__(self, root: Path):
        self.root = root
        self.home = root / "home"
        (self.home / ".config" / "gcloud").mkdir(parents=True)
        self.bashrc = self.home / ".bashrc"
        self.bashrc.write_text("# the victim's own shell setup\n")
        self.credentials = self.home / ".config" / "gcloud" / "application_default_credentials.json"
        self.credentials.write_text(json.dumps({"private_key": SECRET}))
        self.team = write_channel(root / "share" / "mnt" / "team")
        self.victim = root / "victim" / "channel"
        self.outside = {p: p.read_bytes() for p in self.home.rglob("*") if p.is_file()}

    def listed(self, arch: str, name: str = "pytorch") -> str:
        """subdir/file of a package of `arch` the team channel lists."""
        packages = json.loads((self.team / "linux-64" / "repodata.json").read_text())["packages.conda"]
        return "linux-64/" + next(f for f in sorted(packages) if f.startswith(f"{name}-") and f"_{arch}_" in f)

    def entry(self, file: str) -> dict:
        return json.loads((self.team / entry_path(file)).read_text())

    def plant(self, relpath: str, data) -> Path:
        path = self.team / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data if isinstance(data, bytes) else json.dumps(data).encode())
        return path

    def assert_untouched(self, *written: Path) -> None:
        """No file outside the channels changed, and no canary content is in any channel file."""
        assert {p: p.read_bytes() for p in self.home.rglob("*") if p.is_file()} == self.outside
        assert not (self.root / PAYLOAD).exists()
        for folder in (self.team, self.victim, *written):
            for path in folder.rglob("*") if folder.exists() else ():
                if path.is_file() and not path.is_symlink():
                    assert SECRET.encode() not in path.read_bytes(), f"the canary leaked into {path}"


@pytest.fixture
def world(tmp_path, monkeypatch) -> World:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # never the real home, whatever goes wrong
    monkeypatch.chdir(tmp_path)
    return World(tmp_path)


def strict_json(text: str):
    def refuse(constant):
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def plant_everything(world: World) -> list[str]:
    """Every attack on the page and verify at once; returns the planted files verify must name."""
    bad = []
    gfx942, gfx1151 = world.listed("gfx942"), world.listed("gfx1151")
    rocm_942 = world.listed("gfx942", "rocm-sdk")
    # architecture names that carry commands, or are no name at all
    for name, arch in (("vllm", f"gfx942\ntouch {PAYLOAD}"), ("flash-attn", f"gfx942$(touch {PAYLOAD})"),
                       ("rocm-stack", ["gfx942"])):
        file = world.listed("gfx942", name)
        world.plant(entry_path(file), {**world.entry(file), "arch": arch})
        bad.append(entry_path(file))
    file = world.listed("gfx1151", "vllm")
    world.plant(entry_path(file), {**world.entry(file), "arch": 942})
    bad.append(entry_path(file))
    # timestamps that are none
    for (name, arch), built_at in zip((("rocm-sdk", "gfx1151"), ("flash-attn", "gfx1151"), ("rocm-stack", "gfx1151")),
                                      ("yesterday", 1e20, None)):
        file = world.listed(arch, name)
        raw = json.dumps({**world.entry(file), "built_at": built_at}).replace("null", "NaN")
        world.plant(entry_path(file), raw.encode())
        bad.append(entry_path(file))
    # a lookup entry that is a symlink to the publisher's credentials
    (world.team / entry_path(rocm_942)).unlink()
    (world.team / entry_path(rocm_942)).symlink_to(world.credentials)
    bad.append(entry_path(rocm_942))
    # speed-ups no page can draw
    document = json.loads(H100_BENCH.read_text())
    document["speedup"]["results"][0]["speedup"] = 12345.678
    for number, name in (("Infinity", "inf"), ("1e308", "huge"), ("1" * 400, "digits")):
        text = json.dumps({**document, "package": f"x-{name}-1-0.conda", "subdir": "linux-64"})
        text = text.replace("12345.678", number)
        bad.append(str(world.plant(f"bench/gfx942/x-{name}-1-0.json", text.encode()).relative_to(world.team)))
    # a bench folder named like a command, with a readable result in it
    pytorch_stem = stem(gfx942)
    bad.append(f"bench/gfx942$(touch {PAYLOAD})/{pytorch_stem}.json")
    world.plant(bad[-1], (world.team / bench_path("gfx942", gfx942)).read_bytes())
    # 6 KB of nesting as the manifest, a lookup entry, a bench record and a bench document
    bad.append(world.plant("orchestrate-manifest.json", NESTED).relative_to(world.team).as_posix())
    bad.append(world.plant(entry_path("linux-64/nested-1-0.conda"), NESTED).relative_to(world.team).as_posix())
    bad.append(world.plant(record_path("gfx1151", gfx1151), NESTED).relative_to(world.team).as_posix())
    bad.append(world.plant("bench/gfx1151/nested-1-0.json", NESTED).relative_to(world.team).as_posix())
    # a bench folder that is a symlink to a folder outside, holding a copy of the credentials
    elsewhere = world.root / "share" / "elsewhere"
    elsewhere.mkdir(parents=True)
    (elsewhere / "x-1-0.json").write_text(world.credentials.read_text())
    (world.team / "bench" / "gfx90a").symlink_to(elsewhere, target_is_directory=True)
    bad.append("bench/gfx90a")
    # a lookup folder that is a symlink to a folder outside, holding an entry whose host is the canary
    packages = json.loads((world.team / "noarch" / "repodata.json").read_text())["packages.conda"]
    noarch = "noarch/" + next(iter(packages))
    foreign = world.root / "share" / "foreign"
    foreign.mkdir()
    (foreign / f"{noarch.split('/')[1]}.json").write_text(json.dumps(
        {**world.entry(gfx942), "file": noarch, "arch": "noarch", "host": SECRET}))
    (world.team / "orchestrate-manifest.d" / "noarch").symlink_to(foreign, target_is_directory=True)
    bad.append("orchestrate-manifest.d/noarch")
    return bad


def test_page_and_verify_read_a_planted_channel_safely(world, capsys):
    bad = plant_everything(world)
    started = time.monotonic()
    code, out, err = run(capsys, "page", "--workspace", str(REPO), "--channel", str(world.team), "--url",
                         "https://team.example/stack", "-q")
    assert code == 0, err
    assert "Traceback" not in out + err
    html, data = ((world.team / name).read_text() for name in ("index.html", "channel-page.json"))
    page = strict_json(data)  # NaN, Infinity: never written
    assert PAYLOAD not in html and PAYLOAD not in data, "a planted command reached the page"
    lines = [page["install"]["channel_add"]] + [a["install"]["pixi_add"] + a["install"]["override"]
                                                for a in page["architectures"]]
    assert not any(c in line for line in lines for c in "$`;|&\\\n")
    assert PAYLOAD not in "".join(lines) + page["install"]["pixi_toml"]
    table = json.loads(json.dumps([a["name"] for a in page["architectures"]]))
    assert set(table) <= {"gfx1151", "gfx942", "gfx90a"} and "gfx1151" in table  # the good entries stay
    assert any("over" in p or "does not parse" in p or "refused" in p for p in page["problems"])
    for planted in bad:  # each refused file the page reads and can name by its plain name is listed on it
        if PLAIN_PATH.match(planted) and not planted.endswith(".record"):
            assert any(planted in p for p in page["problems"]), f"{planted} not among {page['problems']}"
    assert time.monotonic() - started < 20
    code, out, err = run(capsys, "verify", "--workspace", str(REPO), "--from", world.team.as_uri())
    assert code == 1 and "Traceback" not in out + err
    for planted in bad:
        assert shown(planted) in out, f"verify does not name {planted}:\n{out}"
    assert PAYLOAD not in out.replace(shown(f"gfx942$(touch {PAYLOAD})"), "")  # named, never as a command
    world.assert_untouched()


def test_a_bench_file_with_50000_results_costs_seconds_and_is_refused(world, capsys):
    document = json.loads(H100_BENCH.read_text())
    result, row = document["speedup"]["results"][0], document["rows"][0]
    results = [{**result, "dtype": f"t{i}"} for i in range(50_000)]
    many = {**document, "package": "x-1-0.conda", "subdir": "linux-64", "rows": [row] * 50_000,
            "speedup": {**document["speedup"], "results": results}}
    world.plant("bench/gfx942/x-many-1-0.json", many)  # ~20 MB: over the size limit
    compact = {**many, "package": "x-compact-1-0.conda", "rows": [],
               "speedup": {**many["speedup"], "results": results[:16_000]}}
    world.plant("bench/gfx942/x-compact-1-0.json", compact)  # under it: over the results limit
    started = time.monotonic()
    code, out, err = run(capsys, "page", "--workspace", str(REPO), "--channel", str(world.team), "-q")
    assert code == 0, err
    assert time.monotonic() - started < 10
    problems = strict_json((world.team / "channel-page.json").read_text())["problems"]
    assert any("x-many-1-0.json" in p and "bytes" in p for p in problems), problems
    assert any("x-compact-1-0.json" in p and str(MAX_BENCH_RESULTS) in p for p in problems), problems


def test_a_cache_build_never_writes_outside_its_channel_nor_takes_a_symlinked_result(world, capsys):
    """The record names `bench/evil/../../../../home/.bashrc`: from the team folder that is a file the attacker
    wrote; from the victim's channel, the victim's ~/.bashrc."""
    from orchestrate.runner import _keep_cached_benchmarks

    payload = b"touch " + PAYLOAD.encode() + b"\n"
    (world.root / "share" / "home").mkdir()
    (world.root / "share" / "home" / ".bashrc").write_bytes(payload)
    file = world.listed("gfx1151")
    traversal = "bench/evil/../../../../home/.bashrc"
    world.plant(record_path("gfx1151", file), encode_record(traversal, payload))
    symlinked = world.listed("gfx942")  # its result: a symlink to the credentials, with a matching record
    (world.team / bench_path("gfx942", symlinked)).unlink()
    (world.team / bench_path("gfx942", symlinked)).symlink_to(world.credentials)
    world.plant(record_path("gfx942", symlinked), encode_record(bench_path("gfx942", symlinked),
                                                               world.credentials.read_bytes()))
    world.victim.mkdir(parents=True)
    reporter = Reporter(quiet=True)
    cache = RemoteCache(world.team.as_uri(), FolderStore(world.team), reporter, ["gfx1151", "gfx942", "gfx90a"])
    for package in (file, symlinked):
        entry = ManifestEntry(**world.entry(package))
        _keep_cached_benchmarks(cache, Channel(world.victim), entry, reporter)
    out = capsys.readouterr()
    assert "Traceback" not in out.out + out.err
    assert shown(record_path("gfx1151", file)) in out.err and "symlink" in out.err
    world.assert_untouched()
    assert not list(world.victim.rglob("*.json")), "a refused result was kept"


def test_an_s3_key_with_dot_dot_is_refused_by_the_cache_and_named_by_verify(world, capsys, monkeypatch):
    from share_helpers import S3_ENV, moto_server, s3_client
    from orchestrate.runner import _keep_cached_benchmarks
    from orchestrate.share.s3 import S3Options, S3Store

    file = world.listed("gfx1151")
    traversal = "bench/evil/../../../../home/.bashrc"  # from the victim's channel: its ~/.bashrc
    payload = f"touch {PAYLOAD}\n".encode()
    for name, value in S3_ENV.items():
        monkeypatch.setenv(name, value)
    with moto_server() as endpoint:
        client = s3_client(endpoint)
        client.create_bucket(Bucket="team")
        for relpath in ("noarch/repodata.json", "linux-64/repodata.json", entry_path(file)):
            client.put_object(Bucket="team", Key=f"stack/{relpath}", Body=(world.team / relpath).read_bytes())
        client.put_object(Bucket="team", Key=f"stack/{traversal}", Body=payload)  # S3 keeps `..` literally
        client.put_object(Bucket="team", Key=f"stack/{record_path('gfx1151', file)}",
                          Body=encode_record(traversal, payload))
        client.put_object(Bucket="team", Key=f"stack/{entry_path('linux-64/../../x-1-0.conda')}", Body=b"{}")
        store = S3Store("team", "stack", S3Options(endpoint, "us-east-1", True))
        world.victim.mkdir(parents=True)
        reporter = Reporter(quiet=True)
        cache = RemoteCache("s3://team/stack", store, reporter, ["gfx1151", "gfx942", "gfx90a"])
        _keep_cached_benchmarks(cache, Channel(world.victim), ManifestEntry(**world.entry(file)), reporter)
        code, out, err = run(capsys, "verify", "--workspace", str(REPO), "--from", "s3://team/stack", "--quick",
                             "--s3-endpoint-url", endpoint)
    assert code == 1 and "Traceback" not in out + err
    assert shown(record_path("gfx1151", file)) in out
    assert shown(entry_path("linux-64/../../x-1-0.conda")) in out
    world.assert_untouched()
    assert not (world.victim / "bench").exists()


# -- serve ----------------------------------------------------------------------------------------------------
@pytest.fixture
def served(world, capsys):
    from orchestrate.share.serve import make_server

    (world.team / "visible.json").symlink_to(world.team / "noarch" / "repodata.json")
    (world.team / ".orchestrate-index.lock").write_text("pid 1 on builder")
    (world.team / "lock.txt").symlink_to(world.team / ".orchestrate-index.lock")
    (world.team / "creds.json").symlink_to(world.credentials)
    (world.team / "big.bin").write_bytes(os.urandom(8 << 20))
    server = make_server(world.team, "127.0.0.1", 0, Reporter())
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def status(port: int, path: str) -> int:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.putrequest("GET", path, skip_accept_encoding=True)
    connection.endheaders()
    answer = connection.getresponse()
    answer.read()
    connection.close()
    return answer.status


def test_serve_answers_bad_bytes_with_400_and_serves_only_visible_symlinks(served, capsys):
    assert status(served, "/%00") == 400
    assert status(served, "/noarch/repodata.json%00.html") == 400
    assert status(served, "/%ff%fe") == 400
    assert status(served, "/a%0a") == 400
    assert status(served, "/visible.json") == 200
    assert status(served, "/lock.txt") == 404  # a symlink to a hidden file inside the channel
    assert status(served, "/creds.json") == 404  # out of the channel
    assert status(served, "/noarch/repodata.json") == 200  # and the channel still serves
    out = capsys.readouterr()
    assert "Traceback" not in out.out + out.err


def test_serve_logs_a_client_that_goes_away_in_one_line(served, capsys):
    for _ in range(3):
        with socket.create_connection(("127.0.0.1", served)) as client:
            client.sendall(b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
            client.recv(1024)
            client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # a reset, now
    time.sleep(1)
    assert status(served, "/noarch/repodata.json") == 200
    out = capsys.readouterr()
    text = out.out + out.err
    assert "Traceback" not in text
    assert "went away" in text


def test_the_reference_states_the_limits_the_reader_applies():
    from orchestrate.share import untrusted

    reference = (REPO / "docs" / "reference.md").read_text()
    for constant, words in (("MAX_JSON_BYTES", f"{untrusted.MAX_JSON_BYTES >> 20} MiB (`MAX_JSON_BYTES`)"),
                            ("MAX_INDEX_BYTES", f"{untrusted.MAX_INDEX_BYTES >> 20} MiB (`MAX_INDEX_BYTES`)"),
                            ("MAX_JSON_DEPTH", f"{untrusted.MAX_JSON_DEPTH} levels (`MAX_JSON_DEPTH`)"),
                            ("MAX_BENCH_RESULTS", f"{untrusted.MAX_BENCH_RESULTS} (`MAX_BENCH_RESULTS`")):
        assert words in reference, f"docs/reference.md does not say {constant} is {words}"
    assert f"{untrusted.MAX_INT_DIGITS} digits" in reference and f"{untrusted.MAX_PATH_CHARS} characters" in reference
    assert f"{untrusted.MAX_PATH_PARTS} parts (`MAX_PATH_PARTS`" in reference
    from orchestrate.share.page.plot import MAX_BUILDS_SHOWN
    assert f"latest {MAX_BUILDS_SHOWN} builds (`MAX_BUILDS_SHOWN`" in reference


# -- variants a red team tried after the fix ------------------------------------------------------------------
def test_a_lock_file_hard_linked_to_the_victims_file_is_refused_not_truncated(world, capsys):
    """A hard link is no symlink: O_NOFOLLOW opens it, and writing the lock's holder into it would truncate the
    victim's ~/.bashrc (the same file). The store's lock (page --to, publish) and the channel's lock (page
    --channel, verify --channel) both refuse it in one line; nothing outside changes."""
    os.link(world.bashrc, world.team / ".orchestrate-index.lock")
    code, out, err = run(capsys, "page", "--workspace", str(REPO), "--to", world.team.as_uri(), "-q")
    assert code != 0 and "Traceback" not in out + err
    assert ".orchestrate-index.lock is a hard link to another file" in err and "remove it" in err
    (world.team / ".orchestrate.lock").unlink(missing_ok=True)
    os.link(world.bashrc, world.team / ".orchestrate.lock")
    code, out, err = run(capsys, "page", "--workspace", str(REPO), "--channel", str(world.team), "-q")
    assert code != 0 and ".orchestrate.lock is a hard link to another file" in err
    world.assert_untouched()


def test_fifos_and_sockets_in_a_channel_hang_no_reader_and_verify_names_each(world, capsys):
    """A FIFO where a file should be makes a naive reader wait forever; a socket cannot even be opened. The page
    and verify go on, and verify names each of them (the page lists the bench file among its problems)."""
    planted = ["bench/gfx942/fifo-1-0.json", entry_path("linux-64/fifo-1-0.conda"), "linux-64/fifo-1-0.conda",
               record_path("gfx942", world.listed("gfx942"))]
    for relpath in planted:
        (world.team / relpath).parent.mkdir(parents=True, exist_ok=True)
        (world.team / relpath).unlink(missing_ok=True)
        os.mkfifo(world.team / relpath)
    sock = socket.socket(socket.AF_UNIX)
    # bound at a short path, then moved: a socket's path has a limit of 107 bytes, and pytest's folders (xdist's
    # deeper still) can be longer
    short = Path(tempfile.mkdtemp(prefix="sock-", dir="/tmp")) / "s"
    sock.bind(str(short))
    os.rename(short, world.team / "bench" / "gfx942" / "sock-1-0.json")
    short.parent.rmdir()
    planted.append("bench/gfx942/sock-1-0.json")
    try:
        code, out, err = run(capsys, "page", "--workspace", str(REPO), "--channel", str(world.team), "-q")
        assert code == 0 and "Traceback" not in out + err, err
        problems = strict_json((world.team / "channel-page.json").read_text())["problems"]
        for relpath in ("bench/gfx942/fifo-1-0.json", "bench/gfx942/sock-1-0.json"):
            assert any(relpath in p for p in problems), problems
        code, out, err = run(capsys, "verify", "--workspace", str(REPO), "--from", world.team.as_uri(), "--quick")
    finally:
        sock.close()
    assert code == 1 and "Traceback" not in out + err
    for relpath in planted:
        assert relpath in out, f"verify does not name {relpath}:\n{out}"
    world.assert_untouched()


def test_verify_without_a_workspace_names_an_architecture_with_a_trailing_newline(world, capsys):
    """`$` in a regular expression also matches before a trailing newline: "gfx942\\n" looked like a name when no
    architecture table was at hand (verify outside a workspace)."""
    file = world.listed("gfx942", "vllm")
    world.plant(entry_path(file), {**world.entry(file), "arch": "gfx942\n"})
    code, out, err = run(capsys, "verify", "--from", world.team.as_uri(), "--quick")
    assert code == 1 and "Traceback" not in out + err
    assert f"{entry_path(file)}: refused" in out, out


def test_many_bench_files_of_one_series_cost_linear_time(world, capsys):
    """Many results per file were bounded; many FILES of one series, each with other (backend, dtype, pass) keys,
    made the history table and plot builds times keys large (quadratic: 100 files of 200 results, 74 MB of
    page). The plot and table show the latest builds and at most MAX_BENCH_RESULTS keys; the data keeps all."""
    from orchestrate.share.page.plot import MAX_BUILDS_SHOWN

    source = json.loads((world.team / bench_path("gfx942", world.listed("gfx942"))).read_text())
    result = source["speedup"]["results"][0]
    files = MAX_BUILDS_SHOWN * 2
    for i in range(files):
        world.plant(f"bench/gfx942/evil-{i}-1-0.json", {
            **source, "rows": [], "created": f"2026-11-20T{i // 60:02d}:{i % 60:02d}:00+00:00",
            "speedup": {**source["speedup"], "results": [{**result, "dtype": f"d{i}-{j}"} for j in range(200)]}})
    started = time.monotonic()
    code, out, err = run(capsys, "page", "--workspace", str(REPO), "--channel", str(world.team), "-q")
    assert code == 0, err
    assert time.monotonic() - started < 10
    assert (world.team / "index.html").stat().st_size < 20 << 20  # was over 100 MB at this count
    data = strict_json((world.team / "channel-page.json").read_text())
    [series] = [s for a in data["architectures"] if a["name"] == "gfx942" for s in a["bench"]["series"]
                if s["package"] == "pytorch"]
    assert len(series["history"]) >= files  # the data keeps every build
    assert f"the latest {MAX_BUILDS_SHOWN} of the {len(series['history'])} builds" in \
        (world.team / "index.html").read_text()


def test_serve_never_follows_a_symlinked_page_nor_waits_on_a_fifo(world, served):
    """`/` is answered with the channel's index.html: a symlink there to the victim's credentials was followed;
    a FIFO held the request forever."""
    (world.team / "index.html").unlink(missing_ok=True)
    (world.team / "index.html").symlink_to(world.credentials)
    os.mkfifo(world.team / "noarch" / "waits.json")
    connection = http.client.HTTPConnection("127.0.0.1", served, timeout=10)
    connection.request("GET", "/")
    answer = connection.getresponse()
    assert answer.status == 404 and SECRET.encode() not in answer.read()
    connection.close()
    assert status(served, "/noarch/waits.json") == 404
    assert status(served, "/noarch/x%E2%80%AEnosj.exe") == 400 and status(served, "/noarch/%C2%9B") == 400
    assert status(served, "/noarch/repodata.json") == 200


def test_names_and_values_with_bidirectional_or_c1_controls_are_refused_and_named(world, capsys):
    """`\\u202e` makes `x\\u202enosj.exe` read as `xexe.json`; `\\x9b` is a terminal's CSI (C1 control). Neither reaches
    the page, a terminal line or the snippet as such: a file named so and a lookup entry whose host holds one are
    refused, and verify names both (percent-encoded)."""
    spoofed = world.plant("bench/gfx942/pytorch\u202enosj.exe.json", (world.team / bench_path(
        "gfx942", world.listed("gfx942"))).read_bytes()).relative_to(world.team).as_posix()
    file = world.listed("gfx1151", "vllm")
    world.plant(entry_path(file), {**world.entry(file), "host": "builder\x9b31mred"})
    code, out, err = run(capsys, "page", "--workspace", str(REPO), "--channel", str(world.team), "-q")
    assert code == 0, err
    html, data = ((world.team / name).read_text() for name in ("index.html", "channel-page.json"))
    assert "\u202e" not in html + data and "\x9b" not in html + data and "\\u202e" not in data
    code, out, err = run(capsys, "verify", "--workspace", str(REPO), "--from", world.team.as_uri(), "--quick")
    assert code == 1 and "\u202e" not in out + err and "\x9b" not in out + err
    assert shown(spoofed) in out and f"{entry_path(file)}: refused" in out, out


def test_a_channel_folder_swapped_for_a_symlink_mid_command_is_not_written_through(world, capsys, monkeypatch):
    """Whoever may write the folder above the channel swaps the channel itself for a symlink to the victim's home
    after the command resolved it, and a folder on the way to a stale upload for one after tidy listed it: no
    write, and no removal, lands outside."""
    store = FolderStore(world.team)
    stale = world.home / "bench" / ".x.json.host-1-1.incoming"  # what a removal through the swap would hit
    stale.parent.mkdir()
    stale.write_text("the victim's")
    os.utime(stale, (0, 0))
    inside = world.team / "bench" / ".x.json.host-1-1.incoming"
    inside.write_text("a killed publish's")
    os.utime(inside, (0, 0))
    listed = list(world.team.glob("**/.*.incoming"))
    shutil.rmtree(world.team / "bench")
    (world.team / "bench").symlink_to(world.home / "bench", target_is_directory=True)
    monkeypatch.setattr(FolderStore, "_walk", lambda self, prefix, hidden=False: [
        p.relative_to(world.team).as_posix() for p in listed])
    assert store.tidy() == [] and stale.exists()
    monkeypatch.undo()
    world.team.rename(world.root / "share" / "moved")
    world.team.symlink_to(world.home, target_is_directory=True)
    with pytest.raises(Refused, match="replaced by a symlink"):
        store.create("index.html", data=b"<html>")
    with pytest.raises(Refused, match="replaced by a symlink"):
        with store.exclusive("test", print):  # the lock file, too, would be made in the victim's home
            store.replace("channel-page.json", data=b"{}")
    assert sorted(p.name for p in world.home.iterdir()) == [".bashrc", ".config", "bench"]


def test_a_junk_package_file_is_set_aside_before_indexing_not_a_stop_for_every_publish(world, capsys):
    """rattler's indexer panics on a `.conda` that is no zip (a Rust backtrace, then "indexing failed"): one junk
    file in any subdir it indexes stopped every later publish. Under the lock, before indexing, such a file is
    moved into the channel's hidden .refused/ folder (nothing lost, never served) and named; a real archive, a
    listed one and a symlink the indexer skips stay where they are."""
    store = FolderStore(world.team)
    world.plant("linux-64/junk-1-0.conda", b"junk")
    world.plant("osx-arm64/junk-2-0.conda", b"PK\x05\x06" + b"\0" * 18)  # an empty zip: no info-*.tar.zst
    world.plant("noarch/junk-3-0.tar.bz2", b"junk")
    (world.team / "noarch" / "link-1-0.conda").symlink_to(world.credentials)
    with store.exclusive("test", print):
        lines = store.index()
    out = capsys.readouterr()
    assert "panicked" not in out.out + out.err and "Traceback" not in out.out + out.err
    for relpath in ("linux-64/junk-1-0.conda", "osx-arm64/junk-2-0.conda", "noarch/junk-3-0.tar.bz2"):
        assert any(line.startswith(f"{relpath} is ") and "moved to .refused/" in line for line in lines), lines
        assert not (world.team / relpath).exists()
    assert len(list((world.team / ".refused").rglob("junk-*"))) == 3
    assert (world.team / "noarch" / "link-1-0.conda").is_symlink()
    assert "junk" not in (world.team / "linux-64" / "repodata.json").read_text()
    world.assert_untouched()


def test_a_junk_package_key_in_s3_is_set_aside_before_indexing(world, monkeypatch):
    """The same on S3, where rattler's S3 indexer panicked the same way: the junk key is copied into .refused/ and
    deleted (read by ranged GETs of its end: the object itself is never downloaded whole)."""
    from share_helpers import S3_ENV, bucket_keys, moto_server, s3_client
    from orchestrate.share.s3 import S3Options, S3Store

    for name, value in S3_ENV.items():
        monkeypatch.setenv(name, value)
    with moto_server() as endpoint:
        client = s3_client(endpoint)
        client.create_bucket(Bucket="team")
        client.put_object(Bucket="team", Key="stack/noarch/repodata.json", Body=b'{"packages": {}}')
        client.put_object(Bucket="team", Key="stack/linux-64/junk-1-0.conda", Body=b"junk" * 1000)
        lines = S3Store("team", "stack", S3Options(endpoint, "us-east-1", True)).index()
        keys = bucket_keys(client, "team")
    assert len(lines) == 1 and lines[0].startswith("linux-64/junk-1-0.conda is not a zip archive"), lines
    assert "stack/linux-64/junk-1-0.conda" not in keys
    assert [k for k in keys if k.startswith("stack/.refused/linux-64/junk-1-0.conda.")]
    assert b"junk" not in keys.get("stack/linux-64/repodata.json", b"")


def test_a_lock_held_with_terminal_codes_in_it_is_named_without_them(world, capsys, monkeypatch):
    """The holder a waiting command names is read from the lock file, which anyone who may write the channel
    writes: its escape sequences (here one that retitles the terminal) never reach the victim's terminal."""
    import fcntl

    monkeypatch.setattr("orchestrate.share.store.LOCK_WAIT_S", 0.3)
    lock = world.team / ".orchestrate-index.lock"
    lock.write_bytes(b"\x1b]0;" + PAYLOAD.encode() + b"\x07pid 1 \xe2\x80\xae on builder")
    with open(lock, "rb+") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        code, out, err = run(capsys, "page", "--workspace", str(REPO), "--to", world.team.as_uri(), "-q")
    assert code != 0 and "Traceback" not in out + err
    assert "is being indexed by" in err and "pid 1" in err
    assert not any(c in out + err for c in "\x1b\x07\u202e")
    world.assert_untouched()


def test_a_cache_channel_whose_index_is_a_symlink_is_one_line_with_its_fix(world, capsys):
    """noarch/ swapped for a symlink to a folder outside: the cache channel is refused before anything is built, in
    one line that names what to remove and how to go on."""
    from orchestrate.errors import UserError

    outside = world.root / "share" / "noarch"
    (world.team / "noarch").rename(outside)
    (world.team / "noarch").symlink_to(outside, target_is_directory=True)
    with pytest.raises(UserError) as refused:
        RemoteCache(world.team.as_uri(), FolderStore(world.team), Reporter(quiet=True), ["gfx942"])
    assert "noarch on its way is a symlink" in str(refused.value) and "drop that --cache-channel" in str(refused.value)
    assert "\n" not in str(refused.value)


def test_folders_nested_thousands_deep_stop_no_page_verify_or_publish_tidy(world, capsys):
    """Listing a channel walked it recursively: a planted tree 1500 folders deep under bench/ made a RecursionError
    that stopped the page for good, a traceback of verify, and of the tidy publish runs under its lock. The walk
    goes no deeper than a channel path may be; what lies deeper is refused and named."""
    import subprocess

    folder = os.open(world.team / "bench", os.O_RDONLY)
    try:
        for _ in range(1500):
            os.mkdir("a", dir_fd=folder)
            inner = os.open("a", os.O_RDONLY, dir_fd=folder)
            os.close(folder)
            folder = inner
        os.close(os.open(".x.json.host-1-1.incoming", os.O_WRONLY | os.O_CREAT, dir_fd=folder))
    finally:
        os.close(folder)
    try:
        code, out, err = run(capsys, "page", "--workspace", str(REPO), "--channel", str(world.team), "-q")
        assert code == 0 and "Traceback" not in out + err, err
        assert any("refused" in p for p in strict_json((world.team / "channel-page.json").read_text())["problems"])
        code, out, err = run(capsys, "verify", "--workspace", str(REPO), "--from", world.team.as_uri(), "--quick")
        assert code == 1 and "Traceback" not in out + err
        assert "bench/a/a/a/a/a/a/a/a: refused: a path of over 8 parts" in out, out
        store = FolderStore(world.team)
        with store.exclusive("test", print):
            assert store.tidy() == []
    finally:
        subprocess.run(["rm", "-rf", str(world.team / "bench" / "a")], check=True)  # shutil.rmtree recurses too
    world.assert_untouched()


def test_a_cache_hit_whose_package_is_a_symlink_to_the_victims_file_copies_nothing(world, capsys):
    """The package a lookup entry names, replaced by a symlink to a file of the victim's: the cache refuses it in one
    line naming the package, the channel and the fix, and nothing reaches the download folder."""
    from orchestrate.errors import UserError

    file = world.listed("gfx942", "flash-attn")  # the first file of its input hash: the one the cache takes
    (world.team / file).symlink_to(world.credentials)
    cache = RemoteCache(world.team.as_uri(), FolderStore(world.team), Reporter(quiet=True), ["gfx942"])
    entry = world.entry(file)
    output = type("Output", (), {"input_hash": entry["input_hash"], "name": entry["name"]})()
    with pytest.raises(UserError) as refused:
        cache.fetch(output, world.victim)
    assert f"{file} in cache channel {world.team.as_uri()} is refused (a symlink" in str(refused.value)
    assert "drop that --cache-channel" in str(refused.value)
    assert not [p for p in world.victim.rglob("*") if p.is_file()]
    world.assert_untouched()
