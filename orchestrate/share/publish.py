"""`orchestrate publish --to TARGET [PKG...]`: copy what the local channel holds to a shared one.

Any number of machines may publish to one channel at once, and a publish may be killed at any point:
  1. each package file is uploaded create-only; if the name is taken by the same bytes, or by a package
     built from the same inputs that we can trust (see `same_package`: signed by a trusted key, or holding the
     same files as ours; a claimed input hash alone proves nothing), the channel's copy stands, and the line
     says whose it is; with a signing key (signing.py), each of our packages' signature is created next;
  2. its lookup entry (lookup.py) is created next, again create-only, and so are the benchmark results its
     recipe test measured, with their records (bench.py);
  3. then, under the store's lock (a folder) or by compare-and-swap (S3), damaged copies of our files are
     replaced, the channel is indexed, our files are checked to be listed (indexed again if a concurrent
     indexer dropped them), orchestrate-manifest.json is re-derived from the entries, and the channel's
     page is written from what it holds (channel_page.py; a page that fails is a warning).
The index is only ever written after the files it lists are whole, so it never lists a missing or half
file; whatever a killed publish left undone, running it again completes.
"""
from __future__ import annotations

import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from .. import stops
from ..architectures import ArchitectureTable
from ..channel import LOOKUP_DIR, MANIFEST, Channel, ManifestEntry, read_provenance, sha256_of
from ..errors import UserError
from ..options import Options, load_config
from ..ui import Reporter
from .bench import Bench, encode_record, parse_record, recorded_in, sha256_bytes
from .channel_page import published_page_current, write_published_page
from .lookup import (Lookup, encode_entry, encode_manifest, entry_path, manifest_entries, read_entry, read_index,
                     read_lookup)
from .page.model import unreadable
from .targets import FolderStore, PackageServer, Store, parse_target
from .payload import same_files
from .signing import PublicKey, SigningKey, judge, package_record, parse_signature, signature_path, trusted_keys
from .untrusted import MAX_JSON_BYTES, Refused, json_object

INDEX_ATTEMPTS = 3  # indexes in a row that may each miss our packages before the publish gives up


def select_entries(channel: Channel, arch: str | None, packages: list[str]) -> list[ManifestEntry]:
    entries = channel.entries_present()
    if arch:
        entries = [e for e in entries if e.arch in (arch, "noarch")]
    if packages:
        unknown = sorted(set(packages) - {e.name for e in entries})
        if unknown:
            where = f" for {arch}" if arch else ""
            raise UserError(f"{', '.join(unknown)} not in channel {channel.path}{where}: build it first or "
                            "check the name with `orchestrate list`")
        entries = [e for e in entries if e.name in packages]
    if not entries:
        raise UserError(f"channel {channel.path} has nothing to publish{f' for {arch}' if arch else ''}: "
                        "run `orchestrate build-all` first")
    return sorted(entries, key=lambda e: e.file)


def remote_sha256s(store) -> dict[str, str]:
    """subdir/file -> sha256 for every package the remote index lists; a damaged index is an error."""
    listed, damaged = read_index(store)
    if damaged:
        raise UserError(f"{store.url}/{damaged[0]} is damaged: re-index the channel (`orchestrate publish` to it "
                        "does) or ask whoever maintains it")
    return {file: record.get("sha256", "") for file, record in listed.items()}


def same_package(entry: ManifestEntry, remote_sha: str, store, lookup: Lookup, local: Path,
                 keys: list[PublicKey] = ()) -> tuple[ManifestEntry, str] | None:
    """The channel's entry for the file under our name, and whose copy it is, when it is the same package as
    ours though not byte-identical (builds record their time and paths): built from the same inputs (same input
    hash) and either signed by a trusted key as it is, or holding the same files as ours (payload.same_files).
    A claimed input hash alone (a lookup entry, or about.json inside a copy anyone could have planted) is never
    enough: None then."""
    recorded = lookup.entry(entry.file)
    claimed = recorded if recorded and recorded.sha256 == remote_sha else None
    if claimed and (claimed.input_hash != entry.input_hash or claimed.name != entry.name):
        return None
    if keys:
        verdict = judge(store, entry.file, keys, remote_sha, input_hash=entry.input_hash)
        if verdict.ok:
            return claimed or replace(entry, sha256=remote_sha, package_bytes=store.size(entry.file) or 0), \
                f"signed by {verdict.signer.name}"
    with tempfile.TemporaryDirectory(prefix="orchestrate-compare-") as scratch:
        copy = Path(scratch) / entry.file.split("/")[-1]
        store.download(entry.file, copy)
        if sha256_of(copy) != remote_sha or read_provenance(copy).get("input_hash") != entry.input_hash:
            return None
        if not same_files(local, copy):
            return None
        kept = claimed or replace(entry, sha256=remote_sha, package_bytes=copy.stat().st_size)
        return kept, f"the same files as ours{f', built on {kept.host}' if kept.host else ''}"


def untrusted_copy(target_url: str, entry: ManifestEntry, remote_sha: str, keys: list[PublicKey]) -> UserError:
    signed = "signed by none of your trusted keys, and " if keys else ""
    return UserError(
        f"{target_url} already has {entry.file} with different content (sha256 {remote_sha[:12]}…, ours "
        f"{entry.sha256[:12]}…), {signed}built from other inputs or holding other files: a package file is never "
        "overwritten, nor a copy kept on its claimed input hash alone; remove it there (`orchestrate verify --from` "
        "checks the channel) or bump build_number")


@dataclass
class Trust:
    """The keys whose signature makes a channel's copy ours (the reader's trusted keys and our own signing key's),
    and the key we sign with (None: we sign nothing)."""

    keys: list[PublicKey] = field(default_factory=list)
    signer: SigningKey | None = None

    @classmethod
    def of(cls, options: Options, config: dict, sign_key: str | None) -> "Trust":
        keys = trusted_keys(options.trusted_keys, "trusted_keys (orchestrate.toml, --trusted-key)")
        path = sign_key or config.get("sign_key")
        if not path:
            return cls(keys)
        path = Path(path).expanduser()
        signer = SigningKey(path if path.is_absolute() or sign_key else options.workspace / path)
        return cls(list({k.key_id: k for k in [*keys, signer.public]}.values()), signer)

    def signature(self, channel: Channel, entry: ManifestEntry) -> tuple[str, bytes] | None:
        """Where our signature of `entry` goes and its bytes (None without a signing key)."""
        if self.signer is None:
            return None
        record = package_record(entry.file, entry.sha256, (channel.path / entry.file).stat().st_size,
                                entry.input_hash, entry.host)
        return signature_path(entry.file, self.signer.public), self.signer.sign(record)


@dataclass
class Placed:
    """Where each of our packages stands after step 1 and 2."""

    uploaded: list[ManifestEntry] = field(default_factory=list)
    there: list[ManifestEntry] = field(default_factory=list)  # the same bytes were already there
    theirs: list[ManifestEntry] = field(default_factory=list)  # another machine's copy of the same package
    whose: list[str] = field(default_factory=list)  # for each of `theirs`, a line saying whose copy was kept
    signed: int = 0  # our signatures written
    bad_entries: list[ManifestEntry] = field(default_factory=list)  # lookup entries to rewrite under the lock
    rewrites: dict[str, bytes] = field(default_factory=dict)  # bench files and records to rewrite under the lock

    @property
    def recorded(self) -> list[ManifestEntry]:
        """The entries the channel ends up with for our packages."""
        return self.uploaded + self.there + self.theirs


def publish(options: Options, target_url: str, packages: list[str], reporter: Reporter,
            s3_flags: dict | None = None, sign_key: str | None = None) -> int:
    channel = Channel(options.channel)
    channel.validate()
    if not channel.is_channel():
        raise UserError(f"channel {channel.path} is empty: run `orchestrate build-all` first")
    config = load_config(options.workspace)
    target = parse_target(target_url, config, **(s3_flags or {}))
    trust = Trust.of(options, config, sign_key)
    if config.get("max_package_gib"):
        target.max_package_bytes = config["max_package_gib"] << 30
    stops.describe(lambda: f"{target.url}'s index lists only whole packages",
                   "run the same command again to publish the rest")
    channel.lock(f"orchestrate publish --to {target.url}")
    try:
        entries = select_entries(channel, options.arch, packages)
        for file, why in sorted(channel.unsound().items()):  # a damaged copy is never spread to the team
            reporter.error(f"not publishing {file}: {why}; `orchestrate build-all` replaces it, then publish again")
        known = ArchitectureTable.load(options.variants_dir).names()
        benches = {e.file: _readable(recorded_in(FolderStore(channel.path), e.file, known, reporter.error), e.file,
                                     reporter) for e in entries}
        if isinstance(target, PackageServer):
            if trust.signer:
                reporter.error(f"warning: {target.url} holds packages only, so no signatures: its packages are "
                               "unsigned (publish to a folder or an S3 bucket to sign them)")
            return _publish_to_server(channel, entries, target, reporter, sum(map(len, benches.values())), trust)
        if not target.writable:
            raise UserError(f"{target.url} is read-only over HTTP: publish to the folder or bucket behind it")
        return _publish_to_store(channel, entries, benches, target, reporter,
                                 lambda: write_published_page(target, options.variants_dir, config, reporter.error),
                                 trust)
    finally:
        channel.unlock()


def _complete(entries: list[ManifestEntry], channel: Channel, store: Store, listed: dict, lookup: Lookup,
              trust: Trust) -> bool:
    """Whether the channel already lists, holds whole, records (and, with a signing key, holds our signature of)
    every one of our packages."""
    for entry in entries:
        ours = trust.signature(channel, entry)
        if ours and listed.get(entry.file, {}).get("sha256") == entry.sha256 and not _signed_already(store, *ours):
            return False
        record, recorded = listed.get(entry.file), lookup.entry(entry.file)
        if record is None or recorded is None or entry.file not in lookup.in_manifest:
            return False
        if record.get("sha256") != recorded.sha256 or store.size(entry.file) != record.get("size"):
            return False
        if recorded.sha256 != entry.sha256 and recorded.input_hash != entry.input_hash:
            return False
    return True


def _signed_already(store: Store, path: str, wanted: bytes) -> bool:
    """Whether the channel holds a valid signature by our key of the same record at `path`."""
    file = path[len(LOOKUP_DIR) + 1:path.rindex(".sig/")]
    try:
        there = parse_signature(store.read(path, limit=MAX_JSON_BYTES), path, file)
    except Refused:
        return False
    mine = parse_signature(wanted, path, file)
    return bool(there and mine and there.valid and there.key == mine.key) and there.record == mine.record


def _same_packages_listed(entries: list[ManifestEntry], channel: Channel, store: Store, listed: dict,
                          lookup: Lookup, trust: Trust) -> dict[str, tuple[ManifestEntry, str]]:
    """For each of our files that the index lists with other bytes, the channel's entry for its copy of the
    same package; refused before anything is uploaded when one of them is a different package."""
    theirs = {}
    for entry in entries:
        remote_sha = listed.get(entry.file, {}).get("sha256", entry.sha256)
        if remote_sha != entry.sha256:
            same = same_package(entry, remote_sha, store, lookup, channel.path / entry.file, trust.keys)
            if same is None:
                raise untrusted_copy(store.url, entry, remote_sha, trust.keys)
            theirs[entry.file] = same
    return theirs


def _place(channel: Channel, entry: ManifestEntry, store: Store, listed: dict, lookup: Lookup,
           theirs: dict[str, tuple[ManifestEntry, str]], placed: Placed, reporter: Reporter, trust: Trust) -> None:
    """Step 1 and 2 for one package: its file, then its lookup entry, both create-only."""
    record = listed.get(entry.file)
    remote_sha = record.get("sha256", "") if record else None
    mine = entry
    if remote_sha is None:
        reporter.info(f"uploading {entry.file}")
        if store.create(entry.file, local=channel.path / entry.file):
            placed.uploaded.append(entry)
        else:
            remote_sha = store.sha256(entry.file)
            if remote_sha is None:
                raise UserError(f"{store.url}/{entry.file} exists but is not a file: remove it there, then "
                                "publish again")
    if remote_sha == entry.sha256:
        placed.there.append(entry)
    elif remote_sha is not None:
        kept = theirs.get(entry.file) or same_package(entry, remote_sha, store, lookup, channel.path / entry.file,
                                                      trust.keys)
        if kept is None:
            raise untrusted_copy(store.url, entry, remote_sha, trust.keys)
        mine, whose = kept
        placed.theirs.append(mine)
        placed.whose.append(f"kept the channel's copy of {entry.file} (same input hash): {whose}")
    if mine is entry:  # our bytes are there: our signature of them, create-only (a wrong one is replaced under the lock)
        _sign(channel, entry, store, placed, trust)
    recorded = lookup.entry(entry.file)
    if recorded is not None and recorded.sha256 == mine.sha256:
        return
    if not store.create(entry_path(entry.file), data=encode_entry(mine)):
        existing = read_entry(store, entry.file)
        if existing is None or existing.sha256 != mine.sha256:
            placed.bad_entries.append(mine)  # damaged, or left from a file that was removed by hand


def _sign(channel: Channel, entry: ManifestEntry, store: Store, placed: Placed, trust: Trust) -> None:
    ours = trust.signature(channel, entry)
    if ours is None:
        return
    path, data = ours
    try:
        written = store.create(path, data=data)
    except Refused:  # a symlink planted on its way: replaced (the link, not its target) under the lock
        written = False
    if written:
        placed.signed += 1
    elif not _signed_already(store, path, data):  # planted or damaged under our key's name
        placed.rewrites[path] = data
        placed.signed += 1


def _publish_to_store(channel: Channel, entries: list[ManifestEntry], benches: dict[str, list[Bench]], store: Store,
                      reporter: Reporter, write_page: Callable[[], bool], trust: Trust) -> int:
    store.check()
    listed, damaged_index = read_index(store)
    lookup = read_lookup(store)
    if not damaged_index and _complete(entries, channel, store, listed, lookup, trust) and \
            _benches_complete(benches, store):
        # a channel published before pages existed, or by a publish stopped between its index and its page
        if not published_page_current(store, listed):
            with store.exclusive("orchestrate publish: the channel page", reporter.info):
                write_page()
        reporter.line(f"nothing to publish: all {len(entries)} package(s) are already at {store.url}")
        return 0
    theirs = _same_packages_listed(entries, channel, store, listed, lookup, trust)
    placed = Placed()
    for entry in entries:
        _place(channel, entry, store, listed, lookup, theirs, placed, reporter, trust)
        for bench in benches[entry.file]:
            try:
                _place_bench(bench, store, placed)
            except Refused as exc:  # e.g. a symlink planted where the result goes: never written through
                reporter.error(f"warning: the benchmark result {bench.path} is not published ({exc})")
    with store.exclusive(f"orchestrate publish of {len(entries)} package(s)", reporter.info):
        store.tidy()
        repaired = _repair(channel, placed, store)
        _index_until_listed(placed.recorded, store, bool(damaged_index), reporter)
        _derive_manifest(placed.recorded, store)
        write_page()
    reporter.line(f"published {len(placed.uploaded)} package(s) to {store.url}"
                  + (f"; {len(placed.there)} already there" if placed.there else "")
                  + (f"; {len(placed.theirs)} kept the channel's copy (same input hash)" if placed.theirs else "")
                  + (f"; replaced {repaired} damaged file(s)" if repaired else "")
                  + (f"; signed {placed.signed} with {trust.signer.public.name}" if placed.signed else ""))
    for line in placed.whose:
        reporter.line(line)
    return 0


def _repair(channel: Channel, placed: Placed, store: Store) -> int:
    """Under the lock: our own packages that are missing or the wrong size at the target (removed or cut
    short by hand, or a copy that was killed half-way where the store writes in place) go up again, and
    lookup entries that disagree with their file are rewritten."""
    repaired = 0
    for entry in placed.uploaded + placed.there:
        if store.size(entry.file) != (channel.path / entry.file).stat().st_size:
            store.replace(entry.file, local=channel.path / entry.file)
            repaired += 1
    for entry in placed.bad_entries:
        store.replace(entry_path(entry.file), data=encode_entry(entry))
    for relpath, data in placed.rewrites.items():
        store.replace(relpath, data=data)
    return repaired


def _readable(benches: list[Bench], package: str, reporter: Reporter) -> list[Bench]:
    """The results the channel's page can read: one it cannot would sit in the shared channel for good
    (create-only) and be named under the page's problems on every machine."""
    kept = []
    for bench in benches:
        try:
            why = unreadable(json_object(bench.data, bench.path))
        except Refused as exc:
            why = str(exc)
        if why:
            reporter.error(f"warning: not publishing {bench.path}, the benchmark result of {package}: the channel page "
                           f"cannot read it ({why}); rebuild the package to measure it again")
        else:
            kept.append(bench)
    return kept


def _benches_complete(benches: dict[str, list[Bench]], store: Store) -> bool:
    """Whether the channel records each of our benchmark results and holds the file its record names, whole
    (they are small: read, not only sized)."""
    for bench in (b for found in benches.values() for b in found):
        record = parse_record(store, bench.record)
        try:
            there = store.read(record["bench"], limit=record["size"]) if record else None
        except Refused:
            return False
        if there is None or sha256_bytes(there) != record["sha256"]:
            return False
    return True


def _place_bench(bench: Bench, store: Store, placed: Placed) -> None:
    """One benchmark result and then its record, both create-only. A result the channel already holds for
    this package and architecture stands (another machine measured the same package), unless it is damaged
    or the channel's record says it should be ours: then ours is written again under the lock."""
    record = parse_record(store, bench.record)
    stands = bench.data
    if not store.create(bench.path, data=bench.data):
        try:
            there = store.read(bench.path, limit=MAX_JSON_BYTES)
            whole = there is not None and json_object(there, bench.path) is not None
        except Refused:
            there, whole = None, False  # a symlink, or too large or deep: ours replaces it (the link, not its target)
        if there == bench.data:
            pass
        elif whole and (record is None or record["sha256"] == sha256_bytes(there)):
            stands = there  # another machine's result for the same package
        else:
            placed.rewrites[bench.path] = bench.data  # damaged: ours in its place
    wanted = encode_record(bench.path, stands)
    if record is None:
        if store.create(bench.record, data=wanted):
            return
        record = parse_record(store, bench.record)
    if record is None or record["sha256"] != sha256_bytes(stands) or record["bench"] != bench.path:
        placed.rewrites[bench.record] = wanted


def _index_until_listed(recorded: list[ManifestEntry], store: Store, damaged: bool, reporter: Reporter) -> None:
    """Index, then read the index back: a concurrent indexer (one that takes no lock, or one that read
    the folder before our files were there) may have written an index without them. Then index again."""
    missing = [e.file for e in recorded]
    for attempt in range(INDEX_ATTEMPTS):
        for line in store.index(force=damaged) or []:
            reporter.error(f"warning: {line}")
        listed, damaged_now = read_index(store)
        missing = [e.file for e in recorded if listed.get(e.file, {}).get("sha256") != e.sha256]
        if not missing and not damaged_now:
            return
        damaged = bool(damaged_now)
        reporter.info(f"the index of {store.url} lacks {len(missing)} of our package(s) after indexing "
                      f"(another publish indexed at the same time): indexing again ({attempt + 2}/{INDEX_ATTEMPTS})")
    raise UserError(f"{store.url}'s index still lacks {', '.join(missing[:3])} after {INDEX_ATTEMPTS} indexes: "
                    "something else rewrites it; run the same command again once it is done")


def _derive_manifest(recorded: list[ManifestEntry], store: Store) -> None:
    """Re-derive orchestrate-manifest.json: what it held, plus every lookup entry whose file is listed."""
    listed, _ = read_index(store)
    lookup = read_lookup(store)
    additions = {f: e for f, e in lookup.entries.items() if f in listed and f not in lookup.in_manifest}
    # ours where the channel has no entry for the file yet (or a wrong one); else the channel's stays
    additions.update({e.file: vars(e) for e in recorded if lookup.entries.get(e.file, {}).get("sha256") != e.sha256})

    def merged(current: bytes | None) -> bytes:
        kept, _ = manifest_entries(current, None)  # the entries this table lacks stay: others' architectures
        return encode_manifest({**kept, **additions})

    store.update(MANIFEST, merged)


def _publish_to_server(channel: Channel, entries: list[ManifestEntry], server: PackageServer,
                       reporter: Reporter, benches: int, trust: Trust) -> int:
    if benches:
        reporter.line(f"{server.url} holds packages only: {benches} benchmark result(s) and the channel page stay "
                      "out of it (publish to a folder or an S3 bucket to share them too)")
    reader = server.reader()
    try:
        listed = remote_sha256s(reader)
    except UserError:
        listed = {}  # a new or private channel may not be readable yet; the server itself skips duplicates
    to_upload, theirs = [], 0
    for entry in entries:
        remote = listed.get(entry.file)
        if remote is None:
            to_upload.append(entry)
        elif remote != entry.sha256:
            kept = same_package(entry, remote, reader, Lookup(), channel.path / entry.file, trust.keys)
            if kept is None:
                raise untrusted_copy(server.url, entry, remote, trust.keys)
            theirs += 1
            reporter.line(f"kept the channel's copy of {entry.file} (same input hash): {kept[1]}")
    if not to_upload:
        reporter.line(f"nothing to publish: all {len(entries)} package(s) are already at {server.url}"
                      + (f" ({theirs} as the channel's copy, same input hash)" if theirs else ""))
        return 0
    server.upload([channel.path / e.file for e in to_upload])
    reporter.line(f"published {len(to_upload)} package(s) to {server.url}; {server.kind} indexes them itself. "
                  "Package servers hold no orchestrate-manifest.json, so they serve installs, not build-cache hits")
    return 0
