"""Reading a package index (PEP 691 JSON or PEP 503 HTML, whichever it answers), such as AMD's: the files a
project lists with the sha256 the index publishes, which of them is a given version's build for Linux
x86_64 and one Python, and which versions exist. `orchestrate pins --lock` pins AMD's artifacts from it
(orchestrate/prebuilt.py); `orchestrate pins` reports AMD's newer releases. Every GET goes through web.py.
"""
from __future__ import annotations

import json
import re
import struct
import urllib.parse
import zlib
from dataclasses import dataclass
from html.parser import HTMLParser

from packaging.utils import InvalidSdistFilename, InvalidWheelFilename, canonicalize_name, parse_sdist_filename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from . import web

DEFAULT_TIMEOUT = 20.0
TAIL_BYTES = 65536  # one range request holds the end-of-central-directory and, mostly, the whole directory
EOCD, CENTRAL_ENTRY = b"PK\x05\x06", b"PK\x01\x02"
METADATA_MEMBER = re.compile(r"^[^/]+\.dist-info/METADATA$")
PEP691_JSON = "application/vnd.pypi.simple.v1+json"
ACCEPT = f"{PEP691_JSON}, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1"


@dataclass(frozen=True)
class IndexFile:
    filename: str
    url: str
    sha256: str  # "" where the index publishes none


def project_page(index: str, project: str) -> str:
    return f"{with_slash(index)}{canonicalize_name(project)}/"


def read_project(index: str, project: str, timeout: float = DEFAULT_TIMEOUT) -> list[IndexFile] | None:
    """The files an index lists for a project (PEP 691 JSON or PEP 503 HTML, whichever it answers);
    None where the index has no such project (HTTP 404)."""
    url = project_page(index, project)
    try:
        response = web.get(url, timeout, accept=ACCEPT)
    except web.HTTPStatus as exc:
        if exc.code == 404:
            return None
        raise LookupError(f"{url} answered HTTP {exc.code}") from None
    body, content_type, final_url = response.body, response.content_type, response.url
    if PEP691_JSON in content_type or content_type.startswith("application/json"):
        try:
            data = json.loads(body)
        except ValueError:
            raise LookupError(f"{url} says it is PEP 691 JSON but is not JSON")
        return [IndexFile(str(f.get("filename")), urllib.parse.urljoin(final_url, str(f.get("url"))),
                          str((f.get("hashes") or {}).get("sha256") or "").lower())
                for f in data.get("files") or [] if f.get("filename") and f.get("url")]
    parser = _Anchors()
    parser.feed(body.decode("utf-8", "replace"))
    files = []
    for href, text in parser.anchors:
        absolute = urllib.parse.urljoin(final_url, href)
        bare, _, fragment = absolute.partition("#")
        name = urllib.parse.unquote(text.strip() or bare.rsplit("/", 1)[-1])
        digest = fragment[len("sha256="):].lower() if fragment.startswith("sha256=") else ""
        files.append(IndexFile(name, bare, digest))
    return files


def file_matches(filename: str, project: str, version: str, python_tag: str | None = None) -> bool:
    """Whether a file is this project's build of this version (for Linux x86_64, and for `python_tag`
    where given: cp312 for a CPython-specific wheel, None for a py3-none one)."""
    try:
        wanted = Version(version)
    except InvalidVersion:
        return False
    if filename.endswith(".whl"):
        try:
            name, found, _build, tags = parse_wheel_filename(filename)
        except (InvalidWheelFilename, InvalidVersion):
            return False
        if name != canonicalize_name(project) or found != wanted:
            return False
        if not any(t.platform == "any" or (t.platform.endswith("x86_64") and "linux" in t.platform) for t in tags):
            return False
        if python_tag is None:
            return True
        return any(t.interpreter == python_tag for t in tags) or any(t.interpreter.startswith("py3") and t.abi == "none" for t in tags)
    try:
        name, found = parse_sdist_filename(filename)
    except (InvalidSdistFilename, InvalidVersion):
        return False
    return name == canonicalize_name(project) and found == wanted


def pick_file(files: list[IndexFile], project: str, version: str, python_tag: str | None) -> IndexFile | None:
    """The one file to lock: a wheel for this Python (cpXY) or py3-none, Linux x86_64; else the sdist."""
    matching = [f for f in files if file_matches(f.filename, project, version, python_tag)]
    if python_tag:
        matching.sort(key=lambda f: (python_tag not in f.filename, f.filename))
    matching.sort(key=lambda f: (not f.filename.endswith(".whl"),))
    return matching[0] if matching else None


def versions_of(files: list[IndexFile], project: str) -> list[Version]:
    found = set()
    for f in files:
        try:
            if f.filename.endswith(".whl"):
                name, version, _b, _t = parse_wheel_filename(f.filename)
            else:
                name, version = parse_sdist_filename(f.filename)
        except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
            continue
        if name == canonicalize_name(project):
            found.add(version)
    return sorted(found)


def remote_wheel_metadata(url: str, timeout: float) -> str:
    """A wheel's .dist-info/METADATA read with HTTP range requests, where the index serves no PEP 658 file
    (PyPI's JSON API lists none for vLLM): the end of the file (the zip's end-of-central-directory and,
    mostly, the directory), the directory if it starts earlier, then the one member. A server that ignores
    Range answers the whole file, which works too. Unreachable or LookupError as web.get raises them."""
    tail, tail_start = _range(url, f"bytes=-{TAIL_BYTES}", timeout)
    at = tail.rfind(EOCD)
    if at < 0 or len(tail) < at + 22:
        raise LookupError(f"{url}: no zip end-of-central-directory in its last {TAIL_BYTES} bytes (not a wheel?)")
    cd_size, cd_offset = struct.unpack("<II", tail[at + 12:at + 20])
    if cd_offset >= tail_start:
        directory = tail[cd_offset - tail_start:cd_offset - tail_start + cd_size]
    else:
        body, start = _range(url, f"bytes={cd_offset}-{cd_offset + cd_size - 1}", timeout)
        directory = body[cd_offset - start:cd_offset - start + cd_size]
    position = 0
    while directory.startswith(CENTRAL_ENTRY, position):
        (method, compressed, name_len, extra_len, comment_len, local_offset) = (
            struct.unpack("<H", directory[position + 10:position + 12])[0],
            struct.unpack("<I", directory[position + 20:position + 24])[0],
            *struct.unpack("<HHH", directory[position + 28:position + 34]),
            struct.unpack("<I", directory[position + 42:position + 46])[0])
        name = directory[position + 46:position + 46 + name_len].decode("utf-8", "replace")
        position += 46 + name_len + extra_len + comment_len
        if not METADATA_MEMBER.match(name):
            continue
        # the local header's name and extra fields may differ in length from the directory's: read it first
        body, start = _range(url, f"bytes={local_offset}-{local_offset + 30 + name_len + extra_len + 1024 + compressed}",
                              timeout)
        chunk = body[local_offset - start:]
        local_name_len, local_extra_len = struct.unpack("<HH", chunk[26:30])
        start = 30 + local_name_len + local_extra_len
        data = chunk[start:start + compressed]
        if method == 8:
            data = zlib.decompressobj(-15).decompress(data)
        elif method != 0:
            raise LookupError(f"{url}: METADATA is compressed with zip method {method}, which is not read here")
        return data.decode("utf-8", "replace")
    raise LookupError(f"{url}: the wheel's zip directory names no .dist-info/METADATA")


def _range(url: str, byte_range: str, timeout: float) -> tuple[bytes, int]:
    """(bytes, the file offset they start at) of a range request; a server that ignores Range answers the
    whole file (offset 0)."""
    with web.opened(url, timeout, headers={"Range": byte_range}) as response:
        body = response.read()
        partial = re.match(r"bytes (\d+)-\d+/", response.headers.get("Content-Range", ""))
        whole = response.status != 206
    return body, 0 if whole or not partial else int(partial.group(1))


def with_slash(url: str) -> str:
    return url if not url or url.endswith("/") else url + "/"


class _Anchors(HTMLParser):
    def __init__(self):
        super().__init__()
        self.anchors: list[tuple[str, str]] = []
        self._href: str | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            self._href = dict(attrs).get("href")
            self._text = []

    def handle_data(self, data):
        if self._href is not None:
            self._text.append(data)

    def handle_endtag(self, tag):
        if tag == "a" and self._href:
            self.anchors.append((self._href, "".join(self._text)))
            self._href = None
