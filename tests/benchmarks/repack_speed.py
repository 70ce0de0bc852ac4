"""Repackaging a real wheel: the project's builder against `pip install`, per package format, in one run.

    python tests/benchmarks/repack_speed.py [--runs 3] [--candidates conda conda:9 ...]

The payload is the torch 2.13.0 CPU wheel (191 MB, 700 MB unpacked) that `.ci/run` installs: found through
pip's find-links (`pip config list`) or downloaded once with `pip download torch==2.13.0 --no-deps`.
Each candidate is one `orchestrate build` of a recipe built like recipes/pytorch-prebuilt's pytorch-base (AMD's
torch host wheel, the largest repack): recipes/_shared/install_wheels.py unpacks the wheel, no binary
relocation, no prefix detection under lib/. It runs in a temporary workspace whose orchestrate.toml sets
`package_format` (and `compression_threads`), into a fresh channel, tests skipped; the source cache is filled
by an untimed build first, so every timed build copies the wheel from it as a user's rebuild does. In the
same run, interleaved with the builds, `pip install --no-deps --target` of the same wheel. Medians of
--runs, the ratio to pip's median, and the package size against rattler-build's default format ("conda",
today's default).

A benchmark, not a test: nothing fails on its numbers. Writes tests/benchmarks/results/repack-speed.json
and .md.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(REPO))

from orchestrate.architectures import ArchitectureTable, write_variant_files  # noqa: E402
from orchestrate.options import DEFAULT_PACKAGE_FORMAT  # noqa: E402

WHEEL_GLOB = "torch-2.13.0*-cp3*-manylinux*_x86_64.whl"
PACKAGE = "torch-cpu-wheel"
ARCH = "gfx1151"
# rattler-build's own default ("conda", no level) is today's size reference; each candidate is
# (package_format, compression_threads or None for rattler-build's default: all cores).
DEFAULT_CANDIDATES = ["conda", "conda:3", "conda:6", "conda:9", "conda:12", "conda:9/threads=1"]

# The build runs install_wheels.py with the `python` of its build environment: here a stand-in whose
# bin/python runs the interpreter running this script (no conda-forge offline).
STAND_IN_PYTHON = """schema_version: 1
package: {name: python, version: "3.12.0"}
build:
  script:
    - mkdir -p $PREFIX/bin
    - printf '#!/bin/sh\\nexec %s "$@"\\n' > $PREFIX/bin/python
    - chmod +x $PREFIX/bin/python
"""


def find_wheel(download_dir: Path) -> Path:
    """The torch 2.13.0 wheel from pip's find-links, else one `pip download` into download_dir."""
    listed = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
    folders = []
    for line in listed.splitlines():
        key, _, value = line.partition("=")
        if key.strip().endswith("find-links"):
            folders += [Path(v.removeprefix("file://")) for v in value.strip().strip("'\"").split()]
    for folder in folders + [download_dir]:
        found = sorted(folder.glob(WHEEL_GLOB)) if folder.is_dir() else []
        if found:
            return found[0]
    download_dir.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "torch==2.13.0", "--no-deps", "--only-binary=:all:",
                    "-d", str(download_dir)], check=True)
    return sorted(download_dir.glob(WHEEL_GLOB))[0]


REPACK_RECIPE = """schema_version: 1
package: {name: %(name)s, version: "2.13.0"}
source:
  url: %(url)s
  sha256: %(sha256)s
  file_name: torch.whl
build:
  number: 0
  # as recipes/pytorch-prebuilt's pytorch-base: the wheel's files unchanged
  dynamic_linking:
    binary_relocation: false
  prefix_detection:
    ignore:
      - lib/**
  script:
    content: python "$RECIPE_DIR/../_shared/install_wheels.py" torch.whl
    env:
      PYTHON_VERSION: "3.12"
requirements:
  build:
    - python
"""


def make_workspace(root: Path, wheel: Path) -> Path:
    """The real install_wheels.py, a stand-in python and the repack recipe: nothing from conda-forge."""
    workspace = root / "ws"
    (workspace / "recipes" / "_shared").mkdir(parents=True)
    shutil.copy(REPO / "recipes" / "_shared" / "install_wheels.py", workspace / "recipes" / "_shared")
    (workspace / "recipes" / "python").mkdir()
    (workspace / "recipes" / "python" / "recipe.yaml").write_text(STAND_IN_PYTHON.replace("%s", sys.executable))
    (workspace / "recipes" / PACKAGE).mkdir()
    sha256 = hashlib.sha256(wheel.read_bytes()).hexdigest()
    (workspace / "recipes" / PACKAGE / "recipe.yaml").write_text(
        REPACK_RECIPE % {"name": PACKAGE, "url": wheel.resolve().as_uri(), "sha256": sha256})
    variants = workspace / "variants"
    variants.mkdir()
    shutil.copy(REPO / "variants" / "architectures.yaml", variants)
    (variants / "shared.yaml").write_text('python: ["3.12"]\n')
    (variants / "upstreams.yaml").write_text("components: {}\n")
    write_variant_files(ArchitectureTable.load(variants), variants)
    return workspace


def orchestrate(workspace: Path, *args: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "ORCHESTRATE_ARCH"}
    result = subprocess.run([sys.executable, "-m", "orchestrate", *args, "--arch", ARCH, "--no-source-channels",
                             "-q"], cwd=workspace, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"orchestrate {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")


def parse_candidate(text: str) -> tuple[str, int | None]:
    package_format, _, threads = text.partition("/threads=")
    return package_format, int(threads) if threads else None


def build_once(workspace: Path, candidate: str) -> tuple[float, int]:
    """(seconds of `orchestrate build`, package bytes) with the candidate's settings in orchestrate.toml."""
    package_format, threads = parse_candidate(candidate)
    config = f'source_channels = []\npackage_format = "{package_format}"\n'
    if threads:
        config += f"compression_threads = {threads}\n"
    (workspace / "orchestrate.toml").write_text(config)
    channel = workspace / "bench-channel"
    shutil.rmtree(channel, ignore_errors=True)
    orchestrate(workspace, "build", "python", "--channel", str(channel))  # the stand-in, untimed
    started = time.perf_counter()
    orchestrate(workspace, "build", PACKAGE, "--no-tests", "--channel", str(channel))
    seconds = time.perf_counter() - started
    packages = [p for p in channel.rglob(f"{PACKAGE}-*") if p.suffix in (".conda", ".bz2")]
    size = packages[0].stat().st_size
    shutil.rmtree(channel)
    return seconds, size


def pip_once(wheel: Path, root: Path) -> float:
    target = root / "pip-target"
    shutil.rmtree(target, ignore_errors=True)
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--disable-pip-version-check",
                    "-q", "--target", str(target), str(wheel)], check=True)
    seconds = time.perf_counter() - started
    shutil.rmtree(target)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--candidates", nargs="+", default=DEFAULT_CANDIDATES,
                        help="package formats, each optionally with /threads=N (default: %(default)s)")
    parser.add_argument("--download-dir", type=Path, default=Path(tempfile.gettempdir()) / "repack-speed-wheel")
    args = parser.parse_args()
    if "conda" not in args.candidates:
        args.candidates.insert(0, "conda")  # the size reference
    wheel = find_wheel(args.download_dir)
    print(f"wheel: {wheel} ({wheel.stat().st_size / 1e6:.1f} MB)", flush=True)
    times: dict[str, list[float]] = {c: [] for c in ["pip"] + args.candidates}
    sizes: dict[str, list[int]] = {c: [] for c in args.candidates}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="repack-speed-") as tmp:
        root = Path(tmp)
        workspace = make_workspace(root, wheel)
        build_once(workspace, "conda:1")  # untimed: fills the source cache and rattler's package cache
        order = list(times)
        for run in range(args.runs):
            random.Random(run).shuffle(order)  # interleaved, in a different order each run
            for candidate in order:
                if candidate == "pip":
                    seconds = pip_once(wheel, root)
                else:
                    seconds, size = build_once(workspace, candidate)
                    sizes[candidate].append(size)
                times[candidate].append(seconds)
                print(f"run {run + 1}: {candidate}: {seconds:.1f} s"
                      + (f", {sizes[candidate][-1] / 1e6:.1f} MB" if candidate != "pip" else ""), flush=True)
    pip_median = statistics.median(times["pip"])
    reference_size = statistics.median(sizes["conda"])
    rows = []
    for candidate in args.candidates:
        package_format, threads = parse_candidate(candidate)
        median = statistics.median(times[candidate])
        size = statistics.median(sizes[candidate])
        rows.append({"candidate": candidate, "package_format": package_format, "compression_threads": threads,
                     "seconds_median": round(median, 1), "seconds_all": [round(t, 1) for t in times[candidate]],
                     "ratio_to_pip": round(median / pip_median, 2), "package_mb": round(size / 1e6, 1),
                     "size_ratio_to_default": round(size / reference_size, 3),
                     "meets_goal": median / pip_median <= 2.0 and size / reference_size <= 1.05})
    result = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores (shared with other jobs), "
                   f"Python {platform.python_version()}",
        "date": time.strftime("%Y-%m-%d"), "runs": args.runs, "wall_seconds": round(time.perf_counter() - started),
        "wheel": wheel.name, "wheel_mb": round(wheel.stat().st_size / 1e6, 1),
        "pip": {"seconds_median": round(pip_median, 1), "seconds_all": [round(t, 1) for t in times["pip"]],
                "command": "pip install --no-deps --no-index --target DIR WHEEL"},
        "goal": "at most 2x pip's time, at most 1.05x the size of rattler-build's default format ('conda')",
        "project_default": DEFAULT_PACKAGE_FORMAT,
        "candidates": rows,
    }
    out = HERE / "results"
    (out / "repack-speed.json").write_text(json.dumps(result, indent=1) + "\n")
    lines = [
        f"# Repackaging the {result['wheel_mb']} MB torch wheel: builder vs pip ({result['date']}, {result['machine']})",
        "",
        f"`orchestrate build` of a pytorch-base-like recipe (install_wheels.py, no relocation) per package format, against `pip install "
        f"--no-deps --target` of the same wheel ({wheel.name}), interleaved in one run; median of {args.runs}. "
        f"pip: {pip_median:.1f} s. Size ratio: against rattler-build's default format (`conda`).",
        "",
        "| package_format | threads | seconds (median) | x pip | package MB | x default size | goal met |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(f"| `{row['package_format']}` | {row['compression_threads'] or 'all'} | {row['seconds_median']} | "
                     f"{row['ratio_to_pip']} | {row['package_mb']} | {row['size_ratio_to_default']} | "
                     f"{'yes' if row['meets_goal'] else 'no'} |")
    (out / "repack-speed.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
