from . import stops

stops.install()  # before the slow imports, so that a stop at any moment ends with the one line
try:
    from .cli import entry
except stops.Stopped as stop:
    stops.exit_now(stop.signum, "before anything was done")
entry()
