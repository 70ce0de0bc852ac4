"""A team channel trusted by signature (issue 37), tried from the victim's side. The team builds the test graph once
and publishes it signed with its key (an OpenSSH ed25519 key); an attacker who can write the channel (a01, a14), or
who sits between `serve` and the reader (a02), swaps a package for one with the same file name and recorded input
hash that carries a post-link and an activation script; a teammate plants junk (a04), a sparse 8 GiB .conda (a05),
or holds 300 idle connections open to `serve` (a09). Each test keeps a canary outside everything (the victim's home)
and asserts what the victim sees: the package is not taken, nothing outside changes, no traceback."""
from __future__ import annotations

import contextlib
import http.client
import hashlib
import http.server
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from orchestrate.channel import Channel
from orchestrate.cli import main
from orchestrate.share.link_scripts import scripts_in
from orchestrate.share.lookup import entry_path
from orchestrate.share.signing import SigningKey, parse_public_key, plain_http_risk
from share_helpers import free_port, running
from stack import make_workspace

ARCH = "gfx1151"
SWAPPED = "triton"  # the package the attacker replaces (pytorch and others depend on it)
CANARY = "PWNED-by-a-script-in-a-cache-hit"


def make_key(folder: Path, comment: str) -> Path:
    """An ed25519 key pair in the files `ssh-keygen -t ed25519 -N '' -C comment` writes (the same OpenSSH format)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    path = folder / comment.split("@")[0]
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                       serialization.NoEncryption()))
    path.chmod(0o600)
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    path.with_name(path.name + ".pub").write_text(f"{public.decode()} {comment}\n")
    return path


@dataclass
class Team:
    workspace: Path
    channel: Path
    key: Path  # the team's private key; key.pub beside it
    other: Path  # an attacker's key

    @property
    def public(self) -> str:
        return self.key.with_name(self.key.name + ".pub").read_text().strip()


@pytest.fixture(scope="module")
def team(tmp_path_factory) -> Team:
    root = tmp_path_factory.mktemp("team")
    workspace = make_workspace(root)
    assert main(["build-all", "--workspace", str(workspace), "--arch", ARCH, "--no-tests", "-q"]) == 0
    keys = root / "keys"
    keys.mkdir()
    return Team(workspace, workspace / "channel", make_key(keys, "ci@team"), make_key(keys, "mallory@evil"))


def run(capsys, *args) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".bashrc").write_text("# the victim's own\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(tmp_path)
    return home


def publish_signed(capsys, team: Team, shared: Path, *extra) -> str:
    code, out, err = run(capsys, "publish", "--workspace", team.workspace, "--to", shared.as_uri(),
                         "--sign-key", team.key, *extra)
    assert code == 0, err
    return out


def package_of(channel: Path, name: str) -> str:
    return next(str(p.relative_to(channel)) for p in channel.glob("*/*.conda") if p.name.startswith(f"{name}-"))


def forge(package: Path, out: Path, home: Path, scratch: Path) -> None:
    """The a01 package: the original's payload plus a post-link and an activation script that would write the
    canary, its info/ (and so its recorded input hash) kept; the zip's pkg-*.tar.zst is assemble_package's."""
    from rattler.package_streaming import extract
    from rattler_build import FileEntry, assemble_package

    tree = scratch / "tree"
    extract(package, tree)
    index = json.loads((tree / "info" / "index.json").read_text())
    shutil.rmtree(tree / "info")
    script = f"echo {CANARY} >> {home / '.bashrc'}\n"
    (tree / "bin").mkdir(exist_ok=True)
    (tree / "bin" / f".{index['name']}-post-link.sh").write_text(script)
    (tree / "etc" / "conda" / "activate.d").mkdir(parents=True)
    (tree / "etc" / "conda" / "activate.d" / "zz-helper.sh").write_text(script)
    files = [FileEntry.from_paths(path, path.relative_to(tree)) for path in sorted(tree.rglob("*")) if path.is_file()]
    built = assemble_package(index["name"], index["version"], index["subdir"], index["build"], scratch / "built",
                             files=files)  # named one by one: files_dir leaves hidden files (the link script) out
    with zipfile.ZipFile(built.path) as new, zipfile.ZipFile(package) as old, zipfile.ZipFile(out, "w") as forged:
        payload = new.read(next(n for n in new.namelist() if n.startswith("pkg-")))
        for member in old.infolist():  # a fresh entry each (the original's carries a zip64 field sized for it)
            forged.writestr(zipfile.ZipInfo(member.filename, member.date_time),
                            payload if member.filename.startswith("pkg-") else old.read(member))


def swap(shared: Path, file: str, forged: bytes) -> None:
    """The attacker's a01: the package replaced, and the index, the lookup entry and the manifest made to agree."""
    (shared / file).write_bytes(forged)
    sha, md5 = hashlib.sha256(forged).hexdigest(), hashlib.md5(forged).hexdigest()
    subdir, name = file.split("/")
    index_path = shared / subdir / "repodata.json"
    index = json.loads(index_path.read_text())
    index["packages.conda"][name].update(sha256=sha, md5=md5, size=len(forged))
    index_path.write_text(json.dumps(index))
    (shared / subdir / "repodata.json.zst").unlink(missing_ok=True)
    entry = json.loads((shared / entry_path(file)).read_text())
    entry["sha256"] = sha
    (shared / entry_path(file)).write_text(json.dumps(entry))
    manifest = json.loads((shared / "orchestrate-manifest.json").read_text())
    manifest["packages"][file]["sha256"] = sha
    (shared / "orchestrate-manifest.json").write_text(json.dumps(manifest))


def forged_bytes(team: Team, home: Path, scratch: Path) -> tuple[str, bytes]:
    file = package_of(team.channel, SWAPPED)
    scratch.mkdir()
    forge(team.channel / file, scratch / "forged.conda", home, scratch)
    assert scripts_in(scratch / "forged.conda"), "the forgery carries its scripts"
    return file, (scratch / "forged.conda").read_bytes()


def victim_build(capsys, tmp_path: Path, cache: str, *extra) -> tuple[int, str, str, Path]:
    workspace = make_workspace(tmp_path / "victim")
    code, out, err = run(capsys, "build", "--workspace", workspace, "--arch", ARCH, "--no-tests",
                         "--cache-channel", cache, *extra, SWAPPED)  # and what it needs (rocm-sdk)
    return code, out, err, workspace / "channel"


def assert_not_taken(code: int, out: str, err: str, channel: Path, file: str, home: Path) -> None:
    assert code == 0, err
    assert f"not taking {file} from cache channel" in err
    assert "built" in next(line for line in out.splitlines() if line.split()[:1] == [SWAPPED])
    assert scripts_in(channel / file) == [], "the victim's channel holds the attacker's scripts"
    assert CANARY not in (home / ".bashrc").read_text()


def test_a01_a_swapped_package_is_refused_by_a_reader_who_trusts_only_the_teams_key(team, home, tmp_path, capsys):
    shared = tmp_path / "shared"
    publish_signed(capsys, team, shared)
    file, forged = forged_bytes(team, home, tmp_path / "forge")
    swap(shared, file, forged)
    code, out, err, channel = victim_build(capsys, tmp_path, shared.as_uri(), "--trusted-key", team.public)
    assert_not_taken(code, out, err, channel, file, home)
    assert "differ from what ci@team" in err
    assert "from cache" in next(line for line in out.splitlines() if line.split()[:1] == ["rocm-sdk"]), \
        "an untouched package is still a hit"
    # verify, with the team's key and without any: the swap is named, exit 1
    code, out, _ = run(capsys, "verify", "--from", shared.as_uri(), "--trusted-key", team.public)
    assert code == 1 and f"{file}: its bytes differ from what ci@team" in out.replace("\n    ", " ")
    check = package_of(shared, "rocm-stack-check")
    shutil.rmtree(shared / f"orchestrate-manifest.d/{check}.sig")  # a signature removed: unsigned, said in a note
    code, out, _ = run(capsys, "verify", "--from", shared.as_uri())
    assert code == 1 and f"{file}: differs from what ci@team" in out.replace("\n    ", " ")
    assert f"unsigned: {check}" in out
    # another key's signature does not count: every package is named
    other = team.other.with_name(team.other.name + ".pub")
    code, out, _ = run(capsys, "verify", "--from", shared.as_uri(), "--trusted-key", other)
    assert code == 1 and out.count("a key you do not trust") == 9 and f"{check}: unsigned" in out


def test_a01_without_trusted_keys_a_cache_hit_never_brings_scripts_its_recipe_does_not_declare(team, home, tmp_path,
                                                                                               capsys):
    shared = tmp_path / "shared"
    run(capsys, "publish", "--workspace", team.workspace, "--to", shared.as_uri())  # unsigned
    file, forged = forged_bytes(team, home, tmp_path / "forge")
    swap(shared, file, forged)
    code, out, err, channel = victim_build(capsys, tmp_path, shared.as_uri())
    assert_not_taken(code, out, err, channel, file, home)
    assert "-post-link.sh" in err and "etc/conda/activate.d/zz-helper.sh" in err, err


class SwappingProxy(http.server.BaseHTTPRequestHandler):
    """a02: a man in the middle of `serve`'s plain HTTP, answering some paths with the attacker's bytes."""

    upstream: str
    replace: dict[str, bytes]

    def do_GET(self, head: bool = False):
        path = self.path.split("?")[0].lstrip("/")
        try:
            with urllib.request.urlopen(f"{self.upstream}/{path}", timeout=10) as answer:
                body = answer.read()
        except urllib.error.HTTPError as exc:
            self.send_error(exc.code)
            return
        body = self.replace.get(path, body)
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def do_HEAD(self):
        self.do_GET(head=True)

    def log_message(self, *args):
        pass


def test_a02_a_package_swapped_in_transit_is_refused(team, home, tmp_path, capsys):
    from orchestrate.share.serve import make_server
    from orchestrate.ui import Reporter

    shared = tmp_path / "shared"
    publish_signed(capsys, team, shared)
    file, forged = forged_bytes(team, home, tmp_path / "forge")
    tampered = tmp_path / "tampered"  # what the proxy answers: the a01 swap, made on the wire
    shutil.copytree(shared, tampered)
    swap(tampered, file, forged)
    replace = {p: (tampered / p).read_bytes() for p in (file, f"{file.split('/')[0]}/repodata.json",
                                                         "orchestrate-manifest.json", entry_path(file))}
    server = make_server(shared, "127.0.0.1", 0, Reporter(quiet=True))
    proxy_class = type("Proxy", (SwappingProxy,), {"upstream": f"http://127.0.0.1:{server.server_address[1]}",
                                                   "replace": replace})
    proxy = http.server.ThreadingHTTPServer(("127.0.0.1", 0), proxy_class)
    for each in (server, proxy):
        threading.Thread(target=each.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{proxy.server_address[1]}"
        code, out, err, channel = victim_build(capsys, tmp_path, url, "--trusted-key", team.public)
    finally:
        for each in (server, proxy):
            each.shutdown()
            each.server_close()
    assert_not_taken(code, out, err, channel, file, home)


def test_a14_a_copy_planted_under_a_teammates_name_is_never_kept_on_its_claimed_input_hash(team, home, tmp_path,
                                                                                           capsys):
    shared = tmp_path / "shared"
    file, forged = forged_bytes(team, home, tmp_path / "forge")
    (shared / file).parent.mkdir(parents=True)
    (shared / file).write_bytes(forged)  # before the teammate publishes, with an entry claiming their input hash
    entry = dict(vars(next(e for e in Channel(team.channel).entries_present() if e.file == file)))
    entry["sha256"] = hashlib.sha256(forged).hexdigest()
    (shared / entry_path(file)).parent.mkdir(parents=True)
    (shared / entry_path(file)).write_text(json.dumps(entry))
    code, out, err = run(capsys, "publish", "--workspace", team.workspace, "--to", shared.as_uri(), "--sign-key",
                         team.key)
    assert code == 2 and f"already has {file} with different content" in err
    assert "never overwritten, nor a copy kept on its claimed input hash alone" in err
    assert "kept the channel's copy" not in out
    assert not list(shared.rglob(f"{Path(file).name}.sig/*")), "nothing vouches for the planted copy"
    assert (shared / file).read_bytes() == forged


def test_a04_a05_junk_and_a_sparse_8_gib_package_are_set_aside_named_and_stop_no_publish(team, home, tmp_path,
                                                                                       capsys):
    shared = tmp_path / "shared"
    publish_signed(capsys, team, shared, "rocm-stack-check")  # the rest comes after the attack
    subdir = shared / "linux-64"
    subdir.mkdir()
    (subdir / "junk-1.0-0.conda").write_bytes(b"not a zip at all" * 64)
    (subdir / "junk-1.0-1.tar.bz2").write_bytes(b"BZh9" + os.urandom(4096))
    sparse = subdir / "huge-1.0-0.conda"
    with open(sparse, "wb") as out:  # 8 GiB of hole, then a real package: its zip directory reads fine
        out.truncate(8 << 30)
        out.seek(8 << 30)
        out.write((team.channel / package_of(team.channel, "aiter")).read_bytes())
    sparse_size = sparse.stat().st_size
    started = time.monotonic()
    code, out, err = run(capsys, "publish", "--workspace", team.workspace, "--to", shared.as_uri(), "--sign-key",
                         team.key)
    assert code == 0, err
    assert time.monotonic() - started < 60
    for name, why in (("junk-1.0-0.conda", "is not a zip archive"), ("junk-1.0-1.tar.bz2", "is no package rattler can "
                      "read"), ("huge-1.0-0.conda", f"is a sparse file ({sparse_size} bytes long")):
        assert f"linux-64/{name} {why}" in err
        assert not (subdir / name).exists()
    assert len(list((shared / ".refused" / "linux-64").iterdir())) == 3, "each one moved aside, nothing lost"
    assert "published 9 package(s)" in out
    code, out, err = run(capsys, "verify", "--from", shared.as_uri(), "--trusted-key", team.public)
    assert code == 0, out


def test_a09_idle_connections_do_not_starve_serve(team, tmp_path):
    port = free_port()
    command = [sys.executable, "-m", "orchestrate", "serve", "--channel", str(team.channel), "--port", str(port)]
    idle = []
    with running(command, port, log_to_file=True):
        try:
            for _ in range(300):  # more than twice the cap: the oldest idle ones are closed to make room
                idle.append(socket.create_connection(("127.0.0.1", port), timeout=5))
            started = time.monotonic()
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            connection.request("GET", "/noarch/repodata.json")
            answer = connection.getresponse()
            assert answer.status == 200 and json.loads(answer.read())["packages.conda"]
            assert time.monotonic() - started < 5
        finally:
            for each in idle:
                each.close()


# -- keys, config, the consumer's task, plain HTTP ------------------------------------------------------------
def test_keys_as_ssh_keygen_writes_them_and_one_line_for_each_wrong_key(team, tmp_path, capsys, home):
    signer = SigningKey(team.key)
    assert signer.public.name.startswith("ci@team (SHA256:")
    assert parse_public_key(team.public, "x").key_id == signer.public.key_id
    if shutil.which("ssh-keygen"):  # the fingerprint is the one ssh-keygen shows
        shown = subprocess.run(["ssh-keygen", "-lf", str(team.key) + ".pub"], capture_output=True, text=True).stdout
        assert signer.public.fingerprint in shown
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    locked = tmp_path / "locked"  # passphrase-protected: ssh-keygen writes one without the bcrypt module
    if shutil.which("ssh-keygen"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "a passphrase", "-f", str(locked)], check=True)
    else:
        locked.write_bytes(team.key.read_bytes().replace(b"none", b"aes256-ctr", 1))
    ecdsa = tmp_path / "ecdsa"
    ecdsa.write_bytes(ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()))
    (tmp_path / "junk").write_text("hello")
    for path, said in ((locked, "protected by a passphrase"), (ecdsa, "not ed25519"), (tmp_path / "junk",
                       "no OpenSSH private key"), (tmp_path / "missing", "cannot be read")):
        code, _, err = run(capsys, "publish", "--workspace", team.workspace, "--to", (tmp_path / "s").as_uri(),
                           "--sign-key", path)
        assert code == 2 and said in err and len(err.strip().splitlines()) == 1, err
    with pytest.raises(SystemExit) as stopped:
        main(["verify", "--from", str(tmp_path), "--trusted-key", "ssh-rsa AAAAB3Nza x"])
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and "no ed25519 public key" in err and "Traceback" not in err


def test_trusted_keys_and_sign_key_in_orchestrate_toml(team, tmp_path, capsys, home):
    shared = tmp_path / "shared"
    workspace = make_workspace(tmp_path / "w")
    shutil.copytree(team.channel, workspace / "channel")
    key_line = json.dumps(team.public)
    (workspace / "orchestrate.toml").write_text(f'sign_key = "{team.key}"\ntrusted_keys = [{key_line}]\n')
    code, out, err = run(capsys, "publish", "--workspace", workspace, "--to", shared.as_uri(), "--arch", ARCH)
    assert code == 0 and "signed 10 with ci@team" in out, err
    code, out, _ = run(capsys, "verify", "--workspace", workspace, "--from", shared.as_uri())
    assert code == 0, out
    (workspace / "orchestrate.toml").write_text('trusted_keys = ["ssh-ed25519 AAAA&&"]\n')
    code, _, err = run(capsys, "verify", "--workspace", workspace, "--from", shared.as_uri())
    assert code == 2 and "trusted_keys" in err and "ssh-ed25519" in err


def test_the_consumer_manifest_carries_a_verify_task_with_the_teams_key(team, tmp_path, capsys, home):
    import tomllib

    code, out, _ = run(capsys, "consumer-manifest", "--channel", "http://buildbox:8765", "--trusted-key", team.public,
                       "--print")
    manifest = tomllib.loads(out)
    task = manifest["feature"]["verify"]["tasks"]["verify-channel"]
    assert task.startswith("orchestrate verify --from http://buildbox:8765 --trusted-key 'ssh-ed25519 ")
    assert manifest["environments"]["verify"] == {"features": ["verify"], "no-default-feature": True}
    assert "plain HTTP" in out


def test_plain_http_from_another_host_names_its_risk():
    assert plain_http_risk("http://127.0.0.1:8765", False) is None
    assert plain_http_risk("https://buildbox", False) is None
    assert "can read and change" in plain_http_risk("http://buildbox:8765", False)
    assert "caught by its signature" in plain_http_risk("http://10.0.0.2:8765", True)


@contextlib.contextmanager
def serving(channel, max_connections: int):
    """`orchestrate serve`'s server on a free loopback port, in a thread, with a cap of its connections."""
    from orchestrate.share.serve import make_server
    from orchestrate.ui import Reporter

    server = make_server(channel, "127.0.0.1", 0, Reporter(quiet=True))
    server.max_connections = max_connections
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server, server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def test_serve_closes_an_idle_connection_and_makes_room_at_its_cap(team, monkeypatch):
    from orchestrate.share.serve import ChannelRequestHandler

    monkeypatch.setattr(ChannelRequestHandler, "timeout", 0.5)
    with serving(team.channel, max_connections=4) as (server, port):
        silent = socket.create_connection(("127.0.0.1", port), timeout=5)
        assert silent.recv(1) == b"", "an idle connection is closed after the timeout"
        monkeypatch.setattr(ChannelRequestHandler, "timeout", 60)  # from here on, only the cap closes one
        idle = []
        for _ in range(4):
            idle.append(socket.create_connection(("127.0.0.1", port), timeout=2))
            time.sleep(0.05)  # accepted in this order
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        connection.request("GET", "/noarch/repodata.json")
        assert connection.getresponse().status == 200
        assert idle[0].recv(1) == b"", "the connection idle longest made room"


def test_the_real_recipes_declare_the_activation_scripts_they_make():
    from orchestrate.share.link_scripts import undeclared

    recipes = Path(__file__).resolve().parent.parent / "recipes"
    made = {"rocm-sdk": "rocm-sdk.sh", "flash-attn": "flash-attn-triton.sh",
            "rocm-sdk-device": "rocm-sdk-device-aotriton-experimental.sh"}
    for recipe, script in made.items():
        scripts = [f"etc/conda/activate.d/{script}", f"etc/conda/deactivate.d/{script}"]
        assert undeclared(scripts, recipes / recipe) == [], recipe
        assert undeclared([*scripts, "bin/.x-post-link.sh", "etc/conda/activate.d/zz.sh"], recipes / recipe) == \
            ["bin/.x-post-link.sh", "etc/conda/activate.d/zz.sh"]


def test_an_s3_channel_is_signed_create_only_and_verified(team, tmp_path, capsys, home, monkeypatch):
    """Signatures go through the store's create-only writes on S3 too; publishing again signs nothing twice."""
    from share_helpers import S3_ENV, moto_server, s3_client

    for name, value in S3_ENV.items():
        monkeypatch.setenv(name, value)
    with moto_server() as endpoint:
        s3_client(endpoint).create_bucket(Bucket="team")
        target = ("--to", "s3://team/stack", "--s3-endpoint-url", endpoint)
        code, out, err = run(capsys, "publish", "--workspace", team.workspace, *target, "--sign-key", team.key,
                             "rocm-stack-check")
        assert code == 0 and "signed 1 with ci@team" in out, err
        code, out, err = run(capsys, "publish", "--workspace", team.workspace, *target, "--sign-key", team.key,
                             "rocm-stack-check")
        assert code == 0 and "nothing to publish" in out, out + err
        source = ("--from", "s3://team/stack", "--s3-endpoint-url", endpoint)
        assert run(capsys, "verify", *source, "--trusted-key", team.public)[0] == 0
        code, out, _ = run(capsys, "verify", *source, "--trusted-key", team.other.with_name("mallory.pub"))
        assert code == 1 and "signed only by ci@team" in out


def test_serve_answers_503_when_every_connection_is_busy(team):
    with serving(team.channel, max_connections=1) as (server, port):
        busy = socket.create_connection(("127.0.0.1", port), timeout=5)
        for _ in range(100):  # until the server has accepted it
            if server._open:
                break
            time.sleep(0.02)
        server.busy(next(iter(server._open)), True)  # as if a long download were being answered on it
        refused = socket.create_connection(("127.0.0.1", port), timeout=5)
        assert refused.recv(64).startswith(b"HTTP/1.0 503")
        busy.close()
