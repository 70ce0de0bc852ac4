"""The local channel: packages by subdir, their index, and a manifest of what each was built from.

The manifest (orchestrate-manifest.json) maps each package file to its input hash and provenance; the
same record travels inside every package (about.json `extra.orchestrate`), so a channel alone tells
what it was built from. Packages are added one at a time, each followed by an index, and a package is
only ever replaced after the old file has been moved to .superseded/, so nothing built is lost.
"""
from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import stat
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from rattler.index import index_fs

from . import crashpoints, stops
from .errors import DiskFull, UserError, is_disk_full, writing

MANIFEST = "orchestrate-manifest.json"
LOOKUP_DIR = "orchestrate-manifest.d"  # per-package files beside the manifest: lookup entries, bench records
LOCK = ".orchestrate.lock"
SUPERSEDED = ".superseded"
STAMP_FORMAT = "%Y%m%dT%H%M%S"  # .superseded/<when>/<subdir>/<file>
SUBDIRS = ("noarch", "linux-64")
PACKAGE_SUFFIXES = (".conda", ".tar.bz2")
ROOM_SLACK = 1 << 20  # bytes an add keeps free beyond its own copies (temporary index files)
INDEX_SCRATCH = ".tmp"  # py-rattler's index_fs leaves this (empty) folder behind
MISSING = "missing from channel"
DAMAGED = "damaged in channel"
NOT_RECORDED = "not recorded in channel"


@dataclass
class Recovery:
    """What `Channel.recover` found after an interrupted run."""

    adopted: list[str]
    set_aside: list[str]
    stray: list[str]
    forgotten: list[str]  # manifest entries whose file is gone
    damaged: dict[str, str] = field(default_factory=dict)  # file -> why, each moved to .superseded/
    lost: dict[str, str] = field(default_factory=dict)  # input hash -> why its package must come again

    @property
    def changed(self) -> bool:
        return bool(self.adopted or self.set_aside or self.stray or self.forgotten or self.damaged)


@dataclass
class ManifestEntry:
    file: str  # subdir/filename
    name: str
    version: str
    build: str
    arch: str  # gpu arch, or "noarch" for architecture-independent packages
    slot: str
    input_hash: str
    sha256: str
    digests: dict
    dependency_hashes: dict
    patches: list
    built_at: float
    source: str = "built"  # or the cache channel it came from
    # what the build cost, for `plan`'s time and disk estimates (0 where unknown, e.g. adopted after a crash)
    seconds: float = 0.0
    package_bytes: int = 0
    disk_peak_bytes: int = 0
    host: str = ""


class Channel:
    def __init__(self, path: Path):
        self.path = Path(path).resolve()
        self._lock_fd: int | None = None

    # -- what it is -------------------------------------------------------------------------------
    def exists(self) -> bool:
        """Whether the folder holds anything but what an orchestration writes (its lock, a first package
        that a killed run left before the index existed), which makes it someone else's folder."""
        if not self.path.is_dir():
            return False
        ours = {LOCK, MANIFEST, f".{MANIFEST}.tmp", INDEX_SCRATCH, SUPERSEDED, *SUBDIRS}
        return any(p.name not in ours and not p.name.startswith(".write-probe-") for p in self.path.iterdir())

    def is_channel(self) -> bool:
        return (self.path / "noarch" / "repodata.json").is_file() or (self.path / MANIFEST).is_file()

    def validate(self) -> None:
        """An empty or missing folder becomes a channel on the first package; anything else must be one."""
        if self.path.exists() and not self.path.is_dir():
            raise UserError(f"channel {self.path} is a file, not a folder: pass --channel DIR with a folder")
        if self.exists() and not self.is_channel():
            raise UserError(
                f"{self.path} is not a conda channel (no noarch/repodata.json) and not empty: "
                "pass --channel with an empty folder or an existing channel"
            )

    def check_writable(self) -> None:
        folder = self.path
        self._made_folder = getattr(self, "_made_folder", False) or not folder.exists()
        try:
            folder.mkdir(parents=True, exist_ok=True)
            probe = tempfile.NamedTemporaryFile(dir=folder, prefix=".write-probe-", delete=True)
            probe.close()
        except OSError as exc:
            if is_disk_full(exc):
                raise DiskFull(self.path, "the channel") from None
            raise UserError(
                f"channel folder {self.path} is not writable ({exc.strerror or exc}): "
                "fix its permissions or pass --channel DIR that you can write"
            ) from None

    # -- one orchestration at a time --------------------------------------------------------------
    def lock(self, command: str) -> None:
        with writing("the channel lock", self.path / LOCK):
            try:
                self._lock(command)
            except BaseException:
                self.unlock()
                raise

    def _lock(self, command: str) -> None:
        # unlock removes a folder this run made (here or in check_writable) and left empty
        self._made_folder = getattr(self, "_made_folder", False) or not self.path.exists()
        self.path.mkdir(parents=True, exist_ok=True)
        try:
            holder = f"pid {os.getpid()} ({command}, since {time.strftime('%H:%M:%S')})"
            self._lock_fd = take_lock(self.path / LOCK, holder)
        except LockBusy as busy:
            raise UserError(
                f"channel {self.path} is in use by {busy.holder}: wait for it to finish or use another --channel"
            ) from None

    def unlock(self) -> None:
        if self._lock_fd is not None:
            if getattr(self, "_made_folder", False) and [p.name for p in self.path.iterdir()] == [LOCK]:
                # a run that stopped before it built anything (exit 2) leaves no channel where there was none: the
                # lock goes while still held (take_lock retries a lock file that was removed under it), then the folder
                (self.path / LOCK).unlink(missing_ok=True)
                with contextlib.suppress(OSError):
                    self.path.rmdir()
            release_lock(self._lock_fd)
            self._lock_fd = None

    # -- the manifest -----------------------------------------------------------------------------
    def manifest(self) -> dict[str, ManifestEntry]:
        path = self.path / MANIFEST
        if not path.exists():
            return {}
        try:
            raw = json.loads(path.read_text())
            return {f: ManifestEntry(**e) for f, e in raw["packages"].items()}
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise UserError(f"{path} is damaged ({exc}): restore it from a backup or remove the channel folder")

    def condition(self, entry: ManifestEntry) -> str | None:
        """Why a recorded package cannot be used as it is (missing, or not the size the manifest records),
        or None. One stat: comparing sha256s is `orchestrate verify`'s job."""
        try:
            size = (self.path / entry.file).stat().st_size
        except OSError:
            return MISSING
        if entry.package_bytes and size != entry.package_bytes:
            return (f"{DAMAGED}: size differs from manifest ({size} bytes, the manifest records "
                    f"{entry.package_bytes})")
        return None

    def entries_present(self) -> list[ManifestEntry]:
        """The recorded packages that are there and whole (as far as their size tells)."""
        return [e for e in self.manifest().values() if self.condition(e) is None]

    def unsound(self) -> dict[str, str]:
        """file -> why, for every recorded package that is missing or damaged."""
        found = {f: self.condition(e) for f, e in self.manifest().items()}
        return {f: why for f, why in found.items() if why}

    def package_condition(self, input_hash: str) -> str | None:
        """None when a whole package built from `input_hash` is recorded here; otherwise why it cannot be
        used: NOT_RECORDED, or why the recorded copy is missing or damaged (one manifest read, one stat each)."""
        whys = [self.condition(e) for e in self.manifest().values() if e.input_hash == input_hash]
        if not whys:
            return NOT_RECORDED
        return None if None in whys else whys[0]

    def find_by_slot(self, slot: str) -> ManifestEntry | None:
        matches = [e for e in self.entries_present() if e.slot == slot]
        return max(matches, key=lambda e: e.built_at) if matches else None

    # -- adding packages --------------------------------------------------------------------------
    def add(self, package: Path, entry: ManifestEntry) -> None:
        """Copy one built package in, keep any file it replaces, index, record. All or nothing: a stop
        (Ctrl-C, SIGTERM) waits until it is done, a full disk rolls it back."""
        with stops.zone(stops.CRITICAL), writing("the channel", self.path):
            self._check_room(package)
            self._add(package, entry)

    def _check_room(self, package: Path) -> None:
        """Refuse before touching anything when the copy, a superseded copy, index and manifest cannot fit."""
        indexes = [self.path / d / "repodata.json" for d in SUBDIRS] + [self.path / MANIFEST]
        needed = 2 * package.stat().st_size + 2 * sum(p.stat().st_size for p in indexes if p.exists()) + ROOM_SLACK
        folder = self.path if self.path.exists() else self.path.parent
        if shutil.disk_usage(folder).free < needed:
            raise DiskFull(self.path, f"{package.name} ({needed} bytes with its index) in the channel")

    def _add(self, package: Path, entry: ManifestEntry) -> None:
        subdir = package.parent.name if package.parent.name in SUBDIRS else entry.file.split("/")[0]
        target = self.path / subdir / package.name
        target.parent.mkdir(parents=True, exist_ok=True)
        for other in SUBDIRS:
            (self.path / other).mkdir(exist_ok=True)
        staged = target.with_name(f".{target.name}.incoming")
        try:
            shutil.copy2(package, staged)
            give_umask_mode(staged)  # rattler-build's packages are 0600; the team must be able to read them
            crashpoints.reach("add.staged")
            superseded = self._set_aside(target) if target.exists() else None
        except BaseException:
            staged.unlink(missing_ok=True)
            raise
        recorded = False
        try:
            os.replace(staged, target)
            crashpoints.reach("add.replaced")
            manifest = self.manifest()
            manifest = {f: e for f, e in manifest.items() if f != entry.file}
            manifest[entry.file] = entry
            self.reindex()
            crashpoints.reach("add.indexed")
            self._write_manifest(manifest)  # atomic: until it is replaced, the old manifest stands
            recorded = True
            crashpoints.reach("add.recorded")
        except BaseException:
            if recorded:
                raise  # everything is in place; only a crash point raised
            # Undo in an order that needs no free space: the rename frees the new file's blocks first,
            # so the index written last fits even on a full disk.
            if superseded:
                os.replace(superseded, target)
            else:
                target.unlink(missing_ok=True)
            (self.path / f".{MANIFEST}.tmp").unlink(missing_ok=True)
            self.reindex()
            raise
        finally:
            staged.unlink(missing_ok=True)

    def _set_aside(self, package: Path, copy: bool = True) -> Path:
        """Keep a package that is being replaced or is not trusted: .superseded/<time>/<subdir>/<file>."""
        subdir = package.parent.name
        kept = self.path / SUPERSEDED / time.strftime(STAMP_FORMAT) / subdir / package.name
        kept.parent.mkdir(parents=True, exist_ok=True)
        if copy:
            partial = kept.with_name(f".{kept.name}.partial")  # a crash mid-copy leaves no half file
            shutil.copy2(package, partial)
            give_umask_mode(partial)
            os.replace(partial, kept)
        else:
            os.replace(package, kept)
        return kept

    def reindex(self) -> None:
        for subdir in SUBDIRS:
            (self.path / subdir).mkdir(parents=True, exist_ok=True)
        asyncio.run(index_fs(self.path, write_shards=False, force=False))
        scratch = self.path / INDEX_SCRATCH
        if scratch.is_dir() and not any(scratch.iterdir()):
            scratch.rmdir()

    # -- after a crash ----------------------------------------------------------------------------
    def package_files(self) -> list[str]:
        return sorted(f"{subdir}/{p.name}" for subdir in SUBDIRS if (self.path / subdir).is_dir()
                      for p in (self.path / subdir).iterdir()
                      if p.is_file() and p.name.endswith(PACKAGE_SUFFIXES) and not p.name.startswith("."))

    def recover(self, adopt: Callable[[Path, dict], ManifestEntry | None]) -> Recovery:
        """Make package files, index and manifest agree again after a run was killed (call under the lock).

        A package file that the manifest does not know is adopted when `adopt` recognises its provenance
        (the input hash inside it matches a package the plan wants), otherwise set aside to .superseded/;
        stray temporary files are removed; the index is rewritten if anything changed."""
        if not self.path.is_dir():
            return Recovery([], [], [], [])
        with stops.zone(stops.CRITICAL), writing("the channel", self.path):
            return self._recover(adopt)

    def _recover(self, adopt: Callable[[Path, dict], ManifestEntry | None]) -> Recovery:
        stray = self._remove_stray_files()
        manifest = self.manifest()
        damaged = self._set_aside_damaged(manifest)
        files = set(self.package_files())
        adopted, set_aside = [], []
        for file in sorted(files - set(manifest)):
            package = self.path / file
            entry = adopt(package, read_provenance(package))
            if entry is not None:
                manifest[file] = entry
                adopted.append(file)
            else:
                self._set_aside(package, copy=False)
                set_aside.append(file)
        forgotten = sorted(f for f in manifest if f not in files or f in set_aside)
        lost = {manifest[f].input_hash: damaged.get(f, MISSING) for f in forgotten}
        for file in forgotten:
            del manifest[file]
        indexed = set(self.repodata_records())
        recovery = Recovery(adopted, set_aside, stray, [f for f in forgotten if f not in damaged], damaged, lost)
        if recovery.changed or indexed != set(manifest):
            self.reindex()
            self._write_manifest(manifest)
        return recovery

    def _set_aside_damaged(self, manifest: dict[str, ManifestEntry]) -> dict[str, str]:
        """Move every recorded package whose size is not the recorded one to .superseded/ (kept, never
        deleted), so that it is built or fetched again; and give 0600 files from older runs the umask's mode."""
        damaged = {}
        for file, entry in sorted(manifest.items()):
            why = self.condition(entry)
            if why and why != MISSING:
                self._set_aside(self.path / file, copy=False)
                damaged[file] = why
            elif why is None and (self.path / file).stat().st_mode & 0o777 == 0o600:
                give_umask_mode(self.path / file)
        return damaged

    def _remove_stray_files(self) -> list[str]:
        stray = []
        candidates = [self.path / f".{MANIFEST}.tmp", self.path / INDEX_SCRATCH]
        for subdir in SUBDIRS:
            folder = self.path / subdir
            candidates += sorted(folder.glob(".*.incoming")) if folder.is_dir() else []
        candidates += sorted(self.path.glob(".write-probe-*"))
        # the channel page and the benchmark results, written by a rename as packages are (share/bench.py)
        candidates += sorted(self.path.glob(".*.incoming")) + sorted(self.path.glob("bench/*/.*.incoming"))
        candidates += sorted(self.path.glob(f"{LOOKUP_DIR}/*/*.bench/.*.incoming"))
        candidates += sorted((self.path / SUPERSEDED).glob("*/*/.*.partial")) if (self.path / SUPERSEDED).is_dir() else []
        for path in candidates:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            elif path.exists() or path.is_symlink():
                path.unlink(missing_ok=True)
            else:
                continue
            stray.append(str(path.relative_to(self.path)))
        return stray

    def _write_manifest(self, manifest: dict[str, ManifestEntry]) -> None:
        data = {"packages": {f: vars(e) for f, e in sorted(manifest.items())}}
        tmp = self.path / f".{MANIFEST}.tmp"
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
        os.replace(tmp, self.path / MANIFEST)

    # -- reading ----------------------------------------------------------------------------------
    def repodata_records(self) -> dict[str, dict]:
        """subdir/file -> record, for every package the index lists. A damaged repodata.json lists nothing,
        so recovery sees that index and manifest disagree and indexes again."""
        records = {}
        for subdir in SUBDIRS:
            path = self.path / subdir / "repodata.json"
            if path.exists():
                try:
                    data = json.loads(path.read_text())
                except (json.JSONDecodeError, UnicodeDecodeError):
                    continue
                if not isinstance(data, dict):
                    continue
                for key in ("packages", "packages.conda"):
                    for fn, rec in (data.get(key) or {}).items():
                        records[f"{subdir}/{fn}"] = rec
        return records

    def snapshot(self) -> dict[str, str]:
        """Every file under the channel with its sha256 (tests use it to prove a channel untouched)."""
        if not self.path.exists():
            return {}
        return {
            str(p.relative_to(self.path)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(self.path.rglob("*"))
            if p.is_file() and p.name != LOCK
        }


def umask() -> int:
    """The process's umask (read by setting it and putting it back: there is no plain getter)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def give_umask_mode(path: Path) -> None:
    """The mode a plain create gives under the user's umask (0644 under 022), for files that went through
    tempfile or a copy of a 0600 file: before the rename that publishes them, so readers never see 0600."""
    os.chmod(path, 0o666 & ~umask())


class LockBusy(Exception):
    """Another process holds the lock; `holder` is what it recorded (pid, command, since when)."""

    def __init__(self, holder: str):
        super().__init__(holder)
        self.holder = holder


def take_lock(path: Path, holder: str, wait_s: float = 0.0, dir_fd: int | None = None) -> int:
    """flock `path` (created if needed), waiting up to `wait_s`, and record `holder` in it; returns the fd.

    The kernel releases a flock when its process ends, however it ends, so a killed holder never leaves a
    stale lock behind. On NFS, Linux maps flock to the server's byte-range locks (NLM, NFSv4), which the
    server releases when a dead client's lease runs out. Raises LockBusy with the recorded holder."""
    # a symlink: ELOOP; `dir_fd`: path's folder as the caller opened it (a shared channel's: never through a symlink)
    fd = os.open(path if dir_fd is None else path.name, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o666,
                 dir_fd=dir_fd)
    found = os.fstat(fd)
    if not stat.S_ISREG(found.st_mode) or found.st_nlink != 1:
        # the holder is written into the lock: never into a FIFO, a device, or a hard link to another file (a
        # teammate's link to this user's ~/.bashrc would be truncated), and never read back from one either
        os.close(fd)
        raise UserError(f"{path} is {'a hard link to another file' if stat.S_ISREG(found.st_mode) else 'no plain file'}"
                        ", not a lock file: remove it (nobody holds it), then run the same command again")
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if _same_file(fd, path, dir_fd):
                break
            # the holder removed the lock file before releasing it (Channel.unlock): lock the one there now
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
            return take_lock(path, holder, max(0.0, deadline - time.monotonic()), dir_fd)
        except BlockingIOError:
            if time.monotonic() >= deadline:
                recorded = "".join(c if c.isprintable() else "?" for c in os.pread(fd, 4096, 0).decode(
                    errors="replace").strip())[:200] or "another process"  # not the terminal's control codes
                os.close(fd)
                raise LockBusy(recorded) from None
            time.sleep(0.1)
    try:  # held from here: release it even if recording the holder fails
        os.ftruncate(fd, 0)
        os.pwrite(fd, holder.encode(), 0)
    except BaseException:
        release_lock(fd)
        raise
    return fd


def _same_file(fd: int, path: Path, dir_fd: int | None) -> bool:
    try:
        there = os.stat(path if dir_fd is None else path.name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (there.st_dev, there.st_ino) == (held.st_dev, held.st_ino)


def release_lock(fd: int) -> None:
    try:
        os.ftruncate(fd, 0)
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def read_provenance(package: Path) -> dict:
    """What a package records about its inputs (about.json `extra.orchestrate`); {} if unreadable."""
    from rattler.package_streaming import PackageArchive

    async def read() -> dict:
        archive = await PackageArchive.from_path(package)
        return (await archive.about_json()).extra or {}

    try:
        return (asyncio.run(read()).get("orchestrate") or {})
    except Exception:  # an unreadable archive records nothing
        return {}
