"""The torch group: vLLM, torch and everything that moves with it, on both PyTorch paths.

vLLM's own metadata names the torch it allows; the newest vLLM whose torch can be had decides the torch.
The source path then reads the torch release's own files (its wheel METADATA for Triton's version, its tag's
triton.txt and aotriton.cmake for the commits), torchvision's and torchaudio's metadata for the companions
made with that torch; the prebuilt path reads AMD's index for the newest stable ROCm whose torch vLLM
allows, and that ROCm's triton, torchvision and torchaudio. One unknown blocks the group when it moves.
"""
from __future__ import annotations

import re

from packaging.version import InvalidVersion, Version

from .decide import CURRENT, HELD, MOVES, UNKNOWN, Decider, Download, Edit, Group, admits_series, series, spec_on
from ..release_files import ReadError

NAMES = ("vllm", "pytorch", "triton", "aotriton", "torchvision", "torchaudio", "rocm-sdk", "pytorch-amd",
         "triton-amd", "torchvision-amd", "torchaudio-amd")
SOURCE_PATH = ("pytorch", "triton", "aotriton")
PREBUILT_PATH = ("rocm-sdk", "pytorch-amd", "triton-amd", "torchvision-amd", "torchaudio-amd")
AMD_TRITON_LOCAL = re.compile(r"^git(?P<commit>[0-9a-f]+)\.rocm(?P<rocm>.+)$")


def decide_torch(d: Decider) -> Group:
    rows = {name: d.row(name, "torch") for name in NAMES}
    group = Group("torch", list(rows.values()))
    torch_name = d.component("pytorch").pypi()
    vllm, torch = rows["vllm"], rows["pytorch"]
    pinned_torch = Version(torch.pinned)
    try:
        torch_releases = d.world.releases(torch_name)
        vllm_releases = d.world.releases(d.component("vllm").pypi())
        held = _held_companions(d, rows)
    except ReadError as exc:
        for row in group.rows:
            row.decision, row.reason = UNKNOWN, str(exc)
        return group
    try:
        amd = _amd_releases(d)
    except ReadError:
        amd = None  # _prebuilt_path reads it again and says so in its rows

    # vLLM: the newest release (not below the pin) whose torch a torch release meets, that every held pin of the
    # group admits and AMD's index ships for a stable ROCm (the prebuilt path takes the same torch series)
    candidates = [(v, label) for v, label in vllm_releases if v >= Version(vllm.pinned)]
    if vllm.hold:
        candidates = [c for c in candidates if c[0] == Version(vllm.pinned)]
    window = candidates[-4:] + [c for c in candidates[:-4] if c[0] == Version(vllm.pinned)]
    refused: list[str] = []
    chosen = None
    for version, label in sorted(window, reverse=True):
        try:
            requires = d.world.requirements(d.component("vllm").pypi(), label)
        except ReadError as exc:
            if exc.unreachable or version == Version(vllm.pinned):
                # what vLLM allows decides the whole group: an older vLLM is no answer for one nobody read
                why = f"vllm {label}'s requirements could not be read: {exc}"
                for row in group.rows:
                    row.decision, row.reason = UNKNOWN, why if row is vllm else f"the torch group follows vLLM, and {why}"
                return group
            refused.append(f"vllm {label}: {exc}")
            continue
        d.vllm_reads[label] = requires
        spec = spec_on(requires.value, torch_name)
        allowed = [v for v, _ in torch_releases if v >= pinned_torch and admits_series(spec, v)]
        if torch.hold:
            allowed = [v for v in allowed if v == pinned_torch]
        rule = f"vllm {label} requires {torch_name}{spec or ''} ({requires.source})"
        allowed, blocker = _coherent(d, rows, allowed, held, amd, spec)
        if allowed or version == Version(vllm.pinned):
            chosen = (label, requires, rule, max(allowed) if allowed else pinned_torch)
            break
        refused.append(f"{rule}; {blocker}" if blocker else rule)
    if chosen is None:  # the pin is no release PyPI lists (or it was yanked)
        vllm.decision, vllm.reason = UNKNOWN, "; ".join(refused) or f"PyPI lists no vllm release from {vllm.pinned} on"
        for row in group.rows[1:]:
            row.decision, row.reason = HELD, f"vLLM's torch requirement could not be read: {vllm.reason}"
        return group
    vllm_label, vllm_requires, vllm_rule, target = chosen
    rocm_minimum = None
    if vllm_label != vllm.pinned:
        rocm_minimum, vllm_rule = _rocm_minimum(d, vllm_label, spec_on(vllm_requires.value, torch_name), vllm_rule)
        # every fact of vLLM's move is read before any of its edits is made: it moves whole or not at all
        try:
            kernels, kernels_source = d.sdist_fact("vllm", "triton_kernels_commit", vllm_label)
        except ReadError as exc:
            vllm.decision, vllm.reason = UNKNOWN, f"vllm {vllm_label}: {exc}"
        else:
            vllm.decision, vllm.to = MOVES, vllm_label
            vllm.notes_url = f"https://github.com/vllm-project/vllm/releases/tag/v{vllm_label}"
            vllm.reason = f"{vllm_rule}; triton_kernels {kernels[:12]} ({kernels_source})"
            group.edits.append(Edit("shared", "vllm_version", new=vllm_label))
            group.edits.append(Edit("literal", d.recipe_file("vllm"), d.pins.primary_source("vllm").pin,
                                    _pypi_sha256(d, "vllm", vllm_label)))
            old_kernels = d.pins.git_rev("vllm", "triton")
            if old_kernels and old_kernels != kernels:
                group.edits.append(Edit("literal", d.recipe_file("vllm"), old_kernels, kernels))
    else:
        vllm.reason = f"newest release {vllm_releases[-1][1]} (PyPI {d.component('vllm').pypi()}); " + \
            (f"{refused[0]}" if refused else vllm_rule)
        if refused and vllm_releases[-1][0] > Version(vllm.pinned):
            vllm.decision = HELD
    newest_torch = torch_releases[-1][0]
    blocked_by = refused[0] if refused and newest_torch > target else vllm_rule

    _source_path(d, group, rows, target, blocked_by)
    _companions(d, group, rows, target, blocked_by)
    _prebuilt_path(d, group, rows, vllm_requires, vllm_rule)

    unknown = [r for r in group.rows if r.decision == UNKNOWN]
    if rocm_minimum is not None and target < rocm_minimum:
        group.hold_all(f"vllm {vllm_label}'s ROCm build needs torch >= {rocm_minimum} ({vllm_rule}); "
                       f"pytorch can move only to {target}")
    elif target != pinned_torch and torch.decision != MOVES:  # vLLM's choice needs that torch
        group.hold_all(f"the torch group moves whole and pytorch {target} cannot move ({torch.reason})")
    elif unknown:
        group.hold_all(f"the torch group moves whole and {unknown[0].name} could not be read ({unknown[0].reason})")
    elif rows["pytorch"].decision == MOVES and rows["pytorch-amd"].decision != MOVES and \
            series(target) != series(rows["pytorch-amd"].pinned):
        group.hold_all(f"torch {target} needs a ROCm whose torch is {'.'.join(map(str, series(target)))} on AMD's "
                       f"index ({rows['pytorch-amd'].reason or 'none found'})")
    return group


def _held_companions(d: Decider, rows: dict) -> list[tuple[object, str]]:
    """(the torch specifier, why) of each held torchvision/torchaudio pin: the group's torch must be one its
    pinned release was made with."""
    torch_name, found = d.component("pytorch").pypi(), []
    for name in ("torchvision", "torchaudio"):
        row = rows[name]
        if not row.hold:
            continue
        project = d.component(name).pypi()
        requires = d.world.requirements(project, row.pinned)
        spec = spec_on(requires.value, torch_name)
        if spec is not None:
            found.append((spec, f"{name} is held ({d.component(name).version_key}: hold: {row.hold}) and "
                                f"{project} {row.pinned} requires {torch_name}{spec} ({requires.source})"))
    return found


def _coherent(d: Decider, rows: dict, allowed: list[Version], held: list, amd: dict | None, spec) -> tuple[list[Version], str]:
    """The torch releases of `allowed` every held pin admits and AMD's index ships (its series) for a stable
    ROCm, and why the newest of `allowed` is not among them ("" when it is)."""
    why = ""
    for companion_spec, hold in held:
        kept = [v for v in allowed if companion_spec.contains(v, prereleases=True)]
        if allowed and max(allowed) not in kept:
            why = why or hold
        allowed = kept
    if amd is not None:
        shipped = {series(Version(amd_torch.public)) for _, amd_torch in _amd_fits(d, rows, amd, spec)}
        kept = [v for v in allowed if series(v) in shipped]
        if allowed and max(allowed) not in kept and not why:
            holds = [f"{d.component(n).version_key}: hold: {rows[n].hold}" for n in ("rocm-sdk", "pytorch-amd") if rows[n].hold]
            why = (f"AMD's index has no {d.amd['pytorch-amd']} {max(allowed)}+rocm for a stable ROCm"
                   + (f" it may take ({'; '.join(holds)})" if holds else "") + f" yet (read at {d.world.amd_index})")
        allowed = kept
    return allowed, why


def _amd_releases(d: Decider) -> dict[str, list[Version]]:
    return {name: d.world.amd_versions(d.amd[name]) for name in PREBUILT_PATH}


def _amd_fits(d: Decider, rows: dict, releases: dict, spec) -> list[tuple[Version, Version]]:
    """(ROCm, its newest torch vLLM's `spec` admits), newest ROCm first: stable ROCm releases not below the
    pin and torch builds not below the prebuilt pin (only the pins where they are held)."""
    rocm, torch = rows["rocm-sdk"], rows["pytorch-amd"]
    stable_rocm = [v for v in releases["rocm-sdk"] if not v.is_prerelease and not v.is_devrelease
                   and v >= Version(rocm.pinned) and (not rocm.hold or v == Version(rocm.pinned))]
    found = []
    for candidate in reversed(stable_rocm):
        fits = [v for v in releases["pytorch-amd"] if v.local == f"rocm{candidate}" and not v.is_prerelease
                and admits_series(spec, Version(v.public)) and Version(v.public) >= Version(torch.pinned)
                and (not torch.hold or Version(v.public) == Version(torch.pinned))]
        if fits:
            found.append((candidate, max(fits)))
    return found


def _rocm_minimum(d: Decider, label: str, spec, rule: str) -> tuple[Version | None, str]:
    """The torch vLLM's ROCm build accepts at least (its sdist's CMakeLists.txt), read where the sdist is
    downloaded anyway (a vLLM that moves: --write takes its sha256), and the rule saying whether it agrees
    with the wheel METADATA; (None, rule) where the sdist does not say."""
    try:
        value, source = d.sdist_fact("vllm", "torch_rocm_minimum", label)
        minimum = Version(value)
    except (ReadError, InvalidVersion):
        return None, rule
    agrees = spec is None or admits_series(spec, minimum)
    return minimum, rule + (f"; {source} TORCH_SUPPORTED_VERSION_ROCM {value} " +
                            ("agrees" if agrees else "disagrees: it is the minimum on ROCm"))


def _pypi_sha256(d: Decider, project: str, label: str) -> str:
    """The sdist's sha256 as PyPI publishes it (the recipe downloads the sdist)."""
    sdists = [f for f in d.world.files(project, label) if str(f.get("filename", "")).endswith(".tar.gz")]
    digest = str(((sdists[0].get("digests") or {}).get("sha256")) if sdists else "")
    return digest or Download("")  # write.py holds the group: an empty URL cannot be downloaded


def _source_path(d: Decider, group: Group, rows: dict, target: Version, rule: str) -> None:
    torch, triton, aotriton = rows["pytorch"], rows["triton"], rows["aotriton"]
    torch_name, triton_name = d.component("pytorch").pypi(), d.component("triton").pypi()
    if target == Version(torch.pinned):
        newest = d.world.releases(torch_name)[-1][1]
        if Version(newest) > target:
            torch.decision, torch.reason = HELD, f"{rule}; newest {newest}"
            for row in (triton, aotriton):
                row.decision, row.reason = HELD, f"pytorch stays at {torch.pinned}: {rule}"
        else:
            torch.reason = f"newest release {newest} (PyPI {torch_name})"
            triton.reason = aotriton.reason = f"pytorch stays at {torch.pinned}"
        return
    label = str(target)
    repo, tag = d.read["pytorch"]["repo"], d.tag_of("pytorch", label)
    try:
        requires = d.world.requirements(torch_name, label)
        spec = spec_on(requires.value, triton_name)
        triton_versions = [(v, lbl) for v, lbl in d.world.releases(triton_name) if spec is None or spec.contains(v)]
        if not triton_versions:
            raise ReadError(f"no {triton_name} release meets {torch_name} {label}'s {triton_name}{spec} ({requires.source})")
        triton_label = triton_versions[-1][1]
        triton_commit, triton_source = d.fact("pytorch", "triton_commit", tag)
        llvm_commit, _ = d.fact("triton", "llvm_commit", triton_commit)
        aot_version, aot_source = d.fact("pytorch", "aotriton_version", tag)
        aot_commit, _ = d.fact("pytorch", "aotriton_commit", tag)
        aot_repo = d.read["aotriton"]["repo"]
        aot_tag_commit = str(d.world.tag_commit(aot_repo, aot_version).value)
        aot_tree = d.world.tree(aot_repo, aot_commit)
        aiter_tag, _ = d.fact("aotriton", "aiter_tag", aot_commit)
        aiter_commit = str(d.world.tag_commit(d.read["aiter"]["repo"], aiter_tag).value)
        # PyTorch moves __AOTRITON_CI_COMMIT under the same __AOTRITON_VER label: the commit decides, not the label
        old_aot_commit = _pin_of({s.location: s.pin for s in d.pins.sources("aotriton")}, "aotriton")
        aot_moves = aot_version != aotriton.pinned or aot_commit != old_aot_commit
        broken = d.broken_patches("aotriton", aot_repo, aot_commit) if aot_moves else ""
    except ReadError as exc:
        torch.decision, torch.reason = UNKNOWN, f"torch {label} ({rule}): {exc}"
        for row in (triton, aotriton):
            row.decision, row.reason = HELD, f"torch {label}'s pins could not be read: {exc}"
        return
    if broken:
        for row in (torch, triton, aotriton):
            row.decision, row.reason = HELD, f"patch {broken} no longer applies to aotriton {aot_version} " \
                                             f"({aot_source} names {aot_commit[:12]}), which torch {label} needs"
        return
    torch.decision, torch.to, torch.reason = MOVES, label, f"PyPI {torch_name}; {rule}"
    torch.notes_url = f"https://github.com/{repo}/releases/tag/{tag}"
    old_url = d.pins.primary_source("pytorch-rocm")
    group.edits += [Edit("shared", "pytorch_version", new=label),
                    Edit("literal", d.recipe_file("pytorch-rocm"), old_url.pin,
                         Download(old_url.location.replace(torch.pinned, label)))]
    if triton_label != triton.pinned or triton_commit != d.pins.git_rev("triton-rocm", "triton"):
        triton.decision, triton.to = MOVES, triton_label
        triton.reason = f"{requires.source} requires {triton_name}{spec}; {triton_source} = {triton_commit[:12]}"
        triton.notes_url = f"https://github.com/{d.read['triton']['repo']}/releases/tag/v{triton_label}"
        group.edits += [Edit("shared", "triton_version", new=triton_label),
                        Edit("literal", d.recipe_file("triton-rocm"), d.pins.git_rev("triton-rocm", "triton"), triton_commit),
                        Edit("literal", d.recipe_file("triton-rocm"), d.pins.git_rev("triton-rocm", "llvm-project"), llvm_commit)]
    if aot_moves:
        aotriton.decision, aotriton.to = MOVES, aot_version
        aotriton.reason = f"{aot_source}: {aot_version} = {aot_commit[:12]}"
        if aot_version == aotriton.pinned:
            aotriton.reason = f"version stays {aot_version}; commit {old_aot_commit[:12]} → {aot_commit[:12]} ({aot_source})"
        if aot_tag_commit != aot_commit:  # a known state, not an unknown: the recipe builds what PyTorch builds
            aotriton.reason += f"; pinned to that CI commit, as PyTorch builds it (tag {aot_version} is {aot_tag_commit[:12]})"
        aotriton.notes_url = f"https://github.com/{aot_repo}/releases/tag/{aot_version}"
        recipe = d.recipe_file("aotriton")
        old = {s.location: s.pin for s in d.pins.sources("aotriton")}
        old_tree = d.pins.script_env("aotriton", "AOTRITON_GIT_TREESHA1") or _context(d, "aotriton", "aotriton_tree")
        old_aiter_tag = d.pins.script_env("aotriton", "AITER_TAG") or _context(d, "aotriton", "aiter_tag")
        group.edits += [Edit("shared", "aotriton_version", new=aot_version),
                        Edit("literal", recipe, old_aot_commit, aot_commit),
                        Edit("literal", recipe, old_tree, aot_tree),
                        Edit("literal", recipe, f"aiter_tag: {old_aiter_tag}", f"aiter_tag: {aiter_tag}"),
                        Edit("literal", recipe, _pin_of(old, "aiter"), aiter_commit)]


def _companions(d: Decider, group: Group, rows: dict, target: Version, rule: str) -> None:
    torch_name = d.component("pytorch").pypi()
    recipes = {"torchvision": "torchvision-rocm", "torchaudio": "torchaudio-rocm"}
    for name, recipe in recipes.items():
        row, project = rows[name], d.component(name).pypi()
        try:
            releases = [(v, lbl) for v, lbl in d.world.releases(project) if v >= Version(row.pinned)]
            chosen, refusals = None, []
            for version, label in reversed(releases[-3:]):
                requires = d.world.requirements(project, label)
                spec = spec_on(requires.value, torch_name)
                if spec is not None and spec.contains(target, prereleases=True):
                    chosen, chosen_rule = label, f"{requires.source} requires {torch_name}{spec}"
                    break
                refusals.append(f"{project} {label} requires {torch_name}{spec or ' (none named)'} ({requires.source})")
                if version == Version(row.pinned):
                    break
        except ReadError as exc:
            row.decision, row.reason = UNKNOWN, str(exc)
            continue
        if chosen is None and target != Version(rows["pytorch"].pinned):
            row.decision, row.reason = UNKNOWN, f"no {project} release requires {torch_name} {target}: " + "; ".join(refusals)
        elif chosen is None or chosen == row.pinned:
            newest = releases[-1][1] if releases else row.pinned
            if Version(newest) > Version(row.pinned):
                row.decision, row.reason = HELD, "; ".join(refusals[:1] + [rule])
            else:
                row.reason = f"newest release {newest} (PyPI {project})"
        elif row.hold:
            row.decision, row.reason = HELD, f"hold: {row.hold}"
        else:
            row.decision, row.to = MOVES, chosen
            row.reason = f"PyPI {project}; {chosen_rule}"
            row.notes_url = f"https://pypi.org/project/{project}/{chosen}/"
            source = d.pins.primary_source(recipe)
            group.edits += [Edit("shared", d.component(name).version_key, new=chosen),
                            Edit("literal", d.recipe_file(recipe), source.pin,
                                 Download(source.location.replace(row.pinned, chosen)))]


def _prebuilt_path(d: Decider, group: Group, rows: dict, vllm_requires, rule: str) -> None:
    torch_name = d.component("pytorch").pypi()
    spec = spec_on(vllm_requires.value, torch_name)
    rocm, torch = rows["rocm-sdk"], rows["pytorch-amd"]
    projects = {name: d.amd[name] for name in PREBUILT_PATH}
    try:
        releases = _amd_releases(d)
    except ReadError as exc:
        for name in PREBUILT_PATH:
            rows[name].decision, rows[name].reason = UNKNOWN, f"AMD's index: {exc}"
        return
    fits = _amd_fits(d, rows, releases, spec)
    # the newest stable ROCm whatever holds it back (a held rocm-sdk too): the report says what it ships
    stable_rocm = [v for v in releases["rocm-sdk"] if not v.is_prerelease and not v.is_devrelease
                   and v >= Version(rocm.pinned)]
    newest = stable_rocm[-1] if stable_rocm else None
    if not fits:  # the index was read: AMD has not shipped it yet, a decision and not an unknown
        rocm.decision, rocm.reason = HELD, f"AMD's index ({d.world.amd_index}) has no stable ROCm with a torch " \
                                           f"{torch_name}{spec or ''} allows yet ({rule})"
        return
    version, amd_torch = fits[0]
    shipped = [str(v) for v in releases["pytorch-amd"] if newest and v.local == f"rocm{newest}"]
    if newest and newest > version:
        why = f"{rule}; AMD's ROCm {newest} ships torch {', '.join(shipped) or 'none'} ({d.world.amd_index})"
        for row in (rows[n] for n in PREBUILT_PATH):  # each newer build of the newest ROCm waits with it
            if row is rocm or row is torch or any(_rocm_of(v.local) == str(newest) and v.public != row.pinned
                                           for v in releases[row.name]):
                row.decision, row.reason = HELD, why
    else:
        rocm.reason = torch.reason = f"newest stable ROCm on {d.world.amd_index}"
    rocm_label = str(version)
    picks = {"pytorch-amd": Version(amd_torch.public)}
    for name in ("triton-amd", "torchvision-amd", "torchaudio-amd"):
        # dev builds are no release; a pre-release label is (AMD's torchvision is 0.29.0a0)
        mine = [v for v in releases[name] if _rocm_of(v.local) == rocm_label and not v.is_devrelease]
        if not mine:
            rows[name].decision, rows[name].reason = UNKNOWN, f"AMD's index has no {projects[name]} release " \
                                                              f"(dev builds aside) for ROCm {rocm_label}"
            continue
        picks[name] = max(mine)
    moves = rocm_label != rocm.pinned or str(picks["pytorch-amd"]) != torch.pinned
    for name, pick in picks.items():
        public = pick.public if isinstance(pick, Version) else str(pick)
        row = rows[name]
        if public != row.pinned and (moves or name != "pytorch-amd"):
            row.decision, row.to = MOVES, public
            row.reason = f"AMD's index {projects[name]} {pick} for ROCm {rocm_label}"
            row.notes_url = f"{d.world.amd_index}{projects[name]}/"
            group.edits.append(Edit("shared", d.component(name).version_key, new=public))
        elif row.decision in (CURRENT, HELD):
            row.reason = f"AMD's index {projects[name]} {pick} is the ROCm {rocm_label} build" + \
                (f"; {row.reason}" if row.decision == HELD else "")
    if rocm_label != rocm.pinned:
        rocm.decision, rocm.to = MOVES, rocm_label
        rocm.reason = f"newest stable ROCm on {d.world.amd_index} whose torch ({picks['pytorch-amd']}) {rule.split(' (')[0]} allows"
        rocm.notes_url = f"{d.world.amd_index}rocm/"
        group.edits.append(Edit("shared", "rocm_sdk_version", new=rocm_label))
    triton_pick = picks.get("triton-amd")
    local = AMD_TRITON_LOCAL.match(triton_pick.local or "") if isinstance(triton_pick, Version) else None
    if local and any(e.kind == "shared" for e in group.edits):
        old = _prebuilt_triton_commit(d)
        if old and old != local.group("commit"):
            group.edits.append(Edit("literal", "variants/prebuilt.yaml", f"+git{old}.", f"+git{local.group('commit')}."))
    if any(row.decision == MOVES for row in (rows[n] for n in PREBUILT_PATH)):
        group.edits.append(Edit("lock", "variants/prebuilt-lock.yaml"))


def _rocm_of(local: str | None) -> str:
    match = re.search(r"rocm(\d+(?:\.\d+)*)$", local or "")
    return match.group(1) if match else ""


def _prebuilt_triton_commit(d: Decider) -> str:
    text = (d.workspace / "variants" / "prebuilt.yaml").read_text()
    match = re.search(r"\{prebuilt_triton_version\}\+git([0-9a-f]+)\.", text)
    return match.group(1) if match else ""


def _context(d: Decider, recipe: str, key: str) -> str:
    match = re.search(rf"^\s+{key}:\s*(\S+)", (d.workspace / d.recipe_file(recipe)).read_text(), re.M)
    return match.group(1) if match else ""


def _pin_of(pins_by_location: dict[str, str], part: str) -> str:
    return next((pin for location, pin in pins_by_location.items() if f"/{part}" in location.lower()), "")

