"""One options object for a run, built from the CLI, the environment and orchestrate.toml."""
from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .arch_list import arch_list, first_arch_list
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
    arch: str | None = None  # the architecture a plan or build is for: the first of `archs`, or None (detected)
    archs: list[str] = field(default_factory=list)  # every architecture given (--arch gfx942,gfx950): per_arch()
    arch_given_by: str = ""  # where `arch` is written when not by --arch (arch_given_by), for an error naming it
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


def source_channel(text: str) -> str:
    """A channel dependencies come from, as pixi writes one (orchestrate/channels.py): a name (`conda-forge`,
    `my-org/label`), a URL a conda client reads (file://, http(s)://, s3://) or a folder; as written."""
    url = URL.fullmatch(text)
    wanted = f"a channel name (conda-forge), a URL ({', '.join(s + '://' for s in CHANNEL_SCHEMES)}) or a folder"
    if url and url[1].lower() not in CHANNEL_SCHEMES:
        raise argparse.ArgumentTypeError(f"{text!r}: {url[1]}:// is not taken here: pass {wanted}")
    name = not url and not text.startswith(PATH_START)  # a channel name has no spaces; a folder may
    if not text.strip() or (name and (len(text.split()) > 1 or url_written_wrong(text, set(CHANNEL_SCHEMES)))):
        raise argparse.ArgumentTypeError(f"{text!r} is not a channel: pass {wanted}")
    return text


# Where a package server is written to: `publish`, `verify --from` and --cache-channel take these besides a channel.
PACKAGE_SERVER_SCHEMES = ("prefix", "quetz", "artifactory", "anaconda")
# A channel publish writes, or verify and --cache-channel read: a folder or a URL share/targets.py knows.
shared_channel = location(*CHANNEL_SCHEMES, *PACKAGE_SERVER_SCHEMES)
http_url = location("http", "https", folders=False)
COMPILER_LAUNCHERS = ("ccache", "sccache")


def compiler_launcher(text: str) -> str:
    """The compiler cache the build scripts put in front of the compilers, or "" for none."""
    if text not in ("", *COMPILER_LAUNCHERS):
        raise argparse.ArgumentTypeError(f"{text!r} is not a compiler launcher: pass {' or '.join(COMPILER_LAUNCHERS)} "
                                         "(or leave it out for none)")
    return text


def package_format(text: str) -> str:
    """rattler-build's package format and level (DEFAULT_PACKAGE_FORMAT says why its default)."""
    if not PACKAGE_FORMAT.match(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a package format: pass \"conda\", \"conda:<level -7..22>\", "
                                         f"\"tar-bz2\" or \"tar-bz2:<level 1..9>\" "
                                         f"(default {DEFAULT_PACKAGE_FORMAT!r})")
    return text


# -- orchestrate.toml: every key declared once, checked when the file is read (load_config), by the checker
# of its flag. Keys are snake_case; the [s3-options.<bucket>] tables keep pixi's kebab-case keys, since
# consumer-manifest copies them into a teammate's pixi.toml as they are.
@dataclass(frozen=True)
class ConfigKey:
    name: str
    kind: type  # str, int, bool, or list (of text; a string is a list of one, never read a character at a time)
    form: str  # what to write, for the error line: "a whole number of 1 or more, e.g. max_jobs = 4"
    doc: str  # one line for docs/reference.md
    default: str = ""
    flag: str = ""
    check: Callable[[str], object] | None = None  # the flag's checker (argparse type=), for each value as text
    in_workspace: bool = False  # a relative folder is relative to the workspace

    def read(self, value, where: str, workspace: Path):
        """The value, checked; a UserError naming `where` (file and key) and the form to write otherwise."""
        values = [value] if self.kind is list and isinstance(value, str) else value
        if self.kind is list:
            fits = isinstance(values, list) and all(isinstance(v, str) for v in values)
        else:
            fits = isinstance(value, self.kind) and not (self.kind is int and isinstance(value, bool))
        if not fits:
            raise UserError(f"{where} = {_toml(value)} is {_kind_of(value)}: write {self.form}")
        for text in values if self.kind is list else [value]:
            self._check(str(text), f"{where} = {_toml(value)}", workspace)
        return values

    def _check(self, text: str, said: str, workspace: Path) -> None:
        if not self.check:
            return
        if self.in_workspace and text and not (URL.fullmatch(text) or url_written_wrong(text, set(CHANNEL_SCHEMES))
                                               or Path(text).expanduser().is_absolute()):
            text = str(workspace / text)
        try:
            self.check(text)
        except argparse.ArgumentTypeError as exc:
            reason = str(exc).split(": pass ")[0].removeprefix(repr(text))  # `said` names the value
            raise UserError(f"{said}{reason if reason.startswith(':') else ' ' + reason.strip()}: write {self.form}"
                            ) from None


CONFIG_KEYS = (
    ConfigKey("channel", str, 'a folder, e.g. channel = "channel"',
              "the local channel folder, relative to the workspace",
              default=f'`"{DEFAULT_CHANNEL}"`', flag="--channel", check=folder, in_workspace=True),
    ConfigKey("arch", list, 'architectures of the table, e.g. arch = "gfx1151" or arch = ["gfx942", "gfx950"]',
              f"the GPU architecture(s) to build for (else `${ARCH_ENV}`, else detected; [several](orchestrator.md"
              "#several-gpus-in-one-environment))", flag="--arch", check=arch_list),
    ConfigKey("source_channels", list, 'a list of channels, e.g. source_channels = ["conda-forge"]',
              "where dependencies come from (see [Channel names](#channel-names))",
              default='`["conda-forge"]`', flag="--source-channel, --no-source-channels", check=source_channel),
    ConfigKey("cache_channels", list, 'a list of channels, e.g. cache_channels = ["s3://team/rocm-stack"]',
              "shared channels looked up by input hash before building (see [The shared channel as a build cache]"
              "(sharing.md#the-shared-channel-as-a-build-cache))",
              default="`[]`", flag="--cache-channel", check=shared_channel, in_workspace=True),
    ConfigKey("source_cache", str, 'a folder, e.g. source_cache = "/mnt/team/sources"',
              "the source cache folder (see [Sources](getting-started.md#sources-downloaded-once-checked-before-the-"
              "hours-start))", default='`".orchestrate/sources"`', flag="--source-cache", check=folder,
              in_workspace=True),
    ConfigKey("max_jobs", int, "a whole number of 1 or more, e.g. max_jobs = 4 (leave it out for cores and memory)",
              "`MAX_JOBS` for the builds", default=f"min(cores, free GiB / {GIB_PER_JOB})", flag="--jobs",
              check=count),
    ConfigKey("compiler_launcher", str, f'{" or ".join(COMPILER_LAUNCHERS)}, e.g. compiler_launcher = "ccache"',
              "the compiler cache in front of every compile", default="none", flag="--compiler-launcher",
              check=compiler_launcher),
    ConfigKey("package_format", str, '"conda", "conda:<level -7..22>", "tar-bz2" or "tar-bz2:<level 1..9>", e.g. '
              'package_format = "conda:9"',
              "the packages' format and level: `\"conda\"`, `\"conda:<-7..22>\"`, `\"tar-bz2\"`, `\"tar-bz2:<1..9>\"` "
              "(the default: 1.7× pip's time to repackage the torch wheel against 5.3× at rattler-build's default "
              "level, for 1.9% more size; see [How long repackaging takes]"
              "(prebuilt-or-source.md#how-long-repackaging-takes))",
              default=f'`"{DEFAULT_PACKAGE_FORMAT}"`', check=package_format),
    ConfigKey("compression_threads", int, "a whole number of 1 or more, e.g. compression_threads = 4 (leave it out "
              "for all cores)", "zstd threads per package", default="all cores", check=count),
)
S3_OPTIONS = "s3-options"
S3_OPTION_KEYS = (  # pixi's keys
    ConfigKey("endpoint-url", str, 'an http(s) URL, e.g. endpoint-url = "http://minio:9000"',
              "an S3-compatible endpoint", default="`$AWS_ENDPOINT_URL`, else AWS", flag="--s3-endpoint-url",
              check=http_url),
    ConfigKey("region", str, 'a region, e.g. region = "us-east-1"', "the bucket's region",
              default="`$AWS_REGION`, else `us-east-1`", flag="--s3-region"),
    ConfigKey("force-path-style", bool, "true or false, e.g. force-path-style = true", "path-style bucket addressing",
              default="on with a custom endpoint", flag="--[no-]s3-path-style"),
)


def load_config(workspace: Path) -> dict:
    """orchestrate.toml's keys, each checked as its flag is; a missing file is no keys."""
    path = workspace / CONFIG_FILE
    if not path.exists():
        return {}
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"{path} is not valid TOML ({exc}): fix the file")
    except OSError as exc:
        raise UserError(f"{path} cannot be read ({exc.strerror}): fix its permissions, or remove it") from None
    keys = {key.name: key for key in CONFIG_KEYS}
    config = {}
    for name, value in raw.items():
        if name == S3_OPTIONS:
            config[name] = _s3_options(value, path, workspace)
        elif name in keys:
            config[name] = keys[name].read(value, f"{path}: {name}", workspace)
        else:
            raise UserError(_unknown(f"{path}: unknown key {name!r}", name, [*keys, S3_OPTIONS]))
    return config


def _s3_options(tables, path: Path, workspace: Path) -> dict:
    example = '[s3-options.<bucket>] with endpoint-url = "http://minio:9000" under it'
    if not isinstance(tables, dict):
        raise UserError(f"{path}: {S3_OPTIONS} = {_toml(tables)} is {_kind_of(tables)}: write {example}")
    keys = {key.name: key for key in S3_OPTION_KEYS}
    for bucket, table in tables.items():
        if not isinstance(table, dict):
            raise UserError(f"{path}: [{S3_OPTIONS}] {bucket} = {_toml(table)}: [{S3_OPTIONS}] holds one table per "
                            f"bucket: write [{S3_OPTIONS}.<bucket>] with {bucket} = {_toml(table)} under it")
        for name, value in table.items():
            where = f"{path}: [{S3_OPTIONS}.{bucket}] {name}"
            if name not in keys:
                raise UserError(_unknown(f"{where} is no S3 option", name, list(keys)))
            keys[name].read(value, where, workspace)
    return tables


def _unknown(said: str, name: str, known: list[str]) -> str:
    """`said`, and the nearest known key (`max-jobs` is max_jobs), else every known key."""
    spelt = {k.replace("-", "_").lower(): k for k in known}
    written = name.replace("-", "_").lower()
    near = written if written in spelt else next(iter(difflib.get_close_matches(written, list(spelt), n=1)), None)
    if near:
        return f"{said}: did you mean {spelt[near]!r}?"
    return f"{said}: the keys are {', '.join(known)} (docs/reference.md, orchestrate.toml)"


def _toml(value) -> str:
    """A value as orchestrate.toml writes it."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (str, int, float, list)):
        return json.dumps(value, ensure_ascii=False, default=str)
    return str(value)


def _kind_of(value) -> str:
    kinds = [(bool, "true or false"), (int, "a whole number"), (float, "a number"), (str, "text"), (list, "a list"),
             (dict, "a table")]
    if isinstance(value, list) and any(not isinstance(item, str) for item in value):
        return f"a list holding {_kind_of(next(item for item in value if not isinstance(item, str)))}"
    return next((name for kind, name in kinds if isinstance(value, kind)), "a date")


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


# An override every architecture takes (tests/test_reference.py checks it on each), for the help and errors.
VARIANT_EXAMPLE = "pytorch_from=source"


def parse_variant_overrides(items: list[str]) -> dict[str, str]:
    overrides = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UserError(f"--variant '{item}' is not KEY=VALUE: write e.g. --variant {VARIANT_EXAMPLE}")
        overrides[key.strip()] = value.strip()
    return overrides


# What a command's parser may leave out (`list` takes no --arch, `serve` no --variant): options_from_args reads
# every argument by name, so a misspelt one is an AttributeError, not a silent default.
ARGUMENT_DEFAULTS = {"arch": None, "variant": [], "source_channel": None, "no_source_channels": False,
                     "quiet": False, "source_cache": None, "cache_channel": [], "keep_going": False, "dry_run": False,
                     "jobs": None, "compiler_launcher": None, "no_tests": False, "offline": False}
ARCH_HELP = (f"GPU architecture, e.g. gfx1151, or several: gfx942,gfx950 (default: orchestrate.toml's arch, else "
             f"${ARCH_ENV}, else detected)")


def _arch_sources(flag: str | None, config: dict, workspace: Path) -> list[tuple[str | None, str]]:
    written = ",".join(w) if isinstance(w := config.get("arch"), list) else w  # orchestrate.toml's: a list
    return [(flag, ""), (written, f"{workspace / CONFIG_FILE}: arch"), (os.environ.get(ARCH_ENV), f"${ARCH_ENV}")]


def archs_from(flag: str | None, config: dict, workspace: Path = Path()) -> list[str]:
    """Every architecture a command is given (arch_from's source, split at commas); [] leaves it to detection."""
    return first_arch_list(_arch_sources(flag, config, workspace))


def arch_from(flag: str | None, config: dict) -> str | None:
    """The architecture a command is given: --arch, else orchestrate.toml's arch, else $ORCHESTRATE_ARCH (the first,
    where several are given: `pins` reads one architecture's pins); None leaves it to detection
    (architectures.choose_arch). With archs_from, the one reader of ORCHESTRATE_ARCH for every command whose --arch
    help names it (ARCH_HELP)."""
    return next(iter(archs_from(flag, config)), None)


def arch_given_by(flag: str | None, config: dict, workspace: Path) -> str:
    """Where arch_from's architecture is written (the file and key, or the variable), so that an unknown one is
    named there; "" for --arch, which the error names itself."""
    return next((where for value, where in _arch_sources(flag, config, workspace) if value), "")


def options_from_args(args: argparse.Namespace) -> Options:
    args = argparse.Namespace(**{**ARGUMENT_DEFAULTS, **vars(args)})
    workspace = (args.workspace or find_workspace(Path.cwd())).resolve()
    config = load_config(workspace)
    channel = args.channel or Path(config.get("channel", DEFAULT_CHANNEL)).expanduser()
    channel = channel if channel.is_absolute() else (Path.cwd() if args.channel else workspace) / channel
    if args.no_source_channels:
        sources = []
    else:
        written = args.source_channel or config.get("source_channels", list(DEFAULT_SOURCE_CHANNELS))
        sources = [anchored(c, Path.cwd() if args.source_channel else workspace) for c in written]
    return Options(
        workspace=workspace,
        channel=channel.resolve(),
        arch=next(iter(archs := archs_from(args.arch, config, workspace)), None),
        archs=archs,
        arch_given_by=arch_given_by(args.arch, config, workspace),
        source_channels=list(sources),
        cache_channels=list(args.cache_channel or [anchored(c, workspace) for c in config.get("cache_channels", [])]),
        variant_overrides=parse_variant_overrides(args.variant),
        keep_going=args.keep_going,
        dry_run=args.dry_run,
        quiet=args.quiet,
        max_jobs=args.jobs or config.get("max_jobs"),
        compiler_launcher=args.compiler_launcher or config.get("compiler_launcher", ""),
        run_tests=not args.no_tests,
        source_cache=(args.source_cache.resolve() if args.source_cache else _source_cache(config, workspace)),
        offline=args.offline,
        package_format=config.get("package_format", DEFAULT_PACKAGE_FORMAT),
        compression_threads=config.get("compression_threads"),
    )


def _source_cache(config: dict, workspace: Path) -> Path | None:
    if not config.get("source_cache"):
        return None
    path = Path(config["source_cache"]).expanduser()
    return path if path.is_absolute() else workspace / path
