"""Which hip-config.cmake CMake takes, with and without the shared wiring, for an upstream's own lines.

`prefix_lines(cmakelists)` picks what an upstream CMakeLists.txt does to CMAKE_PREFIX_PATH before its first
find_package(hip); `resolve_hip` runs real CMake on those lines (a decoy prefix standing where they put /opt/rocm),
with recipes/_shared/rocm-toolchain.cmake in the environment as hip-toolchain.sh exports it, or without.
"""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PREFIX_PATH_LINE = re.compile(r"^\s*(list\s*\(\s*(APPEND|PREPEND|INSERT)\s+CMAKE_PREFIX_PATH\b|set\s*\(\s*CMAKE_PREFIX_PATH\b)",
                              re.I)
FIND_HIP = re.compile(r"^\s*find_package\s*\(\s*hip\b", re.I)


def prefix_lines(cmakelists: str) -> list[str]:
    """The CMAKE_PREFIX_PATH lines before the first find_package(hip), one logical line each."""
    lines = []
    for line in cmakelists.splitlines():
        if FIND_HIP.match(line):
            return lines
        if PREFIX_PATH_LINE.match(line):
            lines.append(line.strip())
    raise AssertionError("no find_package(hip) in this CMakeLists.txt")


def resolve_hip(lines: list[str], root: Path, *, wired: bool) -> str:
    """hip_DIR as CMake resolves it after `lines` (their /opt/rocm moved to a decoy prefix), or the error."""
    sdk, decoy, project = root / "sdk", root / "decoy-rocm", root / "project"
    for prefix, says in ((sdk, 'set(hip_FOUND TRUE)'), (decoy, 'message(FATAL_ERROR "DECOY")')):
        (prefix / "lib/cmake/hip").mkdir(parents=True, exist_ok=True)
        (prefix / "lib/cmake/hip/hip-config.cmake").write_text(says + "\n")
    project.mkdir(exist_ok=True)
    moved = [line.replace("/opt/rocm", str(decoy)) for line in lines]
    (project / "CMakeLists.txt").write_text("\n".join([
        "cmake_minimum_required(VERSION 3.21)", "project(find_hip LANGUAGES NONE)", *moved,
        "find_package(hip CONFIG REQUIRED)", 'message(STATUS "hip_DIR=${hip_DIR}")', ""]))
    env = {k: v for k, v in os.environ.items() if k not in ("CMAKE_TOOLCHAIN_FILE", "CMAKE_PREFIX_PATH")}
    env.update(ROCM_PATH=str(sdk), CMAKE_PREFIX_PATH=str(sdk), ROCM_CLANG_TOOLCHAIN_FLAGS="")
    if wired:
        env["CMAKE_TOOLCHAIN_FILE"] = str(REPO / "recipes/_shared/rocm-toolchain.cmake")
    build = root / ("build-wired" if wired else "build-bare")
    result = subprocess.run(["cmake", "-S", str(project), "-B", str(build)], env=env, capture_output=True, text=True)
    found = re.search(r"hip_DIR=(.*)", result.stdout)
    return found.group(1).strip() if result.returncode == 0 and found else "failed: " + result.stdout + result.stderr
