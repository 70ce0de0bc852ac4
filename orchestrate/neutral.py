"""`build-all --arch-neutral`: the packages that every architecture shares, built once.

A package is arch-neutral when every architecture's plan holds it with the same input hash (same input
hash = same package): in the real stack the host SDK, pytorch-base, triton, torchaudio, the PyPI repacks
and rocm-stack-check. CI builds them in a first job and publishes them; each architecture's job then
takes them from the channel instead of building its own copy. The converse is a defect: one file name that two
architectures would fill from different inputs (file_name_clashes), which `build-all --arch A,B` refuses.
"""
from __future__ import annotations

from dataclasses import replace

from . import runner
from .architectures import ArchitectureTable
from .errors import UserError
from .options import Options


def arch_neutral_names(options: Options) -> set[str]:
    """Names whose every output has one input hash in all architectures' default plans."""
    arches = ArchitectureTable.load(options.variants_dir).names()
    hashes: dict[str, dict[str, frozenset[str]]] = {}  # name -> arch -> input hashes of its outputs
    for arch in arches:
        plan = runner.make_plan(replace(options, arch=arch))
        by_name: dict[str, set[str]] = {}
        for step in plan.steps:
            if step.state not in (runner.SKIP, runner.NOT_NEEDED):
                by_name.setdefault(step.output.name, set()).add(step.output.input_hash)
        for name, found in by_name.items():
            hashes.setdefault(name, {})[arch] = frozenset(found)
    return {name for name, by_arch in hashes.items()
            if len(by_arch) == len(arches) and len(set(by_arch.values())) == 1}


def arch_neutral_plan(options: Options) -> runner.Plan:
    """The plan that builds the arch-neutral packages (and nothing else), under --arch or the table's first
    architecture: which one does not change them."""
    names = arch_neutral_names(options)
    if not names:
        raise UserError("no package has the same input hash for every architecture, so --arch-neutral has "
                        "nothing to build: run `orchestrate build-all --arch ARCH` for each architecture")
    table = ArchitectureTable.load(options.variants_dir)
    arch = options.arch or table.names()[0]
    plan = runner.make_plan(replace(options, arch=arch), sorted(names))
    plan.title = (f"Plan for the packages all {len(table.names())} architectures share (one build each, "
                  f"rendered for {arch}; same for every architecture)")
    return plan


def file_name_clashes(plans: list[runner.Plan]) -> list[str]:
    """One line per package file that two architectures' plans would build from different inputs (input hashes):
    in the one channel `build-all --arch gfx942,gfx950` builds into, the second would replace the first's copy and
    each run would rebuild the other's. A recipe whose package differs per GPU names the GPU in its build string
    (`${{ gpu_arch }}`); one that does not keeps the GPU out of its inputs (a run-only requirement is)."""
    builders: dict[str, dict[str, str]] = {}  # file name -> input hash -> first architecture
    for plan in plans:
        for step in plan.steps:
            if step.state not in (runner.SKIP, runner.NOT_NEEDED):
                builders.setdefault(step.output.label, {}).setdefault(step.output.input_hash, plan.arch.name)
    return [f"{label} would be built for {' and '.join(by_hash.values())} from different inputs under one file name: "
            f"in one channel each would replace the other's; give recipes/{_recipe_of(plans, label)}'s build string "
            "the GPU (${{ gpu_arch }}) if the package differs per GPU, else keep the GPU out of what it is built "
            "against" for label, by_hash in builders.items() if len(by_hash) > 1]


def _recipe_of(plans: list[runner.Plan], label: str) -> str:
    return next(s.output.recipe_name for plan in plans for s in plan.steps if s.output.label == label)
