"""Reading a package index (PEP 691 JSON or PEP 503 HTML, whichever it answers), such as AMD's: the files a
project lists with the sha256 the index publishes, which of them is a given version's build for Linux
x86_64 and one Python, and which versions exist. `orchestrate pins --lock` pins AMD's artifacts from it
(orchestrate/prebuilt.py); `orchestrate pins` reports AMD's newer releases. Every GET goes through web.py.
"""
from __future__ import annotations

import json
import urllib.parse
from dataclasses import dataclass
from html.parser import HTMLParser

from packaging.utils import InvalidSdistFilename, InvalidWheelFilename, canonicalize_name, parse_sdist_filename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from . import web

DEFAULT_TIMEOUT = 20.0
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
