"""Sources paid for once, disk bounded: measured side by side in one run.

    python tests/benchmarks/source_cache.py [--runs 3] [--mib 64]

(a) Three builds of a recipe with a sha256-pinned url source (gfx1151, gfx1100, then gfx1151 again after a
    recipe change): downloads and seconds with a fresh source cache per build (what every build had before
    the shared cache) and with the one shared cache. The tarball is served by an HTTP server on 127.0.0.1
    that counts requests; on a real network each avoided download is minutes (PyTorch's tarball, 2 GB
    TheRock tarballs, LLVM's clone).
(b) After a `build-all` of the test graph plus that recipe: bytes under .orchestrate/ (work area, source
    cache, logs) against the channel's size.

Writes tests/benchmarks/results/source-cache.json and .md.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from source_helpers import sourced_recipe  # noqa: E402
from stack import make_workspace  # noqa: E402

from orchestrate.sources import folder_bytes  # noqa: E402

TARBALL = "upstream-1.0.tar.gz"


def orchestrate(workspace: Path, *args: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "ORCHESTRATE_ARCH"}
    result = subprocess.run([sys.executable, "-m", "orchestrate", *args, "-q"], cwd=workspace, env=env,
                            capture_output=True, text=True, timeout=300)
    if result.returncode != 0:
        raise SystemExit(f"orchestrate {' '.join(args)} failed: {result.stderr}")


def three_builds(workspace: Path, shared_cache: bool) -> float:
    seconds = 0.0
    recipe = workspace / "recipes/sourced/recipe.yaml"
    original = recipe.read_text()
    for n, arch in enumerate(["gfx1151", "gfx1100", "gfx1151"]):
        if n == 2:
            recipe.write_text(original.replace("cp kernels.txt", "cp -v kernels.txt"))
        cache = ["--source-cache", str(workspace / ".orchestrate/sources")] if shared_cache else \
            ["--source-cache", tempfile.mkdtemp(dir=workspace / ".orchestrate", prefix="fresh-cache-")]
        started = time.perf_counter()
        orchestrate(workspace, "build", "sourced", "--arch", arch, *cache)
        seconds += time.perf_counter() - started
    recipe.write_text(original)
    return seconds


def measure_downloads(runs: int, mib: int) -> dict:
    rows = {}
    for shared in (False, True):
        times, downloads = [], []
        for _ in range(runs):
            with tempfile.TemporaryDirectory() as tmp:
                tmp = Path(tmp)
                workspace = make_workspace(tmp)
                with sourced_recipe(workspace, tmp, payload_mib=mib) as upstream:
                    (workspace / ".orchestrate").mkdir()
                    times.append(three_builds(workspace, shared))
                    downloads.append(upstream.downloads[TARBALL])
        rows["shared cache" if shared else "fresh cache per build (before)"] = {
            "downloads": statistics.median(downloads), "seconds_median": round(statistics.median(times), 2),
            "seconds_all": [round(t, 2) for t in times]}
    return rows


def measure_disk(mib: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        workspace = make_workspace(tmp)
        with sourced_recipe(workspace, tmp, payload_mib=mib):
            orchestrate(workspace, "build-all", "--arch", "gfx1151")
        state = workspace / ".orchestrate"
        return {
            "channel_bytes": folder_bytes(workspace / "channel"),
            "work_bytes": folder_bytes(state / "work"),
            "source_cache_bytes": folder_bytes(state / "sources"),
            "logs_bytes": folder_bytes(state / "logs"),
            "work_folders_left": sorted(p.name for p in (state / "work").iterdir() if p.is_dir()),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--mib", type=int, default=64, help="size of the served source tarball's payload")
    args = parser.parse_args()
    downloads = measure_downloads(args.runs, args.mib)
    disk = measure_disk(args.mib)
    result = {"machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
              "date": time.strftime("%Y-%m-%d"), "runs": args.runs, "payload_mib": args.mib,
              "three_builds": downloads, "after_build_all": disk}
    out = HERE / "results"
    (out / "source-cache.json").write_text(json.dumps(result, indent=1) + "\n")
    before, after = downloads["fresh cache per build (before)"], downloads["shared cache"]
    mib = 2**20
    lines = [
        f"# Source cache and disk ({result['date']}, {result['machine']}, median of {args.runs})",
        "",
        f"(a) Three builds of a url-sourced recipe ({args.mib} MiB payload): gfx1151, gfx1100, gfx1151 after a recipe change.",
        "",
        "| source cache | downloads | seconds (median) |",
        "|---|---|---|",
        f"| fresh per build (before) | {before['downloads']} | {before['seconds_median']} |",
        f"| one shared cache | {after['downloads']} | {after['seconds_median']} |",
        f"| ratio before/after | {before['downloads'] / max(after['downloads'], 1):.1f}x | "
        f"{before['seconds_median'] / after['seconds_median']:.2f}x |",
        "",
        "(b) After `build-all --arch gfx1151` of the test graph plus that recipe:",
        "",
        "| where | MiB |",
        "|---|---|",
        f"| channel | {disk['channel_bytes'] / mib:.2f} |",
        f"| .orchestrate/work (work folders left: {len(disk['work_folders_left'])}) | {disk['work_bytes'] / mib:.2f} |",
        f"| .orchestrate/sources (the source cache) | {disk['source_cache_bytes'] / mib:.2f} |",
        f"| .orchestrate/logs | {disk['logs_bytes'] / mib:.2f} |",
    ]
    (out / "source-cache.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
