"""The glibc a package needs at run time, and the one this machine has.

A repackaged binary wheel needs what its manylinux platform tag promises (PEP 600: manylinux_X_Y runs on glibc
X.Y and newer; the legacy aliases manylinux1/2010/2014 are 2.5/2.12/2.17). A file that promises nothing
(AMD's `linux_x86_64` wheels, an sdist, a file not locked yet) gets the stack's bound instead: variants/
shared.yaml `c_stdlib_version`, the sysroot every compiled package links against, which is also the glibc of
the manylinux_2_28 image AMD builds its ROCm releases in (the evidence is next to the key). Nobody types a
glibc version into a recipe or a table: it is read from a file name or from that one key.
"""
from __future__ import annotations

import os
import re

from packaging.version import Version

STACK_BOUND_KEY = "c_stdlib_version"
PEP600 = re.compile(r"^manylinux_(\d+)_(\d+)_")
LEGACY = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}


def wheel_floor(filename: str) -> str | None:
    """The oldest glibc a wheel's platform tags say it runs on, or None where they say nothing (linux_x86_64,
    any, not a wheel). A compressed tag set (manylinux_2_27_x86_64.manylinux_2_28_x86_64) claims every one of
    its tags, so the lowest is the wheel's floor."""
    if not filename.endswith(".whl"):
        return None
    floors = []
    for platform in filename[: -len(".whl")].split("-")[-1].split("."):
        found = PEP600.match(platform)
        if found:
            floors.append((int(found.group(1)), int(found.group(2))))
        elif platform.split("_")[0] in LEGACY:
            floors.append(LEGACY[platform.split("_")[0]])
    return "{}.{}".format(*min(floors)) if floors else None


def stack_bound(values: dict) -> str:
    """variants/shared.yaml `c_stdlib_version` (a one-item list there), or "" where a workspace sets none."""
    value = values.get(STACK_BOUND_KEY)
    value = value[0] if isinstance(value, list) and value else value
    return str(value or "")


def floor_or_bound(filename: str, values: dict) -> str:
    return wheel_floor(filename) or stack_bound(values)


def requirement(version: str) -> str:
    return f"__glibc >={version}"


def machine_glibc() -> str | None:
    """This machine's glibc version ("2.36"), or None on a libc that is not glibc (musl) or an unknown one."""
    try:
        found = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (ValueError, OSError, AttributeError):
        return None
    name, _, version = found.partition(" ")
    return version if name == "glibc" and re.fullmatch(r"\d+\.\d+(\.\d+)?", version) else None


def older(version: str, bound: str) -> bool:
    """As versions: 2.28 is not older than a bound written 2.28.0."""
    return Version(version) < Version(bound)
