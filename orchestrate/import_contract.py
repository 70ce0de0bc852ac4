"""The contract between a Python package's recipe and its upstream, checked against the checkout (for vLLM,
the unpacked sdist): do the recipe's run requirements cover what the package imports on the path users
run, and does the recipe account for every requirement upstream lists (required, or left out in
extra.left_out_requirements with a reason). tests/test_upstream_contract.py runs it; this module only reads.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement

from .contract import FAILED, OK, SKIPPED, Outcome
from .imports import (Closure, Root, conda_name, distribution_of, import_closure, module_exists, needed_modules,
                      normalize, unmet_needs)
from .recipes import load_recipe_yaml

LEFT_OUT_KEY = "left_out_requirements"  # recipe extra: {PyPI name: why it is not a run requirement}


@dataclass(frozen=True)
class ImportContract:
    """A recipe whose run requirements must cover what `roots` import in its checkout (package source under
    the checkout's root), and account for every entry of upstream's requirement files."""

    recipe: str
    package: str
    roots: tuple[Root, ...]
    requirement_files: tuple[str, ...]
    path: str  # what users run, for messages


IMPORT_CONTRACTS = (
    # vllm's console script is vllm.entrypoints.cli.main:main (pyproject [project.scripts]); `vllm serve`
    # runs the OpenAI server that vllm.entrypoints.openai.api_server re-exports.
    ImportContract("vllm", "vllm",
                   (Root("vllm.entrypoints.openai.api_server"), Root("vllm.entrypoints.cli.main", "main")),
                   ("requirements/common.txt", "requirements/rocm.txt"), "`vllm serve`"),
)


def run_requirement_names(recipe_path: Path) -> set[str]:
    """Normalized names of the recipe's run requirements, every `if` branch included (read unrendered)."""
    run = ((load_recipe_yaml(recipe_path).get("requirements") or {}).get("run")) or []
    names: set[str] = set()

    def add(spec):
        if isinstance(spec, dict):
            for branch in ("then", "else"):
                for item in spec.get(branch) or [] if isinstance(spec.get(branch), list) else [spec.get(branch)]:
                    if item is not None:
                        add(item)
            return
        text = str(spec).strip()
        pinned = re.search(r"pin_(?:compatible|subpackage)\(\s*[\"']([^\"']+)", text)
        name = pinned.group(1) if pinned else text.split()[0] if text and not text.startswith("${{") else None
        if name:
            names.add(normalize(name))

    for spec in run:
        add(spec)
    return names


def left_out_requirements(recipe_path: Path) -> dict[str, str]:
    extra = load_recipe_yaml(recipe_path).get("extra") or {}
    return {normalize(str(k)): str(v or "").strip() for k, v in (extra.get(LEFT_OUT_KEY) or {}).items()}


def upstream_requirements(checkout: Path, files: tuple[str, ...]) -> dict[str, str]:
    """Normalized distribution name -> where upstream lists it first ("requirements/common.txt:12"),
    following `-r other.txt`; markers are ignored (every entry counts)."""
    found: dict[str, str] = {}
    seen: set[Path] = set()

    def read(path: Path):
        if path in seen or not path.is_file():
            return
        seen.add(path)
        for number, raw in enumerate(path.read_text().splitlines(), 1):
            line = raw.split(" #", 1)[0].split("#", 1)[0].strip() if not raw.lstrip().startswith("#") else ""
            if line.startswith(("-r ", "--requirement ")):
                read(path.parent / line.split(None, 1)[1])
            elif line and not line.startswith("-"):
                try:
                    name = normalize(Requirement(line).name)
                except InvalidRequirement:
                    continue
                found.setdefault(name, f"{path.relative_to(checkout)}:{number}")

    for file in files:
        read(checkout / file)
    return found


@dataclass
class _ImportFacts:
    """What both import checks read: the checkout, the recipe's run requirements and left-out entries, and
    the import closure of the contract's entry points."""

    checkout: Path
    run: set[str]
    left_out: dict[str, str]
    closure: Closure


def _import_facts(contract: ImportContract, workspace: Path, sources: Path) -> _ImportFacts | None:
    """None where there is no checkout of the recipe's upstream (the check is skipped)."""
    checkout = sources / contract.recipe
    if not checkout.is_dir():
        return None
    recipe_path = workspace / "recipes" / contract.recipe / "recipe.yaml"
    return _ImportFacts(checkout, run_requirement_names(recipe_path), left_out_requirements(recipe_path),
                        import_closure(checkout, contract.package, list(contract.roots)))


def check_imports_covered(contract: ImportContract, workspace: Path, sources: Path) -> Outcome:
    """Every third-party module the path imports is a run requirement (conditional ones may be left out)."""
    facts = _import_facts(contract, workspace, sources)
    if facts is None:
        return Outcome(SKIPPED, f"no checkout of {contract.recipe}")
    run, left_out, closure = facts.run, facts.left_out, facts.closure
    drift = []
    for module, where in sorted(closure.third_party.items()):
        package = conda_name(distribution_of(module))
        if normalize(package) not in run:
            drift.append(f"{module} ({where}) needs run requirement {package}")
    for module, where in sorted(closure.conditional.items()):
        distribution = distribution_of(module)
        if normalize(conda_name(distribution)) not in run and distribution not in left_out:
            drift.append(f"{module} ({where}) needs run requirement {conda_name(distribution)} or "
                         f"extra.{LEFT_OUT_KEY}.{distribution} with the reason")
    label = f"recipes/{contract.recipe}/recipe.yaml"
    if drift:
        return Outcome(FAILED, f"{contract.path} imports what {label} does not require: " + "; ".join(drift))
    return Outcome(OK, f"{len(closure.third_party)} third-party modules imported by {contract.path} "
                       f"({len(closure.package_modules)} {contract.package} modules) are run requirements")


def check_requirements_accounted(contract: ImportContract, workspace: Path, sources: Path) -> Outcome:
    """Every upstream requirement is a run requirement or left out with a reason; no stale left-out entry."""
    facts = _import_facts(contract, workspace, sources)
    if facts is None:
        return Outcome(SKIPPED, f"no checkout of {contract.recipe}")
    run, left_out, closure = facts.run, facts.left_out, facts.closure
    listed = upstream_requirements(facts.checkout, contract.requirement_files)
    always = {distribution_of(m) for m in closure.third_party}
    conditional = {distribution_of(m) for m in closure.conditional}
    drift = []
    for name, where in sorted(listed.items()):
        required = normalize(conda_name(name)) in run
        if not required and name not in left_out:
            drift.append(f"{name} ({where}) is neither a run requirement ({conda_name(name)}) nor in extra.{LEFT_OUT_KEY}")
    for name, why in sorted(left_out.items()):
        if not why:
            drift.append(f"extra.{LEFT_OUT_KEY}.{name} gives no reason")
        if normalize(conda_name(name)) in run:
            drift.append(f"{name} is both a run requirement and in extra.{LEFT_OUT_KEY}: drop one")
        elif name in always:
            drift.append(f"{name} is imported unconditionally by {contract.path}: it cannot be left out")
        elif name not in listed and name not in conditional:
            drift.append(f"extra.{LEFT_OUT_KEY}.{name} is no longer an upstream requirement nor imported: drop it")
    if drift:
        return Outcome(FAILED, f"recipes/{contract.recipe}/recipe.yaml does not match "
                               f"{', '.join(contract.requirement_files)}: " + "; ".join(drift))
    return Outcome(OK, f"{len(listed)} upstream requirements: {len(listed) - len(set(listed) & set(left_out))} "
                       f"required, {len(set(listed) & set(left_out))} left out with a reason")


@dataclass(frozen=True)
class ModuleContract:
    """Every module of `provider` that the importer's code imports (function bodies included) exists in the
    provider's checkout at our pin: the importer's features that use it would fail on first use otherwise."""

    importer: str  # recipe folder of the importer's checkout (and its package)
    provider: str  # recipe folder of the provider's checkout (and its package)
    # old module names the provider resolves at run time: (package, dict literal in its __init__.py)
    alias_maps: tuple[tuple[str, str], ...] = ()


MODULE_CONTRACTS = (
    # vLLM's ROCm kernels come from aiter, imported where each feature runs (vllm/_aiter_ops.py, attention
    # backends, MoE experts, models/*/amd); aiter keeps old flat module names through a finder
    # (aiter/ops/triton/__init__.py _BACKWARD_COMPAT_MAP).
    ModuleContract("vllm", "aiter", (("aiter.ops.triton", "_BACKWARD_COMPAT_MAP"),)),
)


def check_modules_exist(contract: ModuleContract, sources: Path) -> Outcome:
    importer, provider = sources / contract.importer, sources / contract.provider
    missing = [name for name in (contract.importer, contract.provider) if not (sources / name).is_dir()]
    if missing:
        return Outcome(SKIPPED, f"no checkout of {' or '.join(missing)}")
    needs = needed_modules(importer, contract.importer, contract.provider)
    unmet = unmet_needs(needs, module_exists(provider, contract.alias_maps))
    if unmet:
        by_module: dict[str, list[str]] = {}
        for line in unmet:
            module, _, where = line.partition(" (")
            by_module.setdefault(module, []).append(where.rstrip(")"))
        listed = "; ".join(f"{m} ({', '.join(w)})" for m, w in sorted(by_module.items()))
        return Outcome(FAILED, f"{len(by_module)} {contract.provider} modules that {contract.importer} imports do not "
                               f"exist at our {contract.provider} pin: {listed}")
    return Outcome(OK, f"all {len(needs)} {contract.provider} imports of {contract.importer} resolve at our pin")
