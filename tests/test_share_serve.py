"""`orchestrate serve`: a real HTTP server on 127.0.0.1 that py-rattler solves and installs from."""
from __future__ import annotations

import sys
import urllib.error
import urllib.request

import pytest

from share_helpers import ARCH, build_channel, free_port, make_workspace, orchestrate, running, solve_and_install

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("serve")
    workspace = make_workspace(root)
    channel = root / "channel"
    result = build_channel(workspace, channel)
    assert result.returncode == 0, result.stderr
    return workspace, channel


def test_serve_installs_the_stack_over_http(built, tmp_path):
    workspace, channel = built
    port = free_port()
    command = [sys.executable, "-m", "orchestrate", "serve", "--channel", str(channel), "--port", str(port)]
    with running(command, port) as server:
        first = server.stdout.readline()
        assert f"http://127.0.0.1:{port}/" in first
        assert "loopback" in server.stdout.readline()
        installed = solve_and_install(f"http://127.0.0.1:{port}", tmp_path / "env")
        with pytest.raises(urllib.error.HTTPError) as hidden:  # the channel lock is never served
            urllib.request.urlopen(f"http://127.0.0.1:{port}/.orchestrate.lock", timeout=5)
        assert hidden.value.code == 404
    assert {"pytorch", "flash-attn", "vllm", "rocm-stack-check", "rocm-sdk"} <= set(installed)
    assert (tmp_path / "env" / "share" / "pytorch" / "built-for").read_text().strip() == ARCH


def test_serve_does_not_follow_symlinks_out_of_the_channel(built, tmp_path):
    _, channel = built
    secret = tmp_path / "secret.txt"
    secret.write_text("not for the network")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "more.txt").write_text("nor this")
    links = [channel / "noarch" / "leak.conda", channel / "outside"]
    links[0].symlink_to(secret)
    links[1].symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    inside = channel / "noarch" / "alias.json"
    inside.symlink_to(channel / "noarch" / "repodata.json")
    port = free_port()
    command = [sys.executable, "-m", "orchestrate", "serve", "--channel", str(channel), "--port", str(port)]
    try:
        with running(command, port):
            for path in ("noarch/leak.conda", "outside/more.txt"):
                with pytest.raises(urllib.error.HTTPError) as refused:
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/{path}", timeout=5)
                assert refused.value.code == 404
            served = urllib.request.urlopen(f"http://127.0.0.1:{port}/noarch/alias.json", timeout=5).read()
            assert served == (channel / "noarch" / "repodata.json").read_bytes()  # a link inside is fine
    finally:
        for link in links + [inside]:
            link.unlink()


def test_serve_refuses_a_folder_that_is_not_a_channel(tmp_path):
    result = orchestrate("serve", "--channel", str(tmp_path), "--port", "0")
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "is not a channel yet" in lines[0]


def test_only_loopback_is_the_default():
    from orchestrate.share.serve import DEFAULT_HOST, is_loopback

    assert DEFAULT_HOST == "127.0.0.1" and is_loopback(DEFAULT_HOST) and is_loopback("::1")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.10")
