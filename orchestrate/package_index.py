"""Reading a package index (PEP 691 JSON or PEP 503 HTML, whichever it answers), such as AMD's: the files a
project lists with the sha256 the index publishes, which of them is a given version's build for Linux
x86_64 and one Python, and which versions exist. `orchestrate pins --lock` pins AMD's artifacts from it
(orchestrate/prebuilt.py); `orchestrate pins` reports AMD's newer releases. Every GET goes through web.py.
"""
from __future__ import annotations

import email.parser
import json
import re
import struct
import tempfile
import urllib.parse
import zlib
from dataclasses import dataclass
from html.parser import HTMLParser

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import InvalidSdistFilename, InvalidWheelFilename, canonicalize_name, parse_sdist_filename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from . import web

DEFAULT_TIMEOUT = 20.0
TAIL_BYTES = 65536  # one range request holds the end-of-central-directory and, mostly, the whole directory
EOCD, CENTRAL_ENTRY = b"PK\x05\x06", b"PK\x01\x02"
ZIP64 = 0xFFFFFFFF  # a 32-bit field of the end-of-central-directory that says "read the zip64 record instead"
METADATA_LIMIT = 1 << 24  # no core metadata comes near 16 MiB: more is a broken or hostile file
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
    Range answers the whole file: it is streamed once into a temporary file, and every later read comes
    from there (a torch wheel is over 300 MB). Unreachable or LookupError as web.get raises them; a file
    that is not a readable wheel is a LookupError "<file> is not a readable wheel (<why>)"."""
    with _RemoteFile(url, timeout) as remote:
        try:
            return checked_metadata(_read_metadata(remote), wheel_filename(url))
        except (struct.error, zlib.error, NotAWheel) as exc:
            raise LookupError(f"{wheel_filename(url)} is not a readable wheel ({exc})") from None


def wheel_filename(url: str) -> str:
    return urllib.parse.unquote(url.split("#")[0].rstrip("/").rsplit("/", 1)[-1])


def checked_metadata(data: bytes, filename: str) -> str:
    """A wheel's METADATA as text, once it parses as core metadata (UTF-8, Metadata-Version and Name, and
    every Requires-Dist a requirement): a requirement read from a broken file would be a wrong decision."""
    try:
        text = data.decode("utf-8")
        message = email.parser.Parser().parsestr(text, headersonly=True)
        if not message.get("Metadata-Version") or not message.get("Name"):
            raise NotAWheel("its METADATA has no Metadata-Version or Name: it does not parse as core metadata")
        for line in message.get_all("Requires-Dist") or []:
            try:
                Requirement(line)
            except InvalidRequirement as exc:
                raise NotAWheel(f"its METADATA's Requires-Dist {line!r} does not parse: {exc}") from None
    except (UnicodeDecodeError, NotAWheel) as exc:
        raise LookupError(f"{filename} is not a readable wheel ({exc})") from None
    return text


class NotAWheel(Exception):
    """The bytes are not the zip a wheel is."""


def _read_metadata(remote: _RemoteFile) -> bytes:
    tail, tail_start = remote.tail(TAIL_BYTES)
    at = tail.rfind(EOCD)
    if at < 0 or len(tail) < at + 22:
        raise NotAWheel(f"no zip end-of-central-directory in its last {TAIL_BYTES} bytes")
    cd_size, cd_offset = struct.unpack("<II", tail[at + 12:at + 20])
    if ZIP64 in (cd_size, cd_offset):
        raise NotAWheel("it is a zip64 archive (over 4 GiB or 65,535 members), which is not read here")
    if cd_offset + cd_size > tail_start + at:
        raise NotAWheel(f"its zip directory ({cd_size} bytes at {cd_offset}) runs past the end-of-central-directory")
    directory = remote.read(cd_offset, cd_size)
    position = 0
    while directory.startswith(CENTRAL_ENTRY, position):
        if len(directory) < position + 46:
            raise NotAWheel("its zip directory is truncated")
        method, = struct.unpack("<H", directory[position + 10:position + 12])
        compressed, = struct.unpack("<I", directory[position + 20:position + 24])
        name_len, extra_len, comment_len = struct.unpack("<HHH", directory[position + 28:position + 34])
        local_offset, = struct.unpack("<I", directory[position + 42:position + 46])
        name = directory[position + 46:position + 46 + name_len].decode("utf-8", "replace")
        position += 46 + name_len + extra_len + comment_len
        if not METADATA_MEMBER.match(name):
            continue
        # the local header's name and extra fields may differ in length from the directory's: read it, and
        # in the same request the member with room for them to differ
        local_name_len, local_extra_len = struct.unpack(
            "<HH", remote.read(local_offset + 26, 4, ahead=name_len + extra_len + 1024 + compressed))
        data = remote.read(local_offset + 30 + local_name_len + local_extra_len, compressed)
        if method == 8:
            inflater = zlib.decompressobj(-15)
            data = inflater.decompress(data, METADATA_LIMIT)
            if not inflater.eof:
                raise NotAWheel(f"{name} does not inflate to a whole file of at most {METADATA_LIMIT} bytes")
        elif method != 0:
            raise LookupError(f"{remote.url}: METADATA is compressed with zip method {method}, which is not read here")
        return data
    raise NotAWheel("its zip directory names no .dist-info/METADATA")


class _RemoteFile:
    """Byte ranges of a file on a server: each read a range request, unless what was read already holds it;
    once the server answers a range with the whole file, the file is kept (streamed to a temporary file,
    never held in memory) and read from there, so it is downloaded at most once."""

    def __init__(self, url: str, timeout: float):
        self.url, self.timeout = url, timeout
        self.size: int | None = None
        self._parts: list[tuple[int, bytes]] = []  # (offset, bytes) of each range answered
        self._whole = None  # the temporary file, once the server sent the whole file

    def __enter__(self) -> _RemoteFile:
        return self

    def __exit__(self, *exc) -> None:
        if self._whole is not None:
            self._whole.close()

    def tail(self, length: int) -> tuple[bytes, int]:
        """(the last `length` bytes, the offset they start at)."""
        if self._whole is None:
            self._request(f"bytes=-{length}")
        if self._whole is not None:
            start = max(self.size - length, 0)
            return self._from_whole(start, self.size - start), start
        start, body = self._parts[-1]
        return body, start

    def read(self, offset: int, length: int, ahead: int = 0) -> bytes:
        """Exactly `length` bytes at `offset` (a range request asks for `ahead` bytes more, for a later read);
        a file shorter than that is not a wheel (NotAWheel)."""
        if offset < 0 or (self.size is not None and offset + length > self.size):
            raise NotAWheel(f"it points at bytes {offset}-{offset + length - 1} of a {self.size}-byte file")
        if self._whole is None:
            held = next((body[offset - start:offset - start + length] for start, body in self._parts
                         if start <= offset and offset + length <= start + len(body)), None)
            if held is not None:
                return held
            if length:
                last = offset + length + ahead - 1
                self._request(f"bytes={offset}-{last if self.size is None else min(last, self.size - 1)}")
        if self._whole is not None:
            return self._from_whole(offset, length)
        start, body = self._parts[-1]
        found = body[offset - start:offset - start + length] if start <= offset else b""
        if len(found) != length:
            raise NotAWheel(f"the server answered bytes {start}-{start + len(body) - 1} for {offset}-{offset + length - 1}")
        return found

    def _request(self, byte_range: str) -> None:
        with web.opened(self.url, self.timeout, headers={"Range": byte_range}) as response:
            partial = re.match(r"bytes (\d+)-\d+/(\d+)", response.headers.get("Content-Range", ""))
            if response.status == 206 and partial:
                self._parts.append((int(partial.group(1)), response.read()))
                self.size = int(partial.group(2))
                return
            self._whole = tempfile.TemporaryFile(prefix="orchestrate-wheel-")
            for chunk in iter(lambda: response.read(1 << 20), b""):
                self._whole.write(chunk)
            self.size = self._whole.tell()

    def _from_whole(self, offset: int, length: int) -> bytes:
        self._whole.seek(offset)
        found = self._whole.read(length)
        if len(found) != length:
            raise NotAWheel(f"it is {self.size} bytes, too short for bytes {offset}-{offset + length - 1}")
        return found


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
