"""Issue 37's network attacks, each from the victim's side: a loopback server plays the man-in-the-middle, the slow
or endless server, or the hostile upstream, and the victim runs what a user runs (a cache channel read by build-all,
`pins --bump --write`, `pypi add`). A canary (a bearer token, a secret, the victim's files) sits outside everything;
each test asserts it stays there, that no traceback reaches the victim, and that the refusal is one line naming its
cause. Nothing here leaves 127.0.0.1."""
from __future__ import annotations

import io
import json
import threading
import time
import zipfile
from functools import partial
from http.server import BaseHTTPRequestHandler, SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from orchestrate import web
from orchestrate.cli import main
from orchestrate.errors import UserError
from orchestrate.share.cache import RemoteCache
from orchestrate.share.store import FolderStore
from orchestrate.share.targets import HttpStore
from orchestrate.share.untrusted import Refused
from orchestrate.ui import Reporter
from test_channel_trust import world  # noqa: F401 (the victim's home, canaries and the team channel)
from test_pypi_packages import pypi_workspace  # noqa: F401

TOKEN = "CANARY-TOKEN-5d1c-never-sent-elsewhere"


def with_manifest(world) -> None:
    """The derived manifest publish writes: what a reader over HTTP, which cannot list, reads the entries from."""
    from orchestrate.share.lookup import encode_manifest, read_lookup

    (world.team / "orchestrate-manifest.json").write_bytes(encode_manifest(read_lookup(FolderStore(world.team)).entries))


def serve(handler) -> tuple[ThreadingHTTPServer, str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return httpd, f"http://127.0.0.1:{httpd.server_address[1]}"


@pytest.fixture
def servers():
    started = []

    def start(handler) -> str:
        httpd, url = serve(handler)
        started.append(httpd)
        return url

    yield start
    for httpd in started:
        httpd.shutdown()
        httpd.server_close()


def run(capsys, *argv) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def assert_one_clean_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err and "\x1b" not in err
    return lines[0]


# ---- a03: a redirect carries no credentials to another host or port, and https never leads to http ----

def test_a03_a_redirect_to_another_port_drops_the_bearer_token_and_https_never_leads_to_http(
        servers, tmp_path, monkeypatch):
    seen: list[dict] = []

    class Elsewhere(BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append(dict(self.headers))
            self.send_response(404)
            self.end_headers()

        do_HEAD = do_GET

        def log_message(self, *args):
            pass

    elsewhere = servers(Elsewhere)

    class Channel(Elsewhere):
        def do_GET(self):
            if self.path.startswith("/here/"):
                return super().do_GET()
            seen.append(dict(self.headers))
            self.send_response(302)
            self.send_header("Location", f"{elsewhere}{self.path}" if "away" in self.path else f"/here{self.path}")
            self.send_header("Content-Length", "0")
            self.end_headers()

    channel = servers(Channel)
    auth = tmp_path / "credentials.json"
    auth.write_text(json.dumps({"127.0.0.1": {"BearerToken": TOKEN}}))
    monkeypatch.setenv("RATTLER_AUTH_FILE", str(auth))
    store = HttpStore(f"{channel}/away")  # the victim's cache channel; its index answers with a redirect elsewhere
    assert store.read("noarch/repodata.json") is None  # 404 there
    assert seen[0].get("Authorization") == f"Bearer {TOKEN}"  # the channel's own host gets it
    assert all("Authorization" not in headers for headers in seen[1:]) and len(seen) == 2
    seen.clear()
    HttpStore(f"{channel}/same").read("noarch/repodata.json")  # a redirect on the same host and port keeps it
    assert [h.get("Authorization") for h in seen] == [f"Bearer {TOKEN}"] * 2

    class Request:  # what urllib hands the redirect handler for an https channel sent to http
        full_url, headers, unredirected_hdrs = "https://team.example/ch/noarch/repodata.json", {}, {}
    with pytest.raises(web.Refused, match="redirects to plain http"):
        web._Redirects().redirect_request(Request(), None, 302, "Found", {}, "http://team.example/x")


# ---- a07: a server that drips is cut; a07/a08: a cache hit stops at the size the index lists ----

class Drip(BaseHTTPRequestHandler):
    """A byte every 0.2 s: every read is within the socket timeout, so only a minimum rate ends it."""

    headers_too = False

    def do_GET(self):
        if self.headers_too:
            for byte in b"HTTP/1.1 200 OK\r\n":
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
                time.sleep(0.2)
            return
        self.send_response(200)
        self.send_header("Content-Length", "100000")
        self.end_headers()
        try:
            for _ in range(100000):
                self.wfile.write(b"{")
                self.wfile.flush()
                time.sleep(0.2)
        except OSError:
            pass

    def log_message(self, *args):
        pass


def test_a07_a_server_that_drips_is_cut_at_the_minimum_rate_and_named_in_one_line(servers, monkeypatch):
    monkeypatch.setattr(web, "TRANSFER_GRACE_S", 1.0)
    monkeypatch.setattr(web, "HEADERS_DEADLINE_S", 1.0)
    url = servers(Drip)
    started = time.monotonic()
    with pytest.raises(UserError) as cut:
        HttpStore(f"{url}/team").read("noarch/repodata.json")
    assert time.monotonic() - started < 10
    assert "under 16 KiB/s" in str(cut.value) and str(cut.value).startswith(f"cannot reach {url}/team")
    Drip.headers_too = True
    try:
        started = time.monotonic()
        with pytest.raises(web.Unreachable, match="no status line and headers within"):
            web.get(f"{url}/x", 1)
        assert time.monotonic() - started < 10
    finally:
        Drip.headers_too = False


def test_a07_a08_a_cache_hit_far_longer_than_its_index_says_is_refused_at_that_size(world, servers):  # noqa: F811
    """The index lists each package at 1000 bytes; the attacker's file is 64 MiB. Read from the folder, over HTTP and
    from S3, the download stops past 1000 bytes, nothing stays in the victim's channel, and the line names it."""
    with_manifest(world)
    file = world.listed("gfx942", "flash-attn")
    (world.team / file).write_bytes(b"\0" * (64 * 2**20))
    entry = world.entry(file)
    output = type("Output", (), {"input_hash": entry["input_hash"], "name": entry["name"]})()
    url = servers(partial(SimpleHTTPRequestHandler, directory=str(world.team)))
    for description, store in ((world.team.as_uri(), FolderStore(world.team)), (url, HttpStore(url))):
        cache = RemoteCache(description, store, Reporter(quiet=True), ["gfx942"])
        with pytest.raises(UserError) as refused:
            cache.fetch(output, world.victim)
        assert f"{file} in cache channel {description} is refused" in str(refused.value)
        assert "1000" in str(refused.value) and "its index lists" in str(refused.value)
        assert not [p for p in world.victim.rglob("*") if p.is_file()]

    from orchestrate.share.s3 import S3Store

    class Body:
        def __init__(self, size):
            self.left, self.closed = size, False

        def read(self, amount):
            chunk = b"\0" * min(amount, self.left)
            self.left -= len(chunk)
            return chunk

        def close(self):
            self.closed = True

    for listed in (64 * 2**20, 1000):  # a length that says so, and one that lies
        body = Body(64 * 2**20)
        s3 = S3Store.__new__(S3Store)
        s3.bucket, s3.prefix, s3.url = "team", "", "s3://team"
        s3._open = lambda relpath, b=body, n=listed: {"Body": b, "ContentLength": n}
        dest = world.root / "s3-download"
        with pytest.raises(Refused, match="1000"):
            s3.download(file, dest, 1000)
        assert body.closed and (not dest.exists() or dest.stat().st_size <= 1000)
    world.assert_untouched()


# ---- a18: a token in the cache channel's URL reaches no line and no file ----

def test_a18_a_token_in_the_cache_channel_url_is_in_no_message_and_no_description(world, servers):  # noqa: F811
    url = servers(partial(SimpleHTTPRequestHandler, directory=str(world.root / "share" / "mnt")))
    (world.root / "share" / "mnt" / "t" / TOKEN).mkdir(parents=True)  # anaconda.org's and quetz's layout
    (world.root / "share" / "mnt" / "t" / TOKEN / "team").symlink_to(world.team, target_is_directory=True)
    with_manifest(world)
    secret_url = f"{url}/t/{TOKEN}/team"
    cache = RemoteCache(secret_url, HttpStore(secret_url), Reporter(quiet=True), ["gfx942"])
    assert cache.description == f"{url}/t/***/team" and TOKEN not in cache.store.url
    file = world.listed("gfx942", "flash-attn")
    (world.team / file).write_bytes(b"not the package")  # a hit whose bytes differ: the message names the channel
    entry = world.entry(file)
    with pytest.raises(UserError) as refused:
        cache.fetch(type("Output", (), {"input_hash": entry["input_hash"], "name": entry["name"]})(), world.victim)
    assert f"{url}/t/***/team" in str(refused.value) and TOKEN not in str(refused.value)
    assert web.shown_url(f"https://user:{TOKEN}@host/ch") == "https://***@host/ch"


def test_a18_a19_build_all_names_a_cache_channel_without_its_token_and_a_status_line_without_its_escapes(
        orchestrate, servers):
    class Hostile(BaseHTTPRequestHandler):
        def handle_one_request(self):
            self.raw_requestline = self.rfile.readline(65537)
            self.wfile.write(b"\x1b]0;owned\x07\x1b[2J\x1b[31mHTTP/1.1 200 OK\r\n\r\n")  # no status line: its text shown

        def log_message(self, *args):
            pass

    url = servers(Hostile)
    result = orchestrate("build-all", "--arch", "gfx1151", "--cache-channel", f"{url}/t/{TOKEN}/team", "--dry-run")
    assert result.code == 2
    line = assert_one_clean_line(result.err)
    assert f"{url}/t/***/team" in line and TOKEN not in line + result.out
    assert "\\x1b" in line and "\x07" not in line  # the server's bytes shown as escapes, never acted on


# ---- a20: file:///dev/zero and a plain-http URL on another host are one line, and nothing is written ----

def test_a20_web_reads_only_http_within_a_byte_limit(servers):
    for url in ("file:///dev/zero", "ftp://127.0.0.1/x", "data:,x"):
        with pytest.raises(web.Unreachable, match="is not an http"):
            web.get(url, 1)

    class Endless(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()
            try:
                while True:
                    self.wfile.write(b"\0" * 65536)
            except OSError:
                pass

        def log_message(self, *args):
            pass

    with pytest.raises(web.Refused, match="answered more than 1048576 bytes"):
        web.get(servers(Endless) + "/zero", 5, limit=2**20)


def fake_wheel(name: str, version: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(f"{name}/__init__.py", "")
        archive.writestr(f"{name}-{version}.dist-info/METADATA",
                         f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nSummary: a tool\n")
        archive.writestr(f"{name}-{version}.dist-info/licenses/LICENSE", "MIT License\n")
        archive.writestr(f"{name}-{version}.dist-info/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
    return buffer.getvalue()


@pytest.mark.parametrize("where", ["http://localhost:{port}/evil/", "file:///dev/zero?"])
def test_a20_pypi_add_refuses_a_file_url_on_another_host_over_plain_http(pypi_workspace, servers, capsys, where):
    import hashlib

    wheel = fake_wheel("canarytool", "1.0")
    state, asked = {}, []

    class PyPI(BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path.endswith("/json"):
                body = json.dumps({"info": {"version": "1.0"}, "releases": {"1.0": [{
                    "filename": "canarytool-1.0-py3-none-any.whl", "packagetype": "bdist_wheel", "size": len(wheel),
                    "url": where.format(port=state["port"]) + "canarytool-1.0-py3-none-any.whl",
                    "digests": {"sha256": hashlib.sha256(wheel).hexdigest()}}]}}).encode()
            else:
                asked.append(self.path)
                body = wheel
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    url = servers(PyPI)
    state["port"] = url.rsplit(":", 1)[1]
    table = pypi_workspace / "variants" / "pypi.yaml"
    before = table.read_text()
    code, out, err = run(capsys, "pypi", "add", "canarytool==1.0", "--pypi-url", f"{url}/pypi")
    assert code == 2
    line = assert_one_clean_line(err)
    assert where.split(":")[0] + ":" in line and "refused, nothing written" in line and "127.0.0.1" in line
    assert table.read_text() == before and asked == []  # the other host is not even asked


# ---- a13: an upstream tag that is template text is never written into a recipe ----

def test_a13_a_hostile_aiter_tag_is_refused_by_pins_bump_write_and_no_recipe_changes(capsys, monkeypatch):
    from orchestrate import release_files
    from test_pins_bump import bump, bump_workspace, rows
    from upstream_world import World as Upstreams, snapshot

    hostile = '${{env.get("AWS_SECRET_ACCESS_KEY")}}'
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", TOKEN)
    monkeypatch.delenv("ORCHESTRATE_AMD_INDEX", raising=False)
    real_file_at, real_tag_commit = release_files.World.file_at, release_files.World.tag_commit

    def file_at(self, repo, ref, path):  # the upstream's aiter.txt at the new aotriton: a valid git ref, and a template
        found = real_file_at(self, repo, ref, path)
        return release_files.Read(hostile + "\n", found.source) if path.endswith("aiter.txt") and \
            ref == upstream.commits["aotriton-0.14b"] else found

    def tag_commit(self, repo, tag):  # ... which the attacker also tagged in aiter
        return real_tag_commit(self, repo, "v0.1.11" if tag == hostile else tag)

    monkeypatch.setattr(release_files.World, "file_at", file_at)
    monkeypatch.setattr(release_files.World, "tag_commit", tag_commit)
    import tempfile
    with tempfile.TemporaryDirectory() as folder:
        upstream = Upstreams(Path(folder) / "world")
        try:
            upstream.baseline()
            workspace = bump_workspace(upstream, Path(folder) / "ws")
            upstream.torch_215()
            before = snapshot(workspace)
            code, out, err = bump(capsys, upstream, workspace, "--json", "--write")
            assert "Traceback" not in err
            held = rows(out)["aotriton"]
            assert hostile in held["reason"] and "refused, nothing written" in held["reason"]
            recipe = (workspace / "recipes" / "aotriton" / "recipe.yaml").read_text()
            assert hostile not in recipe and TOKEN not in recipe
            assert snapshot(workspace)["recipes/aotriton/recipe.yaml"] == before["recipes/aotriton/recipe.yaml"]
        finally:
            upstream.close()


# ---- a17: a shared source cache is trusted only when the workspace says so ----

def test_a17_a_source_cache_another_user_can_change_is_refused_unless_declared_shared(orchestrate, workspace, tmp_path):
    from source_helpers import sourced_recipe

    with sourced_recipe(workspace, tmp_path):
        assert orchestrate("build", "sourced", "--arch", "gfx1151").code == 0
        cache = workspace / ".orchestrate" / "sources"
        tree = next(cache.glob("*_extracted"))
        planted = tree / "kernels.txt"
        planted.chmod(0o666)  # the share as another user left it: anyone may change what is compiled
        planted.write_text("upstream kernels\nrm -rf ~  # the attacker's line\n")
        result = orchestrate("build", "sourced", "--arch", "gfx1100")
        assert result.code == 2
        line = assert_one_clean_line(result.err)
        assert f"source cache {cache}: {planted} can be written by everyone (mode 666)" in line
        assert "shared_source_cache = true" in line
        assert not list((workspace / "channel").rglob("sourced-*gfx1100*.conda"))
        (workspace / "orchestrate.toml").write_text("source_channels = []\nshared_source_cache = true\n")
        assert orchestrate("build", "sourced", "--arch", "gfx1100").code == 0  # declared shared: taken, as documented


def test_the_reference_states_the_limits_web_applies():
    reference = (Path(__file__).resolve().parent.parent / "docs" / "reference.md").read_text()
    assert f"| {web.HEADERS_DEADLINE_S:.0f} s (`HEADERS_DEADLINE_S`), or the command's timeout" in reference
    assert f"{web.MIN_RATE // 1024} KiB/s (`MIN_RATE`), averaged, once {web.TRANSFER_GRACE_S:.0f} s" in reference
    assert f"{web.MAX_BODY >> 20} MiB (`MAX_BODY`)" in reference


def test_a17_an_archives_own_loose_modes_inside_a_cache_no_one_else_may_enter_are_no_alarm(tmp_path):
    from orchestrate.sources import SourceCache

    cache = tmp_path / "sources"
    (cache / "abc_extracted").mkdir(parents=True)
    loose = cache / "abc_extracted" / "configure"
    loose.write_text("#!/bin/sh\n")
    loose.chmod(0o777)  # as an upstream tarball may carry it (rattler-build keeps an archive's modes)
    cache.chmod(0o700)
    assert SourceCache(cache).others_can_change() is None
    cache.chmod(0o755)
    assert SourceCache(cache).others_can_change() == f"{loose} can be written by everyone (mode 777)"
