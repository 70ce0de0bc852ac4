"""The work area's disk: successful builds remove their own work folder; what is left belongs to failed or
killed builds, kept for diagnosis until `orchestrate clean`. Superseded packages (replaced or untrusted
ones, kept so nothing built is lost) go only when asked, by age.

Every command that creates work folders holds the work area shared for its whole run; `clean` takes it
exclusively, so it never removes the folder of a build that is still running.
"""
from __future__ import annotations

import fcntl
import os
import re
import shutil
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from .channel import STAMP_FORMAT, SUPERSEDED, Channel
from .errors import UserError, writing
from .options import Options
from .sources import folder_bytes
from .ui import format_bytes

IN_USE = ".in-use"
LOG_NAME = re.compile(r"(.+)-\d{8}-\d{6}\.log")  # builder.build_output's <name>-<build string>-<time>.log
DAY_S = 86400


@contextmanager
def work_area(options: Options, exclusive: bool = False):
    with writing("the work area's marker", options.work_dir / IN_USE):
        options.work_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(options.work_dir / IN_USE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UserError(f"{options.work_dir} is in use by a running build or clean: "
                            "run this again when it has finished") from None
        yield
    finally:
        os.close(fd)


@dataclass
class Cleaned:
    work_folders: list[Path] = field(default_factory=list)
    superseded: list[Path] = field(default_factory=list)
    logs: list[Path] = field(default_factory=list)
    freed_bytes: int = 0

    def lines(self) -> list[str]:
        lines = [f"removed work folder {p}" for p in self.work_folders]
        lines += [f"removed superseded {p}" for p in self.superseded]
        if self.logs:
            lines.append(f"removed {len(self.logs)} older build log(s) from {self.logs[0].parent} (each package's "
                         "newest kept, and every benchmark result)")
        lines.append(f"freed {format_bytes(self.freed_bytes)}" if lines else "nothing to clean")
        return lines


def clean(options: Options, channel: Channel, superseded_days: float | None) -> Cleaned:
    cleaned = Cleaned()
    with work_area(options, exclusive=True):
        for folder in sorted(options.work_dir.iterdir()) if options.work_dir.is_dir() else []:
            if folder.is_dir() and not folder.is_symlink():
                cleaned.freed_bytes += folder_bytes(folder)
                shutil.rmtree(folder)
                cleaned.work_folders.append(folder)
        for log in older_logs(options.logs_dir):
            cleaned.freed_bytes += log.stat().st_size
            log.unlink()
            cleaned.logs.append(log)
    if superseded_days is not None:
        cutoff = time.time() - superseded_days * DAY_S
        root = channel.path / SUPERSEDED
        for stamp in sorted(root.iterdir()) if root.is_dir() else []:
            if stamp.is_dir() and _set_aside_at(stamp) < cutoff:
                cleaned.freed_bytes += folder_bytes(stamp)
                shutil.rmtree(stamp)
                cleaned.superseded.append(stamp)
    return cleaned


def older_logs(logs_dir: Path) -> list[Path]:
    """Every build log but the newest of each package build (builder names them <name>-<build string>-<time>.log):
    one per build attempt, so without this the folder only grows. The newest stays (a failure's, to be read);
    benchmark results beside the logs (<log>.bench.json, what `status` shows) stay too."""
    builds: dict[str, list[Path]] = {}
    for log in logs_dir.glob("*.log") if logs_dir.is_dir() else []:
        match = LOG_NAME.fullmatch(log.name)
        if match and log.is_file() and not log.is_symlink():
            builds.setdefault(match[1], []).append(log)
    return sorted(old for logs in builds.values() for old in sorted(logs, key=lambda p: p.name)[:-1])


def _set_aside_at(stamp: Path) -> float:
    """When packages were set aside: the folder is named by that time (channel._set_aside)."""
    try:
        return time.mktime(time.strptime(stamp.name, STAMP_FORMAT))
    except ValueError:
        return stamp.stat().st_mtime
