"""Which AMD GPU architecture this machine has, as the hardware names it (gfx...): ROCm's tools, else the
kernel's topology. Which of the table's architectures a build is for is `architectures.choose_arch`."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path


KFD_NODES = Path("/sys/class/kfd/kfd/topology/nodes")
GFX_NAME = re.compile(r"\bgfx[0-9a-f]{3,4}\b")


def detect_gpu_arch(kfd_nodes: Path = KFD_NODES) -> str | None:
    """The GPU's architecture; `kfd_nodes` lets `doctor` (and tests) read another sysfs tree. With GPUs of several
    architectures, the one pixi's solver installs for (solver_gpu), so that a build is for what installs."""
    kinds = {gfx for gfx, _ in detect_gpus(kfd_nodes)}
    if len(kinds) > 1:
        return solver_gpu(detect_gpus(kfd_nodes))
    for probe in (_from_rocm_agent_enumerator, _from_rocminfo, lambda: _from_kfd_topology(kfd_nodes)):
        found = [a for a in probe() if a != "gfx000"]
        if found:
            return found[0]
    return None


def _run(cmd: list[str]) -> str:
    exe = shutil.which(cmd[0])
    if not exe:
        return ""
    try:
        return subprocess.run([exe, *cmd[1:]], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def _from_rocm_agent_enumerator() -> list[str]:
    return GFX_NAME.findall(_run(["rocm_agent_enumerator"]))


def _from_rocminfo() -> list[str]:
    return GFX_NAME.findall(_run(["rocminfo"]))


def _from_kfd_topology(nodes: Path = KFD_NODES) -> list[str]:
    """Decode `gfx_target_version` (e.g. 110501 -> gfx1151) of each GPU node, without ROCm installed."""
    archs = []
    for props in sorted(nodes.glob("*/properties")) if nodes.is_dir() else []:
        match = re.search(r"^gfx_target_version\s+(\d+)", props.read_text(), re.M)
        if match and int(match.group(1)):
            archs.append(gfx_name_from_target_version(int(match.group(1))))
    return archs


def gfx_name_from_target_version(version: int) -> str:
    major, minor, step = version // 10000, version // 100 % 100, version % 100
    return f"gfx{major}{minor:x}{step:x}"


def gfx_name_from_isa(isa: str) -> str:
    """An `__amdgpu_arch` ISA version as the gfx name (11.5.1 -> gfx1151, 9.0.10 -> gfx90a); "" if it is none."""
    parts = isa.split(".")
    if len(parts) != 3 or not all(part.isdigit() and len(part) <= 3 for part in parts):
        return ""
    major, minor, step = map(int, parts)
    return gfx_name_from_target_version(major * 10000 + minor * 100 + step)


def detect_gpus(kfd_nodes: Path = KFD_NODES) -> list[tuple[str, int]]:
    """Every GPU the kernel reports, as (gfx name, compute units), in node order; [] without the KFD topology.
    Compute units decide which GPU the solver sees: rattler picks the one with the most (conda/rattler#2806)."""
    gpus = []
    for props in sorted(kfd_nodes.glob("*/properties"), key=lambda p: int(p.parent.name) if p.parent.name.isdigit()
                        else 0) if kfd_nodes.is_dir() else []:
        values = dict(re.findall(r"^(\w+)\s+(\d+)\s*$", props.read_text(), re.M))
        version = int(values.get("gfx_target_version", 0))
        if version:
            simds, per_cu = int(values.get("simd_count", 0)), int(values.get("simd_per_cu", 0)) or 1
            gpus.append((gfx_name_from_target_version(version), simds // per_cu))
    return gpus


def solver_gpu(gpus: list[tuple[str, int]]) -> str | None:
    """The GPU rattler (so pixi) reports as __amdgpu_arch: the most compute units, ties to the highest ISA
    (conda/rattler#2806, rattler_virtual_packages amdgpu.rs; shared/reference/landscape-2026-12.md)."""
    def isa(gfx: str) -> tuple[int, int, int]:
        digits = gfx.removeprefix("gfx")
        return (int(digits[:-2] or 0), int(digits[-2], 16), int(digits[-1], 16)) if len(digits) >= 3 else (0, 0, 0)
    return max(gpus, key=lambda gpu: (gpu[1], isa(gpu[0])))[0] if gpus else None
