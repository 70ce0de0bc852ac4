"""Benchmark results in a channel: the quick benchmark (or check) a package's recipe test ran, kept beside the
package so that everyone who reads the channel sees it (issue 26).

  bench/<arch>/<package file name without .conda/.tar.bz2>.json
      the document benchlog.collect kept beside the build log, plus "package", "subdir" and "build";
  orchestrate-manifest.d/<subdir>/<package file>.bench/<arch>.record
      {"bench": its path, "sha256", "size"}: what `verify` checks the bench file against, and how it knows
      a bench file is missing. Not a `.json` name, so lookup readers (lookup.read_lookup) pass it by.

<arch> is the architecture the benchmark ran on (an arch-neutral package is measured on every machine that
builds it). The local channel holds the same files (written under its lock by build-all); a publish creates
them create-only, like the lookup entries, so publishes at the same time lose none.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from ..benchlog import architecture_of
from ..channel import LOOKUP_DIR, PACKAGE_SUFFIXES, ManifestEntry
from .store import Store
from .untrusted import Refused, check_arch, check_record, json_object, read_json, shown, write_in

BENCH_DIR = "bench"
RECORD_SUFFIX = ".record"


def stem(package_file: str) -> str:
    name = package_file.split("/")[-1]
    for suffix in PACKAGE_SUFFIXES:
        if name.endswith(suffix):
            return name[:-len(suffix)]
    return name


def bench_path(arch: str, package_file: str) -> str:
    return f"{BENCH_DIR}/{arch}/{stem(package_file)}.json"


def record_path(arch: str, package_file: str) -> str:
    return f"{LOOKUP_DIR}/{package_file}.bench/{arch}{RECORD_SUFFIX}"


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def encode_record(bench: str, data: bytes) -> bytes:
    return json.dumps({"bench": bench, "sha256": sha256_bytes(data), "size": len(data)}, indent=1,
                      sort_keys=True).encode()


def record_arch(relpath: str) -> str:
    """The architecture a record's place names: orchestrate-manifest.d/<subdir>/<file>.bench/<arch>.record."""
    return relpath[relpath.rindex(".bench/") + len(".bench/"):-len(RECORD_SUFFIX)]


def read_record(store: Store, relpath: str, known: list[str] | None = None) -> dict | None:
    """The record at `relpath` as written by encode_record, every field checked, and naming the one bench file
    its place names (bench/<arch>/<package stem>.json: so a record can lead no read or write elsewhere); None
    when missing; untrusted.Refused otherwise."""
    raw = read_json(store, relpath)
    if raw is None:
        return None
    arch = check_arch(record_arch(relpath), relpath, known, noarch=False)
    return check_record(raw, relpath, bench_path(arch, package_of_record(relpath)))


def parse_record(store: Store, relpath: str, known: list[str] | None = None) -> dict | None:
    """read_record, with a refused record as None (a writer that replaces it)."""
    try:
        return read_record(store, relpath, known)
    except Refused:
        return None


def channel_document(kept: Path, entry: ManifestEntry, build_arch: str) -> tuple[str, str, bytes] | None:
    """(arch, bench path, bytes) for the document benchlog kept beside the build log of `entry`'s package;
    None when it cannot be read."""
    try:
        document = json_object(kept.read_bytes() if kept.is_file() else None, str(kept))
    except Refused:
        document = None
    if document is None:
        return None
    arch = architecture_of(document) or build_arch
    subdir, package = entry.file.split("/", 1)
    document.update(package=package, subdir=subdir, build=entry.build)
    return arch, bench_path(arch, entry.file), (json.dumps(document, indent=1, sort_keys=True) + "\n").encode()


@dataclass
class Bench:
    """One benchmark result a channel records for a package file."""

    arch: str
    path: str  # bench/<arch>/<stem>.json
    record: str  # its record's path
    data: bytes


def keep_in_local_channel(channel_path: Path, kept: Path, entry: ManifestEntry, build_arch: str) -> str | None:
    """Under the channel lock: the package's benchmark into the local channel, then its record. A rebuilt
    package's new measurement replaces the old one. Returns the bench path written, or None."""
    found = channel_document(kept, entry, build_arch)
    if found is None:
        return None
    arch, bench, data = found
    keep_copy(channel_path, Bench(arch, bench, record_path(arch, entry.file), data), entry.file)
    return bench


def keep_copy(channel_path: Path, bench: Bench, package_file: str) -> None:
    """A result into the local channel, then its record (the record last: verify names a result without one)."""
    write_in(channel_path, bench.path, bench.data)
    write_in(channel_path, record_path(bench.arch, package_file), encode_record(bench.path, bench.data))


def recorded_in(store: Store, package_file: str, known: list[str] | None = None,
                warn=None) -> list[Bench]:
    """The whole benchmark results a channel (the local one, when publishing; a cache channel) records for a
    package file; one that is refused (untrusted) is named to `warn` and left out."""
    found = []
    prefix = f"{LOOKUP_DIR}/{package_file}.bench"
    for relpath in store.list(prefix) or []:
        if not relpath.endswith(RECORD_SUFFIX):
            continue
        try:
            record = read_record(store, relpath, known)
            data = store.read(record["bench"], limit=record["size"]) if record else None
        except Refused as exc:
            if warn:
                warn(f"warning: benchmark result not taken from {store.url}: {exc}")
            continue
        if data is not None and sha256_bytes(data) == record["sha256"]:
            found.append(Bench(record_arch(relpath), record["bench"], relpath, data))
    return found


def all_records(store: Store) -> list[str] | None:
    """Every bench record a channel holds (relative paths); None when the store cannot list (HTTP)."""
    listed = store.list(LOOKUP_DIR)
    return None if listed is None else [p for p in listed if p.endswith(RECORD_SUFFIX) and ".bench/" in p]


def package_of_record(relpath: str) -> str:
    """subdir/file of the package a record belongs to."""
    return relpath[len(LOOKUP_DIR) + 1:relpath.rindex(".bench/")]


def channel_documents(store: Store, known: list[str] | None) -> list[tuple[str, str, dict | None, str | None]]:
    """(path, architecture, document, None) for every bench/<arch>/<file>.json a channel holds, or (path, arch,
    None, why it is refused): no JSON object, too large or deep, a symlink, or in a folder whose name is not
    an architecture of the table (`known`); [] for a store that cannot list (HTTP)."""
    found = []
    for relpath in store.list(BENCH_DIR) or []:
        parts = relpath.split("/")
        try:
            if len(parts) != 3 or not parts[2].endswith(".json"):
                store.size(relpath)  # not a result; a symlink (to a file or a folder) is refused all the same
                continue
            check_arch(parts[1], shown(relpath), known, noarch=False)
            found.append((relpath, parts[1], read_json(store, relpath), None))
        except Refused as exc:
            found.append((relpath, parts[1] if len(parts) > 1 else "", None, str(exc)))
    return found
