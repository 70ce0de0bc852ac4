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
    """The first GPU's architecture; `kfd_nodes` lets `doctor` (and tests) read another sysfs tree."""
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
