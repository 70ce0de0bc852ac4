"""Named points where the crash-recovery tests kill the orchestrator, to prove that no moment of a
build loses or half-records a package.

ORCHESTRATE_CRASH_AT=NAME:N kills this process with SIGKILL (no cleanup, as a power cut or the OOM
killer would) the Nth time it reaches NAME. Unset, reaching a point costs one environment lookup.
ORCHESTRATE_CRASH_AT=NAME:N:SIGINT sends SIGINT to the process group instead (what a terminal's Ctrl-C
does) and goes on; NAME:N:SIGTERM sends SIGTERM to the orchestrate process alone (the supervisor: what `docker stop` does). The stop
tests use them to stop a run at exact moments.
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
    point, _, rest = wanted.partition(":")
    if point != name:
        return
    count, _, signal_name = rest.partition(":")
    _reached[name] = _reached.get(name, 0) + 1
    if _reached[name] != int(count or 1):
        return
    if signal_name == "SIGINT":
        os.killpg(os.getpgrp(), signal.SIGINT)
    elif signal_name:
        from .stops import supervisor_pid

        os.kill(supervisor_pid() or os.getpid(), getattr(signal, signal_name))
    else:
        os.kill(os.getpid(), signal.SIGKILL)
