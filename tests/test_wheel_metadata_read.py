"""Reading a release's requirements from its wheel without downloading it (orchestrate/package_index.py
remote_wheel_metadata, through orchestrate/release_files.py World.requirements), against a tiny loopback
server that records every request and can refuse Range: the PEP 658 `.metadata` file first, else range
requests (a second one where the zip directory starts before the last 64 KiB), else, from a server without
Range support, one download of the whole file. A malformed wheel is a read error naming the file, never a
traceback."""
from __future__ import annotations

import io
import json
import re
import struct
import threading
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from orchestrate import package_index
from orchestrate.release_files import ReadError, World

NAME = "vllm-0.34.0-py3-none-any.whl"
METADATA = "Metadata-Version: 2.1\nName: vllm\nVersion: 0.34.0\nRequires-Dist: torch==2.15.0\nRequires-Dist: regex\n"


def wheel(metadata: str = METADATA, members: int = 0) -> bytes:
    """A wheel whose METADATA comes last; `members` empty files with long names make its zip directory
    larger than the 64 KiB the first range request reads."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for n in range(members):
            archive.writestr(f"vllm/{'kernels/' * 8}generated_{n:05d}.py", "")
        archive.writestr("vllm/__init__.py", "")
        archive.writestr("vllm-0.34.0.dist-info/METADATA", metadata)
    return buffer.getvalue()


class Server(ThreadingHTTPServer):
    def __init__(self):
        super().__init__(("127.0.0.1", 0), Handler)
        self.files: dict[str, bytes] = {}
        self.ranges = True  # False: answer 200 with the whole file, as a server without Range support does
        self.log: list[tuple[str, str, int]] = []  # (path, Range asked, status answered)
        self.url = f"http://127.0.0.1:{self.server_address[1]}"


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (http.server's naming)
        body = self.server.files.get(self.path)
        asked = self.headers.get("Range", "")
        ranged = re.match(r"bytes=(\d*)-(\d*)$", asked) if self.server.ranges else None
        status = 404 if body is None else 206 if ranged else 200
        self.server.log.append((self.path, asked, status))
        self.send_response(status)
        if body is not None and ranged:
            start, end = ranged.groups()
            first = max(len(body) - int(end), 0) if not start else int(start)
            last = len(body) - 1 if not start or not end else min(int(end), len(body) - 1)
            self.send_header("Content-Range", f"bytes {first}-{last}/{len(body)}")
            body = body[first:last + 1]
        self.send_header("Content-Length", str(len(body or b"")))
        self.end_headers()
        self.wfile.write(body or b"")

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def running():
    server = Server()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def server(running):
    running.files.clear()
    running.log.clear()
    running.ranges = True
    return running


def read(server: Server, data: bytes) -> str:
    server.files[f"/files/{NAME}"] = data
    return package_index.remote_wheel_metadata(f"{server.url}/files/{NAME}", 5)


def test_a_small_wheel_is_read_with_one_range_request_for_its_end(server):
    assert read(server, wheel()) == METADATA
    assert server.log == [(f"/files/{NAME}", "bytes=-65536", 206)]


def test_a_zip_directory_before_the_last_64_kib_is_read_with_a_second_range_request(server):
    data = wheel(members=1500)
    directory_size, directory_offset = struct.unpack("<II", data[data.rfind(b"PK\x05\x06") + 12:][:8])
    assert directory_offset < len(data) - 65536 and directory_size > 65536  # the case this test is about
    assert read(server, data) == METADATA
    asked = [r for _, r, status in server.log if status == 206]
    assert len(server.log) == 3 and len(asked) == 3
    assert asked[0] == "bytes=-65536" and asked[1] == f"bytes={directory_offset}-{directory_offset + directory_size - 1}"
    assert int(asked[2].split("=")[1].split("-")[0]) < directory_offset  # then METADATA, before the directory


@pytest.mark.parametrize("members", [0, 1500])
def test_a_server_without_range_support_is_downloaded_once(server, members):
    server.ranges = False
    assert read(server, wheel(members=members)) == METADATA
    assert server.log == [(f"/files/{NAME}", "bytes=-65536", 200)]


def world(server: Server, core_metadata: bool) -> World:
    entry = {"filename": NAME, "url": f"/files/{NAME}", "yanked": False}
    if core_metadata:
        entry["core-metadata"] = {"sha256": "0" * 64}
    server.files["/pypi/vllm/json"] = json.dumps({"info": {"name": "vllm", "version": "0.34.0"},
                                                 "releases": {"0.34.0": [entry]}}).encode()
    server.files[f"/files/{NAME}"] = wheel()
    return World(f"{server.url}/pypi", "", None, "", 5)


def test_the_pep_658_metadata_file_is_read_first_and_the_wheel_never(server, tmp_path):
    server.files[f"/files/{NAME}.metadata"] = METADATA.replace("torch==2.15.0", "torch==2.15.1").encode()
    found = world(server, core_metadata=True).requirements("vllm", "0.34.0")
    assert found.value == ["torch==2.15.1", "regex"] and found.source == f"{NAME} METADATA (PEP 658)"
    assert [path for path, _, _ in server.log] == ["/pypi/vllm/json", f"/files/{NAME}.metadata"]


def test_without_a_metadata_file_the_wheel_is_range_read(server):
    found = world(server, core_metadata=False).requirements("vllm", "0.34.0")
    assert found.value == ["torch==2.15.0", "regex"] and found.source == f"{NAME} METADATA (range read)"
    assert [(path, status) for path, _, status in server.log] == [("/pypi/vllm/json", 200), (f"/files/{NAME}", 206)]


def truncated_directory(data: bytes) -> bytes:
    """The end-of-central-directory kept, the directory cut short (a download or a proxy that lost bytes)."""
    eocd = data.rfind(b"PK\x05\x06")
    directory_offset = struct.unpack("<I", data[eocd + 16:eocd + 20])[0]
    return data[:directory_offset + 20] + data[eocd:]  # its first entry cut short


def corrupt_deflate(data: bytes) -> bytes:
    info = zipfile.ZipFile(io.BytesIO(data)).getinfo("vllm-0.34.0.dist-info/METADATA")
    start = info.header_offset + 30 + len(info.filename) + len(info.extra)
    return data[:start] + b"\xff" * 8 + data[start + 8:]  # block type 3: no deflate stream has it


def latin1_metadata() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("vllm-0.34.0.dist-info/METADATA", METADATA.encode() + b"Author: Jos\xe9\n")
    return buffer.getvalue()


MALFORMED = {
    "truncated zip directory": (lambda: truncated_directory(wheel()), "zip directory"),
    "corrupt deflate data": (lambda: corrupt_deflate(wheel()), "invalid"),
    "METADATA that is not core metadata": (lambda: wheel("<html>502 Bad Gateway</html>"), "Metadata-Version"),
    "Requires-Dist that does not parse": (lambda: wheel(METADATA + "Requires-Dist: torch (==2.15.0\n"), "torch (==2.15.0"),
    "METADATA that is not UTF-8": (latin1_metadata, "utf-8"),
}


@pytest.mark.parametrize("case", MALFORMED)
def test_a_malformed_wheel_is_a_read_error_naming_the_file_not_a_traceback(server, case):
    make, why = MALFORMED[case]
    server.ranges = case != "truncated zip directory"  # the whole-file path is checked as carefully
    with pytest.raises(LookupError) as raised:
        read(server, make())
    message = str(raised.value)
    assert message.startswith(f"{NAME} is not a readable wheel (") and why in message, message


def test_a_malformed_wheel_makes_requirements_a_read_error(server):
    reader = world(server, core_metadata=False)
    server.files[f"/files/{NAME}"] = corrupt_deflate(wheel())
    with pytest.raises(ReadError) as raised:
        reader.requirements("vllm", "0.34.0")
    assert str(raised.value).startswith(f"{NAME} is not a readable wheel (") and not raised.value.unreachable
