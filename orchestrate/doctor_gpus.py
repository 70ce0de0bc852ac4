"""doctor's lines about the GPUs: every GPU this machine has and the architecture each maps to, which one the
solver installs for, a GPU outside the architecture table (its nearest family and the page on adding it), and
HSA_OVERRIDE_GFX_VERSION (what it pretends, what the table offers for the real GPU). `Check` is doctor's line."""
from __future__ import annotations

import os
from dataclasses import dataclass

from .architectures import Architecture, ArchitectureTable
from .detect import gfx_name_from_isa, solver_gpu
from .options import ARCH_ENV

OK, WARN, FAIL = "ok", "warn", "fail"
ADDING_A_GPU = "docs/adding-a-gpu.md"  # the manual's page on adding a row to the table
# ROCm's runtime takes this ISA version instead of the GPU's own; AMD: "never meant to be a consumer-oriented
# feature" (issue 35). The solver reads the real GPU from the kernel, so the builds installed are the real GPU's.
HSA_OVERRIDE_ENV = "HSA_OVERRIDE_GFX_VERSION"


@dataclass
class Check:
    name: str
    status: str  # ok | warn | fail
    detail: str
    fix: str = ""

    def line(self) -> str:
        return f"{self.status:<4}  {self.name:<9} {self.detail}" + (f"; fix: {self.fix}" if self.fix else "")


solver_pick = solver_gpu  # the GPU pixi's solver installs for


def gpu_checks(chosen: list[str], gpus: list[tuple[str, int]], table: ArchitectureTable) -> list[Check]:
    """One line per GPU seen (one line where there is none), and with several, which one an environment gets."""
    if len(gpus) <= 1:
        return [gpu_check(chosen, gpus[0][0] if gpus else None, table)]
    checks = []
    for number, (gfx, cus) in enumerate(gpus):
        said = f"GPU {number} of {len(gpus)}: "
        if gfx not in table.architectures:
            checks.append(unknown_gpu(gfx, table, said, FAIL if not chosen else WARN))
            continue
        found = f"{said}{gfx} ({table.architectures[gfx].product}), {cus} compute units"
        missing = chosen and gfx not in chosen
        checks.append(Check("gpu", WARN if missing else OK, found + (f", not in --arch {','.join(chosen)}" if missing
                                                                      else ""),
                            f"add it: --arch {','.join([*chosen, gfx])}" if missing else ""))
    pick, kinds = solver_pick(gpus), sorted({gfx for gfx, _ in gpus})
    if len(kinds) > 1:
        checks.append(Check("gpus", WARN, f"{len(gpus)} GPUs of {len(kinds)} architectures ({', '.join(kinds)}): pixi's "
                            f"solver sees {pick} (most compute units) and installs its builds",
                            f"for all of them build --arch {','.join(kinds)} (docs/orchestrator.md, Several GPUs)"))
    return checks


def gpu_check(chosen: list[str], detected: str | None, table: ArchitectureTable) -> Check:
    known, given = ", ".join(table.names()), ",".join(chosen)
    if detected and detected in table.architectures:
        found = f"{detected} ({table.architectures[detected].product})"
        if chosen and detected not in chosen:
            return Check("gpu", WARN, f"this machine has {found}, you build for {given}: those packages will "
                         "not run here", f"drop --arch (and {ARCH_ENV}) to build for this GPU")
        return Check("gpu", OK, found)
    if detected:
        return unknown_gpu(detected, table, "this machine's ", WARN if chosen else FAIL,
                           f"; building for {given}" if chosen else "")
    if chosen:
        return Check("gpu", WARN, f"no AMD GPU seen; building for {given} (a build machine needs none)",
                     "`pixi run check` needs the GPU: run it where the GPU is")
    return Check("gpu", FAIL, "no AMD GPU seen and no architecture given",
                 f"pass --arch or set {ARCH_ENV} (one of {known}), or see the driver line below")


def unknown_gpu(gfx: str, table: ArchitectureTable, said: str, status: str, building: str = "") -> Check:
    """A GPU outside the table: its gfx target, the nearest family the table has, and the page on adding it."""
    return Check("gpu", status, f"{said}{gfx} is not in the architecture table (nearest family there: "
                 f"{nearest_family(gfx, table)}){building}",
                 f"add its row as {ADDING_A_GPU} says, or pass --arch to build for another GPU")


def nearest_family(gfx: str, table: ArchitectureTable) -> str:
    """The table's architectures sharing the longest gfx prefix with `gfx` (gfx1013 -> gfx101x where the table has
    gfx1010-gfx1012), named by their family device package where they share one."""
    def shared(name: str) -> int:
        return next((i for i, (a, b) in enumerate(zip(gfx, name)) if a != b), min(len(gfx), len(name)))
    best = max((shared(name) for name in table.names()), default=0)
    members = [a for a in table.architectures.values() if shared(a.name) == best]
    families = {a.torch_device_family for a in members}
    label = families.pop() if len(families) == 1 and "" not in families else gfx[:best] + "x"
    return f"{label}: {', '.join(a.name for a in members)}"


def hsa_override_check(gpus: list[tuple[str, int]], table: ArchitectureTable, value: str | None = None) -> Check | None:
    """HSA_OVERRIDE_GFX_VERSION set: one line saying what it pretends and what the table offers for the real GPU."""
    value = os.environ.get(HSA_OVERRIDE_ENV) if value is None else value
    if not value:
        return None
    pretends = gfx_name_from_isa(value.strip())
    if not pretends:
        return Check("hsa", WARN, f"{HSA_OVERRIDE_ENV}={value} is not an ISA version like 11.0.0 (ROCm rejects it)",
                     f"unset {HSA_OVERRIDE_ENV}")
    others = [gfx for gfx, _ in gpus if gfx != pretends]
    if gpus and not others:
        return Check("hsa", WARN, f"{HSA_OVERRIDE_ENV}={value} is this {pretends}'s own ISA version: it changes nothing "
                     "here, and would make any other GPU run its kernels", f"unset {HSA_OVERRIDE_ENV}")
    pick = solver_pick(gpus)
    real = pick if pick in others else next(iter(others), None)
    seen = f"this {', '.join(dict.fromkeys(others))} as {pretends}" if real else f"any AMD GPU as {pretends}"
    row = table.architectures.get(real or "")
    offers = (f"the table has {real}: {offer(row)}: build for it (--arch {real})" if row else
              f"{real} is not in the table (nearest family: {nearest_family(real, table)}; {ADDING_A_GPU})" if real
              else "no GPU is seen to compare with")
    return Check("hsa", WARN, f"{HSA_OVERRIDE_ENV}={value} makes ROCm run {seen}, kernels built for another GPU "
                 f"(pixi still installs the real GPU's builds); {offers}", f"unset {HSA_OVERRIDE_ENV}")


def offer(arch: Architecture) -> str:
    """What the stack gives an architecture, in a few words: where its PyTorch comes from, and Flash SDPA."""
    torch = "AMD's prebuilt PyTorch" if arch.prebuilt_torch.value == "yes" else "PyTorch built from source"
    flash = arch.capabilities.get("aotriton")
    return f"{torch}, Flash SDPA {'no' if not flash else flash.value}"
