"""The source cache: rattler-build's own, in one folder every build and every architecture shares.

rattler-build keeps downloaded archives, their extracted trees and git clones in `<output dir>/src_cache`
and indexes them in `src_cache/.metadata/*.json` (url + checksum, or git url + rev + commit). Each build
runs in a fresh work folder, so on its own that cache starts empty every time; linking every work
folder's `src_cache` to one folder makes a source pinned by sha256 or full commit download once, for
every architecture and every rebuild. The orchestrator only reads that index (to tell cached from
missing); rattler-build does all fetching, verifying and patching.
"""
from __future__ import annotations

import json
import os
import tempfile
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
