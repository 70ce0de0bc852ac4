"""The table `orchestrate plan` prints: one row per package with its state, estimate and why, the commands a reason names
under it, and the expected total."""
from __future__ import annotations

import re

from . import runner
from .ui import Reporter, format_duration


# A row's reason may end in a command for the user; the command goes on its own line under the table.
BUILD_HINT = re.compile(r"^(?P<why>[^:`]+): build it with `(?P<command>[^`]+)`(?: \((?P<more>.*)\))?$")
LOCK_HINT = re.compile(r"^(?P<why>.* without a sha256 yet \(.*\)): `(?P<command>[^`]+)` locks them .*$")


def show_plan(plan: runner.Plan, reporter: Reporter) -> None:
    for note in plan.notes:
        reporter.paragraph(note)
    rows, on_request, lock = [], [], []
    for n, step in enumerate(plan.steps, 1):
        o = step.output
        state = {runner.BUILD: "will build", runner.SKIP: "skipped"}.get(step.state, step.state)
        expected = step.estimate.shown() if step.estimate else "-"
        reasons = []
        for reason in step.reasons:
            if match := BUILD_HINT.match(reason):
                on_request.append(match["command"])
                reason = match["why"] + (f" ({match['more']})" if match["more"] else "")
            elif match := LOCK_HINT.match(reason):
                lock.append(match["command"])
                reason = match["why"]
            reasons.append(reason)
        rows.append([str(n), o.name, o.version, o.build_string, state, expected, step.origin, "; ".join(reasons)])
    reporter.fitted_table(plan.title or f"Plan for {plan.arch.name} ({plan.arch.product})",
                          ["#", "package", "version", "build", "state", "expected", "from", "why"], rows,
                          droppable=["build", "#", "from", "expected"], detail="why")
    if on_request:
        reporter.paragraph("Not built by default; each on request:")
        for command in dict.fromkeys(on_request):
            reporter.line(f"  {command}")
    if lock:
        reporter.paragraph("To lock AMD's files that have no sha256 yet (build-all and fetch do it first when online):")
        for command in dict.fromkeys(lock):
            reporter.line(f"  {command}")
    if not plan.title:  # one GPU's plan: what PyTorch's Flash attention is there, from its row
        reporter.paragraph(plan.arch.sdpa_note())
    total, unknown = runner.expected_total(plan)
    builds = sum(1 for s in plan.steps if s.state == runner.BUILD)
    if builds == unknown and builds:
        reporter.paragraph(f"{builds} package(s) to build; no time estimate yet (the recipes declare none and this "
                           "channel records no earlier build)")
    elif builds:
        note = f" ({unknown} without an estimate)" if unknown else ""
        bases = sorted({s.estimate.basis for s in plan.steps if s.estimate and s.estimate.seconds is not None})
        reporter.paragraph(f"{builds} package(s) to build, expected {format_duration(total)}{note}"
                           + (f"; estimates {', '.join(bases)}" if bases else ""))
