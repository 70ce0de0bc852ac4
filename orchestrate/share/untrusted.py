"""The one reader (and writer) of what a channel holds. A shared channel is written by every teammate and every CI
job that holds its token, so all it holds is untrusted input (docs/sharing.md, "What a reader of a channel can
trust"); `build-all --cache-channel`, `publish`, `page` and `verify` read it through here only, and `serve` asks
`bad_characters` what a bad path is.

- paths: a path that channel data names (a record's `bench`, a lookup entry's `file`, a listed S3 key, a folder
  name) is relative, inside the channel, and free of `..`, absolute parts, control characters and backslashes
  (`channel_relpath`); on a folder every part of it is opened without following a symlink (`open_folder`), so a
  symlink planted anywhere on the way is refused, not followed;
- files: read with O_NOFOLLOW, plain files only, at most a size limit (`read_in`); JSON at most MAX_JSON_DEPTH
  deep, checked before parsing (no RecursionError), without NaN, Infinity or over-long integers (`parse_json`);
- values: each field's type and range (`check_entry`, `check_record`, `number`, `timestamp`, `check_arch`);
  architecture names are those of the architecture table (orchestrate/architectures.py).
A check that fails raises Refused (one line: the file and why); callers report the entry and skip it.

Writes into a channel or a workspace go through `write_in`, which creates each folder on the way without
following a symlink, so a symlinked folder planted in the channel (bench/<arch>, orchestrate-manifest.d/linux-64)
cannot redirect a write outside its root.
"""
from __future__ import annotations

import datetime
import errno
import json
import math
import os
import re
import shutil
import socket
import stat
import time
import urllib.parse
from dataclasses import MISSING, fields
from pathlib import Path

from .. import web
from ..channel import PACKAGE_SUFFIXES, SUBDIRS, ManifestEntry
from ..errors import UserError

MAX_JSON_BYTES = 4 << 20  # a lookup entry, a bench record or a bench document (real ones: under 20 KB)
MAX_INDEX_BYTES = 512 << 20  # repodata.json, orchestrate-manifest.json and the page's data
MAX_JSON_DEPTH = 64  # nesting of arrays and objects (real files: under 10)
MAX_INT_DIGITS = 20  # a JSON integer longer than this is refused while parsing
MAX_BENCH_RESULTS = 1000  # results in one bench document (a quick benchmark: a few dozen); more are refused
MAX_PATH_CHARS = 1024
MAX_PATH_PARTS = 8  # folders and file of a channel path (its deepest: orchestrate-manifest.d/<subdir>/<file>.bench/<arch>.record)
MAX_TEXT_CHARS = 4096  # a name, version, build, host or note
LARGEST = 1e15  # bytes, seconds, speed-ups, TFLOP/s, milliseconds: anything larger is no measurement
EARLIEST_TIME, LATEST_TIME = 946_684_800, 7_258_118_400  # 2000-01-01 .. 2200-01-01 (UTC seconds)
NOARCH = "noarch"
ARCH_NAME = re.compile(r"^[a-z][a-z0-9_]{0,31}\Z")  # what an architecture table row may be called
HEX64 = re.compile(r"^[0-9a-f]{64}\Z")
PACKAGE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+!-]*\Z")
PLAIN_PATH = re.compile(r"^[A-Za-z0-9_.+=@,~/-]+\Z")  # shown on a page as it is; anything else is not shown
# (\Z, never $: `$` also matches before a trailing newline, so "gfx942\n" would pass as a name)


class Refused(UserError):
    """What a channel holds that a reader refuses: the message names the file and why."""


def shown(relpath: str) -> str:
    """A channel-named path for a terminal line: as it is when plain, else percent-encoded (a newline or `$(`
    in a name never reaches a terminal or a log as such)."""
    text = str(relpath)
    return text if PLAIN_PATH.match(text) else urllib.parse.quote(text, safe="/._-+=@,~")


def why_of(refusal, relpath: str) -> str:
    """A Refused message without the path it opens with, for a line that names the file already."""
    why, prefix = str(refusal), f"{shown(relpath)}: "
    return why[len(prefix):] if why.startswith(prefix) else why


def page_problem(relpath: str, why: str, hide: bool = False) -> str:
    """A line for the page's list of refused files: the reason as it is where the file's name is plain (and not
    `hide`: a folder named like no architecture), else only that it was refused; `verify` names it and why."""
    if hide or not PLAIN_PATH.match(str(relpath)) or "%" in why:
        return (f"{'a file with an unsafe name' if not hide else 'a file in a folder named like no architecture'}"
                " was refused: `orchestrate verify` names it and why")
    return why


# C0 and C1 control characters (a terminal acts on them), and the bidirectional controls that make a name read
# as another one (`x\u202egnp.json` shows as `xnosj.png`): in no name or value a channel holds
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def bad_characters(text: str) -> bool:
    """Whether a path holds a control character (CONTROL) or a backslash: never in a channel's paths."""
    return "\\" in text or CONTROL.search(text) is not None


# -- paths ----------------------------------------------------------------------------------------------------
def channel_relpath(relpath) -> str:
    """`relpath` when it names a file inside a channel; else Refused."""
    if not isinstance(relpath, str) or not relpath:
        raise Refused(f"{shown(str(relpath))}: not a path")
    if len(relpath) > MAX_PATH_CHARS:
        raise Refused(f"{shown(relpath[:80])}…: a path of over {MAX_PATH_CHARS} characters")
    if bad_characters(relpath):
        raise Refused(f"{shown(relpath)}: a control character, bidirectional control or backslash in a path")
    if relpath.startswith("/") or any(part in ("", ".", "..") for part in relpath.split("/")):
        raise Refused(f"{shown(relpath)}: an absolute path, or one with an empty, `.` or `..` part")
    if relpath.count("/") >= MAX_PATH_PARTS:
        raise Refused(f"{shown(relpath[:200])}: a path of over {MAX_PATH_PARTS} parts (folders nested deeper than a "
                      "channel has them)")
    return relpath


def package_file(file) -> str:
    """`subdir/name.conda` (or .tar.bz2) of a package the channel lists; else Refused."""
    channel_relpath(file)
    subdir, _, name = file.partition("/")
    if subdir not in SUBDIRS or not PACKAGE_NAME.match(name) or not name.endswith(PACKAGE_SUFFIXES):
        raise Refused(f"{shown(file)}: not a package file name (<subdir>/<name>.conda)")
    return file


def open_folder(root: Path, parts: list[str], create: bool = False) -> int:
    """A descriptor of the folder root/parts..., each part opened without following a symlink (made when
    `create`); Refused when one is a symlink or no folder; FileNotFoundError when one is missing. `root` is a
    resolved path (FolderStore and Channel resolve theirs once, as the command starts): a symlink there now is
    a channel folder swapped for one since, by whoever may write the folder above it, and is refused too."""
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
            raise
        raise Refused(f"{root}: the channel folder was replaced by a symlink or a file while this command ran: "
                      "nothing is read or written through it; put the folder back") from None
    try:
        for name in parts:
            if create:
                try:
                    os.mkdir(name, dir_fd=fd)
                except FileExistsError:
                    pass
            try:
                inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise Refused(f"{shown('/'.join(parts))}: {shown(name)} on its way is a symlink or not a "
                                  "folder") from None
                if exc.errno == errno.ENOENT:
                    raise
                raise _unopenable('/'.join(parts), exc) from None
            os.close(fd)
            fd = inner
        return fd
    except BaseException:
        os.close(fd)
        raise


def _unopenable(relpath: str, exc: OSError) -> Refused:
    """Any other failure to open what a channel holds, as a refusal naming it (never a traceback)."""
    return Refused(f"{shown(relpath)}: cannot be opened ({exc.strerror or type(exc).__name__}): no plain file this "
                   "user may read")


def open_file(root: Path, relpath: str) -> int | None:
    """A read descriptor of a plain file inside root, never through a symlink; None when missing or a folder."""
    parts = channel_relpath(relpath).split("/")
    try:
        folder = open_folder(root, parts[:-1])
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:
        fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=folder)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise Refused(f"{shown(relpath)}: a symlink (a channel's files are never followed through one)") from None
        raise _unopenable(relpath, exc) from None  # a socket (ENXIO), a file this user may not read, ...
    finally:
        os.close(folder)
    mode = os.fstat(fd).st_mode
    if stat.S_ISDIR(mode):
        os.close(fd)
        return None
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise Refused(f"{shown(relpath)}: not a plain file")
    return fd


def read_in(root: Path, relpath: str, limit: int = MAX_INDEX_BYTES) -> bytes | None:
    """A file inside folder `root` (None when missing); Refused when it is a symlink, no plain file, or over
    `limit` bytes."""
    fd = open_file(root, relpath)
    if fd is None:
        return None
    with os.fdopen(fd, "rb") as file:
        size = os.fstat(file.fileno()).st_size
        data = file.read(limit + 1) if size <= limit else b""
    if size > limit or len(data) > limit:
        raise Refused(f"{shown(relpath)}: over {limit} bytes")
    return data


def copy_out(root: Path, relpath: str, dest: Path, limit: int | None = None) -> bool:
    """A file inside folder `root` copied to `dest`, never through a symlink, and no more than `limit` bytes
    (Refused: a file that grew after its size was read); False when missing."""
    fd = open_file(root, relpath)
    if fd is None:
        return False
    with os.fdopen(fd, "rb") as source, open(dest, "wb") as out:
        if limit is None:
            shutil.copyfileobj(source, out, 1 << 20)
        elif bounded_copy(source.read, out, limit) is None:
            raise Refused(f"{shown(relpath)}: over the {limit} bytes its index lists")
    return True


def bounded_copy(read, out, limit: int) -> int | None:
    """Copy read(n) chunks into `out` up to `limit` bytes; the bytes copied, or None past the limit (stopped there).
    A source that averages under web.MIN_RATE once web.TRANSFER_GRACE_S has passed (an S3 endpoint that drips) is
    Refused: every transfer has a minimum rate, not only the ones through web.py."""
    copied, started = 0, time.monotonic()
    while chunk := read(min(1 << 20, limit + 1 - copied)):
        copied += len(chunk)
        if copied > limit:
            return None
        out.write(chunk)
        elapsed = time.monotonic() - started
        if elapsed > web.TRANSFER_GRACE_S and copied < web.MIN_RATE * elapsed:
            raise Refused(f"the source sent {copied} bytes in {elapsed:.0f} s, under {web.MIN_RATE // 1024} KiB/s")
    return copied


def stat_in(root: Path, relpath: str) -> os.stat_result | None:
    """The file's stat inside `root`, never through a symlink; None when missing (or a folder)."""
    fd = open_file(root, relpath)
    if fd is None:
        return None
    try:
        return os.fstat(fd)
    finally:
        os.close(fd)


def remove_in(root: Path, relpath: str, older_than_s: float) -> bool:
    """Remove the plain file root/relpath when it has not changed for `older_than_s` seconds; True when removed.
    Through the folders opened without following a symlink, like write_in: a folder swapped for a symlink between
    finding the file and removing it leads nowhere outside `root`."""
    parts = relpath.split("/")
    folder = open_folder(Path(root), parts[:-1])
    try:
        found = os.stat(parts[-1], dir_fd=folder, follow_symlinks=False)
        if not stat.S_ISREG(found.st_mode) or time.time() - found.st_mtime <= older_than_s:
            return False
        os.unlink(parts[-1], dir_fd=folder)
        return True
    finally:
        os.close(folder)


def unique_suffix() -> str:
    """A name part that no other process, here or on another machine, uses at the same time."""
    return f"{socket.gethostname()}-{os.getpid()}-{time.monotonic_ns()}"


def write_in(root: Path, relpath: str, data: bytes | None = None, local: Path | None = None,
             create_only: bool = False, staged_suffix: str = ".incoming") -> bool:
    """THE write into a channel or workspace folder: `data` (or a copy of `local`) as root/relpath, replaced
    whole (a rename: readers see the old file or the new one), or `create_only` (a hard link: never overwrites;
    False, and nothing written, when the name is taken). Every folder on the way is made or opened without
    following a symlink, and the file is staged and renamed inside the folder opened so, so nothing is ever
    written outside `root`, whatever the channel holds. The mode is what the umask gives."""
    parts = channel_relpath(relpath).split("/")
    name = parts[-1]
    folder = open_folder(Path(root), parts[:-1], create=True)
    staged = f".{name}.{unique_suffix()}{staged_suffix}"  # a private copy, renamed or linked into place
    try:
        fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666, dir_fd=folder)
        try:
            with os.fdopen(fd, "wb") as out:
                if local is not None:
                    with open(local, "rb") as source:
                        shutil.copyfileobj(source, out, 1 << 20)
                else:
                    out.write(data)
            if not create_only:
                os.replace(staged, name, src_dir_fd=folder, dst_dir_fd=folder)
                return True
            try:
                os.link(staged, name, src_dir_fd=folder, dst_dir_fd=folder, follow_symlinks=False)
                return True
            except FileExistsError:
                # NFS may answer a retried link() that did succeed with EEXIST: the link count tells
                return os.stat(staged, dir_fd=folder).st_nlink > 1
        finally:
            try:
                os.unlink(staged, dir_fd=folder)
            except FileNotFoundError:
                pass
    finally:
        os.close(folder)


# -- JSON -----------------------------------------------------------------------------------------------------
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_NOT_BRACKET = re.compile(rb"[^\[\]{}]+")


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"an integer of {len(text)} digits")
    return int(text)


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is out of range")
    return value


def _no_constant(text: str):
    raise ValueError(f"{text} is no JSON number")


def parse_json(raw: bytes, where: str, limit: int = MAX_JSON_BYTES):
    """The value of a JSON file from a channel; Refused when larger than `limit`, nested deeper than
    MAX_JSON_DEPTH (checked before parsing, so no RecursionError), or holding NaN, Infinity, an integer of
    over MAX_INT_DIGITS digits or a number too large for a float."""
    if len(raw) > limit:
        raise Refused(f"{shown(where)}: over {limit} bytes")
    if raw.count(b"[") + raw.count(b"{") > MAX_JSON_DEPTH:
        depth = 0
        for bracket in _NOT_BRACKET.sub(b"", _STRING.sub(b"", raw)):
            depth += 1 if bracket in b"[{" else -1
            if depth > MAX_JSON_DEPTH:
                raise Refused(f"{shown(where)}: nested over {MAX_JSON_DEPTH} levels deep")
    try:
        return json.loads(raw, parse_int=_bounded_int, parse_float=_finite_float, parse_constant=_no_constant)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise Refused(f"{shown(where)}: does not parse as JSON ({' '.join(str(exc).split())[:120]})") from None


def json_object(raw: bytes | None, where: str, limit: int = MAX_JSON_BYTES) -> dict | None:
    """A JSON object file's contents (None when missing); Refused when it is no object or parse_json refuses it."""
    if raw is None:
        return None
    value = parse_json(raw, where, limit)
    if not isinstance(value, dict):
        raise Refused(f"{shown(where)}: not a JSON object")
    return value


def read_json(store, relpath: str, limit: int = MAX_JSON_BYTES) -> dict | None:
    """A JSON object file of a channel (any Store); None when missing, Refused when it cannot be used."""
    return json_object(store.read(channel_relpath(relpath), limit=limit), relpath, limit)


# -- values ---------------------------------------------------------------------------------------------------
def _kind(value) -> str:
    return {str: "a string", int: "a number", float: "a number", bool: "true/false", list: "a list",
            dict: "an object", type(None): "null"}.get(type(value), type(value).__name__)


def number(value, where: str, low: float = 0.0, high: float = LARGEST):
    """A finite number in [low, high]; None stays None (unknown); anything else Refused."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not low <= value <= high:
        raise Refused(f"{where} is {_kind(value) if not isinstance(value, (int, float)) else repr(value)[:40]}, "
                      f"not a number from {low:g} to {high:g}")
    return value


def timestamp(value, where: str, scale: int = 1) -> float | None:
    """Seconds since 1970 (UTC) between 2000 and 2200, given in 1/`scale` seconds; 0 or None: unknown."""
    if value in (None, 0):
        return None
    number(value, where, EARLIEST_TIME * scale, LATEST_TIME * scale)
    return value / scale


def iso_time(value, where: str) -> str | None:
    """An ISO 8601 time between 2000 and 2200 as a string (None: unknown)."""
    if value is None:
        return None
    try:
        when = datetime.datetime.fromisoformat(text(value, where, 64).replace("Z", "+00:00"))
        if not EARLIEST_TIME <= when.replace(tzinfo=when.tzinfo or datetime.timezone.utc).timestamp() <= LATEST_TIME:
            raise ValueError
    except (ValueError, OverflowError):
        raise Refused(f"{where} is not a time (ISO 8601, 2000 to 2200)") from None
    return value


def text(value, where: str, limit: int = MAX_TEXT_CHARS) -> str:
    """A string without control characters, at most `limit` long."""
    if not isinstance(value, str):
        raise Refused(f"{where} is {_kind(value)}, not a string")
    if len(value) > limit or CONTROL.search(value):
        raise Refused(f"{where} is over {limit} characters long, or holds control characters")
    return value


def hex_or_none(value, where: str) -> str | None:
    """A sha256 (64 lowercase hex digits), or None."""
    if value is not None and not (isinstance(value, str) and HEX64.match(value)):
        raise Refused(f"{where} is not a sha256 (64 hex digits)")
    return value


def check_arch(name, where: str, known: list[str] | None, noarch: bool = True) -> str:
    """An architecture name of the table (`known`: ArchitectureTable.names(); None where no table is at hand:
    then its shape only), or "noarch" where `noarch`."""
    if noarch and name == NOARCH:
        return name
    if not isinstance(name, str) or not ARCH_NAME.match(name) or (known is not None and name not in known):
        raise Refused(f"{where}: {'the architecture' if isinstance(name, str) else _kind(name)} is not one of the "
                      "architecture table's (variants/architectures.yaml)")
    return name


ENTRY_FIELDS = {f.name: f for f in fields(ManifestEntry)}
ENTRY_REQUIRED = {name for name, f in ENTRY_FIELDS.items() if f.default is MISSING and f.default_factory is MISSING}


def check_entry(raw, file: str, where: str, known: list[str] | None) -> ManifestEntry:
    """A lookup entry (orchestrate-manifest.d/<file>.json, or a row of orchestrate-manifest.json) for package
    `file`, every field checked; Refused otherwise (damaged, planted, or written by another version)."""
    if not isinstance(raw, dict):
        raise Refused(f"{where}: not a JSON object")
    missing, other = ENTRY_REQUIRED - set(raw), set(raw) - set(ENTRY_FIELDS)
    if missing or other:
        raise Refused(f"{where}: {'lacks ' + ', '.join(sorted(missing)) if missing else ''}"
                      f"{'; ' if missing and other else ''}{'has unknown fields' if other else ''} "
                      "(written by another orchestrator version, or damaged)")
    if raw["file"] != file:
        raise Refused(f"{where}: names another package file than its own")
    package_file(file)
    for key in ("name", "version", "build", "slot", "source", "host"):
        if key in raw:
            text(raw[key], f"{where}: {key}", MAX_PATH_CHARS)
    if not PACKAGE_NAME.match(raw["name"]):
        raise Refused(f"{where}: name is not a package name")
    check_arch(raw["arch"], where, known)
    for key in ("input_hash", "sha256"):
        if raw[key] is None:
            raise Refused(f"{where}: {key} is null")
        hex_or_none(raw[key], f"{where}: {key}")
    for key, kind in (("digests", dict), ("dependency_hashes", dict), ("patches", list)):
        if not isinstance(raw[key], kind):
            raise Refused(f"{where}: {key} is {_kind(raw[key])}, not {_kind(kind())}")
    timestamp(raw["built_at"], f"{where}: built_at")
    for key in ("seconds", "package_bytes", "disk_peak_bytes"):
        number(raw.get(key, 0), f"{where}: {key}")
    return ManifestEntry(**raw)


def check_record(raw, relpath: str, expected_bench: str) -> dict:
    """A bench record ({"bench", "sha256", "size"}) at `relpath`: its bench file is the one its own place names
    (bench/<arch>/<package stem>.json), so a record can name no other file; Refused otherwise."""
    if not isinstance(raw, dict):
        raise Refused(f"{shown(relpath)}: not a JSON object")
    if raw.get("bench") != expected_bench:
        raise Refused(f"{shown(relpath)}: names {shown(str(raw.get('bench')))[:120]} as its benchmark result, not "
                      f"{expected_bench}")
    if raw.get("sha256") is None:
        raise Refused(f"{shown(relpath)}: has no sha256")
    hex_or_none(raw["sha256"], f"{shown(relpath)}: sha256")
    number(raw.get("size"), f"{shown(relpath)}: size", 0, MAX_JSON_BYTES)
    if not isinstance(raw.get("size"), int) or isinstance(raw["size"], bool):
        raise Refused(f"{shown(relpath)}: size is not a whole number")
    return raw
