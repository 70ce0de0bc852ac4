"""discover → render → graph → plan → build → channel, for one architecture."""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from rattler_build import VariantConfig

from . import graph
from .architectures import Architecture, ArchitectureTable
from .builder import build_output
from .channel import Channel, ManifestEntry, sha256_of
from .detect import choose_arch
from .errors import BuildFailed
from .options import Options
from .recipes import Output, compute_input_hashes, render_all, variant_config
from .ui import Reporter

UP_TO_DATE, BUILD, SKIP = "up to date", "build", "skip"
BUILT, CACHED, FAILED, BLOCKED, NOT_RUN = "built", "from cache", "failed", "blocked", "not built"


@dataclass
class Step:
    output: Output
    state: str
    reasons: list[str] = field(default_factory=list)
    seconds: float = 0.0
    log_path: Path | None = None


@dataclass
class Plan:
    arch: Architecture
    steps: list[Step]
    outputs: list[Output]
    config: VariantConfig  # what the outputs were rendered with; builds render with the same


class BuildCache(Protocol):
    """A place that may already hold a package with the same input hash (a teammate's channel)."""

    description: str

    def fetch(self, output: Output, into: Path) -> tuple[Path, ManifestEntry] | None: ...


def set_build_knobs(options: Options) -> None:
    """Knobs reach recipes through `${{ env.get(...) }}` in build.script.env, read at render time."""
    os.environ["MAX_JOBS"] = str(options.jobs())
    os.environ["COMPILER_LAUNCHER"] = options.compiler_launcher


def make_plan(options: Options, packages: list[str] | None = None) -> Plan:
    table = ArchitectureTable.load(options.variants_dir)
    arch = table.get(choose_arch(options.arch, table))
    set_build_knobs(options)
    config = variant_config(options, table, arch)
    outputs = render_all(options, config, arch)
    order = graph.build_order(outputs)
    _skip_dependents_of_skipped(order)
    compute_input_hashes(outputs, order)
    if packages:
        order = [o for o in order if o in graph.closure(outputs, packages)]
    channel = Channel(options.channel)
    channel.validate()
    will_build: set[str] = set()
    steps = []
    for output in order:
        step = _plan_step(output, channel, will_build)
        if step.state == BUILD:
            will_build.add(output.name)
        steps.append(step)
    return Plan(arch, steps, outputs, config)


def _skip_dependents_of_skipped(order: list[Output]) -> None:
    """A package that needs one the architecture does not get is skipped too, saying which and why.
    (Optional components are conditional requirements in the recipe, so they never show up here.)"""
    available: dict[str, bool] = {}
    for output in order:
        missing = sorted(d for d in output.requires if not available.get(d, True))
        if missing and not output.skipped:
            output.skip_reasons = [f"needs {d}, which is skipped for this architecture" for d in missing]
        available[output.name] = available.get(output.name, False) or not output.skipped


def _plan_step(output: Output, channel: Channel, will_build: set[str]) -> Step:
    if output.skipped:
        return Step(output, SKIP, output.skip_reasons)
    if channel.is_channel() and channel.find_by_input_hash(output.input_hash):
        return Step(output, UP_TO_DATE, output.notes)
    previous = channel.find_by_slot(output.key) if channel.is_channel() else None
    if previous is None:
        return Step(output, BUILD, ["new"] + output.notes)
    reasons = []
    old, new = previous.digests, output.own_digests
    if old.get("recipe") != new["recipe"]:
        reasons.append("recipe changed")
    elif old.get("files") != new["files"]:
        reasons.append("script changed")
    if old.get("patches") != new["patches"]:
        reasons.append("patch changed")
    if old.get("variant") != new["variant"]:
        reasons.append("variant changed")
    for dep, digest in sorted(output.dependency_hashes.items()):
        if previous.dependency_hashes.get(dep) != digest:
            reasons.append(f"dependency {'will be ' if dep in will_build else ''}rebuilt: {dep}")
    return Step(output, BUILD, (reasons or ["inputs changed"]) + output.notes)


def execute(plan: Plan, options: Options, reporter: Reporter, caches: list[BuildCache] = ()) -> list[Step]:
    channel = Channel(options.channel)
    failed: set[str] = set()
    stopped = False
    for step in plan.steps:
        if step.state != BUILD:
            continue
        output = step.output
        needs_failed = sorted(output.requires & failed)
        if needs_failed:
            step.state, step.reasons = BLOCKED, [f"needs {', '.join(needs_failed)}, which failed"]
            failed.add(output.name)
            continue
        if stopped:
            step.state, step.reasons = NOT_RUN, ["stopped after a failure (use --keep-going to go on)"]
            continue
        if _take_from_cache(step, caches, channel, options, reporter):
            continue
        with reporter.building(output.label) as on_step:
            outcome = build_output(output, plan.config, options, channel, plan.arch.name, on_step)
        step.seconds, step.log_path = outcome.seconds, outcome.log_path
        if outcome.ok:
            for package in outcome.packages:
                channel.add(package, _entry(output, package, plan.arch.name, "built"))
            step.state = BUILT
            reporter.info(f"built {output.label} in {outcome.seconds:.1f}s")
        else:
            step.state, step.reasons = FAILED, [outcome.error]
            failed.add(output.name)
            reporter.error(f"FAILED {output.label}: {outcome.error}; full log: {outcome.log_path}")
            for line in outcome.log_tail:
                reporter.error(f"  | {line}")
            stopped = not options.keep_going
    return plan.steps


def _take_from_cache(step: Step, caches, channel: Channel, options: Options, reporter: Reporter) -> bool:
    for cache in caches:
        started = time.monotonic()
        found = cache.fetch(step.output, options.work_dir)
        if found:
            package, entry = found
            channel.add(package, entry)
            step.state, step.seconds = CACHED, time.monotonic() - started
            step.reasons = [f"same input hash in {cache.description}"]
            reporter.info(f"took {step.output.label} from {cache.description}")
            return True
    return False


def _entry(output: Output, package: Path, arch: str, source: str) -> ManifestEntry:
    subdir = package.parent.name
    return ManifestEntry(
        file=f"{subdir}/{package.name}",
        name=output.name,
        version=output.version,
        build=output.build_string,
        arch="noarch" if output.noarch else arch,
        slot=output.key,
        input_hash=output.input_hash,
        sha256=sha256_of(package),
        digests=output.own_digests,
        dependency_hashes=output.dependency_hashes,
        patches=[str(p.name) for p in output.patches],
        built_at=time.time(),
        source=source,
    )


def summarize(steps: list[Step], reporter: Reporter, arch: str) -> None:
    rows = [
        [s.output.name, s.output.version, s.output.build_string, s.state, f"{s.seconds:.1f}s" if s.seconds else "",
         "; ".join(s.reasons)]
        for s in steps
    ]
    reporter.table(f"Summary for {arch}", ["package", "version", "build", "result", "time", "why"], rows)
    counts = {}
    for s in steps:
        counts[s.state] = counts.get(s.state, 0) + 1
    reporter.line(", ".join(f"{n} {state}" for state, n in sorted(counts.items())))


def raise_if_failed(steps: list[Step]) -> None:
    bad = [s for s in steps if s.state in (FAILED, BLOCKED, NOT_RUN)]
    if bad:
        raise BuildFailed(f"{len([s for s in bad if s.state == FAILED])} package(s) failed")
