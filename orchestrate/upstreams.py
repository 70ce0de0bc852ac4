"""What each pinned component is upstream (variants/upstreams.yaml), and what our pins say about it.

The declarations say where a component's releases are listed, which variants/shared.yaml key holds its
pin, which recipe builds it and which pins must move together. `Pins` reads the pinned side: versions
from shared.yaml (the one place they live) and the sources the recipes render to (commits, checksums).
`orchestrate pins` compares them with upstream's releases; the contract tests with upstream checkouts.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from .architectures import SHARED_VARIANTS_FILE, ArchitectureTable
from .errors import UserError
from .options import Options
from .pypi_table import TABLE_FILE, Table, load_table
from .recipes import Output, load_recipe_yaml, render_all, variant_config
from .sources import Source, sources_of
from .yaml_files import read_mapping

UPSTREAMS_FILE = "upstreams.yaml"
EXPECT_KINDS = ("version", "source", "env")
ADVISORY = "advisory"
EXACT, MINIMUM = "exact", "minimum"


@dataclass(frozen=True)
class ReleaseSource:
    """One place upstream lists releases: a PyPI project, or a git repository's tags."""

    kind: str  # "pypi" or "git"
    name: str  # PyPI project name, or OWNER/REPO
    tag: re.Pattern | None = None

    @property
    def label(self) -> str:
        return f"{self.kind}:{self.name}"

    def version_of_tag(self, tag: str) -> tuple[Version, bool] | None:
        """(version, is a pre-release) for a tag that names a release, None for any other tag."""
        match = self.tag.fullmatch(tag) if self.tag else None
        if not match:
            return None
        version = parse_version(match.group("version"))
        if version is None:
            return None
        pre = bool(match.groupdict().get("pre")) or version.is_prerelease
        return version, pre


@dataclass(frozen=True)
class Check:
    """A value in an upstream checkout that must equal one of our pins."""

    checkout: str  # recipe folder name: the checkout lives at $ROCM_STACK_SOURCES/<checkout>
    expect: dict
    file: str | None = None
    pattern: str | None = None
    gitlink: str | None = None
    when_source: str | None = None  # "url" or "git": the check applies only while the recipe's source is one
    upstream_is: str = EXACT  # MINIMUM: upstream's value is the lowest version it accepts, our pin may be newer


    @property
    def where(self) -> str:
        return f"{self.checkout}: {self.file or self.gitlink}"

    @property
    def wants(self) -> str:
        if "version" in self.expect:
            return f"{'<=' if self.upstream_is == MINIMUM else '='} {self.expect['version']}"
        if "source" in self.expect:
            part = f" ({self.expect['git']})" if "git" in self.expect else ""
            return f"= {self.expect['source']}'s source commit{part}"
        return f"= {self.expect['env']}'s {self.expect['name']}"


@dataclass(frozen=True)
class Component:
    name: str
    version_key: str
    recipe: str | None
    releases: tuple[ReleaseSource, ...]
    compare: bool = True
    note: str = ""
    checks: tuple[Check, ...] = ()

    def parse_pin(self, text: str) -> Version | None:
        """A pinned version in the scheme of upstream's tags where it is one (aotriton's '0.12b'), else PEP 440."""
        for source in self.releases:
            parsed = source.version_of_tag(text)
            if parsed:
                return parsed[0]
        return parse_version(text)

    def pypi(self) -> str | None:
        return next((s.name for s in self.releases if s.kind == "pypi"), None)


@dataclass(frozen=True)
class Coupling:
    pins: tuple[str, str]
    rule: str
    why: str
    # True: the first pin's PyPI metadata must admit the second's version; "advisory": it is shown, not
    # enforced (the PyPI builds are not ours, e.g. vLLM's CUDA wheels pin an exact torch, its ROCm build does not)
    requires: bool | str = False
    checks: tuple[Check, ...] = ()

    @property
    def label(self) -> str:
        return " <-> ".join(self.pins)


@dataclass
class Upstreams:
    path: Path
    components: dict[str, Component]
    couplings: list[Coupling]
    # versions of the components that variants/pypi.yaml adds (keyed by their version key)
    table_versions: dict[str, str] = field(default_factory=dict)

    @classmethod
    def load(cls, variants_dir: Path) -> "Upstreams":
        path = variants_dir / UPSTREAMS_FILE
        if not path.is_file():
            raise UserError(f"{path} does not exist: it declares each pinned component's upstream; restore it")
        data = read_mapping(path)
        if not isinstance(data.get("components"), dict):
            raise UserError(f"{path}: needs a 'components' mapping: fix the file")
        components = {name: _component(path, name, spec) for name, spec in data["components"].items()}
        couplings = [_coupling(path, spec, components) for spec in data.get("couplings") or []]
        # every package repackaged from PyPI is a component too, unless this file already declares it
        table_versions = {}
        covered = {c.pypi() for c in components.values() if c.pypi()}
        for component, key, version in table_components(load_table(variants_dir), covered):
            if component.name not in components:
                components[component.name] = component
                table_versions[key] = version
        return cls(path, components, couplings, table_versions)

    def all_checks(self) -> list[tuple[str, Check]]:
        """(owner label, check) for every declared check, components' first."""
        found = [(c.name, check) for c in self.components.values() for check in c.checks]
        return found + [(c.label, check) for c in self.couplings for check in c.checks]


def _component(path: Path, name: str, spec) -> Component:
    if not isinstance(spec, dict) or not spec.get("version"):
        raise UserError(f"{path}: component {name} needs 'version' (its variants/shared.yaml key): fix the file")
    releases = []
    for entry in spec.get("releases") or []:
        if isinstance(entry, dict) and entry.get("pypi"):
            releases.append(ReleaseSource("pypi", str(entry["pypi"])))
        elif isinstance(entry, dict) and entry.get("git") and entry.get("tag"):
            try:
                pattern = re.compile(str(entry["tag"]))
            except re.error as exc:
                raise UserError(f"{path}: component {name}: tag pattern {entry['tag']!r} is not a regex ({exc}): fix it")
            if "version" not in pattern.groupindex:
                raise UserError(f"{path}: component {name}: tag pattern needs a (?P<version>...) group: fix it")
            releases.append(ReleaseSource("git", str(entry["git"]), pattern))
        else:
            raise UserError(f"{path}: component {name}: each release source is {{pypi: NAME}} or {{git: OWNER/REPO, tag: REGEX}}: fix it")
    if not releases:
        raise UserError(f"{path}: component {name} lists no 'releases': fix the file")
    return Component(name, str(spec["version"]), spec.get("recipe"), tuple(releases), bool(spec.get("compare", True)),
                     str(spec.get("note") or ""), _checks(path, name, spec.get("checks")))


def _coupling(path: Path, spec, components: dict[str, Component]) -> Coupling:
    pins = spec.get("pins") if isinstance(spec, dict) else None
    if not isinstance(pins, list) or len(pins) != 2 or not all(p in components for p in pins):
        raise UserError(f"{path}: coupling {pins!r} must name two components of 'components': fix the file")
    label = " <-> ".join(pins)
    requires = spec.get("requires", False)
    if requires not in (True, False, ADVISORY):
        raise UserError(f"{path}: coupling {label}: requires is true, false or {ADVISORY}: fix the file")
    if requires and not all(components[p].pypi() for p in pins):
        raise UserError(f"{path}: coupling {label} has requires but not both are on PyPI: fix the file")
    return Coupling((pins[0], pins[1]), str(spec.get("rule", "")), str(spec.get("why", "")),
                    requires, _checks(path, label, spec.get("checks")))


def _checks(path: Path, owner: str, specs) -> tuple[Check, ...]:
    checks = []
    for spec in specs or []:
        expect = spec.get("expect") if isinstance(spec, dict) else None
        if not isinstance(expect, dict) or not any(k in expect for k in EXPECT_KINDS) or not spec.get("checkout"):
            raise UserError(f"{path}: {owner}: a check needs 'checkout' and 'expect' ({' | '.join(EXPECT_KINDS)}): fix it")
        if bool(spec.get("file")) == bool(spec.get("gitlink")) or (spec.get("file") and not spec.get("pattern")):
            raise UserError(f"{path}: {owner}: a check reads either file + pattern or gitlink: fix it")
        if spec.get("when_source") not in (None, "url", "git"):
            raise UserError(f"{path}: {owner}: when_source is url or git: fix it")
        if spec.get("upstream_is", EXACT) not in (EXACT, MINIMUM) or (spec.get("upstream_is") == MINIMUM and "version" not in expect):
            raise UserError(f"{path}: {owner}: upstream_is is {EXACT} or {MINIMUM} (a version only): fix it")
        checks.append(Check(str(spec["checkout"]), dict(expect), spec.get("file"), spec.get("pattern"), spec.get("gitlink"),
                            spec.get("when_source"), spec.get("upstream_is", EXACT)))
    return tuple(checks)


def parse_version(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None


def same_release(a: Version, b: Version) -> bool:
    """2.13.0 and 2.13.0a0 (a version.txt between releases) and 2.13 name the same release."""
    def trimmed(v: Version) -> tuple:
        release = list(v.release)
        while len(release) > 1 and release[-1] == 0:
            release.pop()
        return tuple(release)
    return trimmed(a) == trimmed(b)


@dataclass
class Pins:
    """Our side: pinned versions (shared.yaml) and the sources each recipe renders to, for one architecture."""

    arch: str
    versions: dict[str, str]
    outputs: dict[str, list[Output]] = field(default_factory=dict)  # recipe folder -> rendered outputs

    def version(self, key: str) -> str:
        return self.versions[key]

    def sources(self, recipe: str) -> list[Source]:
        """The recipe's rendered sources over all its outputs, first source first, without repeats."""
        found = [source for output in self.outputs.get(recipe, []) for source in sources_of(output.rendered)]
        return list(dict.fromkeys(found))

    def primary_source(self, recipe: str | None) -> Source | None:
        sources = self.sources(recipe) if recipe else []
        return sources[0] if sources else None

    def git_rev(self, recipe: str, url_part: str | None = None) -> str | None:
        for source in self.sources(recipe):
            if source.kind == "git" and (url_part is None or url_part in source.location):
                return source.pin
            if url_part is None:
                return None  # the first source is not git
        return None

    def script_env(self, recipe: str, name: str) -> str | None:
        for output in self.outputs.get(recipe, []):
            env = (output.rendered.get("build", {}).get("script") or {}).get("env") or {}
            if name in env:
                return str(env[name])
        return None

    def applies(self, check: Check) -> bool:
        """A check made for one kind of source (a file only sdists have) applies while the recipe has it."""
        source = self.primary_source(check.checkout)
        return check.when_source is None or (source is not None and check.when_source == source.kind)

    def expected(self, check: Check) -> str | None:
        """The pinned value a check compares with, or None where the pins do not have it."""
        expect = check.expect
        if "version" in expect:
            return self.versions.get(expect["version"])
        if "source" in expect:
            return self.git_rev(expect["source"], expect.get("git"))
        return self.script_env(expect["env"], expect["name"])


def read_pins(workspace: Path, upstreams: Upstreams, arch_name: str | None = None) -> Pins:
    """Pinned versions from shared.yaml, and every recipe rendered for one architecture (its sources;
    they are the same for every architecture but rocm-sdk's per-family tarball)."""
    options = Options(workspace=workspace, channel=workspace / "channel", source_channels=[])
    shared_path = options.variants_dir / SHARED_VARIANTS_FILE
    shared = read_mapping(shared_path)
    versions = dict(upstreams.table_versions)
    for component in upstreams.components.values():
        if component.version_key in versions:
            continue
        value = shared.get(component.version_key)
        if isinstance(value, list) and len(value) == 1:
            value = value[0]
        if value is None or isinstance(value, (list, dict)):
            raise UserError(f"{upstreams.path.name}: {component.name}'s version key {component.version_key} is not a "
                            f"single value in {shared_path}: fix one of them")
        versions[component.version_key] = str(value)
    for key, value in shared.items():  # keys the checks name that belong to no component
        if isinstance(value, list) and len(value) == 1:
            versions.setdefault(key, str(value[0]))
    table = ArchitectureTable.load(options.variants_dir)
    arch = table.get(arch_name or table.names()[0])
    pins = Pins(arch.name, versions)
    for output in render_all(options, variant_config(options, table, arch), arch):
        pins.outputs.setdefault(output.recipe_name, []).append(output)
    for component in upstreams.components.values():
        if component.recipe and component.recipe not in pins.outputs:
            raise UserError(f"{upstreams.path.name}: {component.name}'s recipe {component.recipe} is not in "
                            f"{options.recipes_dir}: fix the file")
    return pins


def recipe_script_env_names(recipe_path: Path) -> list[str]:
    """The names a recipe's build.script.env declares, read from the recipe itself: rendering drops
    empty values, and a name declared with an empty value is still handed to the build."""
    stage0 = load_recipe_yaml(recipe_path)
    script = (stage0.get("build") or {}).get("script") or {}
    env = script.get("env") if isinstance(script, dict) else None
    return sorted(env) if isinstance(env, dict) else []


def table_components(table: Table, covered_pypi_names: set[str]) -> list[tuple[Component, str, str]]:
    """(component, version key, pinned version) for every PyPI table entry that no variants/upstreams.yaml
    component already reports, so `orchestrate pins` lists newer PyPI releases of each repackaged package."""
    covered = {canonicalize_name(n) for n in covered_pypi_names}
    found = []
    for entry in table.entries.values():
        if canonicalize_name(entry.pypi) in covered:
            continue
        key = f"{TABLE_FILE}:{entry.name}"
        found.append((Component(entry.name, key, None, (ReleaseSource("pypi", entry.pypi),),
                                note=f"repackaged from PyPI ({TABLE_FILE})"), key, entry.version))
    return found



def declared_tags(upstreams: Upstreams) -> list[re.Pattern]:
    """Every tag pattern variants/upstreams.yaml declares: the tags grammar.checked_pin lets through."""
    return [s.tag for c in upstreams.components.values() for s in c.releases if s.tag is not None]
