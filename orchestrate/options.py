"""One options object for a run, built from the CLI, the environment and orchestrate.toml."""
from __future__ import annotations

import argparse
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from .channels import anchored
from .errors import UserError

CONFIG_FILE = "orchestrate.toml"
DEFAULT_CHANNEL = "channel"
ARCH_ENV = "ORCHESTRATE_ARCH"
DEFAULT_SOURCE_CHANNELS = ("conda-forge",)
# GiB of memory one compile job may take: PyTorch and CK translation units reach 3-4 GiB each.
GIB_PER_JOB = 4
# The package format every build writes (rattler-build's `package_format`: conda or tar-bz2, an optional
# :level). Chosen by tests/benchmarks/repack_speed.py (results/repack-speed.md): 1.68x pip's time, 1.02x the
# size of rattler-build's default; builder.py, where it is passed, says why. orchestrate.toml's
# `package_format` (and `compression_threads`) override it.
DEFAULT_PACKAGE_FORMAT = "conda:9"
PACKAGE_FORMAT = re.compile(r"^(?:conda(?::(-[1-7]|[0-9]|1[0-9]|2[0-2]))?|tar-bz2(?::[1-9])?)$")


@dataclass
class Options:
    workspace: Path
    channel: Path
    arch: str | None = None
    source_channels: list[str] = field(default_factory=lambda: list(DEFAULT_SOURCE_CHANNELS))
    cache_channels: list[str] = field(default_factory=list)
    variant_overrides: dict[str, str] = field(default_factory=dict)
    keep_going: bool = False
    dry_run: bool = False
    quiet: bool = False
    max_jobs: int | None = None
    compiler_launcher: str = ""
    run_tests: bool = True
    source_cache: Path | None = None  # rattler-build's source cache, shared by every build and architecture
    offline: bool = False  # build from the source cache only; a missing source is an error before any build
    package_format: str = DEFAULT_PACKAGE_FORMAT
    compression_threads: int | None = None  # zstd threads for conda packages; None: rattler-build's (all cores)

    def __post_init__(self) -> None:
        if self.source_cache is None:
            self.source_cache = self.state_dir / "sources"

    @property
    def recipes_dir(self) -> Path:
        return self.workspace / "recipes"

    @property
    def variants_dir(self) -> Path:
        return self.workspace / "variants"

    @property
    def patches_dir(self) -> Path:
        return self.workspace / "patches"

    @property
    def state_dir(self) -> Path:
        """Work folders and build logs: in the workspace, never in the channel."""
        return self.workspace / ".orchestrate"

    @property
    def logs_dir(self) -> Path:
        return self.state_dir / "logs"

    @property
    def work_dir(self) -> Path:
        return self.state_dir / "work"


    def jobs(self) -> int:
        return self.max_jobs or default_max_jobs()


def default_max_jobs(cores: int | None = None, free_gib: float | None = None) -> int:
    """min(cores, free GiB / GIB_PER_JOB), at least 1; `doctor` passes what it read from /proc itself."""
    cores = cores or os.cpu_count() or 1
    if free_gib is None:
        try:
            pages = os.sysconf("SC_AVPHYS_PAGES") if hasattr(os, "sysconf") else 0
            free_gib = pages * os.sysconf("SC_PAGE_SIZE") / 2**30
        except (ValueError, OSError):
            free_gib = 0
    by_memory = int(free_gib // GIB_PER_JOB) if free_gib else cores
    return max(1, min(cores, by_memory))


# -- arguments, checked where they are parsed (argparse's type=): one checker per kind, for every flag of
# that kind. argparse prefixes the flag ("argument --jobs/-j: "); each message names the value and the fix.
URL = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://(.+)")
CHANNEL_SCHEMES = ("file", "http", "https", "s3")  # where a conda client (pixi, rattler) reads a channel from


def count(text: str) -> int:
    """How many things at once (--jobs): a whole number, 1 or more."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of 1 or more: pass e.g. 8, or leave "
                                         "the option out for its default")
    return value


def port(text: str) -> int:
    """A TCP port to listen on: 1-65535, or 0 for any free one."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port: pass a whole number from 1 to 65535 "
                                         "(0: any free port)")
    return value


def _number(text: str, lowest: float, above: bool) -> float | None:
    """`text` as a finite number at or above (strictly above) `lowest`, else None."""
    try:
        value = float(text)
    except ValueError:
        return None
    fits = value > lowest if above else value >= lowest
    return value if fits and value != float("inf") else None


def seconds(text: str) -> float:
    """A time limit: a number of seconds above 0."""
    value = _number(text, 0, above=True)
    if value is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a time limit: pass a number of seconds above 0, e.g. 30")
    return value


def days(text: str) -> float:
    """An age: a number of days, 0 or more."""
    value = _number(text, 0, above=False)
    if value is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of days: pass 0 or more, e.g. 30")
    return value


def location(*schemes: str, folders: bool = True):
    """A checker for a place given as a URL with one of `schemes`, or as a folder (which may not exist
    yet, but is not a file) unless `folders` is False. With no scheme, a folder only, as a Path; `~` is
    expanded (bash leaves it in `--workspace=~/ws`). A new folder's name may hold a colon (a timestamp,
    `ch-2026-11-25T16:00`); text that reads as a URL written wrong is refused (`url_written_wrong`)."""
    def check(text: str):
        url = URL.fullmatch(text)
        if url and url[1].lower() in schemes:
            return text
        urls = f"a URL ({', '.join(s + '://' for s in schemes)})"
        wanted = f"{urls} or a folder" if schemes and folders else urls if schemes else "a folder"
        if url:
            why = f": {url[1]}:// is not taken here" if schemes else " is a URL"
            raise argparse.ArgumentTypeError(f"{text!r}{why}: pass {wanted}")
        if not folders:
            raise argparse.ArgumentTypeError(f"{text!r} is not a URL: pass {wanted}")
        path = Path(text).expanduser()
        if not text or (url_written_wrong(text, {*CHANNEL_SCHEMES, *schemes}) and not path.is_dir()):
            raise argparse.ArgumentTypeError(f"{text!r} is neither a folder nor a URL: pass {wanted}")
        if path.exists() and not path.is_dir():
            raise argparse.ArgumentTypeError(f"{text!r} is a file, not a folder: pass {wanted}")
        return os.path.expanduser(text) if schemes else path  # as written otherwise: `./x` stays a folder
    return check


# Text that starts like a path is a folder, whatever colons follow (rattler's rule: orchestrate/channels.py).
PATH_START = ("/", "./", "../", "~")
# Before the first slash: a known scheme and a colon without `//` (`s3:team/x`, `https:/host/x`), a colon
# and then a slash (`host:8000/x`), or nothing before the colon (`::::`). A colon elsewhere (a timestamped
# folder, `ch-2026-11-25T16:00`) names a folder.
SCHEME_WITHOUT_SLASHES = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")


def url_written_wrong(text: str, known_schemes: set[str]) -> bool:
    if text.startswith(PATH_START):
        return False
    first, slash, _ = text.partition("/")
    if ":" not in first:
        return False
    scheme = SCHEME_WITHOUT_SLASHES.match(first)
    return first.startswith(":") or bool(slash) or bool(scheme and scheme[1].lower() in known_schemes)


folder = location()


def existing_folder(text: str) -> Path:
    """The workspace: a folder that is there already."""
    path = folder(text)
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} does not exist: pass the folder with recipes/ and variants/")
    return path


def load_config(workspace: Path) -> dict:
    path = workspace / CONFIG_FILE
    if not path.exists():
        return {}
    try:
        return tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{path} is not valid TOML ({exc}): fix the file")


def find_workspace(start: Path) -> Path:
    """The nearest folder at or above `start` that has recipes/ and variants/."""
    start = start.resolve()
    for folder in (start, *start.parents):
        if (folder / "recipes").is_dir() and (folder / "variants").is_dir():
            return folder
    raise UserError(
        f"no workspace found at or above {start}: run inside a folder with recipes/ and variants/, "
        "or pass --workspace DIR"
    )


def parse_variant_overrides(items: list[str]) -> dict[str, str]:
    overrides = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UserError(f"--variant '{item}' is not KEY=VALUE: write e.g. --variant aotriton_mi100_fa=true")
        overrides[key.strip()] = value.strip()
    return overrides


def options_from_args(args: argparse.Namespace) -> Options:
    workspace = (args.workspace or find_workspace(Path.cwd())).resolve()
    config = load_config(workspace)
    channel = args.channel or Path(config.get("channel", DEFAULT_CHANNEL))
    channel = channel if channel.is_absolute() else (Path.cwd() if args.channel else workspace) / channel
    if getattr(args, "no_source_channels", False):
        sources = []
    else:
        written = args.source_channel or config.get("source_channels", list(DEFAULT_SOURCE_CHANNELS))
        sources = [anchored(c, Path.cwd() if args.source_channel else workspace) for c in written]
    return Options(
        workspace=workspace,
        channel=channel.resolve(),
        arch=args.arch or config.get("arch"),
        source_channels=list(sources),
        cache_channels=list(getattr(args, "cache_channel", []) or config.get("cache_channels", [])),
        variant_overrides=parse_variant_overrides(args.variant),
        keep_going=getattr(args, "keep_going", False),
        dry_run=getattr(args, "dry_run", False),
        quiet=args.quiet,
        max_jobs=getattr(args, "jobs", None) or count_from(config, "max_jobs", workspace, "cores and memory"),
        compiler_launcher=(getattr(args, "compiler_launcher", None) or config.get("compiler_launcher", "")),
        run_tests=not getattr(args, "no_tests", False),
        source_cache=_source_cache(args, config, workspace),
        offline=getattr(args, "offline", False),
        package_format=package_format_from(config, workspace),
        compression_threads=compression_threads_from(config, workspace),
    )


def package_format_from(config: dict, workspace: Path) -> str:
    value = config.get("package_format", DEFAULT_PACKAGE_FORMAT)
    if not isinstance(value, str) or not PACKAGE_FORMAT.match(value):
        raise UserError(f"{workspace / CONFIG_FILE}: package_format = {value!r} is not a package format: write "
                        f"\"conda\", \"conda:<level -7..22>\", \"tar-bz2\" or \"tar-bz2:<level 1..9>\" "
                        f"(default {DEFAULT_PACKAGE_FORMAT!r})")
    return value


def compression_threads_from(config: dict, workspace: Path) -> int | None:
    return count_from(config, "compression_threads", workspace, "all cores")


def count_from(config: dict, key: str, workspace: Path, default: str) -> int | None:
    """orchestrate.toml's `key`, a whole number of 1 or more (--jobs's rule, for the file), or None."""
    value = config.get(key)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise UserError(f"{workspace / CONFIG_FILE}: {key} = {value!r} is not a positive whole "
                        f"number: write e.g. {key} = 4, or leave it out for {default}")
    return value


def _source_cache(args, config: dict, workspace: Path) -> Path | None:
    if getattr(args, "source_cache", None):
        return args.source_cache.resolve()
    if config.get("source_cache"):
        path = Path(config["source_cache"]).expanduser()
        return path if path.is_absolute() else workspace / path
    return None
