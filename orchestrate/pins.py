"""`orchestrate pins`: each pin beside the newest upstream release, and whether coupled pins still agree.

Releases come from PyPI's JSON API and from `git ls-remote --tags`, both at addresses a user (or a test)
can point elsewhere: --pypi-url / $ORCHESTRATE_PYPI_URL and --git-base / $ORCHESTRATE_GIT_BASE. Every
lookup runs in parallel with a short timeout. What each component is upstream is declared once, in
variants/upstreams.yaml; the pinned versions are read from variants/shared.yaml.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

from . import package_index
from . import prebuilt as amd
from . import web
from .architectures import ArchitectureTable
from .errors import UserError
from .options import ARCH_ENV, Options, arch_from, existing_folder, find_workspace, load_config, seconds, workspace_source_cache
from .release_files import ReadError, World, requirements_on
from .sources import ZERO_SHA256, Source, SourceCache
from .ui import Reporter
from .yaml_files import read_mapping
from .web import DEFAULT_PYPI_URL, PYPI_URL_ENV, Unreachable
from .upstreams import ADVISORY, Component, Coupling, Pins, ReleaseSource, Upstreams, parse_version, read_pins

GIT_BASE_ENV = "ORCHESTRATE_GIT_BASE"
DEFAULT_GIT_BASE = "https://github.com"
DEFAULT_TIMEOUT = 10.0
# States of a component row, as a user reads them.
CURRENT, NEWER, AHEAD, NOT_COMPARED, ERROR = "current", "newer available", "ahead of releases", "not compared", "error"
FOLLOWS = "moves with"  # a pin another component's own files set (flydsl: aiter's setup.py): no move of its own
# States of a coupling row.
OK, BROKEN, DIFFERS, UNKNOWN, OFFLINE = "ok", "BROKEN", "differs", "unknown", "checked offline"
JSON_METADATA = "PyPI JSON"
VLLM_ROCM_SET = "vllm_rocm_set"  # variants/upstreams.yaml: what the pinned vLLM builds on ROCm, beside ours


@dataclass
class Release:
    label: str  # what upstream calls it: a PyPI version or a tag name
    version: Version
    pre: bool
    commit: str = ""  # for git tags


@dataclass
class Lookup:
    """What one release source answered."""

    source: ReleaseSource
    releases: list[Release] = field(default_factory=list)
    latest_requires: tuple[list[str], str] | None = None  # PyPI: (requires_dist, where from) of the current version
    latest_version: str = ""
    pinned_requires: tuple[list[str], str] | None = None  # the same for the pinned version, when served
    requires_error: str = ""  # why the pinned version's wheel could not be read, where it could not
    error: str = ""
    unreachable: bool = False


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workspace", type=existing_folder, metavar="DIR",
                        help="folder with recipes/ and variants/ (default: found from here)")
    parser.add_argument("--arch", help=f"architecture whose rendered sources to show (default: orchestrate.toml's arch, "
                                       f"else ${ARCH_ENV}, else the table's first; only rocm-sdk's tarball differs between "
                                       "architectures); with --lock, the only one whose files are downloaded where the index gives no sha256")
    parser.add_argument("--pypi-url", help=f"PyPI JSON API base (default: ${PYPI_URL_ENV}, else {DEFAULT_PYPI_URL})")
    parser.add_argument("--git-base", help=f"where OWNER/REPO git repositories are (URL or folder; default: "
                                           f"${GIT_BASE_ENV}, else {DEFAULT_GIT_BASE})")
    parser.add_argument("--timeout", type=seconds, default=DEFAULT_TIMEOUT, help="seconds per lookup (default: %(default)s)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--quiet", "-q", action="store_true", help="plain lines")
    parser.add_argument("--lock", action="store_true",
                        help=f"pin AMD's prebuilt artifacts (variants/{amd.PREBUILT_FILE}) by the sha256 their index publishes, "
                             f"else by one download into the source cache, into variants/{amd.LOCK_FILE} (commit it)")


def run(args, reporter: Reporter) -> int:
    workspace = (args.workspace or find_workspace(Path.cwd())).resolve()
    if args.lock:
        return 1 if lock_workspace(workspace, reporter, args.timeout, archs={args.arch} if args.arch else None) else 0
    pypi_url = web.pypi_base(args.pypi_url)
    git_base = (args.git_base or os.environ.get(GIT_BASE_ENV) or DEFAULT_GIT_BASE).rstrip("/")
    if args.timeout <= 0:
        raise UserError(f"--timeout {args.timeout} must be a positive number of seconds")
    upstreams = Upstreams.load(workspace / "variants")
    pins = read_pins(workspace, upstreams, arch_from(args.arch, load_config(workspace)))
    amd.index_to_read("")  # a $ORCHESTRATE_AMD_INDEX that is no URL stops here, before the lookups
    lookups = look_up(upstreams, pins, pypi_url, git_base, args.timeout)
    if lookups and all(lk.unreachable for lk in lookups.values()):
        raise UserError(f"cannot reach PyPI or GitHub ({pypi_url}, {git_base}): check the network or a proxy")
    report = make_report(upstreams, pins, lookups, pypi_url, git_base)
    world = World(pypi_url, git_base, None, "", args.timeout)
    try:
        report["vllm_rocm_set"] = vllm_rocm_set(workspace, upstreams, pins, world)
    finally:
        shutil.rmtree(world.cache, ignore_errors=True)  # made with the World, read or not
    note_vllm_differences(report)
    report["amd_index"] = amd_index_rows(workspace, pins, args.timeout)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        show(report, reporter)
    return 0 if report["ok"] else 1


def lock_workspace(workspace: Path, reporter: Reporter, timeout: float = package_index.DEFAULT_TIMEOUT,
                   source_cache: Path | None = None, archs: set[str] | None = None) -> list[str]:
    """`pins --lock`: read the index, write the lock, say what could not be locked (one line each); a file listed
    without a hash (of `archs`, else any) is downloaded once into the source cache."""
    variants = workspace / "variants"
    prebuilt = amd.Prebuilt.load(variants)
    if prebuilt is None:
        raise UserError(f"{variants / amd.PREBUILT_FILE} does not exist: nothing to lock (it declares AMD's artifacts)")
    table = ArchitectureTable.load(variants)
    shared = read_mapping(variants / "shared.yaml")
    cache = SourceCache(source_cache or workspace_source_cache(workspace))
    # what the declarations' templates may name: the pins, and each architecture's own keys (torch_device_family)
    result = amd.lock(prebuilt, table.names(), lambda arch: {**shared, **table.get(arch).variant_keys()}, timeout,
                      download=amd.downloader(cache, timeout, reporter.info), download_archs=archs)
    path = amd.write_lock(prebuilt, result, table.names())
    pinned = [x for e in result.entries.values() for x in (e.values() if isinstance(e, dict) else [e]) if isinstance(x, amd.Locked)]
    absent = {key: [arch for arch, x in e.items() if isinstance(x, amd.Absent)]
              for key, e in result.entries.items() if isinstance(e, dict)}
    count, computed = sum(len(missing) for missing in absent.values()), sum(amd.COMPUTED in x.evidence for x in pinned)
    reporter.line(f"wrote {path}: {len(pinned)} file(s) pinned by sha256 from {prebuilt.index}" + (
        f" ({computed} computed by download)" if computed else "") + (f", {count} absent" if count else "") + "; commit it")
    for key, missing in ((key, missing) for key, missing in absent.items() if missing):
        artifact = prebuilt.artifacts[key]
        reporter.line(f"absent: the index has no {artifact.project.replace('{gpu_arch}', '<gfx>')} for {', '.join(missing)}"
                      f" (those architectures {'build PyTorch from source' if artifact.pytorch else 'cannot use this artifact'})")
    if result.deferred:
        reporter.line(f"not locked: {len(result.deferred)} file(s) of other architectures (no sha256 on the index: "
                      f"`{amd.LOCK_COMMAND}` downloads them all)")
    for problem in result.problems:
        reporter.error(problem)
    return result.problems


def lock_first(options: Options, plan, reporter: Reporter, archs: set[str] | None = None) -> bool:
    """build-all or fetch on a networked run with an incomplete lock: lock first, saying so, downloading only the
    files of `archs` (else the plan's) the index gives no hash for. True when it locked."""
    if (prebuilt := plan.choice.prebuilt if plan.choice else None) is None:
        return False
    reporter.line(f"locking AMD artifacts from {prebuilt.index}: variants/{amd.LOCK_FILE} does not pin every file "
                  "this build downloads")
    try:
        lock_workspace(options.workspace, reporter, source_cache=options.source_cache, archs=archs or {plan.arch.name})
    except UserError as exc:
        raise UserError(f"{exc} (or run `{amd.LOCK_COMMAND}` where the index can be reached and commit "
                        f"variants/{amd.LOCK_FILE})") from None
    return True


def amd_index_rows(workspace: Path, pins: Pins, timeout: float) -> list[dict]:
    """AMD's newest stable ROCm (the `rocm` project) and torch, for the line we pin and overall."""
    prebuilt = amd.Prebuilt.load(workspace / "variants")
    if prebuilt is None:
        return []
    rocm_pin = pins.versions.get("rocm_sdk_version", "")
    # AMD's index serves the prebuilt path's torch; the source path's pin is another release
    torch_pin = pins.versions.get("prebuilt_pytorch_version") or pins.versions.get("pytorch_version", "")
    index = amd.index_to_read(prebuilt.index)
    rows = []
    for label, project, pinned, line in (
            ("ROCm (rocm)", "rocm", rocm_pin, None),
            (f"torch {_series(torch_pin)}.*+rocm{_series(rocm_pin)}.*", "torch", f"{torch_pin}+rocm{rocm_pin}",
             (_series(torch_pin), _series(rocm_pin))),
            ("torch (any)", "torch", torch_pin, ())):
        row = {"what": label, "pinned": pinned, "newest": None, "error": ""}
        try:
            files = package_index.read_project(index, project, timeout)
        except Unreachable as exc:
            row["error"] = f"cannot reach {index} ({exc})"
        except LookupError as exc:
            row["error"] = str(exc)
        else:
            versions = [v for v in package_index.versions_of(files or [], project) if not v.is_prerelease and not v.is_devrelease]
            if line:
                versions = [v for v in versions if v.public.startswith(line[0] + ".")
                            and (v.local or "").startswith(f"rocm{line[1]}.")]
            row["newest"] = str(versions[-1]) if versions else None
            if files is None:
                row["error"] = f"{index} has no project {project}"
        rows.append(row)
    return rows


def vllm_rocm_set(workspace: Path, upstreams: Upstreams, pins: Pins, world: World) -> dict:
    """What the pinned vLLM builds and tests on ROCm (the ARGs of upstreams.yaml vllm_rocm_set.file in its PyPI
    sdist) beside our pins, with upstreams.yaml's reason where they differ; that reason is also a note of the
    component row it names. Empty where upstreams.yaml declares no set."""
    spec = read_mapping(upstreams.path).get(VLLM_ROCM_SET) or {}
    if not spec:
        return {}
    label = pins.version(upstreams.components["vllm"].version_key)
    found = {"file": spec["file"], "vllm": label, "source": "", "error": "", "rows": []}
    try:
        read = world.sdist_file(upstreams.components["vllm"].pypi(), label, spec["file"])
    except ReadError as exc:
        found["error"] = str(exc)
        return found
    found["source"] = read.source
    args = dict(re.findall(r'^ARG (\w+)="?([^"\s]*)"?', str(read.value), re.M)[::-1])  # the first ARG of a name
    table = ArchitectureTable.load(workspace / "variants")
    for item in spec["args"]:
        theirs, ours = args.get(item["arg"]), _ours(item["ours"], pins, table)
        same = theirs is not None and ours is not None and (
            theirs == ours or (re.fullmatch(r"[0-9a-f]{7,40}", theirs) is not None and ours.startswith(theirs))
            or set(theirs.split(";")) == set(ours.split(";")))
        found["rows"].append({"arg": item["arg"], "vllm": theirs, "ours": ours, "component": item.get("component"),
                              "state": "same" if same else "differs" if theirs is not None else "not in the file",
                              "why": "" if same else " ".join(str(item.get("why", "")).split())})
    return found


def note_vllm_differences(report: dict) -> None:
    """Each component row that the vLLM set names says where vLLM's file differs from our pin, and why."""
    vllm_set = report.get("vllm_rocm_set") or {}
    for item in vllm_set.get("rows", []):
        row = next((r for r in report["components"] if r["component"] == item["component"]), None)
        if row is not None and item["state"] == "differs":
            row["notes"].append(f"vLLM {vllm_set['vllm']}'s {vllm_set['file']} has {item['arg']}={item['vllm']}: "
                                f"{item['why']}")


def _ours(spec, pins: Pins, table: ArchitectureTable) -> str | None:
    if isinstance(spec, str):
        return spec.format(**pins.versions)
    if "source" in spec:
        return pins.git_rev(spec["source"], spec.get("git"))
    return ";".join(n for n in table.names() if table.get(n).variant_keys().get("aiter_support") == [spec["aiter"]])


def _series(version: str) -> str:
    return ".".join(version.split(".")[:2])


def look_up(upstreams: Upstreams, pins: Pins, pypi_url: str, git_base: str, timeout: float) -> dict[tuple, Lookup]:
    """Every release source of every component, queried in parallel; keyed by (component, source label)."""
    world = World(pypi_url, git_base, None, "", timeout)
    jobs = {}
    try:
        with ThreadPoolExecutor(max_workers=8) as pool:
            for component in upstreams.components.values():
                pinned = pins.version(component.version_key)
                for source in component.releases:
                    if source.kind == "pypi":
                        job = pool.submit(_pypi, world, source, pinned)
                    else:
                        job = pool.submit(_git_tags, world, source)
                    jobs[(component.name, source.label)] = job
            return {key: job.result() for key, job in jobs.items()}
    finally:
        shutil.rmtree(world.cache, ignore_errors=True)


def _pypi(world: World, source: ReleaseSource, pinned: str) -> Lookup:
    lookup = Lookup(source)
    try:
        data = world.project(source.name)
        releases = world.releases(source.name, include_pre=True)
    except ReadError as exc:
        lookup.error, lookup.unreachable = str(exc), exc.unreachable
        return lookup
    lookup.releases = [Release(label, version, version.is_prerelease) for version, label in releases]
    info = data.get("info") or {}
    lookup.latest_version = str(info.get("version") or "")
    pinned_label = next((label for label in data.get("releases") or {} if parse_version(label) == parse_version(pinned)),
                        pinned)
    lookup.latest_requires, latest_error = _requires(world, source.name, lookup.latest_version)
    if lookup.latest_requires is None and not latest_error:  # no wheel to read: the JSON API's, labeled as such
        lookup.latest_requires = (list(info.get("requires_dist") or []), JSON_METADATA)
    if pinned_label == lookup.latest_version:
        lookup.pinned_requires, lookup.requires_error = lookup.latest_requires, latest_error
    else:
        lookup.pinned_requires, lookup.requires_error = _requires(world, source.name, pinned_label)
    if lookup.pinned_requires is None and not lookup.requires_error:
        try:  # the pinned version's own JSON; not every PyPI mirror serves per-version JSON
            version_info = web.get_json(f"{world.pypi_url}/{source.name}/{pinned_label}/json", world.timeout).get("info") or {}
            lookup.pinned_requires = (list(version_info.get("requires_dist") or []), JSON_METADATA)
        except (Unreachable, LookupError):
            lookup.pinned_requires = None
    return lookup


def _requires(world: World, name: str, label: str) -> tuple[tuple[list[str], str] | None, str]:
    """((Requires-Dist, where) of a Linux x86_64 wheel of the release, from its own METADATA, or None where
    the release has no wheel; the read error where its wheel cannot be read). The JSON API's `requires_dist`
    is one answer per release, and an index gets it wrong (PyPI answers torch==2.13.0 for vLLM 0.33.0, whose
    wheel METADATA, sdist and CMakeLists.txt say torch==2.14.0)."""
    try:
        read = world.wheel_requirements(name, label)
    except ReadError as exc:
        return None, str(exc)
    return (None if read is None else (list(read.value), f"{read.file} metadata")), ""


def _git_tags(world: World, source: ReleaseSource) -> Lookup:
    lookup = Lookup(source)
    try:
        tags = world.tags(source.name)
    except ReadError as exc:
        lookup.error, lookup.unreachable = str(exc), exc.unreachable
        return lookup
    for name, commit in tags.items():
        parsed = source.version_of_tag(name)
        if parsed:
            lookup.releases.append(Release(name, parsed[0], parsed[1], commit))
    return lookup


def newest(releases: list[Release], include_pre: bool) -> Release | None:
    candidates = [r for r in releases if include_pre or not r.pre]
    return max(candidates, key=lambda r: r.version, default=None)


def component_row(component: Component, pins: Pins, lookups: dict[tuple, Lookup]) -> dict:
    pinned = pins.version(component.version_key)
    pinned_version = component.parse_pin(pinned)
    source = pins.primary_source(component.recipe)
    mine = [lookups[(component.name, s.label)] for s in component.releases]
    errors = [lk.error for lk in mine if lk.error]
    found = [r for lk in mine for r in lk.releases]
    best = newest(found, include_pre=bool(pinned_version and pinned_version.is_prerelease))
    best_source = next((lk.source.label for lk in mine if best in lk.releases), "")
    row = {"component": component.name, "recipe": component.recipe, "version_key": component.version_key,
           "pinned": pinned, "source": _source_info(source), "releases": [s.label for s in component.releases],
           "newest": best.label if best else None, "newest_from": best_source, "state": "", "notes": [],
           "errors": errors}
    if errors:
        row["state"] = ERROR
    elif not component.compare:
        row["state"] = NOT_COMPARED
        row["notes"].append(component.note)
    elif best is None or pinned_version is None:
        row["state"] = ERROR
        row["errors"].append("no release found" if best is None else f"pinned version {pinned} is not a version")
    elif best.version > pinned_version:
        row["state"] = NEWER
    elif best.version == pinned_version:
        row["state"] = CURRENT
    else:
        row["state"] = AHEAD
        row["notes"].append(f"{pinned} is newer than every release ({best.label}): an unreleased commit")
    # A tag that names the pinned version must be the commit the recipe builds.
    if source and source.kind == "git" and pinned_version is not None:
        for release in found:
            if release.commit and release.version == pinned_version and not release.pre:
                if not source.pin.startswith(release.commit) and not release.commit.startswith(source.pin):
                    row["errors"].append(f"tag {release.label} is {release.commit[:12]}, the recipe builds {source.pin[:12]}")
                    row["state"] = ERROR
                else:
                    row["notes"].append(f"the recipe's commit is tag {release.label}")
    return row


def _source_info(source: Source | None) -> dict | None:
    if source is None:
        return None
    if source.kind == "git":
        return {"git": source.location, "rev": source.pin}
    if source.kind == "url":
        if source.pin in ("", ZERO_SHA256):  # the placeholder an artifact the lock does not pin renders to
            return {"url": source.location, "sha256": None, "locked": False}
        return {"url": source.location, "sha256": source.pin}
    return {"path": source.location}


def coupling_row(coupling: Coupling, upstreams: Upstreams, pins: Pins, lookups: dict[tuple, Lookup]) -> dict:
    first, second = (upstreams.components[name] for name in coupling.pins)
    pinned = {name: pins.version(upstreams.components[name].version_key) for name in coupling.pins}
    row = {"pins": list(coupling.pins), "rule": coupling.rule, "why": coupling.why, "pinned": pinned,
           "state": OFFLINE if coupling.checks else UNKNOWN, "detail": "", "newest_needs": "",
           "checks": [f"{c.where} {c.wants}" for c in coupling.checks]}
    if coupling.checks:
        row["detail"] = "tests/test_upstream_contract.py reads " + "; ".join(row["checks"])
    else:
        row["detail"] = "no machine-readable source: keep them together by hand"
    if not coupling.requires:
        return row
    lookup = lookups[(first.name, f"pypi:{first.pypi()}")]
    if lookup.error:
        row["state"], row["detail"] = "error", lookup.error
        return row
    dependency = second.pypi()
    if lookup.latest_version and lookup.latest_version != pinned[first.name] and lookup.latest_requires:
        requires, where = lookup.latest_requires
        wanted = _requirements_on(requires, dependency)
        row["newest_needs"] = (f"{first.pypi()} {lookup.latest_version} needs "
                               + (", ".join(wanted) if wanted else f"no particular {dependency}") + f" ({where})")
    if lookup.pinned_requires is None:
        row["state"] = UNKNOWN
        row["detail"] = lookup.requires_error or f"{lookup.source.label} served no metadata for {pinned[first.name]}"
        return row
    requires, where = lookup.pinned_requires
    wanted = _requirements_on(requires, dependency)
    their_pin = second.parse_pin(pinned[second.name])
    needs = (f"{first.pypi()} {pinned[first.name]} needs {', '.join(wanted) if wanted else f'no particular {dependency}'}"
             f" ({where})")
    if any(_admits(spec, their_pin) for spec in wanted) or not wanted:
        row["state"], row["detail"] = OK, needs
    elif coupling.requires == ADVISORY:  # what PyPI's builds need, not ours: shown, not enforced
        row["state"], row["detail"] = DIFFERS, f"{needs}, pinned {pinned[second.name]} (advisory)"
    else:
        row["state"], row["detail"] = BROKEN, f"{needs}, pinned {pinned[second.name]}"
    return row


def _requirements_on(requires_dist: list[str], name: str) -> list[str]:
    """The version specifiers a requires_dist list puts on one project, as text (markers dropped)."""
    return [f"{r.name}{r.specifier}" if str(r.specifier) else r.name for r in requirements_on(requires_dist, name)]


def _admits(spec: str, version: Version | None) -> bool:
    if version is None:
        return False
    requirement = Requirement(spec)
    return not str(requirement.specifier) or requirement.specifier.contains(version, prereleases=True)


def make_report(upstreams: Upstreams, pins: Pins, lookups: dict[tuple, Lookup], pypi_url: str, git_base: str) -> dict:
    components = [component_row(c, pins, lookups) for c in upstreams.components.values()]
    for row in components:  # the reading `pins --bump` has: a newer release of a follower is no move on its own
        leader = followers(upstreams).get(row["component"])
        if leader and row["state"] == NEWER:
            row["state"] = f"{FOLLOWS} {leader[0]}"
            row["notes"].append(f"{leader[1]} pins it; {row['newest']} comes only with a {leader[0]} release that pins it: "
                                "`orchestrate pins --bump` says whether one does")
    couplings = [coupling_row(c, upstreams, pins, lookups) for c in upstreams.couplings]
    ok = not any(r["state"] == ERROR for r in components) and not any(r["state"] in (BROKEN, "error") for r in couplings)
    return {"arch": pins.arch, "pypi_url": pypi_url, "git_base": git_base, "ok": ok,
            "components": components, "couplings": couplings}


def followers(upstreams: Upstreams) -> dict[str, tuple[str, str]]:
    """component -> (the component whose own file pins its version exactly, that file): it moves with that one."""
    return {c.pins[1]: (c.pins[0], f"{check.checkout}'s {check.file}") for c in upstreams.couplings
            if c.rule == "exact" for check in c.checks if check.file
            and check.expect.get("version") == upstreams.components[c.pins[1]].version_key}


def show(report: dict, reporter: Reporter) -> None:
    rows = []
    vllm_set = report.get("vllm_rocm_set") or {}
    for row in report["components"]:
        state = row["state"] if not row["errors"] else f"{row['state']}: {'; '.join(row['errors'])}"
        notes = "; ".join(n for n in row["notes"] if n)
        rows.append([row["component"], row["pinned"], _source_text(row["source"]), row["newest"] or "-",
                     row["newest_from"] or ", ".join(row["releases"]), state + (f" ({notes})" if notes else "")])
    reporter.table(f"Pins (variants/shared.yaml; sources as rendered for {report['arch']})",
                   ["component", "pinned", "source", "newest", "from", "state"], rows)
    rows = []
    for row in report["couplings"]:
        pinned = " / ".join(row["pinned"][name] for name in row["pins"])
        detail = row["detail"] + (f"; {row['newest_needs']}" if row["newest_needs"] else "")
        rows.append([row["pins"][0] + " <-> " + row["pins"][1], row["rule"], pinned, row["state"], detail])
    reporter.table("Couplings (pins that move together)", ["pins", "rule", "pinned", "state", "upstream says"], rows)
    if vllm_set:
        title = f"vLLM {vllm_set['vllm']}'s ROCm set ({vllm_set['source'] or vllm_set['file']}) beside ours"
        if vllm_set["error"]:
            reporter.line(f"{title}: not read ({vllm_set['error']})")
        else:
            reporter.table(title, ["ARG", "vLLM", "ours", "state", "why ours differs"],
                           [[r["arg"], r["vllm"] or "-", r["ours"] or "-", r["state"], r["why"]] for r in vllm_set["rows"]])
    if report.get("amd_index"):
        rows = [[r["what"], r["pinned"], r["newest"] or "-", r["error"] or ("current" if r["newest"] == r["pinned"] else
                                                                          "newer available" if r["newest"] else "none found")]
                for r in report["amd_index"]]
        reporter.table("AMD's index (variants/prebuilt.yaml)", ["release", "pinned", "newest stable", "state"], rows)
    newer = [r["component"] for r in report["components"] if r["state"] == NEWER]
    broken = [" <-> ".join(r["pins"]) for r in report["couplings"] if r["state"] == BROKEN]
    failed = [r["component"] for r in report["components"] if r["state"] == ERROR]
    summary = [f"newer upstream: {', '.join(newer)}" if newer else "every compared pin is current"]
    if broken:
        summary.append(f"broken couplings: {', '.join(broken)}")
    if failed:
        summary.append(f"lookups failed: {', '.join(failed)}")
    reporter.paragraph("; ".join(summary))


def _source_text(source: dict | None) -> str:
    if not source:
        return "-"
    if "git" in source:
        repo = source["git"].removesuffix(".git").rstrip("/").split("/")
        return f"{'/'.join(repo[-2:])}@{source['rev'][:8]}"
    if "url" in source:
        if not source["sha256"]:
            return f"{source['url']} (not locked: `{amd.LOCK_COMMAND}`)"
        return f"{source['url'].rsplit('/', 1)[-1]} sha256:{source['sha256'][:8]}"
    return source.get("path") or "-"
