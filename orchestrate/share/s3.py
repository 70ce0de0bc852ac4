"""S3 and S3-compatible storage (MinIO, R2, Ceph, ...) as a Store.

Nothing is locked: S3's conditional writes do the work. `If-None-Match: *` makes a write create-only
(package files, lookup entries); `If-Match: <ETag>` makes read-change-write a compare-and-swap that is
retried when another publisher wrote first. rattler's indexer does the same for repodata.json
(precondition checks), so indexes written at the same time do not lose each other's packages.
"""
from __future__ import annotations

import asyncio
import contextlib
import hashlib
import io
import os
import random
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..errors import UserError
from . import credentials
from .store import PLATFORM, Store
from .untrusted import MAX_INDEX_BYTES, Refused, bounded_copy, channel_relpath, shown

MULTIPART_CHUNK = 64 << 20  # larger files go up in parts of this size (S3 takes one PUT up to 5 GiB)
CAS_ATTEMPTS = 20
TAKEN = ("PreconditionFailed", "412")  # If-None-Match/If-Match refused: someone wrote first
CONFLICT = ("ConditionalRequestConflict", "409")  # a conditional write raced another one: try again
MISSING = ("NoSuchKey", "404", "NotFound")
RACED_INDEX = re.compile(r"precondition|condition ?not ?match|\b412\b|\b409\b|ConditionalRequestConflict", re.I)


@dataclass(frozen=True)
class S3Options:
    endpoint_url: str | None  # None: AWS itself
    region: str
    path_style: bool

    def table(self) -> dict:
        """These settings as an orchestrate.toml / pixi [s3-options.<bucket>] table (pixi's keys)."""
        chosen = {"region": self.region, "force-path-style": self.path_style}
        return {"endpoint-url": self.endpoint_url, **chosen} if self.endpoint_url else chosen


def s3_options(bucket: str, config: dict, endpoint_url: str | None = None, region: str | None = None,
               path_style: bool | None = None) -> S3Options:
    """Flags win over orchestrate.toml [s3-options.<bucket>] (pixi's keys), which win over AWS_* variables.
    A custom endpoint means MinIO/Ceph-like storage, where path-style addressing is the safe default."""
    table = (config.get("s3-options") or {}).get(bucket) or {}
    endpoint = endpoint_url or table.get("endpoint-url") or os.environ.get("AWS_ENDPOINT_URL")
    if endpoint and not str(endpoint).startswith(("http://", "https://")):  # botocore's answer is a traceback
        source = f"[s3-options.{bucket}] endpoint-url in orchestrate.toml" if table.get("endpoint-url") else "$AWS_ENDPOINT_URL"
        raise UserError(f"S3 endpoint {endpoint!r} from {source} is not an http(s) URL: write e.g. http://minio:9000")
    chosen_region = (region or table.get("region") or os.environ.get("AWS_REGION")
                     or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1")
    if path_style is None:
        path_style = table.get("force-path-style", endpoint is not None)
    return S3Options(endpoint.rstrip("/") if endpoint else None, chosen_region, bool(path_style))


def _code(exc) -> str:
    return str(exc.response.get("Error", {}).get("Code", "")) if hasattr(exc, "response") else ""


class _Ranges(io.RawIOBase):
    """An S3 object as a seekable file, read by ranged GETs: a zip's directory is read without the object."""

    def __init__(self, store: "S3Store", relpath: str, size: int):
        self.store, self.relpath, self.size, self.position = store, relpath, size, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self.position = max(0, {io.SEEK_SET: 0, io.SEEK_CUR: self.position, io.SEEK_END: self.size}[whence] + offset)
        return self.position

    def readinto(self, buffer) -> int:
        end = min(self.size, self.position + len(buffer))
        if end <= self.position:
            return 0
        answer = self.store._call(f"reading {self.relpath}", self.store.client().get_object, Bucket=self.store.bucket,
                                  Key=self.store._key(self.relpath), Range=f"bytes={self.position}-{end - 1}")
        data = answer["Body"].read()
        buffer[:len(data)] = data
        self.position += len(data)
        return len(data)


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
        if relpath and not relpath.endswith("/"):  # a key may literally hold `../`: only channel paths are asked for
            channel_relpath(relpath)
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
            code = _code(exc)
            if code in ("NoSuchBucket", "404", "NotFound"):
                return UserError(f"bucket {self.bucket} does not exist at {self.options.endpoint_url or 'AWS'}: "
                                 "create it first or fix the s3:// URL")
            if code in ("InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "403", "ExpiredToken",
                        "InvalidToken", "Forbidden"):
                origin = self.keys.origin if self.keys else "the AWS SDK's default chain"
                return UserError(f"S3 refused the credentials from {origin} for {self.url} ({code}) while {doing}: "
                                 "fix the keys or their permissions on the bucket")
            if code == "NotImplemented":
                return UserError(f"{self.where} does not support conditional writes (If-None-Match/If-Match), "
                                 "which publishing needs so that machines publishing at once lose nothing: "
                                 "upgrade the store (MinIO 2024-11 or later, Ceph Reef, R2 and AWS have them)")
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

    def _attempt(self, doing: str, function, *args, **kwargs):
        """Like _call, but a refused condition comes back as its code (TAKEN, CONFLICT) instead of an error."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return function(*args, **kwargs)
        except ClientError as exc:
            if _code(exc) in TAKEN + CONFLICT + MISSING:
                return _code(exc)
            raise self._explain(exc, doing) from None
        except BotoCoreError as exc:
            raise self._explain(exc, doing) from None

    def check(self) -> None:
        self._call("checking the bucket", self.client().head_bucket, Bucket=self.bucket)

    def _open(self, relpath: str) -> dict | None:
        """get_object's answer (its Body not read yet), or None when there is no such object."""
        answer = self._attempt(f"reading {relpath}", self.client().get_object, Bucket=self.bucket,
                               Key=self._key(relpath))
        if isinstance(answer, str):
            if answer in MISSING:
                return None
            raise self._explain(RuntimeError(answer), f"reading {relpath}")
        return answer

    def _get(self, relpath: str, limit: int = MAX_INDEX_BYTES) -> tuple[bytes | None, str | None]:
        answer = self._open(relpath)
        if answer is None:
            return None, None
        if int(answer.get("ContentLength") or 0) > limit:
            answer["Body"].close()
            raise Refused(f"{shown(relpath)}: over {limit} bytes")
        buffer = io.BytesIO()  # read as a download is: at most `limit` bytes, and at web.MIN_RATE (an endpoint that drips)
        if self._call(f"reading {relpath}", bounded_copy, answer["Body"].read, buffer, limit) is None:
            raise Refused(f"{shown(relpath)}: over {limit} bytes")
        return buffer.getvalue(), answer["ETag"]

    def read(self, relpath: str, limit: int = MAX_INDEX_BYTES) -> bytes | None:
        return self._get(relpath, limit)[0]

    def download(self, relpath: str, dest: Path, limit: int | None = None) -> None:
        if limit is None:
            self._call(f"downloading {relpath}", self.client().download_file, self.bucket, self._key(relpath), str(dest))
            return
        answer = self._open(relpath)  # the object's length is checked before a byte is written, and again as it comes
        if answer is None:
            raise UserError(f"{self.url} lists {relpath} but does not have it: re-publish the channel")
        body = answer["Body"]
        try:
            if int(answer.get("ContentLength") or 0) > limit:
                raise Refused(f"{shown(relpath)}: {answer['ContentLength']} bytes, over the {limit} its index lists")
            with open(dest, "wb") as out:
                if self._call(f"downloading {relpath}", bounded_copy, body.read, out, limit) is None:
                    raise Refused(f"{shown(relpath)}: more than the {limit} bytes its index lists")
        finally:
            body.close()

    def list(self, prefix: str) -> list[str]:
        base = self._key(prefix.rstrip("/") + "/")
        strip = len(self._key(""))
        pages = self.client().get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=base)
        found = []
        for page in self._call(f"listing {prefix}", list, pages):
            found += [item["Key"][strip:] for item in page.get("Contents", [])]
        return sorted(found)

    def size(self, relpath: str) -> int | None:
        answer = self._attempt(f"checking {relpath}", self.client().head_object, Bucket=self.bucket,
                               Key=self._key(relpath))
        return None if isinstance(answer, str) else int(answer["ContentLength"])

    def sha256(self, relpath: str) -> str | None:
        """Streamed, not held in memory: `verify` hashes every package of a channel, some of them gigabytes."""
        answer = self._open(relpath)
        if answer is None:
            return None
        digest = hashlib.sha256()

        def consume() -> None:
            for chunk in answer["Body"].iter_chunks(1 << 20):
                digest.update(chunk)

        self._call(f"reading {relpath}", consume)
        return digest.hexdigest()

    def create(self, relpath: str, local: Path | None = None, data: bytes | None = None) -> bool:
        if local is not None and local.stat().st_size > MULTIPART_CHUNK:
            return self._create_in_parts(relpath, local)
        body = local.read_bytes() if local is not None else data
        for _ in range(CAS_ATTEMPTS):
            answer = self._attempt(f"uploading {relpath}", self.client().put_object, Bucket=self.bucket,
                                   Key=self._key(relpath), Body=body, IfNoneMatch="*")
            if answer not in CONFLICT:  # else a simultaneous write to the same name: ask again
                return not isinstance(answer, str)
            time.sleep(random.uniform(0.05, 0.2))
        raise UserError(f"{self.url}/{relpath} kept being written by others while uploading it: run the same "
                        "command again")

    def _create_in_parts(self, relpath: str, local: Path) -> bool:
        client, key = self.client(), self._key(relpath)
        upload = self._call(f"uploading {relpath}", client.create_multipart_upload, Bucket=self.bucket, Key=key)
        upload_id = upload["UploadId"]
        try:
            parts = []
            with open(local, "rb") as source:
                for number, chunk in enumerate(iter(lambda: source.read(MULTIPART_CHUNK), b""), start=1):
                    part = self._call(f"uploading {relpath}", client.upload_part, Bucket=self.bucket, Key=key,
                                      UploadId=upload_id, PartNumber=number, Body=chunk)
                    parts.append({"PartNumber": number, "ETag": part["ETag"]})
            answer = self._attempt(f"uploading {relpath}", client.complete_multipart_upload, Bucket=self.bucket,
                                   Key=key, UploadId=upload_id, MultipartUpload={"Parts": parts}, IfNoneMatch="*")
        except BaseException:
            self._attempt(f"uploading {relpath}", client.abort_multipart_upload, Bucket=self.bucket, Key=key,
                          UploadId=upload_id)
            raise
        if isinstance(answer, str):
            self._attempt(f"uploading {relpath}", client.abort_multipart_upload, Bucket=self.bucket, Key=key,
                          UploadId=upload_id)
            return False
        return True

    def replace(self, relpath: str, local: Path | None = None, data: bytes | None = None) -> None:
        """Overwrite a damaged copy; S3 replaces an object whole, so readers never see half of one."""
        if local is not None:
            self._call(f"uploading {relpath}", self.client().upload_file, str(local), self.bucket, self._key(relpath))
        else:
            self._call(f"uploading {relpath}", self.client().put_object, Bucket=self.bucket, Key=self._key(relpath),
                       Body=data)

    def update(self, relpath: str, change: Callable[[bytes | None], bytes]) -> None:
        """Compare-and-swap: write only if nobody changed the object since we read it, else read again."""
        for attempt in range(CAS_ATTEMPTS):
            current, etag = self._get(relpath)
            condition = {"IfMatch": etag} if etag else {"IfNoneMatch": "*"}
            answer = self._attempt(f"updating {relpath}", self.client().put_object, Bucket=self.bucket,
                                   Key=self._key(relpath), Body=change(current), **condition)
            if not isinstance(answer, str):
                return
            time.sleep(random.uniform(0.05, 0.2) * (attempt + 1))
        raise UserError(f"{self.url}/{relpath} kept changing under {CAS_ATTEMPTS} attempts to update it: "
                        "too many publishes at once; run the same command again")

    def _platform_subdirs(self) -> list[str]:
        base = self._key("")
        pages = self.client().get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=base, Delimiter="/")
        found = [p["Prefix"][len(base):].rstrip("/") for page in self._call("listing the channel", list, pages)
                 for p in page.get("CommonPrefixes", [])]
        return [name for name in found if PLATFORM.match(name)]

    @contextlib.contextmanager
    def _open_package(self, relpath: str):
        try:
            size = self.size(relpath)
        except Refused:
            size = None
        yield None if size is None else io.BufferedReader(_Ranges(self, relpath, size), 1 << 16)

    def _move_aside(self, relpath: str, aside: str) -> None:
        """A copy, then the original deleted (S3 has no rename); another publisher that moved it first: nothing."""
        copied = self._attempt(f"moving {relpath} aside", self.client().copy_object, Bucket=self.bucket,
                               Key=self._key(aside), CopySource={"Bucket": self.bucket, "Key": self._key(relpath)})
        if not isinstance(copied, str):
            self._call(f"moving {relpath} aside", self.client().delete_object, Bucket=self.bucket,
                       Key=self._key(relpath))

    def index(self, force: bool = False) -> list[str]:
        from rattler.index import S3Credentials, index_s3

        set_aside = self.set_aside_unreadable(force)

        if self.size("noarch/repodata.json") is None:
            # conda channels always have noarch; rattler's indexer only indexes subdirs it finds
            self.create("noarch/.keep", data=b"")
        keys = self.keys
        creds = S3Credentials(
            endpoint_url=self.options.endpoint_url or f"https://s3.{self.options.region}.amazonaws.com",
            region=self.options.region,
            access_key_id=keys.access_key_id.reveal() if keys else None,
            secret_access_key=keys.secret_access_key.reveal() if keys else None,
            session_token=keys.session_token.reveal() if keys and keys.session_token else None,
            addressing_style="path" if self.options.path_style else "virtual-host",
        ) if (keys or self.options.endpoint_url) else None
        for attempt in range(CAS_ATTEMPTS):
            try:
                asyncio.run(index_s3(self.url, credentials=creds, write_shards=False, force=force,
                                     precondition_checks=True))
                return set_aside
            except Exception as exc:  # py-rattler raises plain exceptions with the Rust error text
                text = credentials.redact(" ".join(str(exc).split()))
                if not RACED_INDEX.search(text) or attempt == CAS_ATTEMPTS - 1:
                    raise UserError(f"indexing {self.where} failed: {text[:300]}; run `orchestrate publish` "
                                    "again") from None
            # another indexer wrote repodata.json between our read and our conditional write: read again
            time.sleep(random.uniform(0.05, 0.2) * (attempt + 1))
