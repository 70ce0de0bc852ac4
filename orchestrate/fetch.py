"""`orchestrate fetch`: fill the source cache for a plan and prove every source and patch good, without
building: a wrong checksum or a stale patch shows up in minutes instead of after hours of compiling, and
a machine without internet can then `build-all --offline`.

rattler-build fetches, verifies and patches a recipe's sources before it resolves any dependency. So
each recipe is run with one requirement no channel has, and no channels: it downloads (or finds in the
cache), checks checksums and commits, applies every patch, then stops at dependency resolution. That
stop, and nothing earlier, means the sources are good.
"""
from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from rattler_build import ToolConfiguration, VariantConfig

from . import diagnose, resolve, stops
from .errors import DISK_FULL_TEXT, disk_full_message
from .builder import discard_work, new_work_folder
from .options import Options
from .recipes import Output, recipe_data, rerender
from .runner import BLOCKED, NOT_NEEDED
from .sources import Source, SourceCache, sources_of
from .ui import Reporter

STOP_REQUIREMENT = "orchestrate-fetch-stops-here"  # no channel has it: the run ends after the sources
CACHED, FETCHED, FAILED, NOT_CHECKED, LOCAL = "cached", "fetched", "FAILED", "not checked", "local"

FETCHING = re.compile(r"^Fetching source from (?:url|git repo|path)", re.M)


@dataclass
class SourceResult:
    package: str
    source: Source
    state: str
    detail: str = ""


@dataclass
class RecipeRun:
    output: Output
    config: VariantConfig
    results: list[SourceResult] = field(default_factory=list)


def unique_runs(plans) -> list[RecipeRun]:
    """One run per distinct set of sources and patches, over every plan (architectures mostly share them)."""
    seen: dict[tuple, RecipeRun] = {}
    for plan in plans:
        for step in plan.steps:
            output = step.output
            if output.skipped or step.state in (NOT_NEEDED, BLOCKED):  # outside the closure, or a file not locked
                continue
            key = (str(output.recipe_path), repr(sources_of(output.rendered)))
            seen.setdefault(key, RecipeRun(output, plan.config))
    return list(seen.values())


def unresolved_requirements(plans, options: Options) -> list[str]:
    """Every requirement of the plans' builds that no channel provides (one line each, no repeats across
    architectures); a channel that cannot be reached raises UserError."""
    lines: list[str] = []
    for plan in plans:
        lines += [line for line in resolve.check_plan(plan, options).lines() if line not in lines]
    return lines


def fetch_sources(run: RecipeRun, options: Options) -> list[SourceResult]:
    output, cache = run.output, SourceCache(options.source_cache)
    sources = sources_of(output.rendered)
    if not sources:
        return []
    was_cached = [cache.has(s) for s in sources]
    data = recipe_data(output)
    _add_stop_requirement(data)
    work = new_work_folder(output, options)
    lines: list[str] = []
    stopped_at_resolution = False
    try:
        variant = rerender(output, run.config, data, Path(tempfile.mkdtemp(dir=work)))
        with stops.zone(stops.FOREIGN):
            try:
                variant.run_build(tool_config=ToolConfiguration(test_strategy="skip"), output_dir=work, channels=[],
                                  progress_callback=_Lines(lines))
                error = f"the recipe built although {STOP_REQUIREMENT} cannot be installed"
            except Exception as exc:  # py-rattler-build's error types; which one decides the outcome below
                error = str(exc)
                lines = lines or [str(line) for line in getattr(exc, "log", None) or []]
        stopped_at_resolution = diagnose.SOLVE_FAILED in error
    except Exception as exc:  # rendering the recipe failed
        error = str(exc)
    finally:
        discard_work(work)
    reached = len(FETCHING.findall("\n".join(lines)))
    results = []
    for index, (source, cached) in enumerate(zip(sources, was_cached)):
        name = output.name
        if stopped_at_resolution or index < reached - 1:
            state = LOCAL if source.kind == "path" else CACHED if cached else FETCHED
            results.append(SourceResult(name, source, state))
        elif index == max(reached - 1, 0):
            results.append(SourceResult(name, source, FAILED, explain(error, lines, output, cache.path)))
        else:
            results.append(SourceResult(name, source, NOT_CHECKED, "an earlier source of the recipe failed"))
    return results


def explain(error: str, lines: list[str], output: Output, source_cache: Path) -> str:
    text = "\n".join(lines) + "\n" + error
    if DISK_FULL_TEXT.search(text):
        return disk_full_message(source_cache, "the source cache")
    found = diagnose.source_problem(text, recipe=output.pinned_in)
    flat = " ".join(error.replace("PyRattlerBuildError: ", "").split())
    return found or f"could not fetch it ({flat[:240]})"


def report(results: list[SourceResult], reporter: Reporter) -> None:
    width = max((len(r.package) for r in results), default=0)
    for r in results:
        detail = f": {r.detail}" if r.detail else ""
        reporter.line(f"{r.state:<11} {r.package:<{width}}  {r.source.describe()}{detail}")
    counts: dict[str, int] = {}
    for r in results:
        counts[r.state] = counts.get(r.state, 0) + 1
    reporter.line(", ".join(f"{n} {state}" for state, n in sorted(counts.items())) or "no sources to fetch")


def _add_stop_requirement(data: dict) -> None:
    targets = [out for out in data.get("outputs") or [] if isinstance(out, dict)] or [data]
    for target in targets:
        requirements = target.setdefault("requirements", {}) or {}
        target["requirements"] = requirements
        requirements["host"] = list(requirements.get("host") or []) + [STOP_REQUIREMENT]


class _Lines:
    """Progress callback that keeps rattler-build's log lines (which source it is at, which patch)."""

    def __init__(self, lines: list[str]):
        self.lines = lines

    def on_download_start(self, event) -> None:
        pass

    def on_download_progress(self, event) -> None:
        pass

    def on_download_complete(self, event) -> None:
        pass

    def on_build_step(self, event) -> None:
        pass

    def on_log(self, event) -> None:
        self.lines.append(event.message.rstrip("\n"))
