"""Build one package with py-rattler-build into a private work folder, never into the channel.

The channel only receives a package once its build and its recipe tests have passed (channel.add), so
a failing build leaves the channel and its index exactly as they were. Every work folder uses the one
shared source cache (sources.SourceCache). The caller removes a work folder once its packages are in the
channel (`discard_work`); a failed build's folder stays for diagnosis until `orchestrate clean`.
"""
from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from rattler_build import EnvironmentIsolation, ToolConfiguration, VariantConfig
from rattler_build.progress import BuildStepEvent, LogEvent

from . import benchlog, crashpoints, diagnose, stops
from .channel import Channel, sha256_of
from .errors import writing
from .options import Options
from .recipes import Output, recipe_data, rerender
from .sources import SourceCache


@dataclass
class BuildOutcome:
    ok: bool
    packages: list[Path] = field(default_factory=list)
    seconds: float = 0.0
    log_path: Path | None = None
    error: str = ""
    log_tail: list[str] = field(default_factory=list)
    work: Path | None = None
    disk_peak_bytes: int = 0  # how far free space on the work area's disk fell during the build
    bench: Path | None = None  # the recipe test's quick benchmark, kept beside the log (benchlog)


class _LogSink:
    """py-rattler-build progress callback: every log line to the log file, build steps to the UI.

    py-rattler-build prints and ignores an exception raised here, so a write that fails (a full disk)
    is kept in `write_error` for build_output to raise once the build returns."""

    def __init__(self, log_file, on_step: Callable[[str], None]):
        self.log_file = log_file
        self.on_step = on_step
        self.write_error: OSError | None = None

    def write(self, text: str) -> None:
        if self.write_error is not None:
            return
        try:
            self.log_file.write(text)
            self.log_file.flush()
        except OSError as exc:
            self.write_error = exc

    def on_download_start(self, event) -> None:
        self.write(f"download {event.url}\n")

    def on_download_progress(self, event) -> None:
        pass

    def on_download_complete(self, event) -> None:
        pass

    def on_build_step(self, event: BuildStepEvent) -> None:
        self.write(f"== {event.step_name}: {event.message}\n")
        self.on_step(event.step_name)

    def on_log(self, event: LogEvent) -> None:
        crashpoints.reach("build.log")
        self.write(event.message.rstrip("\n") + "\n")


def provenance(output: Output, options: Options, arch: str) -> dict:
    """What a package records about its own inputs, inside about.json (extra.orchestrate)."""
    return {
        "input_hash": output.input_hash,
        "gpu_arch": arch if not output.noarch else "noarch",
        "recipe": output.recipe_name,
        "patches": [
            {"file": _workspace_relative(p, options.workspace), "sha256": sha256_of(p)}
            for p in output.patches
        ],
        "dependency_hashes": output.dependency_hashes,
    }


def build_output(
    output: Output,
    config: VariantConfig,
    options: Options,
    channel: Channel,
    arch: str,
    on_step: Callable[[str], None] = lambda step: None,
) -> BuildOutcome:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    log_path = options.logs_dir / f"{output.name}-{output.build_string}-{stamp}.log"
    with writing("the build log", log_path):
        options.logs_dir.mkdir(parents=True, exist_ok=True)
        log_file = open(log_path, "w")
    with writing("the build log", log_path), log_file:
        outcome = _build_logged(output, config, options, channel, arch, on_step, log_file, log_path)
    with writing("the benchmark results beside", log_path):
        outcome.bench = benchlog.collect(log_path, output.name)  # the recipe test's quick benchmark, when a GPU ran it
    return outcome


def _build_logged(output: Output, config: VariantConfig, options: Options, channel: Channel, arch: str,
                  on_step: Callable[[str], None], log_file, log_path: Path) -> BuildOutcome:
    work = new_work_folder(output, options)
    forget_cached_package(output)
    started = time.monotonic()
    sink = _LogSink(log_file, on_step)
    kept = f"the build of {output.label} was stopped, its work folder kept for a look: {work}"
    with DiskWatch(work) as disk, writing("the build log", log_path):
        sink.write(f"# {output.label} for {arch}; input hash {output.input_hash}; work folder {work}\n")
        try:
            variant = _rendered_with_provenance(output, config, options, arch, work)
            channels = ([str(channel.path)] if channel.is_channel() else []) + list(options.source_channels)
            with stops.zone(stops.FOREIGN, in_flight=kept):
                try:
                    result = variant.run_build(
                        tool_config=ToolConfiguration(test_strategy="native" if options.run_tests else "skip",
                                                      compression_threads=options.compression_threads),
                        output_dir=work,
                        channels=channels,
                        progress_callback=sink,
                        env_isolation=EnvironmentIsolation.STRICT,
                        # zstd level 9 (options.DEFAULT_PACKAGE_FORMAT) for every recipe: compression was
                        # most of a repack's time. Repacking the 191 MB torch wheel (tests/benchmarks/
                        # repack_speed.py, results/repack-speed.md) took 102.5 s at rattler-build's default
                        # level, 5.3x `pip install`; level 9 took 32.4 s, 1.68x pip, for a package 1.9% larger.
                        # Every recipe, not only the large repacks: a source build's package (PyTorch's is
                        # gigabytes) spends the same time compressing, and one setting is simpler to reason
                        # about than a size cut-off.
                        package_format=options.package_format,
                    )
                except Exception as exc:  # py-rattler-build raises several error types; all mean "this build failed"
                    failure = exc
                else:
                    failure = None
        except stops.Stopped as stop:
            sink.write(f"== {stop}: the orchestrator stopped this build\n")
            raise
        except Exception as exc:  # rendering the recipe again failed
            failure = exc
        if sink.write_error is not None:
            raise sink.write_error
        if failure is not None:
            lines = [str(line) for line in getattr(failure, "log", None) or []]
            sink.write("\n".join(lines) + "\n" + f"ERROR: {failure}\n")
            tail = (lines or str(failure).splitlines())[-15:]
            return BuildOutcome(False, [], time.monotonic() - started, log_path,
                                _explain(failure, lines, output, options, work), tail, work, disk.peak_bytes)
        sink.write("\n".join(str(line) for line in result.log or []) + "\n")
        if sink.write_error is not None:
            raise sink.write_error
    return BuildOutcome(True, [Path(p) for p in result.packages], time.monotonic() - started, log_path, work=work,
                        disk_peak_bytes=disk.peak_bytes)


def new_work_folder(output: Output, options: Options) -> Path:
    """A private output folder for one build, using the shared source cache."""
    with writing("a work folder in", options.work_dir):
        options.work_dir.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=f"{output.name}-", dir=options.work_dir))
        SourceCache(options.source_cache).attach(work)
    return work


def forget_cached_package(output: Output) -> None:
    """Drop this package from rattler's package cache before it is rebuilt or replaced.

    The cache keys packages by name-version-build only, and a rebuild after a script or patch change keeps
    its build string: without this, the recipe's tests and every dependent's host environment would install
    the previous build's cached files instead of the new package. The entry's own lock (the one rattler
    takes while it fills or reads the entry) is held while it goes."""
    user_cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    pkgs = Path(os.environ.get("RATTLER_CACHE_DIR") or user_cache / "rattler" / "cache") / "pkgs"
    stem = f"{output.name}-{output.version}-{output.build_string}"
    if not (pkgs / stem).exists():
        return
    with open(pkgs / f"{stem}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        shutil.rmtree(pkgs / stem, ignore_errors=True)


def discard_work(work: Path | None) -> None:
    """Remove a finished build's folder (its package is in the channel by now); the cache it links stays."""
    if work is not None:
        shutil.rmtree(work, ignore_errors=True)


class DiskWatch:
    """Samples free space on a folder's disk during a build: the drop is what the build really needed
    (sources, build tree, package), measured without walking millions of files."""

    INTERVAL_S = 1.0

    def __init__(self, folder: Path):
        self.folder = folder
        self.peak_bytes = 0
        self._stop = threading.Event()

    def __enter__(self) -> "DiskWatch":
        self._start_free = shutil.disk_usage(self.folder).free
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        try:
            used = self._start_free - shutil.disk_usage(self.folder).free
        except OSError:
            return
        self.peak_bytes = max(self.peak_bytes, used)

    def _watch(self) -> None:
        while not self._stop.wait(self.INTERVAL_S):
            self._sample()

    def __exit__(self, *exc) -> None:
        self._sample()
        self._stop.set()
        self._thread.join()


def _rendered_with_provenance(output: Output, config: VariantConfig, options: Options, arch: str, work: Path):
    """The recipe with the provenance record added to `extra`."""
    data = recipe_data(output)
    extra = dict(data.get("extra") or {})
    extra["orchestrate"] = provenance(output, options, arch)
    data["extra"] = extra
    return rerender(output, config, data, work)


def _explain(exc: Exception, lines: list[str], output: Output, options: Options, work: Path) -> str:
    return diagnose.explain(str(exc), lines, output.name, options.source_channels, max_jobs=options.jobs(),
                            work=work, recipe=output.pinned_in)


def _workspace_relative(path: Path, workspace: Path) -> str:
    try:
        return str(path.relative_to(workspace))
    except ValueError:
        return str(path)
