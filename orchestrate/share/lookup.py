"""The build-cache lookup of a shared channel: which package file holds which input hash.

One immutable entry per package file, `orchestrate-manifest.d/<subdir>/<file>.json` (like a Nix binary
cache's .narinfo or a Spack build cache's spec file), holding that file's ManifestEntry. A publisher
creates it (create-only) after the package file and before the index, so no two machines ever write the
same shared file to record their packages. `orchestrate-manifest.json` at the channel root is derived
from the entries and rewritten under the index lock or by compare-and-swap: readers that cannot list
a folder (HTTP) use it, and channels published before the entries existed have only it.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from ..channel import LOOKUP_DIR, MANIFEST, SUBDIRS, ManifestEntry
from .untrusted import (LATEST_TIME, MAX_INDEX_BYTES, Refused, check_entry, hex_or_none, json_object, number,
                        package_file, read_json, shown, text, timestamp)

SUFFIX = ".json"


def entry_path(file: str) -> str:
    """Where the lookup entry of package `file` (subdir/filename) lives in the channel."""
    return f"{LOOKUP_DIR}/{file}{SUFFIX}"


def encode_entry(entry: ManifestEntry) -> bytes:
    return json.dumps(vars(entry), indent=1, sort_keys=True).encode()


def encode_manifest(entries: dict[str, dict]) -> bytes:
    return json.dumps({"packages": dict(sorted(entries.items()))}, indent=1, sort_keys=True).encode()


@dataclass
class Lookup:
    """What a channel records about its packages' inputs."""

    entries: dict[str, dict] = field(default_factory=dict)  # package file -> entry (every field checked)
    refused: list[tuple[str, str]] = field(default_factory=list)  # (lookup file, why) for each entry refused
    in_manifest: set[str] = field(default_factory=set)  # files the derived orchestrate-manifest.json covers

    @property
    def damaged(self) -> list[str]:
        """The lookup files (relative paths) holding an entry that was refused."""
        return list(dict.fromkeys(relpath for relpath, _ in self.refused))

    def entry(self, file: str) -> ManifestEntry | None:
        found = self.entries.get(file)
        return ManifestEntry(**found) if found is not None else None


def manifest_entries(raw: bytes | None, known: list[str] | None,
                     refused: list[tuple[str, str]] | None = None) -> tuple[dict[str, dict], bool]:
    """The channel-wide orchestrate-manifest.json: (file -> checked entry, whether it parsed); an entry that
    is refused is left out (and added to `refused`). Missing: ({}, True)."""
    if raw is None:
        return {}, True
    try:
        packages = (json_object(raw, MANIFEST, MAX_INDEX_BYTES) or {}).get("packages")
        if not isinstance(packages, dict):
            raise Refused(f"{MANIFEST}: has no packages object")
    except Refused as exc:
        if refused is not None:
            refused.append((MANIFEST, str(exc)))
        return {}, False
    kept = {}
    for file, raw_entry in packages.items():
        try:
            kept[file] = vars(check_entry(raw_entry, file, f"{MANIFEST}: the entry of {shown(file)}", known))
        except Refused as exc:
            if refused is not None:
                refused.append((MANIFEST, str(exc)))
    return kept, True


def read_entry(store, file: str, known: list[str] | None = None) -> ManifestEntry | None:
    """The lookup entry of one package file; None when there is none or it is refused."""
    try:
        raw = read_json(store, entry_path(file))
        return check_entry(raw, file, entry_path(file), known) if raw is not None else None
    except Refused:
        return None


def read_lookup(store, known: list[str] | None = None) -> Lookup:
    """Every lookup entry a channel (a Store: folder, S3 or HTTP) holds, each checked (untrusted.check_entry:
    `known` is the architecture table's names, None for their shape only); a refused one is named in
    `refused` and left out.

    The derived orchestrate-manifest.json is read first (one request); then the per-package entries it
    does not cover yet: those a publish wrote since, or one that was killed before it re-derived the
    manifest. A store that cannot list (HTTP) gives the manifest alone."""
    lookup = Lookup()
    try:
        raw_manifest = store.read(MANIFEST, limit=MAX_INDEX_BYTES)
    except Refused as exc:
        raw_manifest = None
        lookup.refused.append((MANIFEST, str(exc)))
    manifest, _ = manifest_entries(raw_manifest, known, lookup.refused)
    lookup.entries.update(manifest)
    lookup.in_manifest = set(manifest)
    for relpath in store.list(LOOKUP_DIR) or []:
        if not relpath.endswith(SUFFIX):
            if ".bench/" not in relpath and ".sig/" not in relpath:  # no entry, bench record or signature: a
                # symlinked folder is refused here (signatures are read by signing.py, bench records by bench.py)
                try:
                    store.size(relpath)
                except Refused as exc:
                    lookup.refused.append((relpath, str(exc)))
            continue
        file = relpath[len(LOOKUP_DIR) + 1:-len(SUFFIX)]
        if file in manifest:
            continue
        try:
            raw = read_json(store, relpath)
            if raw is not None:
                lookup.entries[file] = vars(check_entry(raw, file, shown(relpath), known))
        except Refused as exc:
            lookup.refused.append((relpath, str(exc)))
    return lookup


def check_index_record(record, where: str) -> dict:
    """A repodata.json record with the fields readers use checked (the rest is rattler's and pixi's)."""
    if not isinstance(record, dict):
        raise Refused(f"{where}: not a JSON object")
    for key in ("name", "version", "build"):
        text(record.get(key), f"{where}: {key}", 256)
    hex_or_none(record.get("sha256"), f"{where}: sha256")
    number(record.get("size"), f"{where}: size")
    stamp = record.get("timestamp")  # milliseconds; seconds in packages from old conda-build versions
    seconds = isinstance(stamp, (int, float)) and 0 < stamp < LATEST_TIME
    timestamp(stamp, f"{where}: timestamp", scale=1 if seconds else 1000)
    if not isinstance(record.get("depends", []), list):
        raise Refused(f"{where}: depends is not a list")
    return record


def read_index(store, refused: list[tuple[str, str]] | None = None) -> tuple[dict[str, dict], list[str]]:
    """subdir/file -> repodata record for every package the remote index lists, and the index files that
    do not parse. A record whose fields are refused is left out, and named in `refused` (index file, why)."""
    listed, damaged = {}, []
    for subdir in SUBDIRS:
        relpath = f"{subdir}/repodata.json"
        try:
            data = read_json(store, relpath, MAX_INDEX_BYTES)
            if data is None:
                continue
            groups = [data.get(key) or {} for key in ("packages", "packages.conda")]
            if not all(isinstance(group, dict) for group in groups):
                raise Refused(f"{relpath}: packages is not an object")
        except Refused as exc:
            damaged.append(relpath)
            if refused is not None:
                refused.append((relpath, str(exc)))
            continue
        for group in groups:
            for name, record in group.items():
                file = f"{subdir}/{name}"
                try:
                    package_file(file)
                    listed[file] = check_index_record(record, f"{relpath}: {shown(name)}")
                except Refused as exc:
                    if refused is not None:
                        refused.append((relpath, str(exc)))
    return listed, damaged
