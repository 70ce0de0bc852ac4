"""AMD's prebuilt artifacts: which ones the prebuilt path downloads (variants/prebuilt.yaml), the sha256 of
each (variants/prebuilt-lock.yaml, written by `orchestrate pins --lock` from the index's own hashes, or from one
download where it publishes none), and
what that means for one architecture: the `KEY_url` / `KEY_sha256` variant keys recipes read, and whether
PyTorch comes from AMD's wheels or from source (`pytorch_from`), with the reason.

Nothing here guesses a checksum: an artifact the lock does not pin gets an empty sha256, and the runner
refuses to download it (runner.check_sources_pinned).
"""
from __future__ import annotations

import datetime
import hashlib
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from packaging.version import Version

from . import glibc, web
from .architectures import Architecture
from .errors import UserError, writing
from .grammar import NotGrammar, checked_file, checked_url
from .sources import SourceCache, seed_download
from .yaml_files import read_mapping
from .package_index import DEFAULT_TIMEOUT, IndexFile, file_matches, pick_file, project_page, read_project, versions_of, with_slash

PREBUILT_FILE = "prebuilt.yaml"
LOCK_FILE = "prebuilt-lock.yaml"
LOCK_COMMAND = "orchestrate pins --lock"
PYTORCH_FROM = "pytorch_from"
PREBUILT, SOURCE = "prebuilt", "source"
MI100_FA_FLAG = "aotriton_mi100_fa"
URL_SUFFIX, SHA256_SUFFIX, GLIBC_SUFFIX = "_url", "_sha256", "_glibc"
SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")
COMPUTED = "computed from download"  # a lock entry's evidence where the index gave no hash
# Where a plan row says its package comes from.
ORIGIN_PREBUILT_WHEEL, ORIGIN_PREBUILT_ARCHIVE = "prebuilt wheel", "prebuilt archive"
ORIGIN_SOURCE, ORIGIN_METAPACKAGE, ORIGIN_PYPI_WHEEL = "source build", "metapackage", "PyPI wheel"
# A recipe's `extra.origin` (recipes/pypi declares `pypi`: every package it makes is a PyPI wheel repackaged)
DECLARED_ORIGINS = {"prebuilt": None, "source": ORIGIN_SOURCE, "metapackage": ORIGIN_METAPACKAGE, "pypi": ORIGIN_PYPI_WHEEL}


@dataclass(frozen=True)
class Artifact:
    """One file set AMD publishes, as variants/prebuilt.yaml declares it."""

    key: str
    project: str  # may contain {gpu_arch}
    version: str  # may contain {shared.yaml key}
    per_arch: bool = False
    python: bool = False  # a cpXY-specific wheel (torch), else py3-none
    pytorch: bool = False  # only the prebuilt PyTorch path needs it: its absence sends the arch to source
    when: str = ""  # a variant key: the artifact exists only for architectures where that key is not empty

    def applies(self, values: dict[str, Any]) -> bool:
        return not self.when or bool(_first(values.get(self.when)))

    def project_for(self, values: dict[str, Any], arch: str) -> str:
        return _fill(self.project, values, arch, self.key)

    def version_for(self, values: dict[str, Any], arch: str) -> str:
        return _fill(self.version, values, arch, self.key)


@dataclass(frozen=True)
class Locked:
    file: str
    url: str
    sha256: str
    evidence: str = ""
    size: int | None = None  # bytes, where the lock computed the sha256 by downloading the file


@dataclass(frozen=True)
class Absent:
    reason: str


@dataclass
class PytorchChoice:
    value: str  # PREBUILT or SOURCE
    reason: str = ""  # why, where it is not the default


@dataclass
class Prebuilt:
    """The declarations and the lock, read together."""

    index: str
    artifacts: dict[str, Artifact]
    path: Path
    lock_path: Path
    lock_index: str = ""
    locked: dict[str, Any] = field(default_factory=dict)  # key -> Locked | Absent | {arch: Locked | Absent}

    @classmethod
    def load(cls, variants_dir: Path) -> "Prebuilt | None":
        """None for a workspace that declares no prebuilt artifacts (it builds everything from source)."""
        path = Path(variants_dir) / PREBUILT_FILE
        if not path.is_file():
            return None
        data = read_mapping(path)
        index = str(data.get("index") or "")
        if not index.startswith(("http://", "https://")) or not isinstance(data.get("artifacts"), dict):
            raise UserError(f"{path}: needs `index: https://…/` and an `artifacts:` mapping: fix the file")
        artifacts = {}
        for key, spec in data["artifacts"].items():
            if not isinstance(spec, dict) or not spec.get("project") or not spec.get("version"):
                raise UserError(f"{path}: artifact {key} needs `project:` and `version:`: fix the file")
            artifacts[key] = Artifact(str(key), str(spec["project"]), str(spec["version"]), bool(spec.get("per_arch")),
                                      bool(spec.get("python")), bool(spec.get("pytorch")), str(spec.get("when") or ""))
        found = cls(with_slash(index), artifacts, path, Path(variants_dir) / LOCK_FILE)
        found._load_lock()
        return found

    def _load_lock(self) -> None:
        if not self.lock_path.is_file():
            return
        data = read_mapping(self.lock_path)
        self.lock_index = with_slash(str(data.get("index") or ""))
        for key, entry in (data.get("artifacts") or {}).items():
            artifact = self.artifacts.get(key)
            if artifact is None:
                continue  # an artifact no longer declared: ignored, the next lock drops it
            if artifact.per_arch:
                self.locked[key] = {str(arch): _entry(self.lock_path, key, e) for arch, e in (entry or {}).items()}
            else:
                self.locked[key] = _entry(self.lock_path, key, entry)

    def entry(self, artifact: Artifact, values: dict[str, Any], arch: str) -> "Locked | Absent | None":
        """What the lock says for this artifact on this architecture; None where it pins nothing current
        (no entry, another index, or a file of another project or version than the pins now name)."""
        if self.lock_index != self.index:
            return None
        found = self.locked.get(artifact.key)
        if artifact.per_arch:
            found = (found or {}).get(arch)
        if isinstance(found, Locked) and not file_matches(found.file, artifact.project_for(values, arch),
                                                          artifact.version_for(values, arch)):
            return None
        if isinstance(found, Absent) and not artifact.per_arch:
            return None
        return found

    def project_page(self, artifact: Artifact, values: dict[str, Any], arch: str) -> str:
        return project_page(self.index, artifact.project_for(values, arch))

    def variant_keys(self, values: dict[str, Any], arch: str) -> dict[str, str]:
        """`KEY_url` and `KEY_sha256` for every declared artifact: the locked file, or the project page and
        "" where the lock pins none (the runner then refuses to download it); and `KEY_glibc`, the glibc its
        package requires at run time: the locked file's manylinux tag, else the stack's bound (glibc.py)."""
        keys = {}
        for artifact in self.applicable(values):
            found = self.entry(artifact, values, arch)
            if isinstance(found, Locked):
                keys[artifact.key + URL_SUFFIX], keys[artifact.key + SHA256_SUFFIX] = found.url, found.sha256
            else:
                keys[artifact.key + URL_SUFFIX] = self.project_page(artifact, values, arch)
                keys[artifact.key + SHA256_SUFFIX] = ""
            floor = glibc.floor_or_bound(found.file if isinstance(found, Locked) else "", values)
            if not floor:
                raise UserError(f"{self.path}: {artifact.key} carries no manylinux tag and variants/shared.yaml sets no "
                                f"{glibc.STACK_BOUND_KEY}: set it to the glibc AMD builds against")
            keys[artifact.key + GLIBC_SUFFIX] = floor
        return keys

    def applicable(self, values: dict[str, Any]) -> list[Artifact]:
        """The declared artifacts this architecture has (`when:` names a variant key that must not be empty)."""
        return [a for a in self.artifacts.values() if a.applies(values)]

    def absent_for_pytorch(self, values: dict[str, Any], arch: str) -> str | None:
        for artifact in self.applicable(values):
            found = self.entry(artifact, values, arch) if artifact.pytorch and artifact.per_arch else None
            if isinstance(found, Absent):
                return f"{self.lock_path.name} records that {found.reason}"
        return None

    def absent_notes(self, values: dict[str, Any], arch: str) -> list[str]:
        """Per-arch artifacts other than PyTorch's that the lock records absent: nothing replaces them."""
        notes = []
        for artifact in self.applicable(values):
            found = self.entry(artifact, values, arch) if artifact.per_arch and not artifact.pytorch else None
            if isinstance(found, Absent):
                notes.append(f"{self.lock_path.name} records that {found.reason}: {artifact.key} cannot be "
                             f"downloaded for {arch} (a newer release may have it: change the pin, then `{LOCK_COMMAND}`)")
        return notes

    def urls(self, values: dict[str, Any], arch: str) -> set[str]:
        keys = self.variant_keys(values, arch)
        return {v for k, v in keys.items() if k.endswith(URL_SUFFIX)}

    def complete_for(self, values: dict[str, Any], arch: str) -> bool:
        return all(self.entry(a, values, arch) is not None for a in self.applicable(values))


def choose_pytorch_from(arch: Architecture, default: str | None, override: str | None, mi100_fa: bool,
                        prebuilt: Prebuilt | None, values: dict[str, Any]) -> PytorchChoice:
    """The effective `pytorch_from` for one architecture and why, where it differs from the default."""
    for given, where in ((override, "--variant"), (default, "variants/shared.yaml")):
        if given is not None and given not in (PREBUILT, SOURCE):
            raise UserError(f"{where} pytorch_from={given} is not a choice: use {PREBUILT} or {SOURCE}")
    forced = None
    if arch.prebuilt_torch.value == "no":
        forced = f"AMD publishes no PyTorch for {arch.name} ({arch.prebuilt_torch.why})"
    elif mi100_fa:
        forced = f"{MI100_FA_FLAG}=true patches aotriton, which only a source build of PyTorch uses"
    elif prebuilt is not None:
        forced = prebuilt.absent_for_pytorch(values, arch.name)
    if override == SOURCE:
        return PytorchChoice(SOURCE, "asked for with --variant pytorch_from=source")
    if override == PREBUILT and forced:
        raise UserError(f"--variant pytorch_from=prebuilt is not possible for {arch.name}: {forced}: "
                        "drop the option to build PyTorch from source")
    if forced and (default or PREBUILT) == PREBUILT:
        return PytorchChoice(SOURCE, forced)
    return PytorchChoice(override or default or PREBUILT, "")


def origin_of(rendered: dict, prebuilt_urls: set[str], index: str) -> str:
    """Where a package comes from, for `plan`: `extra.origin` where the recipe declares it, else a url
    source on AMD's index (or one of the artifacts' URLs) makes it prebuilt, anything else a source build."""
    declared = str(((rendered.get("extra") or {}).get("origin")) or "")
    sources = rendered.get("source") or []
    urls = [str(u) for s in (sources if isinstance(sources, list) else [sources]) if isinstance(s, dict)
            for u in (s.get("url") if isinstance(s.get("url"), list) else [s.get("url")]) if u]
    amd = [u for u in urls if u in prebuilt_urls or (index and u.startswith(index))]
    if DECLARED_ORIGINS.get(declared):
        return DECLARED_ORIGINS[declared]
    if declared == "prebuilt" or amd:
        files = [u.split("#")[0] for u in (amd or urls) if not u.endswith("/")]  # a project page: not locked yet
        archives = [u for u in files if not u.endswith(".whl")]
        # an archive only when every file is one (an unlocked project page counts as the wheel it will be)
        return ORIGIN_PREBUILT_ARCHIVE if archives and len(archives) == len(amd or urls) else ORIGIN_PREBUILT_WHEEL
    return ORIGIN_SOURCE


# ---- writing the lock from the index ----

@dataclass
class LockResult:
    entries: dict[str, Any]  # what to write: key -> Locked | {arch: Locked | Absent}
    problems: list[str]  # one line each
    deferred: list[str] = field(default_factory=list)  # files of other architectures left to a full `pins --lock`


def lock(prebuilt: Prebuilt, archs: list[str], values_for: Any, timeout: float = DEFAULT_TIMEOUT,
         today: str | None = None, read: Any = None, download: Any = None,
         download_archs: "set[str] | None" = None) -> LockResult:
    """Read every declared artifact's project page and pin the file the pins name by the index's sha256.
    `values_for(arch)` gives the shared.yaml values (python, versions) for an architecture; `read(project)`,
    if given, reads a page instead (`pins --bump --write`: the pages its decisions read, and its errors).
    Where the index publishes no sha256 (TheRock's page generator writes none unless --include-checksums),
    `download(url)` streams the file once and returns its (sha256, size); without it, the file is not locked.
    The URL is always the one the index lists (a hand-seeded entry's guess is replaced). `download_archs`: the
    architectures whose per-architecture files may be downloaded (a build locks its own, not gigabytes of device
    wheels for every GPU of the table); the others are `deferred`, left unlocked without a problem."""
    today = today or datetime.date.today().isoformat()
    pages: dict[str, list[IndexFile] | None] = {}
    entries: dict[str, Any] = {}
    problems: list[str] = []
    deferred: list[str] = []

    def page(project: str) -> list[IndexFile] | None:
        if project not in pages:
            try:
                pages[project] = read(project) if read else read_project(prebuilt.index, project, timeout)
            except web.Unreachable as exc:
                raise UserError(f"cannot reach {prebuilt.index} ({exc}): check the network or a proxy, then run "
                                f"`{LOCK_COMMAND}` again")
            except LookupError as exc:
                raise UserError(f"{exc}: check `index:` in {prebuilt.path}")
        return pages[project]

    for artifact in prebuilt.artifacts.values():
        per_arch: dict[str, Any] = {}
        for arch in archs if artifact.per_arch else archs[:1]:
            values = values_for(arch)
            if not artifact.applies(values):
                continue
            project, version = artifact.project_for(values, arch), artifact.version_for(values, arch)
            python_tag = _python_tag(values) if artifact.python else None
            files = page(project)
            page_url = project_page(prebuilt.index, project)
            if files is None or (artifact.per_arch and not versions_of(files, project)):
                if artifact.per_arch:
                    per_arch[arch] = Absent(f"the index has no {project} (read {today})")
                else:
                    problems.append(f"{artifact.key}: {prebuilt.index} has no project {project} ({page_url} is not "
                                    f"there): fix `project:` in {prebuilt.path.name}")
                continue
            chosen = pick_file(files, project, version, python_tag)
            try:  # the index's text goes into the lock, and from there into recipes: its own grammar, or nothing
                if chosen is not None:
                    checked_file(chosen.filename, f"{page_url}")
                    checked_url(chosen.url, f"{page_url} (the link to {chosen.filename})", [prebuilt.index])
            except NotGrammar as exc:
                problems.append(f"{artifact.key}: {exc}")
                continue
            if chosen is None:
                known = versions_of(files, project)
                if artifact.per_arch and Version(version) not in known:
                    per_arch[arch] = Absent(f"the index has no {project} {version} (read {today})")
                    continue
                listed = ", ".join(str(v) for v in known[-5:]) or "none"
                what = f"{version} for {python_tag or 'py3-none'} Linux x86_64" if Version(version) in known else version
                problems.append(f"{artifact.key}: {project} has no {what} on {prebuilt.index} (newest there: {listed}): "
                                f"fix the pin in variants/shared.yaml or `version:` in {prebuilt.path.name}")
                continue
            if not SHA256_HEX.match(chosen.sha256):
                kept = prebuilt.entry(artifact, values, arch) if prebuilt.lock_index == prebuilt.index else None
                if isinstance(kept, Locked) and kept.file == chosen.filename:
                    # pinned by hand from public evidence: its sha256 stays, the URL becomes the index's link
                    per_arch[arch] = Locked(kept.file, chosen.url, kept.sha256, kept.evidence, kept.size)
                    continue
                if download is not None and artifact.per_arch and download_archs is not None \
                        and arch not in download_archs:
                    deferred.append(chosen.filename)
                    continue
                if download is None:
                    problems.append(f"{artifact.key}: {chosen.url} has no sha256 on {prebuilt.index} (no #sha256= "
                                    f"fragment or PEP 691 hash): not locked; run `{LOCK_COMMAND}` where the index "
                                    f"can be reached, or add its sha256 to {prebuilt.lock_path.name} by hand, with "
                                    "an evidence: string naming where it is published")
                    continue
                try:
                    digest, size = download(chosen.url)
                except web.Unreachable as exc:
                    problems.append(f"{artifact.key}: {web.shown_url(chosen.url)} has no sha256 on the index and could "
                                    f"not be downloaded to compute it ({exc}): check the network, then run "
                                    f"`{LOCK_COMMAND}` again")
                    continue
                except web.HTTPStatus as exc:
                    problems.append(f"{artifact.key}: the index lists {web.shown_url(chosen.url)} but it answers "
                                    f"HTTP {exc.code}: not locked; run `{LOCK_COMMAND}` again later")
                    continue
                per_arch[arch] = Locked(chosen.filename, chosen.url, digest, f"{COMPUTED} {today}", size)
                continue
            per_arch[arch] = Locked(chosen.filename, chosen.url, chosen.sha256, f"{prebuilt.index} sha256, read {today}")
        if artifact.per_arch:
            if per_arch:
                entries[artifact.key] = per_arch
        elif per_arch:
            entries[artifact.key] = next(iter(per_arch.values()))
    return LockResult(entries, problems, deferred)


def write_lock(prebuilt: Prebuilt, result: LockResult, archs: list[str], now: str | None = None) -> Path:
    """variants/prebuilt-lock.yaml in a stable order (declared artifacts, then the table's architectures)."""
    now = now or datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [f"# Written by `{LOCK_COMMAND}` from {prebuilt.index} on {now}. Commit it: builds download only",
             "# the files it pins, checked against these sha256. Re-run the command after changing a pin; an entry",
             "# added by hand from public evidence carries an `evidence:` string saying where; one the index gives",
             "# no hash for is downloaded once, its sha256 and size computed (`evidence: computed from download`).",
             f"index: {prebuilt.index}", "artifacts:"]
    for key, artifact in prebuilt.artifacts.items():
        entry = result.entries.get(key)
        if entry is None:
            continue
        if artifact.per_arch:
            lines.append(f"  {key}:")
            for arch in [a for a in archs if a in entry] + sorted(a for a in entry if a not in archs):
                lines.append(f"    {arch}: {_flow(entry[arch])}")
        else:
            lines.append(f"  {key}: {_flow(entry)}")
    prebuilt.lock_path.write_text("\n".join(lines) + "\n")
    return prebuilt.lock_path


def downloader(cache: SourceCache, timeout: float, say: Any):
    """lock()'s `download` for `pins --lock`: each file saying why it is downloaded, kept in the source cache."""
    def download(url: str) -> tuple[str, int]:
        say(f"downloading {web.shown_url(url)}: the index gives no sha256, so it is computed here (the file is kept "
            f"in the source cache {cache.path})")
        return download_into_cache(url, cache, timeout)

    return download


def download_into_cache(url: str, cache: SourceCache, timeout: float = DEFAULT_TIMEOUT) -> tuple[str, int]:
    """Stream a file the index lists without a hash once, computing its sha256 and size, into the source cache
    (sources.seed_download), where rattler-build finds it: no fetch or build downloads it again."""
    cache.ensure_writable()
    digest = hashlib.sha256()
    with writing("a download into", cache.path):
        handle, partial = tempfile.mkstemp(dir=cache.path, prefix=".download-")
    try:
        with os.fdopen(handle, "wb") as out, web.opened(url, timeout) as response:
            size = web.stream(response, out, None, url, digest.update)
        seed_download(cache, url, digest.hexdigest(), Path(partial))
    finally:
        if os.path.exists(partial):
            os.unlink(partial)
    return digest.hexdigest(), size


def _flow(entry: "Locked | Absent") -> str:
    if isinstance(entry, Absent):
        data = {"absent": entry.reason}
    else:
        data = {"file": entry.file, "url": entry.url, "sha256": entry.sha256}
        if entry.size is not None:
            data["size"] = entry.size
        if entry.evidence:
            data["evidence"] = entry.evidence
    return yaml.safe_dump(data, default_flow_style=True, sort_keys=False, width=10**6).strip()


def _entry(path: Path, key: str, raw: Any) -> "Locked | Absent":
    if isinstance(raw, dict) and "absent" in raw:
        return Absent(str(raw["absent"]))
    if isinstance(raw, dict) and raw.get("file") and raw.get("url") and SHA256_HEX.match(str(raw.get("sha256", "")).lower()):
        size = raw.get("size")
        return Locked(str(raw["file"]), str(raw["url"]), str(raw["sha256"]).lower(), str(raw.get("evidence") or ""),
                      size if isinstance(size, int) and not isinstance(size, bool) and size >= 0 else None)
    raise UserError(f"{path}: {key} needs file, url and a 64-hex sha256 (or absent: why): fix the entry or run "
                    f"`{LOCK_COMMAND}`")


def _fill(template: str, values: dict[str, Any], arch: str, key: str) -> str:
    try:
        return template.format_map({**{k: _first(v) for k, v in values.items()}, "gpu_arch": arch})
    except (KeyError, IndexError, ValueError) as exc:
        raise UserError(f"{PREBUILT_FILE}: {key}: '{template}' names {exc}, which variants/shared.yaml does not "
                        "define: fix the template")


def _first(value: Any) -> Any:
    return value[0] if isinstance(value, list) and value else value


def _python_tag(values: dict[str, Any]) -> str:
    python = str(_first(values.get("python", "3.12")))
    return "cp" + python.replace(".", "")[:3]


AMD_INDEX_ENV = "ORCHESTRATE_AMD_INDEX"  # where `pins` reads AMD's releases (default: variants/prebuilt.yaml's index)


def index_to_read(declared: str) -> str:
    """The AMD index `pins` and `pins --bump` read: $ORCHESTRATE_AMD_INDEX, else the one variants/prebuilt.yaml
    declares (`pins --lock` locks that one, whose URLs the lock records)."""
    given = os.environ.get(AMD_INDEX_ENV)
    return web.http_url(given, f"${AMD_INDEX_ENV}", f"an index like {declared or 'https://host/simple/'} (or unset it)"
                        ) if given else declared
