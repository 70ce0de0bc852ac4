"""Where a channel can live besides this machine: a folder, S3, an HTTP server, a package server.

A *store* is a channel laid out as files (file://, s3://) that we can read, write and index ourselves;
an HTTP channel (`orchestrate serve`, a web server, a package server's download URL) can only be read;
a *package server* (prefix.dev, quetz, Artifactory, anaconda.org) takes uploads through
py-rattler-build and indexes them itself.

Target URLs:
  file:///abs/path  or a plain path        a folder
  s3://bucket/prefix                       S3 or S3-compatible storage (MinIO, R2, Ceph, ...)
  http(s)://host/path                      read-only (cache lookups, consumers)
  prefix://[host/]channel                  prefix.dev (host defaults to prefix.dev)
  quetz://host/channel                     a quetz server
  artifactory://host/channel               an Artifactory conda repository
  anaconda://owner[/label]                 anaconda.org
"""
from __future__ import annotations

import hashlib
import shutil
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .. import web
from ..errors import UserError
from ..options import PACKAGE_SERVER_SCHEMES
from . import credentials
from .s3 import S3Options, S3Store, s3_options
from .store import FolderStore, Store
from .untrusted import MAX_INDEX_BYTES, Refused, bounded_copy, channel_relpath, shown

__all__ = ["FolderStore", "HttpStore", "PackageServer", "S3Options", "S3Store", "Store", "parse_target", "reader_for",
           "s3_options"]

HTTP_TIMEOUT_S = 30


class HttpStore(Store):
    """A channel behind HTTP(S): read-only. Credentials from the auth store (Bearer, Basic, conda token)."""

    def __init__(self, url: str):
        parsed = urllib.parse.urlsplit(url.rstrip("/"))
        self.host = parsed.hostname or ""
        token = credentials.conda_token(self.host)
        self._base = (f"{parsed.scheme}://{parsed.netloc}/t/{token}{parsed.path}" if token else url.rstrip("/"))
        # what every message, lookup entry and page names: a /t/<token>/ or user:password@ given in the URL itself
        # is used to connect and never shown (issue 37, a18)
        self.url = web.shown_url(url.rstrip("/"))

    def _explain(self, exc: Exception, relpath: str) -> UserError:
        if isinstance(exc, web.HTTPStatus) and exc.code in (401, 403):
            return UserError(f"{self.url} refused access to {relpath} (HTTP {exc.code}): "
                             f"log in with `pixi auth login {self.host}` or set {credentials.AUTH_FILE_ENV}")
        reason = f"HTTP {exc.code}" if isinstance(exc, web.HTTPStatus) else str(exc)
        return UserError(f"cannot reach {self.url} ({credentials.redact(reason)}): "
                         "check the URL and that the server is running")

    def _answer(self, relpath: str, use: Callable, method: str = "GET"):
        """use(response) for the file, or None when the channel does not have it (HTTP 404)."""
        channel_relpath(relpath)
        try:
            with web.opened(f"{self._base}/{relpath}", HTTP_TIMEOUT_S, headers=credentials.http_auth_header(self.host),
                            method=method) as response:
                return use(response)
        except web.HTTPStatus as exc:
            if exc.code == 404:
                return None
            raise self._explain(exc, relpath) from None
        except (web.Unreachable, OSError) as exc:
            raise self._explain(exc, relpath) from None

    def read(self, relpath: str, limit: int = MAX_INDEX_BYTES) -> bytes | None:
        def bounded(response) -> bytes:
            data = response.read(limit + 1)
            if len(data) > limit:
                raise Refused(f"{shown(relpath)}: over {limit} bytes")
            return data

        return self._answer(relpath, bounded)

    def download(self, relpath: str, dest: Path, limit: int | None = None) -> None:
        def save(response) -> bool:
            with open(dest, "wb") as out:
                if limit is None:
                    shutil.copyfileobj(response, out, 1 << 20)
                elif bounded_copy(response.read1, out, limit) is None:
                    raise Refused(f"{shown(relpath)}: the server sent more than the {limit} bytes its index lists")
            return True

        if self._answer(relpath, save) is None:
            raise UserError(f"{self.url} lists {relpath} but does not have it: re-publish the channel")

    def size(self, relpath: str) -> int | None:
        length = self._answer(relpath, lambda response: response.headers.get("Content-Length") or "", "HEAD")
        if length is None or length.isdigit():
            return None if length is None else int(length)
        return self._answer(relpath, lambda response: sum(len(c) for c in iter(lambda: response.read(1 << 20), b"")))

    def sha256(self, relpath: str) -> str | None:
        def digest(response) -> str:
            h = hashlib.sha256()
            for chunk in iter(lambda: response.read(1 << 20), b""):
                h.update(chunk)
            return h.hexdigest()

        return self._answer(relpath, digest)


@dataclass
class PackageServer:
    """prefix.dev, quetz, Artifactory or anaconda.org: upload through py-rattler-build, which indexes."""

    kind: str
    host: str
    channel: str  # channel name (owner for anaconda)
    label: str = ""

    @property
    def url(self) -> str:
        return f"{self.kind}://{self.host}/{self.channel}" + (f"/{self.label}" if self.label else "")

    @property
    def channel_url(self) -> str:
        """Where conda clients read this channel (also where cache lookups go)."""
        if self.kind == "prefix":
            return f"https://{'repo.prefix.dev' if self.host == 'prefix.dev' else self.host}/{self.channel}"
        if self.kind == "quetz":
            return f"https://{self.host}/get/{self.channel}"
        if self.kind == "artifactory":
            return f"https://{self.host}/artifactory/api/conda/{self.channel}"
        return f"https://conda.anaconda.org/{self.channel}" + (f"/label/{self.label}" if self.label else "")

    def reader(self) -> HttpStore:
        return HttpStore(self.channel_url)

    def upload(self, files: list[Path]) -> None:
        from rattler_build import upload

        names = [str(f) for f in files]
        auth_file = credentials.auth_store_path()
        key_env = {"prefix": "PREFIX_API_KEY", "quetz": "QUETZ_API_KEY", "anaconda": "ANACONDA_API_KEY",
                   "artifactory": "ARTIFACTORY_TOKEN"}[self.kind]
        key = credentials.token_from_env(key_env)
        secret = key.reveal() if key else None
        try:
            if self.kind == "prefix":
                upload.upload_package_to_prefix(names, f"https://{self.host}", self.channel, api_key=secret,
                                                auth_file=auth_file, skip_existing=True)
            elif self.kind == "quetz":
                upload.upload_package_to_quetz(names, f"https://{self.host}", self.channel, api_key=secret,
                                               auth_file=auth_file)
            elif self.kind == "artifactory":
                upload.upload_package_to_artifactory(names, f"https://{self.host}/artifactory", self.channel,
                                                     token=secret, auth_file=auth_file)
            else:
                upload.upload_package_to_anaconda(names, self.channel, channel=[self.label or "main"],
                                                  api_key=secret, auth_file=auth_file)
        except Exception as exc:  # py-rattler-build raises RattlerBuildError subclasses with the server's text
            raise UserError(f"upload to {self.url} failed: {credentials.redact(' '.join(str(exc).split()))[:300]}; "
                            f"check {key_env} or `pixi auth login {self.host}`") from None


def parse_target(url: str, config: dict, endpoint_url: str | None = None, region: str | None = None,
                 path_style: bool | None = None) -> Store | PackageServer:
    parsed = urllib.parse.urlsplit(url)
    scheme = parsed.scheme.lower()
    if scheme in ("", "file"):
        path = Path(urllib.parse.unquote(parsed.path) if scheme == "file" else url).expanduser()
        if scheme == "file" and parsed.netloc not in ("", "localhost"):
            raise UserError(f"{url}: file:// URLs take an absolute path, e.g. file:///srv/channel")
        return FolderStore(path)
    if scheme == "s3":
        if not parsed.netloc:
            raise UserError(f"{url} has no bucket: write s3://BUCKET/path/to/channel")
        return S3Store(parsed.netloc, parsed.path, s3_options(parsed.netloc, config, endpoint_url, region, path_style))
    if scheme in ("http", "https"):
        return HttpStore(url)
    if scheme in PACKAGE_SERVER_SCHEMES:
        parts = [p for p in parsed.path.split("/") if p]
        if scheme == "anaconda":
            return PackageServer("anaconda", "anaconda.org", parsed.netloc, parts[0] if parts else "")
        if scheme == "prefix" and not parts:
            return PackageServer("prefix", "prefix.dev", parsed.netloc)
        if not parsed.netloc or len(parts) != 1:
            raise UserError(f"{url}: write {scheme}://HOST/CHANNEL")
        return PackageServer(scheme, parsed.netloc, parts[0])
    raise UserError(f"{url}: unknown target; use file://, s3://, http(s)://, prefix://, quetz://, "
                    "artifactory:// or anaconda://")


def reader_for(url: str, config: dict) -> Store:
    """A readable store for a channel URL (a package server is read through its download URL)."""
    target = parse_target(url, config)
    return target.reader() if isinstance(target, PackageServer) else target
