"""Named points where the crash-recovery tests kill the orchestrator, to prove that no moment of a
build loses or half-records a package.

ORCHESTRATE_CRASH_AT=NAME:N kills this process with SIGKILL (no cleanup, as a power cut or the OOM
killer would) the Nth time it reaches NAME. Unset, reaching a point costs one environment lookup.
"""
from __future__ import annotations

import os
import signal

ENV = "ORCHESTRATE_CRASH_AT"
_reached: dict[str, int] = {}


def reach(name: str) -> None:
    wanted = os.environ.get(ENV)
    if not wanted:
        return
    point, _, count = wanted.partition(":")
    if point != name:
        return
    _reached[name] = _reached.get(name, 0) + 1
    if _reached[name] == int(count or 1):
        os.kill(os.getpid(), signal.SIGKILL)
