"""A channel laid out as files that we read, write and index ourselves: the Store interface and a folder.

Many machines may publish to one store at once, so a store offers only writes that cannot lose another
machine's work:
  - `create`: create-only. A package file or a lookup entry is written once and never overwritten; a second
    writer learns that the name is taken and compares what is there.
  - `exclusive` + `replace`: the only way to overwrite a shared file (the index's companions, a damaged
    package), under a lock that every publisher takes.
  - `update`: read, change and write back one shared file, under that lock or by compare-and-swap.
"""
from __future__ import annotations

import asyncio
import contextlib
import errno
import hashlib
import os
import re
import socket
import time
from pathlib import Path
from typing import Callable, Iterator

from ..channel import PACKAGE_SUFFIXES, LockBusy, release_lock, take_lock
from ..errors import UserError
from .package_files import archive_problem, size_problem
from .untrusted import (MAX_INDEX_BYTES, MAX_PATH_PARTS, Refused, channel_relpath, copy_out, open_file, open_folder,
                        read_in, read_json, remove_in, shown, stat_in, unique_suffix, write_in)

INDEX_LOCK = ".orchestrate-index.lock"
REFUSED_DIR = ".refused"  # package files the indexer could not read, set aside before indexing
PLATFORM = re.compile(r"^(noarch|[a-z]+-[a-z0-9_]+)\Z")  # a subdir rattler's indexer indexes
DEFAULT_MAX_PACKAGE_GIB = 32  # a package larger than this is set aside before indexing (max_package_gib)
LOCK_WAIT_S = 600  # indexing a large channel takes a while; a publisher waits this long for another one
STAGED_SUFFIX = ".incoming"
STALE_STAGED_S = 24 * 3600  # a private copy untouched this long belongs to a publish that was killed


class Store:
    """A channel as files: read, and (for writable stores) create, replace, update and index."""

    url: str
    writable = False
    max_package_bytes = DEFAULT_MAX_PACKAGE_GIB << 30  # publish sets orchestrate.toml's max_package_gib

    def read(self, relpath: str, limit: int = MAX_INDEX_BYTES) -> bytes | None:
        """The file's bytes, or None when the channel does not have it; untrusted.Refused when `relpath` is no
        path inside the channel, or the file is larger than `limit` (or, on a folder, a symlink)."""
        raise NotImplementedError

    def download(self, relpath: str, dest: Path, limit: int | None = None) -> None:
        """The file into `dest`; Refused past `limit` bytes (the size the channel's index lists), never written whole
        first (issue 37, a07/a08: a cache hit gigabytes long where the index says kilobytes)."""
        data = self.read(relpath) if limit is None else self.read(relpath, limit)
        if data is None:
            raise UserError(f"{self.url} lists {relpath} but does not have it: re-publish the channel")
        dest.write_bytes(data)

    def list(self, prefix: str) -> list[str] | None:
        """Every file under the folder `prefix` (relative paths), or None when the store cannot list."""
        return None

    def check(self) -> None:
        """Raise UserError (one line, with the fix) unless the store is reachable and usable."""

    def size(self, relpath: str) -> int | None:
        raise NotImplementedError

    def sha256(self, relpath: str) -> str | None:
        """The sha256 of the file as stored, or None when it is not there."""
        raise NotImplementedError

    def create(self, relpath: str, local: Path | None = None, data: bytes | None = None) -> bool:
        """Write a file that must not exist yet; False (and nothing written) when the name is taken."""
        raise NotImplementedError

    @contextlib.contextmanager
    def exclusive(self, doing: str, waiting: Callable[[str], None] = print) -> Iterator[None]:
        """Held while this publisher changes shared files that others may change too; `waiting` hears
        who holds it, if this publisher has to wait."""
        yield

    def replace(self, relpath: str, local: Path | None = None, data: bytes | None = None) -> None:
        """Overwrite a shared file; only inside `exclusive`."""
        raise NotImplementedError

    def update(self, relpath: str, change: Callable[[bytes | None], bytes]) -> None:
        """Write change(current bytes or None) back, without losing another publisher's update."""
        raise NotImplementedError

    def index(self, force: bool = False) -> list[str]:
        """Index the channel; returns a line for each file set aside because the indexer could not read it."""
        raise NotImplementedError

    def tidy(self) -> list[str]:
        """Remove what killed publishes left behind and nobody will finish; returns what was removed."""
        return []

    def set_aside_unreadable(self, force: bool) -> list[str]:
        """Before indexing: each package file that rattler's indexer would read (one its subdir's index does not
        list yet, or any with `force`) and could not, or that is too large or sparse (package_files.py), moved into
        REFUSED_DIR/<subdir>/ (hidden, never served, nothing lost), so that one junk file stops no publish. A line
        for each."""
        found = []
        for subdir in self._platform_subdirs():
            try:
                index = (read_json(self, f"{subdir}/repodata.json", MAX_INDEX_BYTES) or {}) if not force else {}
            except Refused:
                index = {}
            listed = {name for key in ("packages", "packages.conda") if isinstance(index.get(key), dict)
                      for name in index[key]}
            for relpath in self.list(subdir) or []:
                name = relpath[len(subdir) + 1:]
                if "/" in name or name.startswith(".") or not name.endswith(PACKAGE_SUFFIXES) or name in listed:
                    continue
                with self._open_package(relpath) as file:
                    why = (size_problem(file, relpath, self.max_package_bytes) or archive_problem(file, relpath)
                           if file is not None else None)
                if why:
                    aside = f"{REFUSED_DIR}/{relpath}.{unique_suffix()}"
                    self._move_aside(relpath, aside)
                    found.append(f"{shown(relpath)} is {why}: moved to {shown(aside)} (the index leaves it out)")
        return found

    def _platform_subdirs(self) -> list[str]:
        """The channel's subdirs that rattler's indexer indexes (noarch, linux-64, osx-arm64, ...)."""
        raise NotImplementedError

    def _open_package(self, relpath: str):
        """A context giving a seekable binary file of `relpath`, or None where there is no plain file."""
        raise NotImplementedError

    def _move_aside(self, relpath: str, aside: str) -> None:
        raise NotImplementedError


class FolderStore(Store):
    """A folder, local or on NFS. Create-only through a hard link of a finished copy (atomic on NFS too),
    the rest under a flock on INDEX_LOCK that every publisher takes."""

    writable = True

    def __init__(self, path: Path):
        self.written = Path(path)  # as the user wrote it: `bucket/rocm` may have meant s3://bucket/rocm
        self.path = Path(path).resolve()
        self.url = self.path.as_uri()
        self._lock_fd: int | None = None

    def read(self, relpath: str, limit: int = MAX_INDEX_BYTES) -> bytes | None:
        return read_in(self.path, relpath, limit)

    def download(self, relpath: str, dest: Path, limit: int | None = None) -> None:
        found = stat_in(self.path, relpath) if limit is not None else None
        if found is not None and found.st_size > limit:
            raise Refused(f"{shown(relpath)}: {found.st_size} bytes, over the {limit} its index lists")
        if not copy_out(self.path, relpath, dest, limit):
            raise UserError(f"{self.url} lists {relpath} but does not have it: re-publish the channel")

    def list(self, prefix: str) -> list[str]:
        """Everything but folders under `prefix`: files, and symlinks, FIFOs, sockets and devices (which readers
        then refuse, naming them); a symlinked folder is listed, never entered; hidden files are left out. Walked
        without recursion, and no deeper than a channel path may be (MAX_PATH_PARTS): what lies in a folder that
        deep is listed, not entered, and refused by its readers (a planted tree thousands of folders deep made a
        RecursionError of the page and verify)."""
        prefix = prefix.rstrip("/")
        try:
            os.close(open_folder(self.path, channel_relpath(prefix).split("/")))
        except (FileNotFoundError, NotADirectoryError):
            return []
        except Refused:
            return [prefix]  # a symlink on the way: never entered; a reader of it refuses it, naming it
        return self._walk(prefix)

    def _walk(self, prefix: str, hidden: bool = False) -> list[str]:
        """Every entry but folders under folder `prefix` ("": the channel), sorted; see `list`."""
        found, folders = [], [prefix]
        while folders:
            folder = folders.pop()
            try:  # through the folder as opened: one swapped for a symlink since its parent was read is not entered
                fd = open_folder(self.path, folder.split("/") if folder else [])
            except Refused:
                found.append(folder)  # its readers refuse it, naming it
                continue
            except OSError:
                continue  # gone since, or not ours to read
            try:  # whether each is a folder, asked while the folder is open (d_type, else a stat through it)
                entries = [(entry.name, entry.is_dir(follow_symlinks=False)) for entry in os.scandir(fd)]
            finally:
                os.close(fd)
            for name, is_folder in entries:
                relpath = f"{folder}/{name}" if folder else name
                if is_folder and relpath.count("/") + 1 <= MAX_PATH_PARTS:
                    folders.append(relpath)
                elif hidden or not name.startswith("."):
                    found.append(relpath)
        return sorted(found)

    def check(self) -> None:
        if not self.path.parent.is_dir():  # the whole path, as written and in full: `bucket/rocm` is not `bucket`
            relative = not self.written.is_absolute() and not str(self.written).startswith("~")
            written = f"{self.written} ({self.path})" if relative else str(self.path)
            bucket = f"; a bucket is written s3://{self.written.as_posix()}" if relative else ""
            raise UserError(f"target folder {written} cannot be made: its parent folder {self.path.parent} does not "
                            f"exist: create it or fix the path{bucket}")
        try:
            (self.path / "noarch").mkdir(parents=True, exist_ok=True)
            probe = self.path / f".write-probe-{unique_suffix()}"
            probe.touch(exist_ok=False)
            probe.unlink()
        except OSError as exc:
            raise UserError(f"target folder {self.path} is not writable ({exc.strerror}): fix its permissions") from None

    def size(self, relpath: str) -> int | None:
        found = stat_in(self.path, relpath)
        return found.st_size if found else None

    def sha256(self, relpath: str) -> str | None:
        fd = open_file(self.path, relpath)
        if fd is None:
            return None
        with os.fdopen(fd, "rb") as file:
            return hashlib.file_digest(file, "sha256").hexdigest()

    @contextlib.contextmanager
    def _writing(self, relpath: str, doing: str):
        try:
            yield
        except Refused as exc:  # a symlink planted on the way: nothing is written through it
            raise Refused(f"not writing {exc}: remove that from {self.path}, then publish again") from None
        except OSError as exc:
            raise UserError(f"{doing} {relpath} in {self.path} failed ({exc.strerror or exc}): "
                            "fix the folder's permissions or free space, then publish again") from None

    def create(self, relpath: str, local: Path | None = None, data: bytes | None = None) -> bool:
        with self._writing(relpath, "writing"):
            try:
                return write_in(self.path, relpath, data, local, create_only=True, staged_suffix=STAGED_SUFFIX)
            except OSError as exc:
                if exc.errno in (errno.EPERM, errno.EOPNOTSUPP):  # a filesystem without hard links
                    raise UserError(f"target folder {self.path} does not support hard links, which publishing "
                                    "needs to write files create-only: use a local disk, NFS or S3") from None
                raise

    @contextlib.contextmanager
    def exclusive(self, doing: str, waiting: Callable[[str], None] = print) -> Iterator[None]:
        holder = f"pid {os.getpid()} on {socket.gethostname()} ({doing}, since {time.strftime('%H:%M:%S')})"
        folder = open_folder(self.path, [])  # the channel folder itself swapped for a symlink: Refused
        try:
            try:
                self._lock_fd = take_lock(self.path / INDEX_LOCK, holder, dir_fd=folder)
            except LockBusy as busy:
                waiting(f"waiting for {busy.holder} to finish indexing {self.url}")
                self._lock_fd = take_lock(self.path / INDEX_LOCK, holder, wait_s=LOCK_WAIT_S,
                                          dir_fd=folder)
        except LockBusy as busy:
            raise UserError(f"{self.url} is being indexed by {busy.holder} for over {LOCK_WAIT_S}s: "
                            "wait for it to finish, then publish again") from None
        except OSError as exc:
            raise UserError(f"cannot lock {self.path / INDEX_LOCK} ({exc.strerror or exc}): on NFS, mount with "
                            "locking enabled (no `nolock`); fix the folder's permissions otherwise") from None
        finally:
            os.close(folder)
        try:
            yield
        finally:
            release_lock(self._lock_fd)
            self._lock_fd = None

    def _require_lock(self, relpath: str) -> None:
        if self._lock_fd is None:
            raise RuntimeError(f"{relpath} in a shared folder is only overwritten under {INDEX_LOCK}")

    def replace(self, relpath: str, local: Path | None = None, data: bytes | None = None) -> None:
        self._require_lock(relpath)
        with self._writing(relpath, "writing"):
            write_in(self.path, relpath, data, local, staged_suffix=STAGED_SUFFIX)

    def update(self, relpath: str, change: Callable[[bytes | None], bytes]) -> None:
        try:
            current = self.read(relpath)
        except Refused:  # a symlink planted in its place (or a file over the limit): replaced, never followed
            current = None
        self.replace(relpath, data=change(current))

    def index(self, force: bool = False) -> list[str]:
        from rattler.index import index_fs

        self._require_lock("the index")
        with self._writing("noarch/", "indexing"):
            (self.path / "noarch").mkdir(parents=True, exist_ok=True)
            set_aside = self.set_aside_unreadable(force)
        try:
            asyncio.run(index_fs(self.path, write_shards=False, force=force))
        except Exception as exc:  # py-rattler raises plain exceptions with the Rust error text
            raise UserError(f"indexing {self.path} failed ({' '.join(str(exc).split())[:200]}): "
                            "fix the folder, then publish again") from None
        return set_aside

    def _platform_subdirs(self) -> list[str]:
        root = open_folder(self.path, [])
        try:
            return [e.name for e in os.scandir(root) if e.is_dir(follow_symlinks=False) and PLATFORM.match(e.name)]
        finally:
            os.close(root)

    @contextlib.contextmanager
    def _open_package(self, relpath: str):
        try:
            fd = open_file(self.path, relpath)
        except Refused:
            fd = None  # a symlink, a FIFO: the indexer skips them, verify names them
        if fd is None:
            yield None
            return
        with os.fdopen(fd, "rb") as file:
            yield file

    def _move_aside(self, relpath: str, aside: str) -> None:
        parts, aside_parts = relpath.split("/"), aside.split("/")
        source = open_folder(self.path, parts[:-1])
        try:
            target = open_folder(self.path, aside_parts[:-1], create=True)
            try:
                os.rename(parts[-1], aside_parts[-1], src_dir_fd=source, dst_dir_fd=target)
            finally:
                os.close(target)
        finally:
            os.close(source)

    def tidy(self) -> list[str]:
        """Private copies (`.<file>.<host>-<pid>-<n>.incoming`) that a killed publish left; only old ones,
        since another machine may be writing one right now."""
        removed = []
        for relpath in self._walk("", hidden=True):
            if not (relpath.split("/")[-1].startswith(".") and relpath.endswith(STAGED_SUFFIX)):
                continue
            try:
                if remove_in(self.path, relpath, STALE_STAGED_S):
                    removed.append(relpath)
            except (FileNotFoundError, NotADirectoryError):
                continue  # its publish finished, or another one tidied it
            except Refused:
                continue  # a folder on its way became a symlink since the listing: never followed
        return removed
