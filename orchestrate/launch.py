"""The `orchestrate` command: a supervisor process first (stops.py says why), then the command itself."""
from __future__ import annotations


def entry() -> None:
    # Our first instructions: from here on a stop ends in one line, never a traceback. A stop that comes
    # earlier, while the interpreter starts and imports this module, meets Python's own handling (a
    # KeyboardInterrupt traceback, or death by SIGTERM): no code of ours has run yet, and none can help.
    import _signal  # built in and loaded by the interpreter itself: importing it runs no code

    held: list[int] = []  # kept while stops.py loads, which takes long enough to be interrupted
    for signum in (_signal.SIGINT, _signal.SIGTERM):
        _signal.signal(signum, lambda signum, frame: held.append(signum))
    from . import stops

    stops.start(held)  # a stop from here until the command runs prints the line and ends the process
    stops.supervise()  # returns in the worker only
    from .cli import entry as run

    run()
