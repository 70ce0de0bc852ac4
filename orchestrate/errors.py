"""Errors a user can fix: the CLI prints the message as one line and exits non-zero."""
from __future__ import annotations

import errno
import re
import shutil
from contextlib import contextmanager
from pathlib import Path

# The manual's page on a failed build: its kept work folder, re-entering the build there, rebuilding one package,
# a compiler cache for the retry. The failure lines and --help name it.
FAILED_BUILDS_PAGE = "docs/failed-builds.md"


class UserError(Exception):
    """A problem with the user's input or environment; the message names the fix."""

    exit_code = 2


class BuildFailed(Exception):
    """One or more packages failed to build (already reported in the summary)."""

    exit_code = 1


# -- a full disk ------------------------------------------------------------------------------------------
DISK_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
DISK_FULL_TEXT = re.compile(r"No space left on device|os error 28\b|Disk quota exceeded|os error 122\b")


def is_disk_full(exc: BaseException) -> bool:
    """An OSError for a full disk (or quota), or another library's error that says so (py-rattler's Rust
    errors are not OSErrors, their text carries "No space left on device (os error 28)")."""
    if isinstance(exc, OSError) and exc.errno in DISK_FULL_ERRNOS:
        return True
    return not isinstance(exc, OSError) and bool(DISK_FULL_TEXT.search(str(exc)))


def filesystem_of(path: Path) -> tuple[Path, int]:
    """The mount point holding `path` (or its nearest existing parent) and the bytes free there."""
    path = Path(path).absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    free = shutil.disk_usage(path).free
    device = path.stat().st_dev
    while path != path.parent and path.parent.stat().st_dev == device:
        path = path.parent
    return path, free


def disk_full_message(path: Path, what: str) -> str:
    try:
        mount, free = filesystem_of(path)
        room = f"the filesystem at {mount} has {free} bytes ({free / 2**10:.0f} KiB) free"
    except OSError:
        room = "its free space could not be read"
    return (f"disk full: no space left on device for {what} {path} ({room}): free space there "
            "(`orchestrate clean` removes failed builds' work folders), then run the same command again")


class DiskFull(UserError):
    """No space left for something the orchestrator writes; the message names the path and free bytes."""

    def __init__(self, path: Path, what: str):
        self.path = Path(path)
        super().__init__(disk_full_message(self.path, what))


@contextmanager
def writing(what: str, path: Path):
    """Turn a full disk while writing `what` at `path` into one line (DiskFull); other errors pass."""
    try:
        yield
    except DiskFull:
        raise
    except Exception as exc:
        if not is_disk_full(exc):
            raise
        raise DiskFull(Path(getattr(exc, "filename", None) or path), what) from None
