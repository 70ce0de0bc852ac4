"""The input hash that decides whether a package must be built: the rendered recipe (less what changes speed,
not output), every file of its recipe folder and the shared scripts it names, every patch it applies, its
variant values, and the input hashes of the dependencies it is built against (build and host, and a run
requirement pinned to its exact build), so a change rebuilds that package and its dependents, nothing else.
A run or test requirement alone is a name and a version range, already in the rendered recipe: which build
of it the channel holds does not change this package's file (a noarch selector or a repacked wheel that
runs with any GPU's torch is one package for every GPU, not one per GPU under one file name).
"""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any, Callable

SHARED_SCRIPTS = "_shared"  # recipes/_shared: build scripts recipes share
# Bump when what goes into the input hash changes, so old channels are rebuilt rather than trusted.
HASH_SCHEME = "orchestrate-inputs-v1"
# Build knobs reach scripts through build.script.env; they change how fast a build runs, not what it
# produces, so they stay out of the input hash (a compiler cache's folder differs per machine, too).
BUILD_KNOBS = ("MAX_JOBS", "COMPILER_LAUNCHER", "CCACHE_DIR", "SCCACHE_DIR")
COMPILER_CACHES = ("ccache", "sccache")
IGNORED_NAMES = {"__pycache__", ".git", "output", ".DS_Store"}


def own_digests(stage1: dict, recipe_files: str, patches: list[Path], variant: dict[str, str], workspace: Path) -> dict:
    """What one output's own inputs hash to (compute_input_hashes adds its dependencies')."""
    return {
        "recipe": digest(hashable_recipe(stage1)),
        "files": recipe_files,
        "patches": digest({str(p.relative_to(workspace)) if p.is_relative_to(workspace) else str(p): file_digest(p)
                           for p in patches}),
        "variant": digest(variant),
    }


def recipe_folder_digest(folder: Path, leave_out: str = "") -> str:
    """Every file of the recipe folder (but those under its subfolder `leave_out`), plus the shared scripts it
    names and those they name in turn (rocm-env.sh sources hip-toolchain.sh), by content."""
    files = {str(p.relative_to(folder)): file_digest(p) for p in _walk(folder)
             if not leave_out or p.relative_to(folder).parts[0] != leave_out}
    shared = folder.parent / SHARED_SCRIPTS
    for ref in sorted(shared_scripts_used(folder)):
        target = shared / ref
        for p in _walk(target) if target.is_dir() else [target] if target.is_file() else []:
            files[f"{SHARED_SCRIPTS}/{p.relative_to(shared)}"] = file_digest(p)
    return digest(files)


def compute_input_hashes(outputs: list, order: list) -> None:
    """Input hash = own inputs + dependencies' input hashes, so a rebuild ripples to dependents only."""
    by_name: dict[str, list] = {}  # recipes.Output by name
    for o in outputs:
        by_name.setdefault(o.name, []).append(o)
    for output in order:
        deps = {}
        for dep in sorted(output.requires & built_against(output.rendered)):
            candidates = [d for d in by_name.get(dep, []) if not d.skipped]
            if candidates:
                deps[dep] = digest(sorted(d.input_hash for d in candidates))
        output.dependency_hashes = deps
        output.input_hash = digest({"scheme": HASH_SCHEME, "own": output.own_digests, "deps": deps})


def built_against(stage1: dict) -> set[str]:
    """The requirements whose build goes into this package: its build and host environments (what it compiles
    and links against, and their run_exports), and run requirements pinned to one exact build."""
    reqs = stage1.get("requirements") or {}
    names = {_requirement_name(spec) for section in ("build", "host") for spec in reqs.get(section) or []}
    for spec in reqs.get("run") or []:
        pin = spec.get("pin_subpackage") if isinstance(spec, dict) else None
        if isinstance(pin, dict) and pin.get("exact"):
            names.add(_requirement_name(spec))
    return names - {""}


def _requirement_name(spec: Any) -> str:
    if isinstance(spec, dict):  # {pin_subpackage: {name: ...}} or {pin_compatible: ...}
        inner = next(iter(spec.values()), "")
        spec = inner.get("name", "") if isinstance(inner, dict) else inner
    match = re.match(r"[A-Za-z0-9_.\-]+", str(spec).strip())
    return match.group(0).lower() if match else ""


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _walk(folder: Path):
    for path in sorted(folder.rglob("*")):
        if path.is_file() and not IGNORED_NAMES.intersection(path.relative_to(folder).parts):
            yield path


def shared_scripts_used(folder: Path) -> set[str]:
    """The recipes/_shared files a recipe folder's scripts use, directly or through another shared script."""
    shared = folder.parent / SHARED_SCRIPTS
    named = _shared_references(folder)
    return named | shared_files_named(shared, [(shared / n).read_text(errors="ignore") for n in named if (shared / n).is_file()])


def shared_files_named(shared: Path, texts: list[str], names: set[str] | None = None,
                       code: Callable[[str], str] = lambda text: text) -> set[str]:
    """The files of `shared` (those in `names`, by default all) that `texts` name, and those they name in turn: they
    find each other beside themselves (`$(dirname "${BASH_SOURCE[0]}")/hip-toolchain.sh`). `code` is what of a text
    counts (the contract checks leave out comments)."""
    available = names if names is not None else ({p.name for p in shared.iterdir() if p.is_file()}
                                                 if shared.is_dir() else set())
    found: set[str] = set()
    queue = list(texts)
    while queue:
        text = code(queue.pop())
        for name in available - found:
            if name in text and re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w-])", text):
                found.add(name)
                queue.append((shared / name).read_text(errors="ignore"))
    return found


def _shared_references(folder: Path) -> set[str]:
    refs = set()
    pattern = re.compile(SHARED_SCRIPTS + r"/([\w.\-/]+)")
    for path in _walk(folder):
        try:
            refs.update(m.rstrip("/.") for m in pattern.findall(path.read_text(errors="ignore")))
        except OSError:
            continue
    return refs


def hashable_recipe(stage1: dict) -> dict:
    """The rendered recipe without what changes speed, not output: build knobs, compiler caches, estimates."""
    data = json.loads(json.dumps(stage1, default=str))
    script = (data.get("build") or {}).get("script") or {}
    if isinstance(script, dict) and isinstance(script.get("env"), dict):
        for knob in BUILD_KNOBS:
            script["env"].pop(knob, None)
    if isinstance(data.get("extra"), dict):  # estimates (estimates.py) and the plan's origin label do not change the package
        data["extra"].pop("estimate", None)
        data["extra"].pop("origin", None)  # where plan says it comes from: the sources themselves are hashed
    build_reqs = (data.get("requirements") or {}).get("build")
    if isinstance(build_reqs, list):  # a compiler cache in the build env changes speed, not output
        data["requirements"]["build"] = [r for r in build_reqs if str(r).split()[0] not in COMPILER_CACHES]
    return data


def digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()
