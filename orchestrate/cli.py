"""The `orchestrate` command line."""
from __future__ import annotations

import argparse
import dataclasses
import os
import signal
import sys
from pathlib import Path

from . import __version__, benchlog, bump, clean, doctor, fetch, lint, pins, pypi, resolve, runner, stops
from .architectures import ArchitectureTable, choose_arch, stale_variant_files, support_pages, write_variant_files
from .channel import Channel
from .detect import detect_gpu_arch
from .errors import FAILED_BUILDS_PAGE, BuildFailed, DiskFull, UserError, is_disk_full
from .arch_list import ARCH_HELP, arch_list, per_arch
from .key_text import public_key
from .neutral import file_name_clashes
from .options import (ARCH_ENV, COMPILER_LAUNCHERS, DEFAULT_CHANNEL, VARIANT_EXAMPLE, Options,
                      compiler_launcher, count, days, existing_folder, find_workspace, folder, load_config,
                      options_from_args, shared_channel, source_channel)
from .share import COMMANDS as SHARING
from .share.page.command import COMMAND as PAGE
from .sources import SourceCache
from .plan_view import show_plan
from .ui import Reporter

SHARE_COMMANDS = [*SHARING, PAGE]
# the top-level --help's last lines, as written (a path is never broken at its hyphens)
MANUAL = ("The manual: docs/index.md in this repository;\n"
          "  every command, orchestrate.toml key and variable: docs/reference.md;\n"
          f"  a build that failed, and how to re-enter it: {FAILED_BUILDS_PAGE}.\n"
          "`orchestrate COMMAND --help` for one command.")


class Parser(argparse.ArgumentParser):
    """argparse, with a usage error in one line like every other error (the usage is a --help away), and no
    abbreviated flags (`--arch-n` is not silently --arch-neutral; cibuildwheel's parser does the same). The
    subcommands' parsers are Parsers too (add_subparsers makes its own class)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **{"allow_abbrev": False, **kwargs})

    def error(self, message: str):
        commands = next((a for a in self._actions if isinstance(a, argparse._SubParsersAction)), None)
        if commands and message.endswith(f"required: {commands.dest}"):  # not the dest's name: what to type
            message = f"`{self.prog}` needs a command: {', '.join(commands.choices)}"
        self.exit(2, f"error: {message} (see `{self.prog} --help`)\n")


def _local(parser: argparse.ArgumentParser) -> None:
    """The workspace and its channel: what `list`, `status` and `clean` read, and every command below."""
    parser.add_argument("--workspace", type=existing_folder, metavar="DIR",
                        help="folder with recipes/ and variants/ (default: found from here)")
    parser.add_argument("--channel", type=folder, metavar="DIR",
                        help=f"local channel folder (default: <workspace>/{DEFAULT_CHANNEL})")
    parser.add_argument("--quiet", "-q", action="store_true", help="plain lines, no progress")


def _common(parser: argparse.ArgumentParser, build: bool = False) -> None:
    _local(parser)
    parser.add_argument("--arch", type=arch_list, metavar="ARCH[,ARCH...]", help=ARCH_HELP)
    parser.add_argument("--variant", action="append", default=[], metavar="KEY=VALUE",
                        help=f"override a variant key, e.g. --variant {VARIANT_EXAMPLE}")
    parser.add_argument("--source-channel", action="append", type=source_channel, metavar="URL",
                        help="channel for dependencies that are not ours (repeatable; default: conda-forge)")
    parser.add_argument("--no-source-channels", action="store_true", help="use no channel but the local one")
    parser.add_argument("--source-cache", type=folder, metavar="DIR",
                        help="the source cache every build shares (default: <workspace>/.orchestrate/sources; "
                             "a shared folder or network mount works)")
    if build:
        parser.add_argument("--keep-going", "-k", action="store_true",
                            help="after a failure, still build every package that does not need it")
        parser.add_argument("--dry-run", "-n", action="store_true", help="show what would be built, build nothing")
        parser.add_argument("--jobs", "-j", type=count, metavar="N",
                            help="MAX_JOBS for compiles (default: from cores and memory)")
        parser.add_argument("--compiler-launcher", type=compiler_launcher,
                            metavar="{" + ",".join(COMPILER_LAUNCHERS) + "}",
                            help="compiler cache the build scripts put in front of the compilers (default: none)")
        parser.add_argument("--no-tests", action="store_true", help="skip the recipes' test sections")
        parser.add_argument("--cache-channel", action="append", default=[], metavar="URL", type=shared_channel,
                            help="take a package with the same input hash from this channel instead of building")
        parser.add_argument("--trusted-key", action="append", default=[], metavar="KEY", type=public_key,
                            help="take cache hits only when this key signed them (ssh-ed25519 AAAA…, or a .pub file; "
                                 "repeatable; adds to trusted_keys in orchestrate.toml)")
        parser.add_argument("--offline", action="store_true",
                            help="build from the source cache only (fill it first with `orchestrate fetch`)")
        parser.add_argument("--skip-disk-check", action="store_true",
                            help="build even if free disk looks smaller than the plan's estimate")


def _one_environment(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--one-environment", action="store_true",
                        help="with --arch gfx942,gfx950: one environment for a machine with all of them (each "
                             "compiled package built once for every listed GPU, each GPU's device packages side by side)")


def make_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="orchestrate", description=__doc__.strip() if __doc__ else None, epilog=MANUAL,
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"orchestrate {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    plan = sub.add_parser("plan", help="the build order and what each package needs")
    _common(plan)
    plan.add_argument("packages", nargs="*", metavar="PKG", help="plan these and what they need (default: rocm-stack)")
    plan.add_argument("--all", action="store_true", dest="everything",
                      help="plan every recipe, not only what rocm-stack needs")
    _one_environment(plan)
    build_all = sub.add_parser("build-all", help="build rocm-stack and everything it needs (add PKG to build more)")
    _common(build_all, build=True)
    build_all.add_argument("packages", nargs="*", metavar="PKG",
                           help="also build these (e.g. composable-kernel), with what they need")
    build_all.add_argument("--all", action="store_true", dest="everything",
                           help="build every recipe the architecture gets, not only what rocm-stack needs")
    _one_environment(build_all)
    build_all.add_argument("--arch-neutral", action="store_true",
                           help="build only the packages every architecture shares (same input hash for all), "
                                "once: CI's first job, whose channel the architectures' jobs then use as cache")
    build = sub.add_parser("build", help="build packages and whatever they need")
    _common(build, build=True)
    build.add_argument("packages", nargs="+", metavar="PKG", help="the packages to build, with what they need")
    _one_environment(build)
    fetch = sub.add_parser("fetch", help="download and verify every source, check every patch; build nothing")
    _common(fetch)
    fetch.add_argument("--all-archs", action="store_true", help="the sources of every architecture in the table")
    fetch.add_argument("--solve", action="store_true",
                       help="first solve every build's requirements against the source channels (conda-forge or "
                            "a mirror), as build-all does before building")
    fetch.add_argument("packages", nargs="*", metavar="PKG",
                       help="only these packages' sources and what they need (default: rocm-stack's)")
    clean = sub.add_parser("clean", help="remove failed builds' work folders and older build logs (and old "
                                         "superseded packages)")
    _local(clean)
    clean.add_argument("--superseded", type=days, metavar="DAYS",
                       help="also remove superseded packages set aside more than DAYS days ago")
    for name in ("list", "status"):
        listing = sub.add_parser(name, help="what the channel holds, per architecture")
        _local(listing)
    variants = sub.add_parser("variants", help="check or regenerate variants/<arch>.yaml and the support tables of README and the manual from the table")
    variants.add_argument("--workspace", type=existing_folder, metavar="DIR",
                          help="folder with recipes/ and variants/ (default: found from here)")
    variants.add_argument("--write", action="store_true", help="rewrite the generated variant files")
    detect = sub.add_parser("detect", help="print this machine's AMD GPU architecture")
    detect.add_argument("--workspace", type=existing_folder, metavar="DIR",
                        help="folder with recipes/ and variants/ (default: found from here)")
    doctor_parser = sub.add_parser("doctor", help="is this machine ready to build and run the stack? one line per check")
    _common(doctor_parser)
    doctor.add_arguments(doctor_parser)
    pins_parser = sub.add_parser("pins", help="each pin beside upstream's newest release, and the pins that move together")
    pins.add_arguments(pins_parser)
    bump.add_arguments(pins_parser)
    pypi.add_arguments(sub.add_parser("pypi", help="PyPI-only dependencies repackaged as conda packages (variants/pypi.yaml)"))
    lint.add_arguments(sub.add_parser("lint", help="check every recipe against the conda-smithy rules that fit a private channel"))
    for name, help_text, add_arguments, _ in SHARE_COMMANDS:
        extra = sub.add_parser(name, help=help_text)
        add_arguments(extra)
    return parser


def cmd_plan(args, reporter: Reporter) -> int:
    plans = [_make_plan(args, one) for one in _each_arch(args)]
    for plan in plans:
        show_plan(plan, reporter)
    if len(plans) > 1:
        reporter.paragraph(runner.shared_line(plans))
        for clash in file_name_clashes(plans):
            reporter.error(clash)
    return 0


def _each_arch(args, options: Options | None = None) -> list[Options]:
    """The options for each architecture given (one, or each of --arch gfx942,gfx950), every one checked against
    the table before the first is planned."""
    options = options or options_from_args(args)
    if getattr(args, "arch_neutral", False) or getattr(args, "one_environment", False):
        return [options]  # built once, whatever the list: what every architecture shares, or the set as one
    if len(options.archs) > 1:
        table = ArchitectureTable.load(options.variants_dir)
        for name in options.archs:
            choose_arch(name, table, options.arch_given_by)
    return per_arch(options)


def _make_plan(args, options: Options) -> runner.Plan:
    """`build` and `plan PKG` plan the named packages; `build-all` (and `plan`) the default closure plus
    any named package, or every recipe with --all."""
    packages = list(getattr(args, "packages", None) or [])
    if getattr(args, "arch_neutral", False):
        if packages or args.everything:
            raise UserError("--arch-neutral picks the packages itself: drop the package names and --all")
        from .neutral import arch_neutral_plan

        return arch_neutral_plan(options)
    together = list(options.archs) if getattr(args, "one_environment", False) else None
    if args.command == "build-all" or (args.command == "plan" and getattr(args, "everything", False)):
        return runner.make_plan(options, None, also=packages, everything=getattr(args, "everything", False),
                                one_environment=together)
    return runner.make_plan(options, packages, one_environment=together)


def cmd_build(args, reporter: Reporter) -> int:
    """`build-all` and `build`, once per architecture given (--arch gfx942,gfx950), in order: what the first built
    with the same input hash is up to date for the next. A failure stops the rest, unless --keep-going."""
    failed, each = [], _each_arch(args)
    if len(each) > 1:  # before the first build: the list's plans must not fill one file name twice
        clashes = file_name_clashes([_make_plan(args, options) for options in each])
        if clashes:
            raise UserError(clashes[0] + (f" ({len(clashes) - 1} more: `orchestrate plan` lists them)"
                                          if len(clashes) > 1 else ""))
    for options in each:
        try:
            _build_one(args, options, reporter)
        except BuildFailed as exc:
            if not options.keep_going or len(each) < 2:
                raise
            failed.append(f"{options.arch}: {exc}")
    if failed:
        raise BuildFailed("; ".join(failed))
    return 0


def _build_one(args, options: Options, reporter: Reporter) -> int:
    packages = getattr(args, "packages", None)
    plan = _make_plan(args, options)
    caches = _caches(options)  # a cache channel that is not there stops the run (a dry one too) before any build
    if options.dry_run:
        show_plan(plan, reporter)
        return 0
    channel = Channel(options.channel)
    stops.describe(lambda: f"{len(channel.entries_present())} package(s) are in channel {channel.path} and stay there")
    if any(s.state == runner.BUILD for s in plan.steps) or channel.exists():
        channel.check_writable()
    channel.lock(" ".join(["orchestrate", args.command, *(packages or [])]))
    try:
        recovery = runner.recover_channel(plan, options, channel)
        runner.report_recovery(recovery, reporter)
        if recovery.changed:
            plan = _make_plan(args, options)  # what was recovered is up to date now
            runner.explain_lost(plan, recovery)
        # Every environment solved before the first build or download: a missing requirement, or a channel
        # that cannot be reached, stops here, in seconds.
        blocked = resolve.require_resolvable(plan, options, reporter)
        # Then AMD's files: an incomplete lock is completed first where the index answers; a file without a
        # sha256 is never downloaded.
        failure = None
        if runner.unpinned_sources(plan.steps) and not options.offline:
            locked, failure = _lock_first(options, plan, reporter)
            if locked:
                plan = _make_plan(args, options)
                runner.explain_lost(plan, recovery)
                runner.block(plan, blocked)
        _block_unlocked([plan], reporter, "built", failure)
        if any(s.state == runner.BUILD for s in plan.steps):
            SourceCache(options.source_cache).ensure_writable()
            SourceCache(options.source_cache).check_private(options.shared_source_cache)
        if options.offline:
            runner.check_sources_cached(plan, options)
        if not getattr(args, "skip_disk_check", False):
            runner.check_disk_space(plan, options)
        with clean.work_area(options):
            steps = runner.execute(plan, options, reporter, caches)
        _write_page(channel, options, reporter)
    finally:
        channel.unlock()
    runner.summarize(steps, reporter, plan.arch.name)
    runner.raise_if_failed(steps)
    return 0


def _lock_first(options: Options, plan, reporter: Reporter, archs: set[str] | None = None
                ) -> tuple[bool, UserError | None]:
    """pins.lock_first, a failure to lock (the index unreachable) kept rather than raised: the packages that need no
    unlocked file go on without it (issue 36), and it is the run's one line only where none is left."""
    try:
        return pins.lock_first(options, plan, reporter, archs), None
    except UserError as exc:
        return False, exc


def _block_unlocked(plans: list, reporter: Reporter, verb: str, failure: UserError | None,
                    dependents: bool = True) -> dict[str, str]:
    """Block the packages that need a file the lock does not pin (and, for a build, what needs them), one line each,
    then say which go on; where nothing is left, one line: the failure to lock, else the first unlocked file."""
    reasons: dict[str, str] = {}
    for plan in plans:
        reasons.update(runner.block_unpinned(plan, dependents, stop_when_none_left=False))
    if reasons and not any(s.state == runner.BUILD for plan in plans for s in plan.steps):
        if failure is not None:
            raise failure
        raise UserError(next(iter(reasons.values())) + (f" (and {len(reasons) - 1} more package(s) like it)"
                                                         if len(reasons) > 1 else ""))
    if failure is not None and reasons:
        reporter.error(f"error: {failure}")
    for name, why in reasons.items():
        reporter.error(f"error: {why}" if why.startswith(f"{name}: ") else f"error: {name}: {why}")
    if reasons:
        reporter.error(f"not locked: {', '.join(reasons)} will not be {verb} (run `orchestrate pins --lock` where "
                       f"AMD's index answers); the packages that need no unlocked file go on")
    return reasons


def _write_page(channel: Channel, options: Options, reporter: Reporter) -> None:
    """The local channel's page, under its lock, when it has none or one older than what the channel holds (a
    build, a package from a cache, a recovery, or a run stopped before it wrote the page, all leave that)."""
    from .share.channel_page import local_page_stale, write_local_page

    if channel.is_channel() and local_page_stale(channel.path):
        write_local_page(channel.path, options.variants_dir, load_config(options.workspace), reporter.error)


def _caches(options: Options) -> list:
    if not options.cache_channels:
        return []
    try:
        from .share.cache import caches_for  # the sharing layer, when installed
    except ImportError:
        raise UserError("--cache-channel needs orchestrate.share, which is not available in this install")
    return caches_for(options)


def cmd_list(args, reporter: Reporter) -> int:
    options = options_from_args(args)
    channel = Channel(options.channel)
    channel.validate()
    if not channel.is_channel():
        reporter.line(f"channel {channel.path} is empty")
        _show_benchmarks(options, reporter)
        return 0
    entries = sorted(channel.entries_present(), key=lambda e: (e.arch, e.name, e.build))
    manifest, unsound = channel.manifest(), channel.unsound()
    records = channel.repodata_records()
    unrecorded = [f for f in records if f not in manifest]
    rows = [[e.arch, e.name, e.version, e.build, e.input_hash[:12], e.source] for e in entries]
    rows += [["?", records[f]["name"], records[f]["version"], records[f]["build"], "(not built here)", "?"] for f in unrecorded]
    by_arch: dict[str, int] = {}
    for row in rows:
        by_arch[row[0]] = by_arch.get(row[0], 0) + 1
    # A missing or damaged package is shown, but not counted: build-all takes it again or rebuilds it.
    rows += [[manifest[f].arch, manifest[f].name, manifest[f].version, manifest[f].build, why, "-"]
             for f, why in sorted(unsound.items())]
    reporter.table(f"Channel {channel.path}", ["arch", "package", "version", "build", "input hash", "from"], rows,
                   droppable=["input hash"])
    counts = [f"{arch}: {n} package(s)" for arch, n in sorted(by_arch.items())]
    if unsound:
        counts.append(f"{len(unsound)} missing or damaged (`orchestrate build-all` replaces them)")
    reporter.line(", ".join(counts))
    _show_benchmarks(options, reporter)
    return 0


def _show_benchmarks(options: Options, reporter: Reporter) -> None:
    for line in benchlog.summary_lines(options.logs_dir):
        reporter.item(line, hanging=len(line) - len(line.lstrip()) + 4)  # an architecture's line wraps under itself


def cmd_fetch(args, reporter: Reporter) -> int:
    options = options_from_args(args)
    if args.all_archs and options.archs:
        raise UserError("--arch and --all-archs exclude each other: pass one")
    plans = _fetch_plans(args, options)
    SourceCache(options.source_cache).ensure_writable()
    SourceCache(options.source_cache).check_private(options.shared_source_cache)
    stops.describe(lambda: f"the source cache {options.source_cache} keeps every source fetched so far",
                   "run the same command again to fetch the rest")
    # As build-all does: an incomplete lock of AMD's files is completed first where the index answers (one line
    # where it does not); a file without a sha256 is never downloaded.
    unlocked, failure = [plan for plan in plans if runner.unpinned_sources(plan.steps)], None
    if unlocked:
        locked, failure = _lock_first(options, unlocked[0], reporter, {p.arch.name for p in unlocked})
        if locked:
            plans = _fetch_plans(args, options)
    # With --solve, requirements first: seconds, where the sources may take an hour. A channel that cannot be
    # reached stops here; a requirement no channel has is reported and the sources are still fetched (a
    # recipe fix changes no source), so one run tells everything.
    unresolved = fetch.unresolved_requirements(plans, options) if args.solve else []
    for line in unresolved:
        reporter.error(f"error: {line}")
    # a file without a sha256 is never downloaded; the packages that need none are fetched
    not_locked = _block_unlocked(plans, reporter, "fetched", failure, dependents=False)
    reporter.info(f"source cache: {options.source_cache}")
    results = []
    with clean.work_area(options):
        for run in fetch.unique_runs(plans):
            with reporter.building(run.output.source_name, verb="fetching the sources of"):
                results += fetch.fetch_sources(run, options)
    fetch.report(results, reporter)
    failed = [r for r in results if r.state == fetch.FAILED]
    problems = [f"{len(failed)} source(s) failed"] if failed else []
    problems += [f"{len(unresolved)} requirement(s) cannot be resolved"] if unresolved else []
    problems += [f"{len(not_locked)} package(s) need files not locked"] if not_locked else []
    if problems:
        raise UserError(f"{' and '.join(problems)} (see above): fix them before building")
    return 0


def _fetch_plans(args, options: Options) -> list[runner.Plan]:
    if not args.all_archs:
        return [runner.make_plan(one, args.packages) for one in _each_arch(args, options)]
    table = ArchitectureTable.load(options.variants_dir)
    return [runner.make_plan(dataclasses.replace(options, arch=a, archs=[a]), args.packages) for a in table.names()]


def cmd_clean(args, reporter: Reporter) -> int:
    options = options_from_args(args)
    channel = Channel(options.channel)
    channel.validate()
    removed = clean.clean(options, channel, args.superseded)
    for line in removed.lines():
        reporter.line(line)
    return 0


def cmd_variants(args, reporter: Reporter) -> int:
    workspace = (args.workspace or find_workspace(Path.cwd())).resolve()
    variants_dir = workspace / "variants"
    table = ArchitectureTable.load(variants_dir)
    if args.write:
        for path in write_variant_files(table, variants_dir) + support_pages(table, workspace, write=True):
            reporter.line(f"wrote {path}")
        return 0
    stale = stale_variant_files(table, variants_dir) + support_pages(table, workspace)
    for path in stale:
        reporter.error(f"{path} is out of date: run `orchestrate variants --write`")
    if not stale:
        reporter.line(f"{len(table.architectures)} variant files match {table.path.name}")
    return 1 if stale else 0


def cmd_pins(args, reporter: Reporter) -> int:
    return bump.run(args, reporter) if bump.wanted(args) else pins.run(args, reporter)


def cmd_detect(args, reporter: Reporter) -> int:
    """This machine's GPU, as found; $ORCHESTRATE_ARCH is no detection, so it is only said beside it."""
    found, override = detect_gpu_arch(), os.environ.get(ARCH_ENV)
    if override:
        reporter.error(f"note: {ARCH_ENV}={override} is set: the other commands build for {override}, whatever "
                       "GPU is detected")
    if not found:
        raise UserError("no AMD GPU found (rocm_agent_enumerator, rocminfo, /sys/class/kfd): check the driver with "
                        "`orchestrate doctor`; to build for a GPU this machine lacks, give the other commands "
                        f"--arch A or set {ARCH_ENV}")
    reporter.line(found)
    return 0


COMMANDS = {"plan": cmd_plan, "build-all": cmd_build, "build": cmd_build, "fetch": cmd_fetch, "clean": cmd_clean,
            "list": cmd_list, "status": cmd_list, "variants": cmd_variants, "detect": cmd_detect, "pins": cmd_pins, "pypi": pypi.run,
            "doctor": doctor.run, "lint": lint.run}


def main(argv: list[str] | None = None) -> int:
    parser = make_parser()
    args = parser.parse_args(argv)
    reporter = Reporter(quiet=getattr(args, "quiet", False))
    handler = COMMANDS.get(args.command) or {n: run for n, _, _, run in SHARE_COMMANDS}[args.command]
    installed = stops.install()  # Ctrl-C and SIGTERM: stops.py says how
    try:
        return _run(handler, args, reporter)
    finally:
        if installed:
            stops.uninstall()


def _run(handler, args, reporter: Reporter) -> int:
    try:
        with stops.armed():
            return handler(args, reporter)
    except UserError as exc:
        reporter.error(f"error: {exc}")
        return exc.exit_code
    except BuildFailed as exc:
        reporter.error(f"error: {exc}; run the same command again to retry only what failed")
        return exc.exit_code
    except (stops.Stopped, KeyboardInterrupt) as exc:
        signum = getattr(exc, "signum", signal.SIGINT)
        if stops.report_once():
            reporter.error(stops.line(signum))
        return 128 + signum
    except OSError as exc:
        if not is_disk_full(exc):
            raise
        error = DiskFull(Path(exc.filename or "."), "a file at")  # a write site not wrapped in errors.writing
        reporter.error(f"error: {error}")
        return error.exit_code


def entry() -> None:
    """Console-script entry: exit without interpreter finalization, which can crash while py-rattler's
    worker threads are still shutting down (seen as exit 134/139 after a successful build)."""
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
