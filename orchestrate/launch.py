"""The `orchestrate` command: a supervisor process first (stops.py says why), then the command itself."""
from __future__ import annotations


def entry() -> None:
    from . import stops

    stops.supervise()  # returns in the worker only, before the slow imports, so a stop at any moment is handled
    try:
        from .cli import entry as run
    except stops.Stopped as stop:
        stops.exit_now(stop.signum, "before anything was done")
    run()
