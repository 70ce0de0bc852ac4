"""Orchestrator speed on this machine's class (a benchmark, not a timed test).

Measures, each as the median of several runs in one process:
  * `orchestrate plan` over every real recipe (recipes/) for one architecture    (target < 1 s)
  * `orchestrate build-all` on the test graph when everything is up to date       (target < 2 s)
  * after one patch changes: how many packages rebuild (expected: the patched one and its dependents)
Writes tests/benchmarks/results/orchestrator-speed.json. Run: python tests/benchmarks/orchestrator_speed.py
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from orchestrate.architectures import ArchitectureTable, write_variant_files  # noqa: E402
from orchestrate.cli import main  # noqa: E402

RUNS = 7


def timed(argv: list[str]) -> float:
    started = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.redirect_stderr(io.StringIO()):
        code = main(argv)
    if code != 0:
        raise SystemExit(f"orchestrate {' '.join(argv)} failed:\n{out.getvalue()}")
    return time.perf_counter() - started


def median_of(argv: list[str]) -> dict:
    times = [timed(argv) for _ in range(RUNS)]
    return {"median_s": round(statistics.median(times), 4), "min_s": round(min(times), 4), "runs": RUNS}


def main_bench() -> dict:
    results: dict = {"machine": {"cores": os.cpu_count(), "python": platform.python_version(),
                                 "cpu": platform.processor() or platform.machine()}}
    results["plan_real_recipes_gfx1151"] = median_of(["plan", "--arch", "gfx1151", "--workspace", str(REPO),
                                                      "--channel", tempfile.mkdtemp()])
    results["plan_real_recipes_gfx1151"]["recipes"] = len(list((REPO / "recipes").glob("*/recipe.yaml")))
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "ws"
        shutil.copytree(REPO / "tests" / "workspace", ws)
        shutil.copy(REPO / "variants" / "architectures.yaml", ws / "variants")
        write_variant_files(ArchitectureTable.load(ws / "variants"), ws / "variants")
        base = ["--arch", "gfx1151", "--workspace", str(ws), "--quiet"]
        results["build_all_first_time_test_graph"] = {"seconds": round(timed(["build-all", *base]), 3)}
        results["build_all_up_to_date_test_graph"] = median_of(["build-all", *base])
        patch = ws / "patches/aotriton/0001-add-gfx908-target.patch"
        # a change to what the patch does (as tests/test_orchestrate_build.py makes it): appended blank space alone
        # changed nothing the build reads, and rebuilt nothing
        patch.write_text(patch.read_text().replace("patched for the test graph", "patched for the test graph again"))
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            main(["build-all", *base])
        # the summary's rows: package, version, result, why (a row's `why` may wrap onto lines of its own)
        rebuilt = sorted(m[1] for m in re.finditer(r"^(\S+) +\S+ +built\b", out.getvalue(), re.M))
        results["after_one_patch_change"] = {"rebuilt": rebuilt, "count": len(rebuilt)}
    return results


if __name__ == "__main__":
    report = main_bench()
    report["git_commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                                          text=True).stdout.strip()
    target = REPO / "tests" / "benchmarks" / "results" / "orchestrator-speed.json"
    target.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
