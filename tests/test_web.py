"""The one HTTP client (orchestrate/web.py) and its users that are not lookups: doctor's probes and an HTTP
channel read as a cache or by a consumer. A local server answers with files, 404, 401 and a cut connection."""
from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from orchestrate import doctor, web
from orchestrate.errors import UserError
from orchestrate.share.targets import HttpStore


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path.endswith("/noarch/repodata.json"):
            body = b'{"packages": {}}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        elif self.path.endswith("/page.html"):
            self.send_response(200)
            self.send_header("Content-Length", "6")
            self.end_headers()
            self.wfile.write(b"<html>")
        elif self.path.endswith("/secret.json"):
            self.send_response(401)
            self.end_headers()
        elif self.path.endswith("/cut.json"):
            self.send_response(200)
            self.send_header("Content-Length", "1000")
            self.end_headers()
            self.wfile.write(b"{")  # then the connection closes: 999 bytes short
        else:
            self.send_response(404)
            self.end_headers()

    do_HEAD = do_GET

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/channel"
    httpd.shutdown()
    httpd.server_close()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_web_maps_every_failure_to_two_kinds(server):
    assert web.get_json(f"{server}/noarch/repodata.json", 5) == {"packages": {}}
    with pytest.raises(web.HTTPStatus) as status:
        web.get(f"{server}/missing.json", 5)
    assert status.value.code == 404
    with pytest.raises(web.Unreachable):
        web.get(f"{server}/cut.json", 5)  # answered, then cut: nothing usable came
    with pytest.raises(web.Unreachable):
        web.get(f"http://127.0.0.1:{closed_port()}/x", 5)
    with pytest.raises(web.Unreachable):
        web.get("notascheme://x", 5)  # a URL urllib cannot send is no traceback either
    with pytest.raises(LookupError, match="page.html: not JSON"):
        web.get_json(f"{server}/page.html", 5)


def test_doctor_probe_reports_a_status_or_why_nothing_answered(server):
    assert doctor.probe_url(f"{server}/noarch/repodata.json", 5) == (200, "")
    assert doctor.probe_url(f"{server}/missing", 5) == (404, "")
    status, why = doctor.probe_url(f"http://127.0.0.1:{closed_port()}/", 5)
    assert status is None and "refused" in why.lower()


def test_http_channel_reads_files_and_says_what_went_wrong(server, tmp_path):
    store = HttpStore(server)
    assert store.read("noarch/repodata.json") == b'{"packages": {}}'
    assert store.read("noarch/absent.json") is None  # a new, empty channel
    store.download("noarch/repodata.json", tmp_path / "r.json")
    assert (tmp_path / "r.json").read_bytes() == b'{"packages": {}}'
    with pytest.raises(UserError, match=r"refused access to secret.json \(HTTP 401\): log in with `pixi auth login 127.0.0.1`"):
        store.read("secret.json")
    with pytest.raises(UserError, match=r"cannot reach .*: check the URL and that the server is running"):
        HttpStore(f"http://127.0.0.1:{closed_port()}/c").read("noarch/repodata.json")
