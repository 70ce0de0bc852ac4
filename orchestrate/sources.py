"""The source cache: rattler-build's own, in one folder every build and every architecture shares.

rattler-build keeps downloaded archives, their extracted trees and git clones in `<output dir>/src_cache`
and indexes them in `src_cache/.metadata/*.json` (url + checksum, or git url + rev + commit). Each build
runs in a fresh work folder, so on its own that cache starts empty every time; linking every work
folder's `src_cache` to one folder makes a source pinned by sha256 or full commit download once, for
every architecture and every rebuild. The orchestrator only reads that index (to tell cached from
missing); rattler-build does all fetching, verifying and patching.
"""
from __future__ import annotations

import datetime
import grp
import json
import os
import pwd
import stat as st
import shutil
import tarfile
import tempfile
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from .errors import DiskFull, UserError, is_disk_full, writing

LINK_NAME = "src_cache"  # where rattler-build looks for its source cache inside an output folder
METADATA = ".metadata"
# py-rattler-build renders `sha256: ""` (an unlocked prebuilt artifact's KEY_sha256) as 64 zeros.
ZERO_SHA256 = "0" * 64


@dataclass(frozen=True)
class Source:
    """One entry of a rendered recipe's `source` list."""

    kind: str  # "url", "git" or "path"
    locations: tuple[str, ...]  # url mirrors, the git url, or the path
    pin: str  # sha256 (or md5) for url, rev for git, "" for path
    patches: tuple[str, ...] = ()
    target_directory: str = ""

    @property
    def location(self) -> str:
        return self.locations[0]

    def describe(self) -> str:
        if self.kind == "git":
            return f"git {self.location} @ {self.pin[:12]}"
        if self.kind == "url":
            return self.location
        return f"path {self.location}"


def sources_of(rendered: dict) -> list[Source]:
    raw = rendered.get("source") or []
    found = []
    for entry in raw if isinstance(raw, list) else [raw]:
        patches = tuple(str(p) for p in entry.get("patches") or [])
        target = str(entry.get("target_directory") or "")
        if "url" in entry:
            urls = entry["url"] if isinstance(entry["url"], list) else [entry["url"]]
            pin = str(entry.get("sha256") or entry.get("md5") or "")
            found.append(Source("url", tuple(str(u) for u in urls), pin.lower(), patches, target))
        elif "git" in entry:
            pin = str(entry.get("rev") or entry.get("tag") or entry.get("branch") or "HEAD")
            found.append(Source("git", (str(entry["git"]),), pin, patches, target))
        elif "path" in entry:
            found.append(Source("path", (str(entry["path"]),), "", patches, target))
    return found


class SourceCache:
    def __init__(self, path: Path):
        self.path = Path(path).resolve()

    def ensure_writable(self) -> None:
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            tempfile.TemporaryFile(dir=self.path).close()
        except OSError as exc:
            if is_disk_full(exc):
                raise DiskFull(self.path, "the source cache") from None
            raise UserError(f"source cache {self.path} is not a folder you can write ({exc.strerror or exc}): "
                            "pass --source-cache DIR (or source_cache in orchestrate.toml) with one") from None

    def others_can_change(self) -> str | None:
        """The first place in the cache (or a folder above it) where another user can change what a build compiles:
        a file or folder owned by someone else, writable by everyone, or by a group with members besides us; a folder
        above that lets them swap the cache itself. None for a cache only we (and root) can change. rattler-build
        checks an archive's sha256 when it downloads it, never the tree it unpacked, nor a git checkout: an unpacked
        source changed in a shared cache would be compiled under the same input hash (issue 37, a17). Inside a cache
        folder no one else may enter, what an archive unpacked writable by everyone (its own modes) is harmless: there
        only what others own counts."""
        if not self.path.exists():
            return None
        for folder in reversed(self.path.parents):  # the way to the cache: a folder others can rename entries in
            found = _changeable(folder, os.lstat(folder), above=True)
            if found:
                return found
        top = os.lstat(self.path)
        found = _changeable(self.path, top)
        closed = not top.st_mode & (st.S_IXOTH | st.S_IXGRP) if not found else False
        for root, dirs, files in os.walk(self.path) if not found else ():  # never into a linked folder
            for name in [*dirs, *files]:
                path = os.path.join(root, name)
                try:
                    found = _changeable(Path(path), os.lstat(path), owner_only=closed)
                except OSError:
                    continue
                if found:
                    return found
        return found

    def check_private(self, shared_allowed: bool) -> None:
        """Refuse (one line, with the fix) a cache others can change, unless orchestrate.toml says it is shared."""
        found = None if shared_allowed else self.others_can_change()
        if found:
            raise UserError(f"source cache {self.path}: {found}, so another user can change what a build compiles: "
                            "use a source cache of your own (--source-cache DIR, or `chmod go-rwx` this one if only you "
                            "wrote it), or set shared_source_cache = true in orchestrate.toml to trust everyone who can "
                            "write it as you trust the channel's writers")

    def attach(self, output_dir: Path) -> None:
        """Make a build's output folder use this cache (rattler-build reads `<output dir>/src_cache`)."""
        self.ensure_writable()
        with writing("the source cache link in", output_dir):
            (output_dir / LINK_NAME).symlink_to(self.path, target_is_directory=True)

    def records(self) -> list[dict]:
        folder = self.path / METADATA
        records = []
        for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
            try:
                records.append(json.loads(path.read_text()))
            except (OSError, json.JSONDecodeError):
                continue  # a record being written by a concurrent build; it is not a hit yet
        return records

    def has(self, source: Source, records: list[dict] | None = None) -> bool:
        """Whether rattler-build will find this source in the cache without going to the network."""
        if source.kind == "path":
            return True
        for record in self.records() if records is None else records:
            if record.get("source_type") != source.kind or record.get("url") not in source.locations:
                continue
            if source.kind == "url":
                matched = str(record.get("checksum") or "").lower() == source.pin
            else:
                matched = source.pin in (record.get("git_rev"), record.get("git_commit"))
            if matched and (self.path / str(record.get("cache_path") or "")).exists():
                return True
        return False


# rattler-build unpacks a url source with one of these endings (and no file_name) into `<key>_extracted`; any
# other file it keeps whole (crates/rattler_build_source_cache/src/cache.rs, is_archive, at v0.73.0)
ARCHIVE_ENDINGS = (".tar.gz", ".tgz", ".taz", ".tar.bz2", ".tbz", ".tbz2", ".tz2", ".tar.lzma", ".tlz", ".tar.xz",
                   ".txz", ".tar.zst", ".tzst", ".tar.Z", ".taZ", ".tar", ".zip", ".7z")


def kept_whole(url: str) -> bool:
    """Whether rattler-build keeps this url source as the file it is (a wheel), rather than unpacking it."""
    name = urllib.parse.urlsplit(url).path.rsplit("/", 1)[-1]
    return not name.endswith(ARCHIVE_ENDINGS)


def url_cache_key(url: str, sha256: str) -> str:
    """rattler-build's key for a url source pinned by one sha256: Rust's DefaultHasher (SipHash-1-3, zero keys)
    over the URL's text and the checksum's hex, each `str` hashed as its bytes and 0xff, printed as {:x}
    (CacheIndex::generate_cache_key, rattler-build v0.73.0, the version py-rattler-build 0.73 bundles)."""
    return format(_siphash13(url.encode() + b"\xff" + sha256.encode() + b"\xff"), "x")


def _siphash13(data: bytes) -> int:
    mask = (1 << 64) - 1

    def rotl(x: int, b: int) -> int:
        return ((x << b) | (x >> (64 - b))) & mask

    v = [0x736F6D6570736575, 0x646F72616E646F6D, 0x6C7967656E657261, 0x7465646279746573]

    def sip_round() -> None:
        v[0] = (v[0] + v[1]) & mask; v[1] = rotl(v[1], 13) ^ v[0]; v[0] = rotl(v[0], 32)  # noqa: E702
        v[2] = (v[2] + v[3]) & mask; v[3] = rotl(v[3], 16) ^ v[2]  # noqa: E702
        v[0] = (v[0] + v[3]) & mask; v[3] = rotl(v[3], 21) ^ v[0]  # noqa: E702
        v[2] = (v[2] + v[1]) & mask; v[1] = rotl(v[1], 17) ^ v[2]; v[2] = rotl(v[2], 32)  # noqa: E702

    end = len(data) - len(data) % 8
    words = [int.from_bytes(data[i:i + 8], "little") for i in range(0, end, 8)]
    words.append(((len(data) & 0xFF) << 56) | int.from_bytes(data[end:], "little"))
    for word in words:
        v[3] ^= word
        sip_round()
        v[0] ^= word
    v[2] ^= 0xFF
    for _ in range(3):
        sip_round()
    return v[0] ^ v[1] ^ v[2] ^ v[3]


def seed_download(cache: SourceCache, url: str, sha256: str, downloaded: Path) -> bool:
    """Put a file downloaded and checked here into rattler-build's cache as rattler-build would have (the file as
    `<key>_<name>`, a tarball also unpacked into `<key>_extracted` with its one top folder stripped, and the
    record in .metadata/<key>.json), so no build or fetch downloads it again. False, the file left alone, for
    an archive unpacked here would not match rattler-build's (a zip, 7z or zstd one, or a tarball the `data`
    filter refuses): a build downloads that one again."""
    key = url_cache_key(url, sha256)
    name = urllib.parse.urlsplit(url).path.rsplit("/", 1)[-1] or "download"
    cache.ensure_writable()
    extracted = None
    if not kept_whole(url):
        extracted = _unpacked(cache.path, downloaded, f"{key}_extracted")
        if extracted is None:
            return False
    with writing("a download into", cache.path):
        os.replace(downloaded, cache.path / f"{key}_{name}")
        (cache.path / METADATA).mkdir(exist_ok=True)
        now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        record = {"source_type": "url", "url": url, "checksum": sha256, "checksum_type": "sha256",
                  "actual_filename": None, "git_commit": None, "git_rev": None, "cache_path": f"{key}_{name}",
                  "extracted_path": extracted, "last_accessed": now, "created": now, "lock_file": None,
                  "attestation_verified": False}
        partial = cache.path / METADATA / f".{key}.json.partial"
        partial.write_text(json.dumps(record, indent=2))
        os.replace(partial, cache.path / METADATA / f"{key}.json")
    return True


def _unpacked(cache: Path, archive: Path, folder: str) -> str | None:
    """A tarball unpacked as rattler-build unpacks it (strip_and_move_extracted_dir: a lone top folder is
    stripped), through tarfile's `data` filter; None where that is not possible here."""
    if not tarfile.is_tarfile(archive):
        return None
    staging = Path(tempfile.mkdtemp(dir=cache, prefix=".unpacking-"))
    try:
        with tarfile.open(archive) as tar:
            tar.extractall(staging, filter="data")
        top = list(staging.iterdir())
        inner = top[0] if len(top) == 1 and top[0].is_dir() and not top[0].is_symlink() else staging
        target = cache / folder
        if target.exists():
            shutil.rmtree(target)
        target.mkdir()
        for entry in inner.iterdir():
            os.replace(entry, target / entry.name)
        return folder
    except (tarfile.TarError, OSError, ValueError):
        shutil.rmtree(cache / folder, ignore_errors=True)
        return None
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _changeable(path: Path, stat: os.stat_result, above: bool = False, owner_only: bool = False) -> str | None:
    """Why another user can change `path` (None: they cannot): its owner, unless root or we (for what is in the
    cache); everyone, or a group with members besides us, where it is writable (a sticky folder above the cache,
    /tmp, lets others add entries, never rename ours). A symlink's own mode means nothing."""
    if st.S_ISLNK(stat.st_mode):
        return None
    me = os.getuid()
    if stat.st_uid not in (me, 0) and not above:  # a folder above: its owner is who set the machine up (a CI checkout)
        return f"{path} belongs to uid {stat.st_uid}"
    if owner_only:
        return None
    sticky = above and stat.st_mode & st.S_ISVTX
    if stat.st_mode & st.S_IWOTH and not sticky:
        return f"{path} can be written by everyone (mode {stat.st_mode & 0o7777:o})"
    if stat.st_mode & st.S_IWGRP and not sticky:
        try:  # a group of our own (umask 002, one group per user) is no one else
            group_name, members = grp.getgrgid(stat.st_gid).gr_name, set(grp.getgrgid(stat.st_gid).gr_mem)
        except KeyError:  # a container's group or user without a name
            group_name, members = str(stat.st_gid), set()
        try:
            members.discard(pwd.getpwuid(me).pw_name)
        except KeyError:
            pass
        if members or stat.st_gid != os.getgid():
            return f"{path} can be written by group {group_name}"
    return None


def folder_bytes(folder: Path) -> int:
    """Bytes of the files under a folder, not following links (a work folder links the source cache)."""
    total = 0
    for root, _dirs, files in os.walk(folder):  # does not descend into linked folders
        for name in files:
            try:
                stat = os.lstat(os.path.join(root, name))
            except OSError:
                continue
            total += stat.st_size if not os.path.islink(os.path.join(root, name)) else 0
    return total
