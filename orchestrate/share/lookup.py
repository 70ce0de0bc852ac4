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

SUFFIX = ".json"


def entry_path(file: str) -> str:
    """Where the lookup entry of package `file` (subdir/filename) lives in the channel."""
    return f"{LOOKUP_DIR}/{file}{SUFFIX}"


def encode_entry(entry: ManifestEntry) -> bytes:
    return json.dumps(vars(entry), indent=1, sort_keys=True).encode()


def parse_entry(raw) -> ManifestEntry | None:
    """A ManifestEntry from its published form; None for one this orchestrator cannot use (damaged, or
    written by a newer or older version with other fields)."""
    try:
        return ManifestEntry(**raw)
    except TypeError:  # not a mapping, or other fields
        return None


def encode_manifest(entries: dict[str, dict]) -> bytes:
    return json.dumps({"packages": dict(sorted(entries.items()))}, indent=1, sort_keys=True).encode()


@dataclass
class Lookup:
    """What a channel records about its packages' inputs."""

    entries: dict[str, dict] = field(default_factory=dict)  # package file -> entry, as published
    damaged: list[str] = field(default_factory=list)  # lookup files that do not parse (relative paths)
    in_manifest: set[str] = field(default_factory=set)  # files the derived orchestrate-manifest.json covers


def parse_manifest(raw: bytes | None) -> tuple[dict[str, dict], bool]:
    """The channel-wide orchestrate-manifest.json: (file -> entry, whether it parsed). Missing: ({}, True)."""
    if raw is None:
        return {}, True
    try:
        packages = json.loads(raw)["packages"]
        if isinstance(packages, dict) and all(isinstance(v, dict) for v in packages.values()):
            return dict(packages), True
    except (json.JSONDecodeError, KeyError, TypeError, UnicodeDecodeError):
        pass
    return {}, False


def json_object(raw: bytes | None) -> dict | None:
    """A JSON object file's contents; None when missing, not JSON or not an object."""
    try:
        data = json.loads(raw) if raw is not None else None
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    return data if isinstance(data, dict) else None


def read_entry(store, file: str) -> ManifestEntry | None:
    """The lookup entry of one package file; None when there is none or it cannot be used."""
    raw = json_object(store.read(entry_path(file)))
    return parse_entry(raw) if raw is not None else None


def read_lookup(store) -> Lookup:
    """Every lookup entry a channel (a Store: folder, S3 or HTTP) holds.

    The derived orchestrate-manifest.json is read first (one request); then the per-package entries it
    does not cover yet: those a publish wrote since, or one that was killed before it re-derived the
    manifest. A store that cannot list (HTTP) gives the manifest alone."""
    lookup = Lookup()
    manifest, parsed = parse_manifest(store.read(MANIFEST))
    if not parsed:
        lookup.damaged.append(MANIFEST)
    lookup.entries.update(manifest)
    lookup.in_manifest = set(manifest)
    for relpath in store.list(LOOKUP_DIR) or []:
        if not relpath.endswith(SUFFIX):
            continue
        file = relpath[len(LOOKUP_DIR) + 1:-len(SUFFIX)]
        if file in manifest:
            continue
        raw = store.read(relpath)
        entry = json_object(raw)
        if entry is not None:
            lookup.entries[file] = entry
        elif raw is not None:
            lookup.damaged.append(relpath)
    return lookup


def read_index(store) -> tuple[dict[str, dict], list[str]]:
    """subdir/file -> repodata record for every package the remote index lists, and the index files that
    do not parse."""
    listed, damaged = {}, []
    for subdir in SUBDIRS:
        raw = store.read(f"{subdir}/repodata.json")
        if raw is None:
            continue
        try:
            data = json.loads(raw)
            for key in ("packages", "packages.conda"):
                for name, record in (data.get(key) or {}).items():
                    listed[f"{subdir}/{name}"] = record
        except (json.JSONDecodeError, UnicodeDecodeError, AttributeError):
            damaged.append(f"{subdir}/repodata.json")
    return listed, damaged
