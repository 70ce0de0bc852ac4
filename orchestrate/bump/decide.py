"""The newest coherent set of pins: for each coupled group (variants/upstreams.yaml `bump.groups`) the newest
releases every coupling allows, read from the releases' own files (release_files.py), as one row per pin and
the edits that would move them (write.py applies those).

The couplings: vLLM's release metadata names the torch it allows (its ROCm build takes that as the series:
`torch==2.14.0` allows the bug-fix 2.14.1, never 2.15); torch's own metadata names its Triton, its tag's
.ci/docker/ci_commit_pins/triton.txt the Triton commit and cmake/External/aotriton.cmake the aotriton;
torchvision's and torchaudio's metadata name the torch they were made with; AMD's index pairs a ROCm with
its torch (the newest stable ROCm whose torch vLLM allows); flash-attn's tag names its composable_kernel
submodule; aiter's setup.py names its flydsl; the PyPI repacks move within what vLLM requires.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from ..contract import FAILED as PATCH_FAILED, check_patch
from ..errors import UserError
from ..upstreams import Component, Pins, Upstreams, parse_version
from ..yaml_files import read_mapping
from ..release_files import Read, ReadError, World, requirements_on

MOVES, CURRENT, HELD, UNKNOWN = "moves", "current", "held", "unknown"
HOLD = re.compile(r"#\s*hold:\s*(?P<reason>.+?)\s*$")
PYPI_PREFIX = "pypi.yaml:"


@dataclass
class Row:
    name: str
    pinned: str
    decision: str = CURRENT
    to: str | None = None
    reason: str = ""
    group: str = ""
    notes_url: str | None = None
    hold: str | None = None
    files: list[str] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)  # after --write: comments that still cite the old pin

    def as_dict(self) -> dict:
        return dict(self.__dict__)

    def text(self) -> str:
        if self.decision == MOVES:
            return f"moves {self.pinned} → {self.to} ({self.reason})"
        if self.decision == HELD:
            return f"held at {self.pinned}: {self.reason}"
        if self.decision == UNKNOWN:
            return f"unknown: {self.reason}"
        return f"current ({self.reason})" if self.reason else "current"


@dataclass(frozen=True)
class Download:
    """A sha256 write.py computes from a download of `url`."""

    url: str


@dataclass
class Edit:
    """One change write.py makes: `shared` key -> value; `literal` (file relative to the workspace) old -> new
    (new may be a Download); `pypi` entry name -> version; `lock` regenerates the prebuilt lock."""

    kind: str
    target: str
    old: str = ""
    new: object = ""


@dataclass
class Group:
    name: str
    rows: list[Row]
    edits: list[Edit] = field(default_factory=list)

    def moving(self) -> list[Row]:
        return [r for r in self.rows if r.decision == MOVES]

    def hold_all(self, reason: str, decision: str = HELD) -> None:
        """A coupled group moves whole or not at all: every move of it is held with the reason (unknown where
        an upstream could not be reached)."""
        for row in self.moving():
            row.decision, row.to, row.reason = decision, None, reason
        self.edits = []


def read_holds(variants: Path) -> dict[str, str]:
    """`# hold: <reason>` on a pin's line: variants/shared.yaml `KEY: [...]  # hold: why` (keyed by KEY) and
    variants/pypi.yaml `    version: X  # hold: why` inside an entry (keyed by pypi.yaml:<entry>)."""
    holds = {}
    shared = variants / "shared.yaml"
    for line in shared.read_text().splitlines() if shared.is_file() else []:
        match = re.match(r"^(\w+):[^#]*", line)
        found = HOLD.search(line)
        if match and found:
            holds[match.group(1)] = found.group("reason")
    table = variants / "pypi.yaml"
    entry = None
    for line in table.read_text().splitlines() if table.is_file() else []:
        top = re.match(r"^  ([\w.-]+):\s*$", line)
        if top:
            entry = top.group(1)
        found = HOLD.search(line)
        if entry and found and re.match(r"^    version:", line):
            holds[PYPI_PREFIX + entry] = found.group("reason")
    return holds


def spec_on(requires: list[str], project: str) -> SpecifierSet | None:
    """The specifier a Requires-Dist list puts on a project (extras' requirements dropped); None: unnamed."""
    found = None
    for requirement in requirements_on(requires, project):
        found = requirement.specifier if found is None else found & requirement.specifier
    return found


def admits_series(spec: SpecifierSet | None, version: Version) -> bool:
    """vLLM's ROCm build takes the torch its metadata names as a minimum within that series: ==2.14.0
    allows 2.14.1, not 2.15.0."""
    if spec is None:
        return True
    series_start = Version(".".join(str(p) for p in (list(version.release) + [0, 0])[:2]) + ".0")
    return spec.contains(version, prereleases=True) or (spec.contains(series_start, prereleases=True)
                                                        and not any(s.operator in ("<", "<=") for s in spec))


def series(version: Version | str) -> tuple:
    return tuple(Version(str(version)).release[:2])


def pattern_value(text: str, pattern: str, what: str) -> str:
    match = re.search(pattern, text, re.M)
    if not match:
        raise ReadError(f"{what} has no match for {pattern!r}")
    return match.group(1)


# every key of upstreams.yaml's `bump:` section the decisions read, so that a missing one is one line up front
# (and not a KeyError half-way through a group)
BUMP_KEYS = {
    "read.pytorch": ("repo", "tag", "triton_commit", "aotriton_version", "aotriton_commit"),
    "read.triton": ("repo", "llvm_commit"),
    "read.aotriton": ("repo", "aiter_tag"),
    "read.aiter": ("repo", "tag", "flydsl_version", "ck_commit"),
    "read.flash-attn": ("repo", "tag", "ck_commit"),
    "read.composable-kernel": ("repo", "version"),
    "read.vllm": ("rocm_requirements", "triton_kernels_commit", "torch_rocm_minimum", "aiter_branch"),
    "read.vllm.rocm_requirements": ("sdist_files",),
    "amd": ("rocm-sdk", "pytorch-amd", "triton-amd", "torchvision-amd", "torchaudio-amd"),
}


def bump_section(path: Path) -> dict:
    """upstreams.yaml's `bump:` section, checked whole: one line naming the first key it lacks."""
    declared = read_mapping(path).get("bump")
    fix = f"restore it from the project's variants/{path.name}"
    if not isinstance(declared, dict) or not isinstance(declared.get("groups"), dict) or not declared["groups"]:
        raise UserError(f"{path} has no bump: section with groups: {fix}")
    for where, keys in {"": ("read", "amd"), **BUMP_KEYS}.items():
        mapping: object = declared
        for part in where.split(".") if where else []:
            mapping = mapping.get(part) if isinstance(mapping, dict) else None
        for key in keys:
            if not isinstance(mapping, dict) or mapping.get(key) in (None, "", {}):
                raise UserError(f"{path} lacks bump.{where + '.' if where else ''}{key}: {fix}")
    return declared


class Decider:
    def __init__(self, workspace: Path, upstreams: Upstreams, pins: Pins, world: World):
        self.workspace, self.upstreams, self.pins, self.world = workspace, upstreams, pins, world
        declared = bump_section(upstreams.path)
        self.groups: dict[str, list[str]] = {str(k): list(v) for k, v in declared["groups"].items()}
        self.read: dict[str, dict] = declared["read"]
        self.amd: dict[str, str] = declared["amd"]
        self.holds = read_holds(workspace / "variants")
        self.vllm_reads: dict[str, Read] = {}  # vLLM's METADATA by release, as the torch group read it
        self.vllm_label = ""  # the vLLM the result pins (bump.decide sets it once the torch group is decided)
        self._dependents: list[tuple[list[str], str]] | ReadError | None = None

    # ---- shared helpers ----

    def component(self, name: str) -> Component:
        return self.upstreams.components[name]

    def pinned(self, name: str) -> str:
        return self.pins.version(self.component(name).version_key)

    def row(self, name: str, group: str) -> Row:
        component = self.component(name)
        return Row(name, self.pinned(name), group=group, hold=self.holds.get(component.version_key))

    def fact(self, owner: str, key: str, ref: str) -> tuple[str, str]:
        """(value, source) of a declared fact (`bump.read.<owner>.<key>`) at a tag or commit."""
        spec, repo = self.read[owner][key], self.read[owner]["repo"]
        if "gitlink" in spec:
            found = self.world.gitlink(repo, ref, spec["gitlink"])
            return str(found.value), found.source
        found = self.world.file_at(repo, ref, spec["file"])
        return pattern_value(str(found.value), spec["pattern"], found.source), found.source

    def sdist_fact(self, owner: str, key: str, label: str) -> tuple[str, str]:
        """(value, source) of a declared fact read from a file of the release's PyPI sdist."""
        spec = self.read[owner][key]
        found = self.world.sdist_file(self.component(owner).pypi(), label, spec["sdist_file"])
        return pattern_value(str(found.value), spec["pattern"], found.source), found.source

    def tag_of(self, owner: str, version: str) -> str:
        return self.read[owner]["tag"].format(version=version)

    def recipe_file(self, recipe: str) -> str:
        return f"recipes/{recipe}/recipe.yaml"

    def finish(self, groups: list[Group]) -> list[Group]:
        """Every component in no group moves alone, within what the vLLM the result pins requires (the one the
        torch group moves to, else the pinned one); a PyPI repack that the moved-to vLLM constrains moves with
        the torch group, so that a hold of the group (at --write too) holds it. A pin held on purpose says so
        in its row."""
        torch = next((g for g in groups if g.name == "torch"), None)
        vllm = next((r for r in torch.rows if r.name == "vllm"), None) if torch else None
        vllm_moves = vllm is not None and vllm.decision == MOVES
        grouped = {name for names in self.groups.values() for name in names}
        for component in (c for c in self.upstreams.components.values() if c.name not in grouped):
            alone = self.alone(component)
            row = alone.rows[0]
            if vllm_moves and row.decision == MOVES and self.vllm_spec(component.pypi())[0] is not None:
                row.reason += f"; moves with vllm {vllm.to}"
                torch.rows.append(row)
                torch.edits += alone.edits
            else:
                groups = groups + [alone]
        for group in groups:
            for row in group.rows:
                if row.hold and row.decision in (CURRENT, HELD) and not row.reason.startswith("hold:"):
                    row.decision, row.reason = HELD, f"hold: {row.hold}" + (f" ({row.reason})" if row.reason else "")
        return groups

    def vllm_target(self, torch: Group | None) -> str:
        """The vLLM the result pins: the one the torch group moves to, else the pinned one."""
        vllm = next((r for r in torch.rows if r.name == "vllm"), None) if torch else None
        return (vllm.to if vllm.decision == MOVES else vllm.pinned) if vllm else ""

    def apply_hold(self, group: Group) -> None:
        """A pin held on purpose keeps the group where it is if it would have to move."""
        held = [r for r in group.rows if r.hold and r.decision == MOVES]
        if held:
            group.hold_all(f"{held[0].name} is held ({self.component(held[0].name).version_key}: hold: {held[0].hold}) "
                           f"and the {group.name} group moves whole")
            for row in held:
                row.reason = f"hold: {row.hold}"

    # ---- flash-attn <-> composable-kernel ----

    def flash_attn_group(self) -> Group:
        rows = {n: self.row(n, "flash-attn") for n in ("flash-attn", "composable-kernel")}
        group = Group("flash-attn", list(rows.values()))
        fa, ck = rows["flash-attn"], rows["composable-kernel"]
        try:
            releases = self.world.releases(self.component("flash-attn").pypi())
        except ReadError as exc:
            fa.decision, fa.reason = UNKNOWN, str(exc)
            ck.decision, ck.reason = HELD, f"flash-attn's release could not be read: {exc}"
            return group
        newest = releases[-1] if releases else None
        pinned = parse_version(fa.pinned)
        ck.reason = "moves with flash-attn's csrc/composable_kernel submodule"
        if newest is None or pinned is None or newest[0] <= pinned:
            fa.reason = f"newest release {newest[1] if newest else 'none'} (PyPI {self.component('flash-attn').pypi()})"
            if newest and pinned and newest[0] < pinned:
                fa.reason += f"; the pin {fa.pinned} is an unreleased commit"
            return group
        label = newest[1]
        repo = self.read["flash-attn"]["repo"]
        tag = self.tag_of("flash-attn", label)
        try:
            commit = str(self.world.tag_commit(repo, tag).value)
            ck_commit, ck_source = self.fact("flash-attn", "ck_commit", commit)
            ck_version, ck_version_source = self.fact("composable-kernel", "version", ck_commit)
            broken = self.broken_patches("flash-attn", repo, commit)
        except ReadError as exc:
            fa.decision, fa.reason = UNKNOWN, f"flash-attn {label}: {exc}"
            ck.decision, ck.reason = HELD, f"flash-attn {label} could not be read: {exc}"
            return group
        fa.notes_url = f"https://github.com/{repo}/releases/tag/{tag}"
        if broken:
            reason = f"patch {broken} no longer applies to flash-attn {label} ({tag} = {commit[:12]})"
            fa.decision, fa.reason = HELD, reason
            ck.decision, ck.reason = HELD, reason
            return group
        old_fa, old_ck = self.pins.git_rev("flash-attn", "flash-attention"), self.pins.git_rev("composable-kernel")
        fa.decision, fa.to, fa.reason = MOVES, label, f"PyPI {self.component('flash-attn').pypi()}; {repo} tag {tag} = {commit[:12]}"
        group.edits += [Edit("shared", "flash_attn_version", new=label),
                        Edit("literal", self.recipe_file("flash-attn"), old_fa, commit)]
        if ck_commit != old_ck:
            ck.decision, ck.to = MOVES, ck_version
            ck.reason = f"{ck_source} = {ck_commit[:12]}; version from {ck_version_source}"
            group.edits += [Edit("shared", "composable_kernel_version", new=ck_version),
                            Edit("literal", self.recipe_file("flash-attn"), old_ck, ck_commit),
                            Edit("literal", self.recipe_file("composable-kernel"), old_ck, ck_commit)]
            if ck.to == ck.pinned:
                ck.reason = f"version stays {ck_version}; commit {old_ck[:12]} → {ck_commit[:12]} ({ck_source})"
        self.apply_hold(group)
        return group

    def broken_patches(self, recipe: str, repo: str, commit: str) -> str:
        """The first of the recipe's patches (those it renders to, and opt-in ones in patches/<recipe>/) that
        does not apply to the repository at `commit`, checked as the upstream contract tests check them;
        "" if all apply."""
        recipe_dir = self.workspace / "recipes" / recipe
        patches = {(recipe_dir / p).resolve() for source in self.pins.sources(recipe) for p in source.patches}
        patches |= {p.resolve() for p in (self.workspace / "patches" / recipe).glob("*.patch")}
        if not patches:
            return ""
        checkout = self.world.checkout(repo, commit)
        for path in sorted(p for p in patches if p.is_file()):
            if check_patch(path, checkout.name, checkout.parent).status == PATCH_FAILED:
                return path.name
        return ""

    # ---- aiter <-> flydsl ----

    def aiter_group(self) -> Group:
        rows = {n: self.row(n, "aiter") for n in ("aiter", "flydsl")}
        group = Group("aiter", list(rows.values()))
        aiter, flydsl = rows["aiter"], rows["flydsl"]
        repo = self.read["aiter"]["repo"]
        source = next(s for s in self.component("aiter").releases if s.kind == "git")
        pinned_commit = self.pins.git_rev("aiter", "aiter") or ""
        try:
            tags = self.world.tags(repo)
            flydsl_releases = self.world.releases(self.component("flydsl").pypi())
            pinned_flydsl, flydsl_source = self.fact("aiter", "flydsl_version", pinned_commit)
        except ReadError as exc:
            aiter.decision, aiter.reason = UNKNOWN, str(exc)
            flydsl.decision, flydsl.reason = UNKNOWN, f"aiter's setup.py FLYDSL_VERSION could not be read: {exc}"
            return group
        releases = sorted((parsed[0], tag) for tag in tags if (parsed := source.version_of_tag(tag)) and not parsed[1])
        pinned = parse_version(aiter.pinned)
        newest = releases[-1] if releases else None
        aiter.reason = f"newest tag {newest[1] if newest else 'none'} ({repo})"
        try:  # a coupling: our aiter is at least the one vLLM's ROCm images build, a tag whose commit we read
            floor, floor_rule = self.vllm_aiter(tags, source)
        except ReadError as exc:
            aiter.decision, aiter.reason = UNKNOWN, str(exc)
            flydsl.decision, flydsl.reason = HELD, f"aiter is unknown: {exc}"
            return group
        aiter.reason += f"; {floor_rule}"
        if pinned is not None and pinned < floor and (aiter.hold or newest is None or newest[0] < floor):
            aiter.reason += f"; our aiter {aiter.pinned} is below it"
        newest_flydsl = flydsl_releases[-1][1] if flydsl_releases else flydsl.pinned
        flydsl_rule = f"aiter {aiter.pinned} pins flydsl=={pinned_flydsl} ({flydsl_source})"
        if newest is None or pinned is None or newest[0] <= pinned or aiter.hold:
            if parse_version(newest_flydsl) and parse_version(newest_flydsl) > parse_version(flydsl.pinned):
                flydsl.decision, flydsl.reason = HELD, f"{flydsl_rule}; newest flydsl {newest_flydsl}"
            else:
                flydsl.reason = flydsl_rule
            return group
        tag = newest[1]
        version = str(newest[0])
        try:
            commit = tags[tag]
            new_flydsl, new_source = self.fact("aiter", "flydsl_version", commit)
            ck_commit, _ = self.fact("aiter", "ck_commit", commit)
            if not any(label == new_flydsl or v == parse_version(new_flydsl) for v, label in flydsl_releases):
                raise ReadError(f"aiter {version} pins flydsl=={new_flydsl} ({new_source}), which PyPI does not have")
        except ReadError as exc:
            aiter.decision, aiter.reason = UNKNOWN, f"aiter {tag}: {exc}"
            flydsl.decision, flydsl.reason = HELD, f"aiter {tag} could not be read: {exc}"
            return group
        aiter.decision, aiter.to, aiter.notes_url = MOVES, version, f"https://github.com/{repo}/releases/tag/{tag}"
        aiter.reason = f"{repo} tag {tag} = {commit[:12]}; {floor_rule}"
        old_ck = self.pins.git_rev("aiter", "composable_kernel")
        group.edits += [Edit("shared", "aiter_version", new=version),
                        Edit("literal", self.recipe_file("aiter"), pinned_commit, commit)]
        if old_ck and ck_commit != old_ck:
            group.edits.append(Edit("literal", self.recipe_file("aiter"), old_ck, ck_commit))
        if new_flydsl != flydsl.pinned:
            flydsl.decision, flydsl.to = MOVES, new_flydsl
            flydsl.notes_url = f"https://pypi.org/project/flydsl/{new_flydsl}/"
            group.edits += [Edit("shared", "flydsl_version", new=new_flydsl), Edit("pypi", "flydsl", new=new_flydsl)]
        flydsl.reason = f"aiter {version} pins flydsl=={new_flydsl} ({new_source})"
        self.apply_hold(group)
        return group

    def vllm_aiter(self, tags: dict[str, str], source) -> tuple:
        """(version, rule) of the aiter tag the resulting vLLM's ROCm images build (bump.read.vllm.aiter_branch),
        its commit read from the tag; a ReadError says why it cannot be, naming the file."""
        label = self.vllm_label or self.pinned("vllm")
        tag, where = self.sdist_fact("vllm", "aiter_branch", label)
        parsed = source.version_of_tag(tag)
        if tag not in tags or not parsed:
            raise ReadError(f"vllm {label} builds aiter {tag} ({where}), which {self.read['aiter']['repo']} has no "
                            "release tag for: its commit cannot be verified")
        return parsed[0], f"vllm {label} builds aiter {tag} = {tags[tag][:12]} ({where})"

    # ---- components in no group: the PyPI repacks, within what vLLM requires ----

    def dependents_requirements(self) -> list[tuple[list[str], str]]:
        """What the vLLM the result pins requires: its wheel METADATA and its sdist's ROCm requirement files (a
        build from the sdist installs those; the CUDA wheel's METADATA does not name them)."""
        if self._dependents is None:
            project, label = self.component("vllm").pypi(), self.vllm_label
            try:
                if label not in self.vllm_reads:
                    self.vllm_reads[label] = self.world.requirements(project, label)
                wheel = self.vllm_reads[label]
                self._dependents = [(list(wheel.value), wheel.source)] + [
                    (list(r.value), r.source) for r in self.world.sdist_requirements(
                        project, label, re.compile(self.read["vllm"]["rocm_requirements"]["sdist_files"]))]
            except ReadError as exc:
                self._dependents = ReadError(f"vllm {label}: {exc}", exc.unreachable)
        if isinstance(self._dependents, ReadError):
            raise self._dependents
        return self._dependents

    def vllm_spec(self, name: str) -> tuple[SpecifierSet | None, str]:
        """The specifier the pinned-to vLLM puts on a project (None: it names none) and where it says so."""
        spec, rule = None, ""
        for requires, source in self.dependents_requirements():
            found = spec_on(requires, name)
            if found is not None:
                spec, rule = found if spec is None else spec & found, f"{source} requires {name}{found}"
        return spec, rule

    def alone(self, component: Component) -> Group:
        row = self.row(component.name, "")
        group = Group("", [row])
        if not component.version_key.startswith(PYPI_PREFIX):  # only a PyPI repack may move alone
            row.decision, row.reason = UNKNOWN, f"not in a bump group ({component.version_key} is no {PYPI_PREFIX} " \
                                                f"entry): add it to bump.groups in {self.upstreams.path.name}"
            return group
        name = component.pypi()
        if not name:
            row.decision, row.reason = UNKNOWN, "no PyPI project declared: compare it by hand"
            return group
        try:
            releases = self.world.releases(name)
        except ReadError as exc:
            row.decision, row.reason = UNKNOWN, str(exc)
            return group
        pinned = parse_version(row.pinned)
        spec, rule = None, ""
        if releases and pinned and releases[-1][0] > pinned:
            try:
                spec, rule = self.vllm_spec(name)
            except ReadError as exc:
                row.decision, row.reason = UNKNOWN, f"what vLLM requires of {name} could not be read: {exc}"
                return group
        allowed = [(v, label) for v, label in releases if pinned and v >= pinned and (spec is None or spec.contains(v))]
        newest = releases[-1] if releases else None
        target = max(allowed) if allowed else None
        if newest is None or pinned is None:
            row.decision, row.reason = UNKNOWN, f"PyPI {name} lists no release comparable with {row.pinned}"
        elif target and target[0] > pinned and not row.hold:
            row.decision, row.to = MOVES, target[1]
            row.reason = f"PyPI {name}" + (f"; {rule}" if rule else "; no dependent's metadata names it")
            row.notes_url = f"https://pypi.org/project/{name}/{target[1]}/"
            entry = component.version_key[len(PYPI_PREFIX):]
            group.edits.append(Edit("pypi", entry, new=target[1]))
        elif newest[0] > pinned:
            row.decision, row.reason = HELD, f"{rule}; newest {newest[1]}" if rule else f"newest {newest[1]}"
        else:
            row.reason = f"newest release {newest[1]} (PyPI {name})"
        return group
