"""The wheel installer's peak memory and time on one large member, against `pip install --no-deps --target`.

    python tests/benchmarks/wheel_stream.py [--member-mib 1536] [--runs 3] [--before REV]

The payload is a synthetic wheel shaped like TheRock's rocm-sdk-devel wheel: its one large member,
rocm_sdk_devel/_devel.tar, stored uncompressed as TheRock ships it (build_portable_linux_python_packages.yml
leaves --devel-tarball-compression off), here --member-mib of random (incompressible) bytes, beside the small
files of a real wheel (an __init__.py, METADATA, WHEEL, RECORD). Each run, interleaved and in one process
tree: recipes/_shared/install_wheels.py as the recipes run it (PREFIX, PYTHON_VERSION; no Requires-Dist check),
and `pip install --no-deps --no-index --target` of the same wheel, each round in a rotated order, each run after an
untimed os.sync(). With --before REV, the installer as it was at that commit too
(`git show REV:recipes/_shared/install_wheels.py`). Peak memory is each child's own maximum
resident set (os.wait4's ru_maxrss); times are wall clock. Medians of --runs, and the ratio to pip's median.

A benchmark, not a test: nothing fails on its numbers (tests/test_install_wheels_stream.py holds the memory
bound in the suite, on a smaller member). Needs about 4.5 GiB free for the default member (the wheel and two
installed copies); everything is removed at the end. Writes tests/benchmarks/results/wheel-stream.json and .md.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
INSTALLER = REPO / "recipes/_shared/install_wheels.py"
WHEEL_NAME = "rocm_sdk_devel-10.1.0-py3-none-linux_x86_64.whl"


def make_wheel(path: Path, member_mib: int) -> Path:
    """A stored (uncompressed) wheel with one member of member_mib MiB of random bytes and a real wheel's small
    files; written in 1 MiB chunks, so making it takes no memory either."""
    dist_info = "rocm_sdk_devel-10.1.0.dist-info"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as wheel:
        wheel.writestr("rocm_sdk_devel/__init__.py", "")
        with wheel.open(zipfile.ZipInfo("rocm_sdk_devel/_devel.tar"), "w", force_zip64=True) as member:
            for _ in range(member_mib):
                member.write(os.urandom(1 << 20))
        wheel.writestr(f"{dist_info}/METADATA", "Metadata-Version: 2.1\nName: rocm-sdk-devel\nVersion: 10.1.0\n")
        wheel.writestr(f"{dist_info}/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: py3-none-linux_x86_64\n")
        wheel.writestr(f"{dist_info}/RECORD", "")
    return path


def timed(command: list[str], env: dict | None = None) -> tuple[float, float, float]:
    """(seconds, peak RSS in MiB, CPU seconds: user + system, what other jobs on the machine change least) of one
    child process, started with no dirty pages pending (os.sync, untimed), so
    no run pays for the writeback of the one before it."""
    os.sync()
    start = time.perf_counter()
    child = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode:
        raise SystemExit(f"{command[:3]} failed: {child.stderr.read().decode()[-2000:]}")
    return seconds, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime


def ours(installer: Path, wheel: Path, root: Path) -> tuple[float, float, float]:
    prefix = root / "prefix"
    shutil.rmtree(prefix, ignore_errors=True)
    env = {"PATH": os.environ["PATH"], "PREFIX": str(prefix), "PYTHON_VERSION": "3.12"}
    try:
        return timed([sys.executable, str(installer), str(wheel)], env)
    finally:
        shutil.rmtree(prefix, ignore_errors=True)


def pip(wheel: Path, root: Path) -> tuple[float, float, float]:
    target = root / "pip-target"
    shutil.rmtree(target, ignore_errors=True)
    try:
        return timed([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--disable-pip-version-check",
                      "--no-compile", "--quiet", "--target", str(target), str(wheel)])
    finally:
        shutil.rmtree(target, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--member-mib", type=int, default=1536)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--before", help="also run the installer as it was at this git revision")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="wheel-stream-", dir=os.environ.get("TMPDIR")) as tmp:
        root = Path(tmp)
        free = shutil.disk_usage(root).free / 2**30
        if free < 3.2 * args.member_mib / 1024 + 0.5:
            raise SystemExit(f"{free:.1f} GiB free under {root}: the benchmark needs about "
                             f"{3 * args.member_mib / 1024:.1f} GiB (set TMPDIR or a smaller --member-mib)")
        wheel = make_wheel(root / WHEEL_NAME, args.member_mib)
        candidates = {"install_wheels.py": lambda: ours(INSTALLER, wheel, root), "pip --target": lambda: pip(wheel, root)}
        if args.before:
            before = root / "install_wheels_before.py"
            before.write_bytes(subprocess.run(["git", "show", f"{args.before}:recipes/_shared/install_wheels.py"],
                                              cwd=REPO, check=True, capture_output=True).stdout)
            candidates[f"install_wheels.py at {args.before}"] = lambda: ours(before, wheel, root)
        results = {name: {"seconds": [], "peak_rss_mib": [], "cpu_seconds": []} for name in candidates}
        for run in range(args.runs):
            order = list(candidates.items())
            for name, candidate in order[run % len(order):] + order[:run % len(order)]:  # each goes first in turn
                seconds, rss, cpu = candidate()
                results[name]["seconds"].append(round(seconds, 3))
                results[name]["peak_rss_mib"].append(round(rss, 1))
                results[name]["cpu_seconds"].append(round(cpu, 3))
                print(f"run {run + 1}: {name}: {seconds:.2f} s ({cpu:.2f} s CPU), peak RSS {rss:.0f} MiB", flush=True)
    pip_median = statistics.median(results["pip --target"]["seconds"])
    pip_cpu = statistics.median(results["pip --target"]["cpu_seconds"])
    for result in results.values():
        result["median_seconds"] = statistics.median(result["seconds"])
        result["median_peak_rss_mib"] = statistics.median(result["peak_rss_mib"])
        result["median_cpu_seconds"] = statistics.median(result["cpu_seconds"])
        result["time_vs_pip"] = round(result["median_seconds"] / pip_median, 2)
        result["cpu_vs_pip"] = round(result["median_cpu_seconds"] / pip_cpu, 2)
    report = {"member_mib": args.member_mib, "runs": args.runs, "machine": platform.platform(),
              "cpus": os.cpu_count(), "python": platform.python_version(), "results": results}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "wheel-stream.json").write_text(json.dumps(report, indent=2) + "\n")
    lines = [f"# Installing a wheel with one {args.member_mib / 1024:.1f} GiB stored member",
             "", f"`python tests/benchmarks/wheel_stream.py --runs {args.runs}"
             + (f" --before {args.before}" if args.before else "") + f"` on {platform.platform()}, "
             f"{os.cpu_count()} CPUs, Python {platform.python_version()}; medians of {args.runs} interleaved runs.",
             "", "| installer | median time | vs pip | median CPU time | vs pip | median peak RSS |",
             "|---|---|---|---|---|---|"]
    for name, result in results.items():
        lines.append(f"| {name} | {result['median_seconds']:.2f} s | {result['time_vs_pip']:.2f}x | "
                     f"{result['median_cpu_seconds']:.2f} s | {result['cpu_vs_pip']:.2f}x | "
                     f"{result['median_peak_rss_mib']:.0f} MiB |")
    (args.out / "wheel-stream.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
