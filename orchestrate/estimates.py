"""How long a plan will take and how much disk it needs.

For each package: this machine's last recorded build of it wins (the channel manifest keeps each build's
duration, disk peak and package size), then another machine's, then the recipe's own declaration:

    extra:
      estimate: {build_minutes: 60, disk_gib: 40, package_gib: 1.5}

(`disk_gib`: the most disk the build uses at once — sources, build tree, package; `package_gib`: what the
package adds to the channel). Estimates stay out of the input hash: editing one rebuilds nothing.
"""
from __future__ import annotations

import os
import shutil
import socket
from dataclasses import dataclass
from pathlib import Path

from .channel import Channel, ManifestEntry
from .errors import UserError
from .recipes import Output
from .ui import GIB, format_bytes, format_duration

ESTIMATE_KEY = "estimate"


@dataclass
class Estimate:
    seconds: float | None
    disk_bytes: int  # peak while building
    package_bytes: int
    basis: str  # where the figures come from

    def shown(self) -> str:
        return format_duration(self.seconds)


def this_host() -> str:
    return socket.gethostname()


def recorded_builds(channel: Channel) -> list[ManifestEntry]:
    """Builds with recorded costs, newest first."""
    if not channel.is_channel():
        return []
    entries = [e for e in channel.manifest().values() if e.source == "built" and e.seconds > 0]
    return sorted(entries, key=lambda e: e.built_at, reverse=True)


def estimate_for(output: Output, history: list[ManifestEntry]) -> Estimate:
    declared = (output.rendered.get("extra") or {}).get(ESTIMATE_KEY) or {}
    declared_disk = int(float(declared.get("disk_gib", 0)) * GIB)
    declared_package = int(float(declared.get("package_gib", 0)) * GIB)
    same_slot = [e for e in history if e.slot == output.key]
    same_name = [e for e in history if e.name == output.name]  # the recipe built for another architecture
    here = this_host()
    tiers = (([e for e in same_slot if e.host == here], "measured here"),
             ([e for e in same_name if e.host == here], "measured here"),
             (same_slot, "measured on {host}"),
             (same_name, "measured on {host}"))
    for entries, basis in tiers:
        if entries:
            last = entries[0]
            return Estimate(last.seconds, max(last.disk_peak_bytes, last.package_bytes) or declared_disk,
                            last.package_bytes or declared_package, basis.format(host=last.host or "another machine"))
    if declared:
        minutes = declared.get("build_minutes")
        return Estimate(float(minutes) * 60 if minutes is not None else None, declared_disk, declared_package,
                        "declared by the recipe")
    return Estimate(None, 0, 0, "unknown")


@dataclass
class DiskNeed:
    folder: Path
    bytes: int
    parts: list[str]


def disk_needs(estimates: list[tuple[str, Estimate]], work_dir: Path, channel_dir: Path) -> list[DiskNeed]:
    """What the builds need, per disk: the work area needs the largest single build (each build's folder
    is removed once its package is in the channel); the channel needs every new package."""
    needs: dict[int, DiskNeed] = {}

    def add(folder: Path, count: int, part: str) -> None:
        if count <= 0:
            return
        device = os.stat(existing_parent(folder)).st_dev
        need = needs.setdefault(device, DiskNeed(folder, 0, []))
        need.bytes += count
        need.parts.append(part)

    if estimates:
        label, biggest = max(estimates, key=lambda item: item[1].disk_bytes)
        add(work_dir, biggest.disk_bytes, f"{label}'s build peaks at {format_bytes(biggest.disk_bytes)}")
        packages = sum(e.package_bytes for _, e in estimates)
        add(channel_dir, packages, f"new packages {format_bytes(packages)}")
    return list(needs.values())


def check_disk(needs: list[DiskNeed]) -> None:
    for need in needs:
        free = shutil.disk_usage(existing_parent(need.folder)).free
        if free < need.bytes:
            raise UserError(
                f"not enough free disk at {existing_parent(need.folder)}: this build needs about "
                f"{format_bytes(need.bytes)} ({'; '.join(need.parts)}), {format_bytes(free)} free: free space there, "
                "point --channel or --source-cache at a larger disk, or pass --skip-disk-check if you know better"
            )


def existing_parent(path: Path) -> Path:
    path = Path(path).absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path
