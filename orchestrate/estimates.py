"""How long a plan will take and how much disk it needs.

For each package: this machine's last recorded build of it wins (the channel manifest keeps each build's
duration, disk peak and package size), then another machine's, then the recipe's own declaration:

    extra:
      estimate: {build_minutes: 60, disk_gib: 40, package_gib: 1.5, source_gib: 2}

(`disk_gib`: the most disk the build uses at once — sources, build tree, package; `package_gib`: what the
package adds to the channel; `source_gib`: what its sources keep in the source cache, which outlives every
build — each archive plus its unpacked tree, each git clone). Estimates stay out of the input hash: editing
one rebuilds nothing.

The source cache is shared by every recipe and architecture, so its need is counted per source, not per
build: a recipe's source_gib is split evenly among its downloaded sources, a source several recipes share is
counted once (at the largest share declared for it), and a source already in the cache counts nothing.
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
from .sources import Source, SourceCache
from .ui import GIB, format_bytes, format_duration

ESTIMATE_KEY = "estimate"


@dataclass
class Estimate:
    seconds: float | None
    disk_bytes: int  # peak while building
    package_bytes: int
    basis: str  # where the figures come from
    source_bytes: int = 0  # declared source_gib: what the build's sources keep in the source cache

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
    declared_sources = int(float(declared.get("source_gib", 0)) * GIB)
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
                            last.package_bytes or declared_package, basis.format(host=last.host or "another machine"),
                            declared_sources)
    if declared:
        minutes = declared.get("build_minutes")
        return Estimate(float(minutes) * 60 if minutes is not None else None, declared_disk, declared_package,
                        "declared by the recipe", declared_sources)
    return Estimate(None, 0, 0, "unknown")


@dataclass
class DiskNeed:
    folder: Path
    bytes: int
    parts: list[str]


@dataclass
class SourceCacheNeed:
    bytes: int
    part: str  # what doctor and the disk check say about it


def source_cache_need(builds: list[tuple[str, Estimate, list[Source]]], cache: SourceCache) -> SourceCacheNeed:
    """What the builds' sources will add to the source cache (see the module's docstring for the rule)."""
    records = cache.records()
    shares: dict[tuple, int] = {}
    undeclared, cached, total = set(), 0, set()
    for name, estimate, sources in builds:
        downloaded = [source for source in sources if source.kind != "path"]
        for source in downloaded:
            key = (source.kind, source.location, source.pin)
            if key in total:
                shares[key] = max(shares.get(key, 0), estimate.source_bytes // len(downloaded))
                continue
            total.add(key)
            if cache.has(source, records):
                cached += 1
                continue
            shares[key] = estimate.source_bytes // len(downloaded)
            if not estimate.source_bytes:
                undeclared.add(name)
    needed = sum(bytes_ for key, bytes_ in shares.items())
    part = (f"sources not yet in the source cache {format_bytes(needed)} ({len(shares)} of {len(total)} sources; "
            "declared source_gib, archives plus unpacked trees")
    part += f"; none declared by {', '.join(sorted(undeclared))})" if undeclared else ")"
    return SourceCacheNeed(needed, part)


def disk_needs(estimates: list[tuple[str, Estimate]], work_dir: Path, channel_dir: Path,
               source_cache: tuple[Path, SourceCacheNeed] | None = None) -> list[DiskNeed]:
    """What the builds need, per disk: the work area needs the largest single build (each build's folder
    is removed once its package is in the channel); the channel needs every new package; the source cache
    keeps every source the builds download (`source_cache`: its folder and source_cache_need's answer)."""
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
        add(work_dir, biggest.disk_bytes, f"{label}'s build peaks at {format_bytes(biggest.disk_bytes)}, "
                                          f"{biggest.basis}")
        packages = sum(e.package_bytes for _, e in estimates)
        bases = sorted({e.basis for _, e in estimates})
        add(channel_dir, packages, f"new packages {format_bytes(packages)}, {' or '.join(bases)}")
    if source_cache is not None:
        add(source_cache[0], source_cache[1].bytes, source_cache[1].part)
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
