"""`orchestrate verify`: does a channel hold what its index and its build-cache lookup say it holds?

For the local channel (`--channel DIR`, default the workspace's) or a shared one (`--from URL`: a folder,
file://, s3://, http(s)://), one problem per line, each naming the file and what to do:
  - every package file the index (<subdir>/repodata.json) lists is there, with the listed size and sha256;
  - every package file in a subdir is listed (where the store can list its files; HTTP cannot);
  - every lookup entry (what each package was built from) names a listed file with the same sha256;
  - every subdir's repodata.json parses;
  - every benchmark result the channel records (bench.py) is there, with the recorded sha256, and is a
    document the channel's page can read; a result without a record, or the record of a package the index no
    longer lists, is a note (the page leaves the latter out).
  - with trusted keys (`trusted_keys`, `--trusted-key`; signing.py): every listed package is signed by one of
    them, as the index lists it and the lookup records it; without, every signature the channel holds still
    matches the package it signs (a package swapped after signing is named either way).
A clean channel exits 0, any problem 1; `--json` writes the same as one JSON object for scripts.
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from typing import Callable

from pathlib import Path

from ..architectures import ArchitectureTable
from ..channel import LOOKUP_DIR, MANIFEST, PACKAGE_SUFFIXES, SUBDIRS, Channel
from ..errors import UserError
from ..options import find_workspace, load_config
from ..ui import Reporter
from .bench import BENCH_DIR, all_records, channel_documents, package_of_record, read_record, sha256_bytes
from .lookup import read_index, read_lookup
from .page.model import unreadable
from .signing import PublicKey, all_signatures, differences, judge, plain_http_risk, read_signature, trusted_keys
from .store import FolderStore, Store
from .untrusted import MAX_JSON_BYTES, Refused, channel_relpath, json_object, shown, why_of

INDEX = "repodata.json"
PROBLEMS_EXIT = 1


@dataclass
class Problem:
    file: str  # channel-relative: noarch/foo-1.0-h1_0.conda, linux-64/repodata.json, orchestrate-manifest.json
    kind: str  # damaged, missing, unlisted, wrong-entry, unlisted-entry, damaged-index, damaged-lookup,
    # missing-bench, damaged-bench (cut short, or a shape the page cannot read), damaged-bench-record
    detail: str
    fix: str

    def line(self) -> str:
        return f"{shown(self.file)}: {self.detail} — {self.fix}"


@dataclass
class Verification:
    channel: str
    packages: int = 0  # listed package files checked
    entries: int = 0  # lookup entries checked
    benches: int = 0  # benchmark results checked
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what could not be checked, and why

    @property
    def ok(self) -> bool:
        return not self.problems

    def as_json(self) -> str:
        return json.dumps({"channel": self.channel, "ok": self.ok, "packages": self.packages,
                           "entries": self.entries, "benches": self.benches,
                           "problems": [asdict(p) for p in self.problems], "notes": self.notes}, indent=1)


class Fixes:
    """What to do about each problem, worded for the local channel (build-all repairs it) or a shared one
    (publish again from a machine whose channel holds the package)."""

    def __init__(self, local: bool, url: str, arch_of: dict[str, str], writable: bool = True, channel_arg: str = ""):
        self.local, self.url, self.arch_of = local, url, arch_of
        self.channel_arg = channel_arg  # ` --channel DIR` for a local channel that is not the workspace's own
        self.publish = (f"`orchestrate publish --to {url}`" if writable
                        else f"`orchestrate publish --to` the folder or bucket behind {url}")

    def _build_all(self, file: str) -> str:
        arch = self.arch_of.get(file, "")
        return f"`orchestrate build-all{f' --arch {arch}' if arch and arch != 'noarch' else ''}{self.channel_arg}`"

    def damaged(self, file: str, size_ok: bool) -> str:
        if not self.local:
            then = "remove it there, then " if size_ok else ""  # publish replaces a file of the wrong size itself
            return f"damaged; {then}publish it again from a machine whose channel holds it: {self.publish}"
        if size_ok:  # build-all only compares sizes, so it needs the damaged file out of the way
            return (f"damaged; move it into the channel's .superseded/ folder, then run {self._build_all(file)} "
                    "to rebuild it or take it from a cache channel")
        return (f"damaged; run {self._build_all(file)}: it moves the file to .superseded/ and rebuilds it "
                "or takes it from a cache channel")

    def missing(self, file: str) -> str:
        if not self.local:
            return f"publish it again from a machine whose channel holds it: {self.publish}"
        return f"run {self._build_all(file)}: it re-indexes the channel and rebuilds the package or takes it from a cache"

    def unlisted(self, file: str) -> str:
        if not self.local:
            return (f"if a publish was stopped, run it again on that machine ({self.publish}): it indexes the "
                    "file; otherwise remove the file there")
        return (f"run {self._build_all('')}: it indexes the file if this workspace built it, or moves it "
                "to .superseded/")

    def wrong_entry(self, file: str) -> str:
        if not self.local:
            return f"publish the package again from the machine that built it: {self.publish}"
        return (f"move the package into the channel's .superseded/ folder, then run {self._build_all(file)} to "
                "build and record it again")

    def damaged_index(self) -> str:
        if not self.local:
            return f"run {self.publish} again: it re-indexes the channel"
        return f"run {self._build_all('')}: it re-indexes the channel"

    def bench(self, record: str, package: str) -> str:
        if not self.local:
            return (f"publish {package} again from the machine that built it ({self.publish}): it writes the result "
                    f"again; or remove {record} there to forget the result")
        return (f"copy it back from a channel it was published to, or remove {record} to forget the result; "
                "the package's next build measures it again")

    def refused_entry(self, file: str) -> str:
        where = "" if self.local else " there"
        return (f"remove {shown(file)}{where}; publishing the package again from the machine that built it writes "
                "its entry again")

    def forget(self, *files: str) -> str:
        where = "" if self.local else " there"
        return f"remove {' and '.join(shown(f) for f in files)}{where} to forget it"

    def unrecorded(self, bench: str) -> str:
        if not self.local:
            return (f"publish its package again from the machine that built it ({self.publish}): it writes the "
                    f"record; or remove {bench} there")
        return "remove it; the package's next build measures it again and writes it with its record"

    def damaged_lookup(self) -> str:
        if not self.local:
            return f"run {self.publish} again from a machine that published to it: it writes it again"
        return ("the record of what each package was built from is lost: restore it from a backup, or move the "
                "channel folder aside and build again")


def verify(store: Store, local: bool, quick: bool = False, known: list[str] | None = None,
           channel_arg: str = "", keys: list[PublicKey] | None = None) -> Verification:
    """Check every claim the channel's index and lookup make against the files it holds, and name every file
    that a reader (the page, a cache build) refuses (untrusted.py); `known`: the architecture table's names;
    `channel_arg`: the --channel flag a local channel's fixes need."""
    result = Verification(str(store.path) if local else store.url)
    lookup = read_lookup(store, known)
    fixes = Fixes(local, store.url, {f: str(e.get("arch", "")) for f, e in lookup.entries.items()},
                  store.writable, channel_arg)
    refused_records: list[tuple[str, str]] = []
    listed, damaged_indexes = read_index(store, refused_records)
    if not (listed or damaged_indexes or lookup.entries or lookup.damaged) and store.size(f"noarch/{INDEX}") is None:
        raise UserError(f"{store.url} is not a conda channel (no noarch/{INDEX}): check the "
                        f"{'--channel folder' if local else '--from URL'}")
    for relpath, why in refused_records:
        kind = "damaged-index" if relpath in damaged_indexes else "refused-index-record"
        result.problems.append(Problem(relpath, kind, refused(why, relpath), fixes.damaged_index()))
    for file, record in sorted(listed.items()):
        result.packages += 1
        try:
            _check_package(store, file, record, quick, fixes, result)
        except Refused as exc:
            result.problems.append(Problem(file, "refused", refused(exc, file), fixes.forget(file)))
    # a subdir whose index does not parse: every file in it would be "unlisted"; its one line says it all
    unreadable = {p.file.split("/")[0] for p in result.problems if p.kind == "damaged-index"}
    for subdir in sorted(set(SUBDIRS) - unreadable):
        present = store.list(subdir)
        if present is None:
            result.notes.append(f"{store.url} cannot list its files (HTTP): files the index does not list "
                                "are not looked for")
            break
        for relpath in present:
            name = relpath[len(subdir) + 1:]
            if "/" not in name and name.endswith(PACKAGE_SUFFIXES) and relpath not in listed:
                result.problems.append(Problem(relpath, "unlisted", f"not listed in {subdir}/{INDEX}",
                                               fixes.unlisted(relpath)))
    for relpath, why in lookup.refused:
        result.problems.append(Problem(relpath, "damaged-lookup", refused(why, relpath),
                                       fixes.damaged_lookup() if relpath == MANIFEST else fixes.refused_entry(relpath)))
    for file, entry in sorted(lookup.entries.items()):
        result.entries += 1
        if file.split("/")[0] in unreadable:
            continue
        if file not in listed:
            result.problems.append(Problem(file, "unlisted-entry", "the build-cache lookup records it, but the "
                                           "index does not list it", fixes.missing(file)))
        elif entry.get("sha256") != listed[file].get("sha256"):
            result.problems.append(Problem(
                file, "wrong-entry", f"the build-cache lookup records sha256 {str(entry.get('sha256'))[:12]}…, "
                f"the index {str(listed[file].get('sha256'))[:12]}…", fixes.wrong_entry(file)))
    _check_benches(store, quick, fixes, result, listed, known)
    if local:
        if keys:
            result.notes.append("a local channel holds no signatures (`orchestrate publish --sign-key` signs what it "
                                "publishes): trusted keys are checked on shared channels, with --from")
    else:
        _check_signatures(store, listed, lookup.entries, keys or [], result)
    _check_paths(store, fixes, result)
    if quick:
        result.notes.append("--quick: sizes compared, sha256 not")
    return result


def _check_benches(store: Store, quick: bool, fixes: Fixes, result: Verification, listed: dict,
                   known: list[str] | None) -> None:
    records = all_records(store)
    if records is None:
        result.notes.append(f"{store.url} cannot list its files (HTTP): benchmark results are not checked")
        return
    recorded: set[str] = set()
    for relpath in records:
        result.benches += 1
        package = package_of_record(relpath)
        try:
            record = read_record(store, relpath, known)
        except Refused as exc:
            result.problems.append(Problem(relpath, "damaged-bench-record", refused(exc, relpath),
                                           fixes.forget(relpath)))
            continue
        bench = record["bench"]
        recorded.add(bench)
        if package not in listed:
            result.notes.append(f"{relpath} records the result of {package}, which the index no longer lists (a "
                                f"newer build replaced it): the page leaves it out; {fixes.forget(relpath, bench)}")
        try:
            size = store.size(bench)
            data = store.read(bench, limit=MAX_JSON_BYTES) if size is not None and not quick else None
        except Refused as exc:
            result.problems.append(Problem(bench, "damaged-bench", refused(exc, bench), fixes.bench(relpath, package)))
            continue
        if size is None:
            result.problems.append(Problem(bench, "missing-bench", f"the benchmark result of {package} that "
                                           f"{relpath} records is not there", fixes.bench(relpath, package)))
        elif size != record["size"]:
            result.problems.append(Problem(bench, "damaged-bench", f"size {size} but {relpath} records "
                                           f"{record['size']}", fixes.bench(relpath, package)))
        elif not quick:
            if sha256_bytes(data or b"") != record["sha256"]:
                result.problems.append(Problem(bench, "damaged-bench", f"sha256 differs from what {relpath} records",
                                               fixes.bench(relpath, package)))
            elif why := _unreadable(data, bench):
                result.problems.append(Problem(bench, "damaged-bench", f"the channel page cannot read it ({why})",
                                               fixes.bench(relpath, package)))
    named = {p.file for p in result.problems}  # once, not per document: verify's cost stays linear
    for bench, _arch, document, why_not in channel_documents(store, known):
        if why_not:
            if bench not in named:  # its record's check named it already
                named.add(bench)
                result.problems.append(Problem(bench, "damaged-bench", refused(why_not, bench), fixes.forget(bench)))
            continue
        if bench in recorded:
            continue
        if not quick and (why := unreadable(document)):
            result.problems.append(Problem(bench, "damaged-bench", f"the channel page cannot read it ({why})",
                                           fixes.forget(bench)))
        else:
            result.notes.append(f"{bench} is a benchmark result no record in orchestrate-manifest.d/ names (a write "
                                f"stopped between the two): {fixes.unrecorded(bench)}")


SIGNATURE_FIX = ("do not install from the channel until it is explained: whoever built the package publishes it "
                 "again with their --sign-key; a package someone else put there, remove")


def _check_signatures(store: Store, listed: dict, entries: dict, keys: list[PublicKey], result: Verification) -> None:
    """With `keys`: each listed package signed by one of them, as listed (signing.judge). Without: each signature
    the channel holds matches its package, and a note says who signed what."""
    named = {p.file for p in result.problems}
    signers: dict[str, int] = {}
    signed = all_signatures(store) if not keys else {}
    if signed is None:
        return  # HTTP: without trusted keys, no signature file can be found
    for file, record in sorted(listed.items()):
        input_hash = (entries.get(file) or {}).get("input_hash")
        if keys:
            verdict = judge(store, file, keys, record.get("sha256"), record.get("size"), input_hash)
            if not verdict.ok:
                result.problems.append(Problem(file, verdict.kind, verdict.problem, SIGNATURE_FIX))
            continue
        for signature in filter(None, (read_signature(store, path, file) for path in signed.get(file, []))):
            if signature.why or not signature.valid:
                if signature.path not in named:
                    result.problems.append(Problem(signature.path, "refused-signature", "refused: " + (
                        signature.why.split(": ", 1)[-1] if signature.why else "its signature does not verify under "
                        "the key it names (forged, or damaged)"), f"remove {shown(signature.path)} there"))
                continue
            wrong = differences(signature.record, record.get("sha256"), record.get("size"), input_hash)
            if wrong:
                result.problems.append(Problem(file, "signed-record-differs", f"differs from what {signature.key.name} "
                                               f"signed ({'; '.join(wrong)}): it was replaced after signing",
                                               SIGNATURE_FIX))
            else:
                signers[signature.key.name] = signers.get(signature.key.name, 0) + 1
    if not keys and signers:  # an unsigned channel's output stays as it was
        by = "; ".join(f"{count} by {name}" for name, count in sorted(signers.items()))
        unsigned = sorted(set(listed) - set(signed))
        some = f"; unsigned: {', '.join(shown(f) for f in unsigned[:5])}{', …' if len(unsigned) > 5 else ''}" \
            if unsigned else ""
        result.notes.append(f"no trusted keys named, so signatures are not required ({by}{some}): pass --trusted-key "
                            "(or set trusted_keys) to name every package your team's keys did not sign")


def refused(why, file: str) -> str:
    """A reader's refusal as a problem's detail: the line already starts with the file."""
    return "refused: " + why_of(why, file)


def _check_paths(store: Store, fixes: Fixes, result: Verification) -> None:
    """Every file the channel lists that no reader takes: a symlink (on a folder; never followed), or a name
    with `..` or a control character (an S3 key may hold them literally). One line each, unless named above."""
    named = {p.file for p in result.problems}
    for prefix in (*SUBDIRS, LOOKUP_DIR, BENCH_DIR):
        for relpath in store.list(prefix) or []:
            if relpath.endswith("/"):
                continue  # an S3 console's empty "folder" object: nothing reads it
            try:
                channel_relpath(relpath)
                if isinstance(store, FolderStore):  # the reader itself: a symlink, FIFO, socket, ... is refused
                    store.size(relpath)
            except Refused as exc:
                if relpath not in named:
                    named.add(relpath)
                    result.problems.append(Problem(relpath, "refused", refused(exc, relpath), fixes.forget(relpath)))


def _unreadable(data: bytes, bench: str) -> str | None:
    """Why the page cannot read a bench file's bytes (None: it can)."""
    try:
        return unreadable(json_object(data, bench))
    except Refused as exc:
        return str(exc)


def _verify_locked(store, quick: bool = False, known: list[str] | None = None, channel_arg: str = "",
                   keys: list[PublicKey] | None = None) -> Verification:
    """The local channel, under its lock: a build adding a package right now would show as a problem. A
    folder that is not a channel, or that we may not write, is read without it (and left as it was)."""
    channel = Channel(store.path)
    if not channel.is_channel() or not os.access(channel.path, os.W_OK):
        return verify(store, True, quick, known, channel_arg, keys)
    channel.lock("orchestrate verify")
    try:
        return verify(store, True, quick, known, channel_arg, keys)
    finally:
        channel.unlock()


def _check_package(store: Store, file: str, record: dict, quick: bool, fixes: Fixes, result: Verification) -> None:
    size = store.size(file)
    if size is None:
        result.problems.append(Problem(file, "missing", f"listed in {file.split('/')[0]}/{INDEX} but not there",
                                       fixes.missing(file)))
        return
    listed_size = record.get("size")
    if listed_size is not None and size != listed_size:
        result.problems.append(Problem(file, "damaged", f"size {size} but the index lists {listed_size}",
                                       fixes.damaged(file, size_ok=False)))
        return
    if quick:
        return
    actual = store.sha256(file)
    if actual != record.get("sha256"):
        result.problems.append(Problem(file, "damaged", f"sha256 {str(actual)[:12]}… but the index lists "
                                       f"{str(record.get('sha256'))[:12]}…", fixes.damaged(file, size_ok=True)))


def _architectures(args) -> list[str] | None:
    """The names of the workspace's architecture table, which the page and a cache build check against; None
    where there is no workspace (a teammate checking a team channel)."""
    try:
        workspace = (args.workspace or find_workspace(Path.cwd())).resolve()
        return ArchitectureTable.load(workspace / "variants").names()
    except UserError:
        return None


def _trusted(args) -> list[PublicKey]:
    """orchestrate.toml's trusted_keys (where there is a workspace) and every --trusted-key."""
    try:
        config = load_config((args.workspace or find_workspace(Path.cwd())).resolve())
    except UserError:
        if args.workspace:
            raise
        config = {}
    return trusted_keys([*config.get("trusted_keys", []), *getattr(args, "trusted_key", [])],
                        "trusted_keys (orchestrate.toml, --trusted-key)")


def run(args, reporter: Reporter, open_store: Callable[[], tuple[Store, bool]]) -> int:
    """The command: one line per problem (stdout), or --json; exit 0 when clean, 1 with problems, and one
    error line (2) when the channel cannot be read at all. `open_store` gives the store and whether it is
    the local channel (whose fixes are build-all's)."""
    known = _architectures(args)
    try:
        keys = _trusted(args)
        store, local, *channel_arg = open_store()  # and, for a --channel DIR, the flag its fixes need
        if not local and (risk := plain_http_risk(store.url, bool(keys))):
            reporter.error(f"warning: {risk}")
        result = (_verify_locked(store, args.quick, known, *(channel_arg or [""]), keys) if local
                  else verify(store, local, args.quick, known, keys=keys))
        if known is None:
            result.notes.append("no workspace here: architecture names are checked by their shape, not against "
                                "an architecture table (run verify in a workspace, or pass --workspace)")
    except UserError as exc:
        if not args.json:
            raise
        reporter.line(json.dumps({"ok": False, "error": str(exc)}))
        return exc.exit_code
    if args.json:
        reporter.line(result.as_json())
        return 0 if result.ok else PROBLEMS_EXIT
    for problem in result.problems:
        reporter.item(problem.line())
    for note in result.notes:
        reporter.info(f"note: {note}")
    checked = f"{result.packages} package(s) and {result.entries} lookup entries checked" + (
        f" (and {result.benches} benchmark result(s))" if result.benches else "")
    if result.ok:
        reporter.paragraph(f"{result.channel}: {checked}; every file is there, whole and listed")
        return 0
    reporter.error(f"{result.channel}: {len(result.problems)} problem(s) ({checked}); each line above says what "
                   "to do")
    return PROBLEMS_EXIT
