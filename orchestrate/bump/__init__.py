"""`orchestrate pins --bump`: the newest coherent set of pins, one row per pin (moves / current / held /
unknown, with where each answer was read); `--write` applies the moves (write.py), `--prove` proves the
written set (prove.py), `--report FILE` writes the pull-request body and `--docs` the dated list in
docs/versions.md (report.py).

Exit: 0 the result is complete, 3 partial (an upstream could not be read: its rows say `unknown`), 1 a
proof failed (whether or not the result is also partial: a line on stderr and the report say both), 2 a
usage error (--prove without --write among them: it proves the written set).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
from pathlib import Path

from .. import prebuilt as amd
from .. import web
from ..errors import UserError
from ..options import arch_from, find_workspace, load_config
from ..pins import DEFAULT_GIT_BASE, GIT_BASE_ENV
from ..ui import Reporter
from ..upstreams import Upstreams, read_pins
from . import report, write
from .decide import MOVES, UNKNOWN, Decider, Group
from ..release_files import DEFAULT_RAW_BASE, RAW_BASE_ENV, World
from .torch_group import decide_torch

PARTIAL, PROOF_FAILED = 3, 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The bump's options on `orchestrate pins` (the lookup options --pypi-url, --git-base, --timeout and
    --json are the report's)."""
    parser.add_argument("--bump", action="store_true",
                        help="the newest coherent set of pins: one row per pin (moves / current / held / unknown)")
    parser.add_argument("--write", action="store_true", help="with --bump: apply the moves to the files they live in")
    parser.add_argument("--prove", action="store_true",
                        help="with --bump --write: prove the written set (fetch, plan for every architecture, solve, contract tests)")
    parser.add_argument("--report", type=Path, metavar="FILE", help="with --bump: write the Markdown report (a PR body)")
    parser.add_argument("--docs", action="store_true",
                        help=f"with --bump: rewrite the dated 'Checked against upstream' list in {report.DOCS_FILE}")
    parser.add_argument("--raw-base", help=f"with --bump: where files at a git tag are read, as BASE/OWNER/REPO/REF/PATH "
                                           f"(default: ${RAW_BASE_ENV}, else {DEFAULT_RAW_BASE} while --git-base is "
                                           "GitHub, else git itself against --git-base)")


def wanted(args) -> bool:
    extras = [flag for flag, on in (("--write", args.write), ("--prove", args.prove), ("--report", args.report),
                                    ("--docs", args.docs), ("--raw-base", args.raw_base)) if on]
    if extras and not args.bump:
        raise UserError(f"{' and '.join(extras)} {'works' if len(extras) == 1 else 'work'} with --bump only: add --bump")
    if args.bump and args.lock:
        raise UserError("--bump and --lock exclude each other (--bump --write relocks what it moves): pass one")
    if args.prove and not args.write:  # else it would prove the current pins under a report of moves
        raise UserError("--prove proves the set --write writes: add --write")
    return args.bump


def run(args, reporter: Reporter) -> int:
    workspace = (args.workspace or find_workspace(Path.cwd())).resolve()
    if args.timeout <= 0:
        raise UserError(f"--timeout {args.timeout} must be a positive number of seconds")
    # before anything is read or written: a report that cannot be written must not follow a --write
    if args.report:
        report.check_writable("--report", args.report)
    if args.docs:
        report.check_writable("--docs", workspace / report.DOCS_FILE, exists=True)
    world = make_world(args, workspace)
    try:
        upstreams = Upstreams.load(workspace / "variants")
        pins = read_pins(workspace, upstreams, arch_from(args.arch, load_config(workspace)))
        groups = decide(Decider(workspace, upstreams, pins, world))
        if args.write:
            write.apply(workspace, groups, world)
            write.stale_evidence(workspace, groups, {n: c.recipe for n, c in upstreams.components.items()})
    finally:
        shutil.rmtree(world.cache, ignore_errors=True)  # upstream clones and checkouts read for this run
    order = list(upstreams.components)
    rows = sorted((r.as_dict() for g in groups for r in g.rows), key=lambda r: order.index(r["name"]))
    proofs = []
    if args.prove:
        from .prove import prove
        # --json keeps stdout for the rows: the proofs' progress would corrupt them (--report has the proofs)
        proofs = prove(workspace, Reporter(quiet=True) if args.json else reporter)
    now = datetime.datetime.now(datetime.timezone.utc)
    if args.report:
        report.write_report(args.report, report.markdown(rows, proofs, generated=now.strftime("%Y-%m-%d %H:%M UTC"),
                                                         written=args.write))
    if args.docs:
        report.write_checked_against_upstream(workspace / report.DOCS_FILE, rows, now.date().isoformat())
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        show(groups, rows, reporter, args.write)
        for proof in proofs:
            reporter.line(f"proof {proof.name}: {proof.status}: {proof.detail}")
    partial = any(r["decision"] == UNKNOWN for r in rows)
    if any(p.status == "failed" for p in proofs):
        if partial:  # the exit code says the proof; this line (and the report) says both
            reporter.error("a proof failed, and the result is partial (some upstream could not be read): exit 1")
        return PROOF_FAILED
    return PARTIAL if partial else 0


def make_world(args, workspace: Path) -> World:
    git_base = (args.git_base or os.environ.get(GIT_BASE_ENV) or DEFAULT_GIT_BASE).rstrip("/")
    raw_base = args.raw_base or os.environ.get(RAW_BASE_ENV) or (DEFAULT_RAW_BASE if git_base == DEFAULT_GIT_BASE else None)
    if raw_base:
        web.http_url(raw_base, "--raw-base" if args.raw_base else f"${RAW_BASE_ENV}", f"one like {DEFAULT_RAW_BASE}")
    declared = amd.Prebuilt.load(workspace / "variants")
    index = amd.index_to_read(declared.index if declared else "")
    return World(web.pypi_base(args.pypi_url), git_base, raw_base.rstrip("/") if raw_base else None,
                 index, args.timeout)


def decide(decider: Decider) -> list[Group]:
    torch = decide_torch(decider)  # first: the PyPI repacks move within what the chosen vLLM requires
    decider.apply_hold(torch)
    decider.vllm_label = decider.vllm_target(torch)  # aiter is coupled to the vLLM the result pins
    return decider.finish([torch, decider.flash_attn_group(), decider.aiter_group()])


def show(groups: list[Group], rows: list[dict], reporter: Reporter, written: bool) -> None:
    by_name = {r.name: r for g in groups for r in g.rows}
    reporter.table("Pins against upstream (orchestrate pins --bump)", ["pin", "group", "decision"],
                   [[r["name"], r["group"] or "-", by_name[r["name"]].text()] for r in rows])
    moves = [r for r in rows if r["decision"] == MOVES]
    unknown = [r["name"] for r in rows if r["decision"] == UNKNOWN]
    summary = [f"{len(moves)} move(s)" + (" written: " + ", ".join(sorted({f for r in moves for f in r["files"]}))
                                         if written and moves else "" if written or not moves else
                                         " (run with --write to apply them)")]
    if unknown:
        summary.append(f"unknown: {', '.join(unknown)} (the result is partial)")
    reporter.line("; ".join(summary))

