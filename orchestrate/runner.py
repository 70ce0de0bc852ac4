"""discover → render → graph → plan → build → channel, for one architecture."""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

from rattler_build import VariantConfig

from . import arch_set, crashpoints, graph, stops
from .architectures import FLASH_ATTN_BACKEND_KEY, Architecture, ArchitectureTable, choose_arch
from .builder import build_output, discard_work, forget_cached_package
from .channel import DAMAGED, MISSING, NOT_RECORDED, Channel, ManifestEntry, Recovery, sha256_of
from .errors import FAILED_BUILDS_PAGE, BuildFailed, UserError
from .estimates import (DiskNeed, Estimate, check_disk, disk_needs, estimate_for, recorded_builds, source_cache_need,
                        this_host)
from .options import Options
from .plan_sources import file_of, unpinned_of, unpinned_text
from .prebuilt import LOCK_COMMAND, PYTORCH_FROM, SOURCE, origin_of
from .input_hash import compute_input_hashes
from .recipes import Output, VariantChoice, render_all, variant_choice
from .share import bench as channel_bench
from .sources import Source, SourceCache, sources_of
from .ui import Progress, Reporter

UP_TO_DATE, BUILD, SKIP, NOT_NEEDED = "up to date", "build", "skip", "not needed"
# What `build-all` builds by default: this metapackage and everything it needs. A workspace without it
# (the test graph) builds every recipe.
DEFAULT_TARGET = "rocm-stack"
BUILT, CACHED, FAILED, BLOCKED, NOT_RUN = "built", "from cache", "failed", "blocked", "not built"


@dataclass
class Step:
    output: Output
    state: str
    reasons: list[str] = field(default_factory=list)
    seconds: float = 0.0
    log_path: Path | None = None
    estimate: Estimate | None = None  # for steps that will build
    origin: str = ""  # prebuilt wheel, source build, metapackage (prebuilt.origin_of)


@dataclass
class Plan:
    arch: Architecture
    steps: list[Step]
    outputs: list[Output]
    config: VariantConfig  # what the outputs were rendered with; builds render with the same
    choice: VariantChoice | None = None
    notes: list[str] = field(default_factory=list)  # plan-wide: where PyTorch comes from and why
    title: str = ""  # what the plan is for, when it is not one architecture's build (--arch-neutral)


class BuildCache(Protocol):
    """A place that may already hold a package with the same input hash (a teammate's channel)."""

    description: str

    def fetch(self, output: Output, into: Path) -> tuple[Path, ManifestEntry] | None: ...

    def benchmarks(self, file: str) -> list[channel_bench.Bench]:
        """The benchmark results it records for package `file` (subdir/name)."""
        ...


def set_build_knobs(options: Options) -> None:
    """Knobs reach recipes through `${{ env.get(...) }}` in build.script.env, read at render time."""
    os.environ["MAX_JOBS"] = str(options.jobs())
    os.environ["COMPILER_LAUNCHER"] = options.compiler_launcher
    # A build's HOME is its work folder, where ccache and sccache would put their cache by default: gone with the
    # folder, so a retry after a failure compiled from zero. Their own default outside a build, or the user's.
    os.environ["CCACHE_DIR"] = os.environ.get("CCACHE_DIR") or str(Path.home() / ".cache" / "ccache")
    os.environ["SCCACHE_DIR"] = os.environ.get("SCCACHE_DIR") or str(Path.home() / ".cache" / "sccache")


def make_plan(options: Options, packages: list[str] | None = None, also: list[str] | None = None,
              everything: bool = False, one_environment: list[str] | None = None) -> Plan:
    """The plan for the named packages and what they need; with none named, the default target's closure
    (plus `also`), or every recipe with `everything` or where the workspace has no default target.
    `one_environment`: several architectures as one set (arch_set), one environment for a machine with them all."""
    table = ArchitectureTable.load(options.variants_dir)
    set_build_knobs(options)
    if one_environment is not None:  # [] too: arch_set says a set needs two architectures
        arch, choice, outputs = arch_set.plan_inputs(options, table, one_environment)
    else:
        arch = table.get(choose_arch(options.arch, table, options.arch_given_by))
        choice = variant_choice(options, table, arch)
        outputs = render_all(options, choice.config, arch)
    config = choice.config
    crashpoints.reach("planned")
    notes = _explain_pytorch_from(outputs, choice)
    notes += choice.prebuilt.absent_notes(choice.values, arch.name) if choice.prebuilt else []
    order = graph.build_order(outputs)
    _skip_dependents_of_skipped(order)
    compute_input_hashes(outputs, order)
    needed: dict[str, str] | None = None  # package -> why it is in the plan; None: every package is
    backend_why: dict[int, str] = {}  # id(flash-attn output) -> why it is built by default or on request
    on_request: set[int] = set()
    if packages:
        order = [o for o in order if o in graph.closure(outputs, packages)]
    elif not everything and any(o.name == DEFAULT_TARGET for o in outputs):
        backend_why, on_request = _flash_attn_backends(outputs, arch, options, set(also or []))
        needed = graph.needed_by([o for o in outputs if id(o) not in on_request], [DEFAULT_TARGET] + list(also or []))
    channel = Channel(options.channel)
    channel.validate()
    history = recorded_builds(channel)
    prebuilt_urls = choice.prebuilt.urls(choice.values, arch.name) if choice.prebuilt else set()
    index = choice.prebuilt.index if choice.prebuilt else ""
    will_build: set[str] = set()
    steps = []
    for output in order:
        if id(output) in on_request:
            step = Step(output, NOT_NEEDED, [f"on request: build it with `orchestrate build {output.name} --variant "
                                             f"{FLASH_ATTN_BACKEND_KEY}={output.variant[FLASH_ATTN_BACKEND_KEY]}` "
                                             f"({backend_why[id(output)]})"])
        elif needed is not None and output.name not in needed and not output.skipped:
            step = Step(output, NOT_NEEDED, [f"not needed by {DEFAULT_TARGET}: build it with "
                                             f"`orchestrate build {output.name}`"])
        else:
            step = _plan_step(output, channel, will_build)
            if needed is not None and output.name in needed and not output.skipped:
                step.reasons += [backend_why[id(output)]] if id(output) in backend_why else []
                step.reasons.append(needed[output.name])
        step.origin = origin_of(output.rendered, prebuilt_urls, index)
        if step.state == BUILD:
            will_build.add(output.name)
            step.estimate = estimate_for(output, history)
            unlocked = unpinned_of(output)
            if unlocked:
                step.reasons.append(f"{len(unlocked)} file(s) without a sha256 yet ({', '.join(file_of(s) for s in unlocked)}): "
                                    f"`{LOCK_COMMAND}` locks them (build-all does it first when online)")
        steps.append(step)
    return Plan(arch, steps, outputs, config, choice, notes)


def _flash_attn_backends(outputs: list[Output], arch: Architecture, options: Options,
                         asked: set[str]) -> tuple[dict[int, str], set[int]]:
    """flash-attn renders once per backend the architecture supports; the default build builds the table's
    default backend (or the one `--variant flash_attn_backend=` names), the other on request. Returns why for
    each flash-attn output, and the outputs left to a request (none of a package named on the command line)."""
    why: dict[int, str] = {}
    on_request: set[int] = set()
    requested = options.variant_overrides.get(FLASH_ATTN_BACKEND_KEY)
    for output in outputs:
        backend = output.variant.get(FLASH_ATTN_BACKEND_KEY)
        if backend is None or output.skipped:
            continue
        built, why[id(output)] = arch.flash_attn_reason(str(backend), requested)
        if not built and output.name in asked:
            why[id(output)] = f"the {backend} backend asked for ({why[id(output)]})"
        elif not built:
            on_request.add(id(output))
    return why, on_request


def _explain_pytorch_from(outputs: list[Output], choice: VariantChoice) -> list[str]:
    """Say, on the plan and on the rows it skips, why PyTorch comes from where it does."""
    if choice.pytorch is None:
        return []
    value, reason = choice.pytorch.value, choice.pytorch.reason
    for output in outputs:
        generic = [r for r in output.skip_reasons if PYTORCH_FROM in r and r.startswith("the recipe skips it here")]
        if generic:
            output.skip_reasons = [r for r in output.skip_reasons if r not in generic] + [
                f"{PYTORCH_FROM}={value}: " + (reason or ("AMD's prebuilt PyTorch serves this architecture" if value != SOURCE
                                                         else "PyTorch is built from source here"))]
    if reason:
        return [f"PyTorch from {'source' if value == SOURCE else 'AMD wheels'} for this architecture: {reason}"]
    return []


def unpinned_sources(steps: list[Step]) -> list[tuple[str, Source]]:
    """(package, source) for every url source a build would download with no sha256 or md5 to check it by."""
    return [(s.output.name, source) for s in steps if s.state == BUILD for source in unpinned_of(s.output)]


def check_sources_pinned(plan: Plan) -> None:
    """No download without a checksum: refused before anything is fetched."""
    missing = unpinned_sources(plan.steps)
    if missing:
        more = f" (and {len(missing) - 1} more source(s) like it)" if len(missing) > 1 else ""
        raise UserError(unpinned_text(*missing[0]) + more)


def block_unpinned(plan: Plan, dependents: bool = True, stop_when_none_left: bool = True) -> dict[str, str]:
    """No download without a checksum, and no stop for the packages that need none (issue 36): each package with a
    url source the lock does not pin yet is blocked, with (`dependents`, for a build) every package that needs it;
    the rest go on. Their reasons, by package; nothing left to build or fetch is the one line check_sources_pinned
    says."""
    reasons: dict[str, str] = {}
    for package, source in unpinned_sources(plan.steps):
        reasons.setdefault(package, unpinned_text(package, source))
    if not reasons:
        return {}
    for step in plan.steps if dependents else []:  # in build order: what a blocked package's dependents need comes first
        needs = sorted(step.output.requires & set(reasons))
        if step.state == BUILD and step.output.name not in reasons and needs:
            reasons[step.output.name] = f"needs {', '.join(needs)}, whose files are not locked"
    if stop_when_none_left and all(s.output.name in reasons for s in plan.steps if s.state == BUILD):
        check_sources_pinned(plan)
    block(plan, reasons)
    return reasons


def expected_total(plan: Plan) -> tuple[float, int]:
    """Seconds the plan's builds are expected to take, and how many builds have no estimate."""
    estimates = [s.estimate for s in plan.steps if s.state == BUILD and s.estimate]
    return sum(e.seconds or 0 for e in estimates), sum(1 for e in estimates if e.seconds is None)


def plan_disk_needs(plan: Plan, options: Options) -> list[DiskNeed]:
    """What the plan's builds need on each disk (one entry per build: two builds of a name both count)."""
    estimates = [(s.output.name, s.estimate) for s in plan.steps if s.state == BUILD and s.estimate]
    sources = source_cache_need([(s.output.name, s.estimate, sources_of(s.output.rendered)) for s in plan.steps
                                 if s.state == BUILD and s.estimate], SourceCache(options.source_cache))
    return disk_needs(estimates, options.work_dir, options.channel, (options.source_cache, sources))


def check_disk_space(plan: Plan, options: Options) -> None:
    check_disk(plan_disk_needs(plan, options))


def uncached_sources(plan: Plan, options: Options) -> list[tuple[str, Source]]:
    """(package, source) for every source a build of the plan needs that the source cache lacks."""
    cache = SourceCache(options.source_cache)
    records = cache.records()
    return [(s.output.name, source) for s in plan.steps if s.state == BUILD
            for source in sources_of(s.output.rendered) if not cache.has(source, records)]


def check_sources_cached(plan: Plan, options: Options) -> None:
    """--offline: every source the builds need must already be in the source cache."""
    cache = SourceCache(options.source_cache)
    missing = uncached_sources(plan, options)
    if missing:
        listed = ", ".join(f"{name} ({source.describe()})" for name, source in missing[:4])
        more = f" and {len(missing) - 4} more" if len(missing) > 4 else ""
        raise UserError(
            f"--offline: {len(missing)} source(s) are not in the source cache {cache.path}: {listed}{more}: run "
            f"`orchestrate fetch --arch {plan.arch.name}` where there is network (with the same source cache), then build again"
        )


def recover_channel(plan: Plan, options: Options, channel: Channel) -> Recovery:
    """After a crash: adopt package files the plan wants (same input hash inside), set aside the rest.
    Packages of another architecture are checked against that architecture's plan."""
    plans = {plan.arch.name: plan}

    def wanted(arch: str) -> dict[str, Output]:
        if arch not in plans:
            try:
                members = arch_set.members_of(arch)  # a set's packages: checked against the set's plan
                plans[arch] = make_plan(replace(options, arch=None if members else arch), one_environment=members or None)
            except UserError:
                return {}
        return {o.input_hash: o for o in plans[arch].outputs if not o.skipped}

    def adopt(package: Path, provenance: dict) -> ManifestEntry | None:
        arch = provenance.get("gpu_arch") or ""
        output = wanted(plan.arch.name if arch == "noarch" else arch).get(provenance.get("input_hash", ""))
        if output is None or _file_name_mismatch(output, package):
            return None
        return _entry(output, package, arch or plan.arch.name, "built", seconds=0.0)

    return channel.recover(adopt)


def _file_name_mismatch(output: Output, package: Path) -> bool:
    return not package.name.startswith(f"{output.name}-{output.version}-{output.build_string}.")


def report_recovery(recovery: Recovery, reporter: Reporter) -> None:
    for file in recovery.adopted:
        reporter.line(f"recovered {file}: complete and built from this plan's inputs, but not recorded when the "
                      "last run stopped; kept, not rebuilt")
    for file in recovery.set_aside:
        reporter.line(f"set aside {file} to .superseded/: not recorded in the channel and not built from this "
                      "plan's inputs")
    for file, why in recovery.damaged.items():
        reporter.line(f"moved {file} to .superseded/: {why}; the next build of it takes it again from a cache "
                      "channel or rebuilds it")
    for file in recovery.forgotten:
        reporter.line(f"{file} is {MISSING}: the next build of it takes it again from a cache channel or rebuilds it")
    if recovery.stray:
        reporter.info(f"removed {len(recovery.stray)} temporary file(s) left by an interrupted run")


def explain_lost(plan: Plan, recovery: Recovery) -> None:
    """A package recovery moved aside or forgot is built (or fetched) again: its row says why, not "new"."""
    for step in plan.steps:
        why = recovery.lost.get(step.output.input_hash)
        if why and step.state == BUILD:
            step.reasons = [why] + [r for r in step.reasons if r != "new"]


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
    why = channel.package_condition(output.input_hash) if channel.is_channel() else NOT_RECORDED
    if why is None:
        return Step(output, UP_TO_DATE, output.notes)
    if why != NOT_RECORDED:  # recorded, but missing or damaged: built (or fetched) again, saying why
        return Step(output, BUILD, [why] + output.notes)
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


def block(plan: Plan, reasons: dict[str, str]) -> None:
    """Steps that cannot be completed (resolve.py found why, before any build) are not built."""
    for step in plan.steps:
        if step.state == BUILD and step.output.name in reasons:
            step.state, step.reasons = BLOCKED, [reasons[step.output.name]]


def execute(plan: Plan, options: Options, reporter: Reporter, caches: list[BuildCache] = ()) -> list[Step]:
    channel = Channel(options.channel)
    failed: set[str] = set()
    stopped = False
    to_build = [s for s in plan.steps if s.state == BUILD]
    for number, step in enumerate(to_build, 1):
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
        with reporter.building(output.label, _progress(number, to_build)) as on_step:
            outcome = build_output(output, output.config or plan.config, options, channel, plan.arch.name, on_step)
        step.seconds, step.log_path = outcome.seconds, outcome.log_path
        if outcome.ok:
            # a stop from here until the work folder goes (between packages) names the folder it leaves
            with stops.naming(f"the work folder of {output.label} is kept: {outcome.work} (`orchestrate clean` "
                              "removes it)"):
                crashpoints.reach("built")
                for package in outcome.packages:
                    entry = _entry(output, package, plan.arch.name, "built", outcome.seconds, outcome.disk_peak_bytes)
                    channel.add(package, entry)
                    _keep_bench(channel, outcome.bench, entry, plan.arch.name, reporter)
                discard_work(outcome.work)
            step.state = BUILT
            reporter.info(f"built {output.label} in {outcome.seconds:.1f}s")
        else:
            step.state, step.reasons = FAILED, [outcome.error]
            failed.add(output.name)
            reporter.error(f"FAILED {output.label}: {outcome.error}; full log: {outcome.log_path} "
                           f"(work folder kept for a look: {outcome.work}; to re-enter the build there or rebuild "
                           f"it: {FAILED_BUILDS_PAGE}; `orchestrate clean` removes it)")
            for line in outcome.log_tail:
                reporter.error(f"  | {line}")
            stopped = not options.keep_going
    return plan.steps


def _keep_bench(channel: Channel, kept: Path | None, entry: ManifestEntry, arch: str, reporter: Reporter) -> None:
    """The recipe test's benchmark beside its package in the channel, for publish and the channel's page. One
    that cannot be written costs a warning, not the build: the package is in."""
    if kept is None:
        return
    try:
        channel_bench.keep_in_local_channel(channel.path, kept, entry, arch)
    except OSError as exc:
        reporter.error(f"warning: {kept.name} not kept in channel {channel.path} ({exc.strerror or exc}): the "
                       "package is in, without its benchmark; free space or fix permissions, then rebuild it to "
                       "measure again")


def _keep_cached_benchmarks(cache, channel: Channel, entry: ManifestEntry, reporter: Reporter) -> None:
    """The results the cache channel records for a package it gave, so this channel's page shows them too."""
    try:
        for found in cache.benchmarks(entry.file):
            channel_bench.keep_copy(channel.path, found, entry.file)
    except (OSError, UserError) as exc:
        reporter.error(f"warning: the benchmark results of {entry.file} in {cache.description} not kept in channel "
                       f"{channel.path} ({exc}): the package is in, without them")


def _progress(number: int, to_build: list[Step]) -> Progress:
    after = [s.estimate for s in to_build[number:] if s.estimate]
    current = to_build[number - 1].estimate
    return Progress(
        position=f"{number}/{len(to_build)}",
        expected_s=current.seconds if current else None,
        remaining_s=sum(e.seconds or 0 for e in after),
        unknown_after=sum(1 for e in after if e.seconds is None),
    )


def _take_from_cache(step: Step, caches, channel: Channel, options: Options, reporter: Reporter) -> bool:
    for cache in caches:
        started = time.monotonic()
        found = cache.fetch(step.output, options.work_dir)
        if found:
            package, entry = found
            forget_cached_package(step.output)
            channel.add(package, entry)
            package.unlink(missing_ok=True)  # the channel has its copy now
            _keep_cached_benchmarks(cache, channel, entry, reporter)
            step.state, step.seconds = CACHED, time.monotonic() - started
            step.reasons = [r for r in step.reasons if r.startswith((MISSING, DAMAGED))]
            step.reasons.append(f"same input hash in {cache.description}")
            reporter.info(f"took {step.output.label} from {cache.description}")
            return True
    return False


def _entry(output: Output, package: Path, arch: str, source: str, seconds: float = 0.0,
           disk_peak_bytes: int = 0) -> ManifestEntry:
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
        seconds=round(seconds, 3),
        package_bytes=package.stat().st_size,
        disk_peak_bytes=disk_peak_bytes,
        host=this_host(),
    )


def summarize(steps: list[Step], reporter: Reporter, arch: str) -> None:
    rows = [
        [s.output.name, s.output.version, s.output.build_string, s.state, f"{s.seconds:.1f}s" if s.seconds else "",
         "; ".join(s.reasons)]
        for s in steps
    ]
    reporter.table(f"Summary for {arch}", ["package", "version", "build", "result", "time", "why"], rows,
                   droppable=["time", "build"])  # the result stays in its column
    counts = {}
    for s in steps:
        counts[s.state] = counts.get(s.state, 0) + 1
    reporter.line(", ".join(f"{n} {state}" for state, n in sorted(counts.items())))


def raise_if_failed(steps: list[Step]) -> None:
    bad = [s for s in steps if s.state in (FAILED, BLOCKED, NOT_RUN)]
    failed = len([s for s in bad if s.state == FAILED])
    if failed:
        raise BuildFailed(f"{failed} package(s) failed")
    if bad:
        raise BuildFailed(f"{len(bad)} package(s) were not built: their requirements, or those of a package they "
                          "need, cannot be resolved, or their files are not locked (see the summary)")


def shared_line(plans: list[Plan]) -> str:
    """For a plan of several architectures: which packages all of them share (the same input hash: built once,
    then up to date for the others) and how many are each architecture's own."""
    hashes = [{s.output.input_hash for s in p.steps if s.state in (BUILD, UP_TO_DATE)} for p in plans]
    shared = set.intersection(*hashes) if hashes else set()
    names = sorted({s.output.name for s in plans[0].steps if s.output.input_hash in shared})
    own = ", ".join(f"{p.arch.name} {len(h - shared)}" for p, h in zip(plans, hashes))
    return (f"{len(plans)} architectures ({', '.join(p.arch.name for p in plans)}) in one channel: "
            f"{len(names)} package(s) are the same for all (built once): {', '.join(names) or 'none'}; "
            f"each architecture's own: {own}")
