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

import asyncio
import contextlib
import os
import shutil
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from ..errors import UserError
from . import credentials

HTTP_TIMEOUT_S = 30
PACKAGE_SERVER_SCHEMES = ("prefix", "quetz", "artifactory", "anaconda")


@dataclass(frozen=True)
class S3Options:
    endpoint_url: str | None  # None: AWS itself
    region: str
    path_style: bool


def s3_options(bucket: str, config: dict, endpoint_url: str | None = None, region: str | None = None,
               path_style: bool | None = None) -> S3Options:
    """Flags win over orchestrate.toml [s3-options.<bucket>] (pixi's keys), which win over AWS_* variables.
    A custom endpoint means MinIO/Ceph-like storage, where path-style addressing is the safe default."""
    table = (config.get("s3-options") or {}).get(bucket) or {}
    endpoint = endpoint_url or table.get("endpoint-url") or os.environ.get("AWS_ENDPOINT_URL")
    chosen_region = (region or table.get("region") or os.environ.get("AWS_REGION")
                     or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1")
    if path_style is None:
        path_style = table.get("force-path-style", endpoint is not None)
    return S3Options(endpoint.rstrip("/") if endpoint else None, chosen_region, bool(path_style))


class Store:
    """A channel as files: read, and (for writable stores) put, delete and index."""

    url: str
    writable = False

    def read(self, relpath: str) -> bytes | None:
        """The file's bytes, or None when the channel does not have it."""
        raise NotImplementedError

    def download(self, relpath: str, dest: Path) -> None:
        data = self.read(relpath)
        if data is None:
            raise UserError(f"{self.url} lists {relpath} but does not have it: re-publish the channel")
        dest.write_bytes(data)

    def check(self) -> None:
        """Raise UserError (one line, with the fix) unless the store is reachable and usable."""

    def put(self, local: Path, relpath: str) -> None:
        raise NotImplementedError

    def put_bytes(self, data: bytes, relpath: str) -> None:
        raise NotImplementedError

    def delete(self, relpath: str) -> None:
        raise NotImplementedError

    def index(self) -> None:
        raise NotImplementedError


class FolderStore(Store):
    writable = True

    def __init__(self, path: Path):
        self.path = Path(path).resolve()
        self.url = self.path.as_uri()

    def read(self, relpath: str) -> bytes | None:
        try:
            return (self.path / relpath).read_bytes()
        except FileNotFoundError:
            return None

    def download(self, relpath: str, dest: Path) -> None:
        if not (self.path / relpath).is_file():
            raise UserError(f"{self.url} lists {relpath} but does not have it: re-publish the channel")
        shutil.copyfile(self.path / relpath, dest)

    def check(self) -> None:
        if not self.path.parent.is_dir():
            raise UserError(f"target folder {self.path.parent} does not exist: create it or fix the file:// URL")
        try:
            (self.path / "noarch").mkdir(parents=True, exist_ok=True)
            tempfile.NamedTemporaryFile(dir=self.path, prefix=".write-probe-").close()
        except OSError as exc:
            raise UserError(f"target folder {self.path} is not writable ({exc.strerror}): fix its permissions") from None

    @contextlib.contextmanager
    def _writing(self, relpath: str, doing: str):
        try:
            yield
        except OSError as exc:
            raise UserError(f"{doing} {relpath} in {self.path} failed ({exc.strerror or exc}): "
                            "fix the folder's permissions or free space, then publish again") from None

    def put(self, local: Path, relpath: str) -> None:
        with self._writing(relpath, "writing"):
            target = self.path / relpath
            target.parent.mkdir(parents=True, exist_ok=True)
            staged = target.with_name(f".{target.name}.incoming")
            shutil.copyfile(local, staged)
            os.replace(staged, target)  # readers never see half a file

    def put_bytes(self, data: bytes, relpath: str) -> None:
        with self._writing(relpath, "writing"):
            target = self.path / relpath
            staged = target.with_name(f".{target.name}.incoming")
            staged.write_bytes(data)
            os.replace(staged, target)

    def delete(self, relpath: str) -> None:
        with self._writing(relpath, "removing"):
            (self.path / relpath).unlink(missing_ok=True)

    def index(self) -> None:
        from rattler.index import index_fs

        with self._writing("noarch/", "indexing"):
            (self.path / "noarch").mkdir(parents=True, exist_ok=True)
        try:
            asyncio.run(index_fs(self.path, write_shards=False))
        except Exception as exc:  # py-rattler raises plain exceptions with the Rust error text
            raise UserError(f"indexing {self.path} failed ({' '.join(str(exc).split())[:200]}): "
                            "fix the folder, then publish again") from None


class S3Store(Store):
    writable = True

    def __init__(self, bucket: str, prefix: str, options: S3Options):
        self.bucket, self.prefix, self.options = bucket, prefix.strip("/"), options
        self.url = f"s3://{bucket}/{self.prefix}".rstrip("/")
        self.keys = credentials.s3_keys(bucket)
        self._client = None

    @property
    def where(self) -> str:
        return f"{self.url} (endpoint {self.options.endpoint_url or 'AWS'})"

    def _key(self, relpath: str) -> str:
        return f"{self.prefix}/{relpath}" if self.prefix else relpath

    def client(self):
        if self._client is None:
            try:
                import boto3
                from botocore.config import Config
            except ImportError:
                raise UserError("s3:// channels need boto3: pip install 'rocm-stack-orchestrate[share]'") from None
            keys = self.keys
            self._client = boto3.client(
                "s3",
                endpoint_url=self.options.endpoint_url,
                region_name=self.options.region,
                aws_access_key_id=keys.access_key_id.reveal() if keys else None,
                aws_secret_access_key=keys.secret_access_key.reveal() if keys else None,
                aws_session_token=keys.session_token.reveal() if keys and keys.session_token else None,
                config=Config(
                    s3={"addressing_style": "path" if self.options.path_style else "virtual"},
                    connect_timeout=5, read_timeout=120, retries={"max_attempts": 2, "mode": "standard"},
                ),
            )
        return self._client

    def _explain(self, exc: Exception, doing: str) -> UserError:
        """One line naming the fix, for every failure boto3 can report."""
        from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError

        if isinstance(exc, NoCredentialsError):
            return UserError(f"no S3 credentials for {self.url}: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
                             f"or run `pixi auth login --s3-access-key-id ... s3://{self.bucket}`")
        if isinstance(exc, EndpointConnectionError):
            return UserError(f"cannot reach {self.where} while {doing}: check the endpoint URL and the network")
        if isinstance(exc, ClientError):
            code = str(exc.response.get("Error", {}).get("Code", ""))
            if code in ("NoSuchBucket", "404", "NotFound"):
                return UserError(f"bucket {self.bucket} does not exist at {self.options.endpoint_url or 'AWS'}: "
                                 "create it first or fix the s3:// URL")
            if code in ("InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "403", "ExpiredToken",
                        "InvalidToken", "Forbidden"):
                origin = self.keys.origin if self.keys else "the AWS SDK's default chain"
                return UserError(f"S3 refused the credentials from {origin} for {self.url} ({code}) while {doing}: "
                                 "fix the keys or their permissions on the bucket")
            return UserError(f"S3 error {code or type(exc).__name__} for {self.where} while {doing}: "
                             f"{credentials.redact(str(exc))}")
        return UserError(f"S3 failed for {self.where} while {doing}: "
                         f"{credentials.redact(' '.join(str(exc).split()))[:300]}")

    def _call(self, doing: str, function, *args, **kwargs):
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return function(*args, **kwargs)
        except (BotoCoreError, ClientError) as exc:
            raise self._explain(exc, doing) from None

    def check(self) -> None:
        self._call("checking the bucket", self.client().head_bucket, Bucket=self.bucket)

    def read(self, relpath: str) -> bytes | None:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return self.client().get_object(Bucket=self.bucket, Key=self._key(relpath))["Body"].read()
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return None
            raise self._explain(exc, f"reading {relpath}") from None
        except BotoCoreError as exc:
            raise self._explain(exc, f"reading {relpath}") from None

    def download(self, relpath: str, dest: Path) -> None:
        self._call(f"downloading {relpath}", self.client().download_file, self.bucket, self._key(relpath), str(dest))

    def put(self, local: Path, relpath: str) -> None:
        self._call(f"uploading {relpath}", self.client().upload_file, str(local), self.bucket, self._key(relpath))

    def put_bytes(self, data: bytes, relpath: str) -> None:
        self._call(f"uploading {relpath}", self.client().put_object, Bucket=self.bucket, Key=self._key(relpath),
                   Body=data)

    def delete(self, relpath: str) -> None:
        self._call(f"removing {relpath}", self.client().delete_object, Bucket=self.bucket, Key=self._key(relpath))

    def index(self) -> None:
        from rattler.index import S3Credentials, index_s3

        if self.read("noarch/repodata.json") is None and self.read("noarch/.keep") is None:
            # conda channels always have noarch; rattler's indexer only indexes subdirs it finds
            self.put_bytes(b"", "noarch/.keep")
        keys = self.keys
        creds = S3Credentials(
            endpoint_url=self.options.endpoint_url or f"https://s3.{self.options.region}.amazonaws.com",
            region=self.options.region,
            access_key_id=keys.access_key_id.reveal() if keys else None,
            secret_access_key=keys.secret_access_key.reveal() if keys else None,
            session_token=keys.session_token.reveal() if keys and keys.session_token else None,
            addressing_style="path" if self.options.path_style else "virtual-host",
        ) if (keys or self.options.endpoint_url) else None
        try:
            asyncio.run(index_s3(self.url, credentials=creds, write_shards=False))
        except Exception as exc:  # py-rattler raises plain exceptions with the Rust error text
            raise UserError(f"indexing {self.where} failed: {credentials.redact(' '.join(str(exc).split()))[:300]}; "
                            "run `orchestrate publish` again") from None


class HttpStore(Store):
    """A channel behind HTTP(S): read-only. Credentials from the auth store (Bearer, Basic, conda token)."""

    def __init__(self, url: str):
        self.url = url.rstrip("/")
        parsed = urllib.parse.urlsplit(self.url)
        self.host = parsed.hostname or ""
        token = credentials.conda_token(self.host)
        self._base = (f"{parsed.scheme}://{parsed.netloc}/t/{token}{parsed.path}" if token else self.url)

    def _open(self, relpath: str):
        request = urllib.request.Request(f"{self._base}/{relpath}", headers=credentials.http_auth_header(self.host))
        return urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S)

    def _explain(self, exc: Exception, relpath: str) -> UserError:
        if isinstance(exc, urllib.error.HTTPError) and exc.code in (401, 403):
            return UserError(f"{self.url} refused access to {relpath} (HTTP {exc.code}): "
                             f"log in with `pixi auth login {self.host}` or set {credentials.AUTH_FILE_ENV}")
        reason = getattr(exc, "reason", None) or exc
        return UserError(f"cannot reach {self.url} ({credentials.redact(str(reason))}): "
                         "check the URL and that the server is running")

    def read(self, relpath: str) -> bytes | None:
        try:
            with self._open(relpath) as response:
                return response.read()
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            raise self._explain(exc, relpath) from None
        except (urllib.error.URLError, OSError) as exc:
            raise self._explain(exc, relpath) from None

    def download(self, relpath: str, dest: Path) -> None:
        try:
            with self._open(relpath) as response, open(dest, "wb") as out:
                shutil.copyfileobj(response, out, 1 << 20)
        except (urllib.error.URLError, OSError) as exc:
            raise self._explain(exc, relpath) from None


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
