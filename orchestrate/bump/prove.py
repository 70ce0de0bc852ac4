"""Prove a set of pins as a maintainer would before merging it: every source fetched and checked, every
architecture planned on both PyTorch paths, every environment solved where a channel answers, and the
upstream contract tests where checkouts are given. Each step is one Proof; a step that cannot run here is
skipped with the reason, never counted as passed.

The steps reuse what `orchestrate fetch`, `plan` and the preflight solve run (fetch.py, runner.py,
resolve.py), against a throw-away local channel: what a workspace has built before must not make a step
pass (an up-to-date package is still fetched and solved), and proving builds nothing.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from .. import clean, fetch, runner
from ..architectures import ArchitectureTable
from ..channels import FIX_CHANNEL
from ..errors import UserError
from ..options import options_from_args
from ..prebuilt import LOCK_COMMAND, LOCK_FILE, PREBUILT, PYTORCH_FROM, SOURCE
from ..sources import ZERO_SHA256, Source, SourceCache
from ..ui import Reporter
from ..upstreams import Upstreams, read_pins

PASSED, FAILED, SKIPPED = "passed", "failed", "skipped"
FETCH, PLAN, SOLVE, CONTRACT = "fetch", "plan", "solve", "contract tests"
SOURCES_ENV = "ROCM_STACK_SOURCES"  # what tests/test_upstream_contract.py reads its checkouts from
CONTRACT_TESTS = Path("tests") / "test_upstream_contract.py"
CONTRACT_TIMEOUT_S = 1800  # a vLLM import closure over 500 modules, on a slow runner
TAR_ARCHIVES = (".tar.gz", ".tgz", ".tar.bz2", ".tar.xz")  # what the workflow unpacks into a checkout
SHOWN = 2  # problems named in one detail line; the rest are counted


@dataclasses.dataclass(frozen=True)
class Proof:
    name: str
    status: str  # PASSED, FAILED or SKIPPED
    detail: str  # one line: what was proven, or the cause


def prove(workspace: Path, reporter: Reporter, *, archs: list[str] | None = None,
          sources_dir: Path | None = None, channels: list[str] | None = None) -> list[Proof]:
    """fetch, plan, solve and contract-test proofs, in that order. `archs`: every architecture of the
    table by default; `channels`: orchestrate.toml's source channels (else conda-forge) by default;
    `sources_dir`: the checkouts, else $ROCM_STACK_SOURCES."""
    workspace = Path(workspace).resolve()
    with tempfile.TemporaryDirectory(prefix="orchestrate-prove-") as scratch:
        options = prove_options(workspace, Path(scratch) / "channel", channels)
        plans, plan_proof = prove_plans(options, archs, reporter)
        proofs = [prove_fetch(plans, options, reporter), plan_proof, prove_solve(plans, options, reporter)]
    given = sources_dir or (Path(os.environ[SOURCES_ENV]) if os.environ.get(SOURCES_ENV) else None)
    proofs.append(prove_contract(workspace, given, reporter))
    return proofs


def prove_options(workspace: Path, channel: Path, channels: list[str] | None):
    """The options `orchestrate plan` would use in this workspace (orchestrate.toml's source cache and
    channels), with an empty local channel of its own."""
    args = argparse.Namespace(workspace=workspace, channel=channel, arch=None, variant=[], quiet=True,
                              source_channel=list(channels) if channels else None, no_source_channels=channels == [])
    return options_from_args(args)


def prove_plans(options, archs: list[str] | None, reporter: Reporter) -> tuple[list[runner.Plan], Proof]:
    """Every architecture on both PyTorch paths. An architecture that cannot take AMD's PyTorch plans it
    from source by default and says why: that is its only path, not a failure."""
    try:
        names = list(archs or ArchitectureTable.load(options.variants_dir).names())
    except UserError as exc:
        return [], Proof(PLAN, FAILED, _one_line(str(exc)))
    plans: list[runner.Plan] = []
    problems: list[str] = []
    source_only: list[str] = []
    paths: set[str] = set()
    for arch in names:
        reporter.info(f"proving: plan for {arch}")
        default = _try_plan(options, arch, {}, problems, f"{arch}")
        if default is None:
            continue
        plans.append(default)
        chosen = default.choice.pytorch if default.choice else None
        if chosen is None:  # recipes without a pytorch_from key: one path
            continue
        paths.add(chosen.value)
        other = SOURCE if chosen.value == PREBUILT else PREBUILT
        if other == PREBUILT and chosen.reason:
            source_only.append(f"{arch} ({chosen.reason})")
            continue
        extra = _try_plan(options, arch, {PYTORCH_FROM: other}, problems, f"{arch} ({PYTORCH_FROM}={other})")
        if extra is not None:
            plans.append(extra)
            paths.add(other)
    if problems:
        return plans, Proof(PLAN, FAILED, _problems(problems, "plan(s) failed"))
    on = f" on {' and '.join(sorted(paths))}" if paths else ""
    only = f"; source only: {', '.join(source_only)}" if source_only else ""
    return plans, Proof(PLAN, PASSED, f"{len(plans)} plan(s): {len(names)} architecture(s){on}{only}")


def _try_plan(options, arch: str, overrides: dict[str, str], problems: list[str], label: str) -> runner.Plan | None:
    try:
        return runner.make_plan(dataclasses.replace(options, arch=arch, variant_overrides=overrides))
    except UserError as exc:
        problems.append(f"{label}: {_one_line(str(exc))}")
        return None


def prove_fetch(plans: list[runner.Plan], options, reporter: Reporter) -> Proof:
    """`orchestrate fetch` over every plan: each distinct source downloaded (or found in the source cache),
    its checksum or commit checked and its patches applied. A file without a sha256 is never downloaded."""
    if not plans:
        return Proof(FETCH, SKIPPED, "no plan could be made (see plan), so there is nothing to fetch")
    unpinned = [(name, source) for plan in plans for name, source in runner.unpinned_sources(plan.steps)]
    files = list(dict.fromkeys(f"{name}: {source.location}" for name, source in unpinned))
    unlocked = [f"{len(files)} file(s) have no sha256 in the recipe or variants/{LOCK_FILE} and were not downloaded "
                f"({'; '.join(files[:SHOWN])}{' ...' if len(files) > SHOWN else ''}): run `{LOCK_COMMAND}`"] if files else []
    try:
        SourceCache(options.source_cache).ensure_writable()
        results = []
        with clean.work_area(options):
            for run in fetch.unique_runs(plans):
                if runner.unpinned_sources([runner.Step(run.output, runner.BUILD)]):
                    continue  # never downloaded without a checksum: counted above
                with reporter.building(run.output.source_name, verb="proving: fetching the sources of"):
                    results += fetch.fetch_sources(run, options)
    except UserError as exc:
        return Proof(FETCH, FAILED, _one_line(str(exc)))
    problems = [f"{r.package}: {r.source.describe()}: {r.detail}" for r in results if r.state == fetch.FAILED] + unlocked
    if problems:
        return Proof(FETCH, FAILED, _problems(problems, "source problem(s)"))
    counts = ", ".join(f"{sum(1 for r in results if r.state == s)} {s}" for s in (fetch.FETCHED, fetch.CACHED, fetch.LOCAL)
                       if any(r.state == s for r in results))
    return Proof(FETCH, PASSED, f"{len(results)} source(s) ({counts or 'none'}): every checksum and commit matched, "
                                "every patch applied")


def prove_solve(plans: list[runner.Plan], options, reporter: Reporter) -> Proof:
    """The preflight solve of every plan; a channel that does not answer skips it (offline is not a failure
    of the pins), a channel that answers wrongly or a requirement nobody has fails it."""
    if not plans:
        return Proof(SOLVE, SKIPPED, "no plan could be made (see plan), so there is nothing to solve")
    reporter.info("proving: solving every environment of every plan")
    channels = ", ".join(options.source_channels) or "no source channel"
    try:
        lines = fetch.unresolved_requirements(plans, options)
    except UserError as exc:
        status = SKIPPED if FIX_CHANNEL in str(exc) else FAILED
        return Proof(SOLVE, status, _one_line(str(exc)))
    if lines:
        return Proof(SOLVE, FAILED, _problems(lines, "requirement(s) cannot be resolved"))
    return Proof(SOLVE, PASSED, f"every environment of {len(plans)} plan(s) solves against {channels}")


def prove_contract(workspace: Path, sources: Path | None, reporter: Reporter) -> Proof:
    """The workspace's own upstream contract tests, in a pytest subprocess (they are tests: a fresh
    interpreter reads this workspace's pins, not what this process has imported)."""
    tests = workspace / CONTRACT_TESTS
    if not tests.is_file():
        return Proof(CONTRACT, SKIPPED, f"{CONTRACT_TESTS} is not in {workspace}")
    if sources is None:
        return Proof(CONTRACT, SKIPPED, f"no checkouts given: set {SOURCES_ENV}=DIR (one checkout per recipe folder "
                                        "at the pinned commits; docs/versions.md says how)")
    if not Path(sources).is_dir():
        return Proof(CONTRACT, FAILED, f"{SOURCES_ENV}={sources} is not a folder: clone the upstreams there first")
    reporter.info(f"proving: the upstream contract tests against {sources}")
    # COLUMNS: pytest cuts a failure's message to the terminal's width, 80 columns off a terminal
    env = {**os.environ, SOURCES_ENV: str(Path(sources).resolve()), "COLUMNS": "400",
           "PYTHONPATH": os.pathsep.join([str(workspace), *filter(None, [os.environ.get("PYTHONPATH")])])}
    command = [sys.executable, "-m", "pytest", "-q", "-rf", "-p", "no:cacheprovider", str(CONTRACT_TESTS)]
    try:
        result = subprocess.run(command, cwd=workspace, env=env, capture_output=True, text=True,
                                timeout=CONTRACT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return Proof(CONTRACT, FAILED, f"{CONTRACT_TESTS} ran over {CONTRACT_TIMEOUT_S} s: run it by hand to see where")
    return _contract_outcome(result.returncode, result.stdout + result.stderr)


SUMMARY = re.compile(r"^=*\s*((?:\d+ \w+(?:, )?)+)(?: in [\d.]+s.*)?$", re.M)
FAILED_TEST = re.compile(r"^FAILED (\S+?)(?: - (.*))?$", re.M)


def _contract_outcome(code: int, output: str) -> Proof:
    """pytest's exit code decides; its summary line and the first failures' messages make the detail."""
    summaries = SUMMARY.findall(output)
    summary = summaries[-1].strip() if summaries else ""
    if code == 0:
        return Proof(CONTRACT, PASSED, summary or "passed")
    failures = [f"{test.split('::')[-1]}: {message or 'failed'}" for test, message in FAILED_TEST.findall(output)]
    if failures:
        return Proof(CONTRACT, FAILED, f"{summary}: " + _problems(failures, "failure(s)") if summary
                     else _problems(failures, "failure(s)"))
    tail = [line for line in output.splitlines() if line.strip()][-1:] or ["no output"]
    return Proof(CONTRACT, FAILED, f"pytest exited {code}: {_one_line(tail[0])}")


def _problems(problems: list[str], what: str) -> str:
    shown = "; ".join(_one_line(p) for p in problems[:SHOWN])
    more = f" (and {len(problems) - SHOWN} more)" if len(problems) > SHOWN else ""
    return f"{len(problems)} {what}: {shown}{more}"


def _one_line(text: str) -> str:
    return " ".join(text.split())


# ---- the checkouts the contract tests read: what the workflow clones ----

def checkouts(workspace: Path) -> list[tuple[str, Source]]:
    """(recipe folder, its first source) for every recipe a component of variants/upstreams.yaml builds:
    the contract tests read $ROCM_STACK_SOURCES/<recipe folder> at that source. A source without a
    checksum, and a file that is not a source archive (AMD's wheels: rocm-sdk's checkout is TheRock), has
    no checkout to make."""
    upstreams = Upstreams.load(Path(workspace) / "variants")
    pins = read_pins(Path(workspace), upstreams)
    found = []
    for recipe in sorted({c.recipe for c in upstreams.components.values() if c.recipe}):
        source = pins.primary_source(recipe)
        if source is None or not source.pin or source.pin == ZERO_SHA256:
            continue
        if source.kind == "git" or (source.kind == "url" and source.location.endswith(TAR_ARCHIVES)):
            found.append((recipe, source))
    return found


def main(argv: list[str] | None = None) -> int:
    """`python -m orchestrate.bump.prove checkouts [WORKSPACE]`: one line per checkout to make,
    `RECIPE<TAB>git|url<TAB>LOCATION<TAB>COMMIT|SHA256` (.github/workflows/update-pins.yml reads it)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] != "checkouts" or len(args) > 2:
        print("usage: python -m orchestrate.bump.prove checkouts [WORKSPACE]", file=sys.stderr)
        return 2
    try:
        for recipe, source in checkouts(Path(args[1] if len(args) > 1 else ".").resolve()):
            print(f"{recipe}\t{source.kind}\t{source.location}\t{source.pin}")
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
