"""Ctrl-C and SIGTERM stop a run within seconds, at any moment, and say so in one line.

Why Python's default handling is not enough: most of a build runs inside py-rattler-build (Rust), which
calls back into Python only for its progress events. Python runs a signal handler at the next Python
bytecode of the main thread, so the KeyboardInterrupt surfaced inside those callbacks, and py-rattler-build
prints "Error in Python progress callback on_log: KeyboardInterrupt" and goes on building: Ctrl-C was
swallowed whenever it arrived during a build. And while a build script runs without printing, no Python
code runs in the main thread at all; SIGTERM sent to our process alone (docker stop, a CI cancel) never
reaches the script's compilers.

So a signal is handled in two places:
- a watcher thread woken by the signal itself (signal.set_wakeup_fd), whatever the main thread is doing:
  it ends every process the run started (the build script and its compilers, found through /proc; this
  process is their child subreaper, so none escapes by being orphaned), and if the main thread has not
  stopped after EXIT_AFTER_S (rattler-build downloading or solving, say) it prints the line and exits;
- the Python handler in the main thread raises Stopped where that is safe: at once in our own code; at the
  end of a `zone` otherwise (FOREIGN: inside py-rattler-build, where an exception would be swallowed;
  CRITICAL: adding a package to the channel, which must complete).
A second signal exits at once.
"""
from __future__ import annotations

import ctypes
import os
import signal
import socket
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable

FOREIGN, CRITICAL = "foreign", "critical"
SIGNALS = (signal.SIGINT, signal.SIGTERM)
WORDS = {signal.SIGINT: ("interrupted", "Ctrl-C"), signal.SIGTERM: ("terminated", "SIGTERM")}
KILL_AFTER_S = 2.0  # build processes still running this long after SIGTERM get SIGKILL
EXIT_AFTER_S = 4.0  # the main thread must have stopped by then, or the watcher ends the process
SAME_STOP_S = 0.5  # signals this close to the first are the same stop, not a second Ctrl-C
PR_SET_CHILD_SUBREAPER = 36


class Stopped(BaseException):
    """Raised in the main thread when a stop was asked for (BaseException: no `except Exception` eats it)."""

    def __init__(self, signum: int):
        super().__init__(WORDS.get(signum, ("stopped", ""))[0])
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


class _State:
    def __init__(self) -> None:
        self.signum: int | None = None
        self.count = 0
        self.first_at = 0.0
        self.zone: str | None = None
        self.in_flight = ""  # what was under way, for the line ("the build of X; its work folder ...")
        self.done: Callable[[], str] = lambda: ""  # what the command has done that stays, for the line
        self.resume = ""  # how to go on
        self.reported = False
        self.lock = threading.Lock()


_state = _State()
_installed: dict | None = None


def install() -> bool:
    """Take over SIGINT and SIGTERM (main thread only); False when already installed."""
    global _installed
    if _installed is not None or threading.current_thread() is not threading.main_thread():
        return False
    reader, writer = socket.socketpair()
    reader.setblocking(True)
    writer.setblocking(False)
    previous = {s: signal.signal(s, _on_signal) for s in SIGNALS}
    previous_fd = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
    _set_child_subreaper(True)
    thread = threading.Thread(target=_watch, args=(reader,), name="orchestrate-stops", daemon=True)
    _installed = {"previous": previous, "previous_fd": previous_fd, "reader": reader, "writer": writer}
    _state.__init__()
    thread.start()
    return True


def uninstall() -> None:
    """Give the signals back (in-process callers, the tests)."""
    global _installed
    if _installed is None:
        return
    signal.set_wakeup_fd(_installed["previous_fd"])
    for signum, handler in _installed["previous"].items():
        signal.signal(signum, handler)
    _set_child_subreaper(False)
    _installed["writer"].close()  # wakes the watcher, which then ends
    _installed = None


def describe(done: Callable[[], str], resume: str = "run the same command again to continue") -> None:
    """What the stop line says stays done, and how to go on (each command says it once it knows)."""
    _state.done, _state.resume = done, resume


def requested() -> int | None:
    return _state.signum


@contextmanager
def zone(kind: str, in_flight: str = ""):
    """Code where a stop must not raise at once: FOREIGN (inside py-rattler-build) or CRITICAL. Raises
    Stopped when it ends, if a stop arrived meanwhile."""
    outer, outer_flight = _state.zone, _state.in_flight
    _state.zone = kind if outer != CRITICAL else CRITICAL
    if in_flight:
        _state.in_flight = in_flight
    try:
        yield
    finally:
        _state.zone = outer
    if _state.signum is not None and outer is None:
        raise Stopped(_state.signum)
    _state.in_flight = outer_flight


def line(signum: int) -> str:
    """The one line a stop prints: what stopped it, what stays, what was under way, how to go on."""
    word, name = WORDS.get(signum, ("stopped", f"signal {signum}"))
    try:
        done = _state.done()
    except Exception:  # the line must come out even if counting what stays fails
        done = ""
    rest = "; ".join(part for part in (done, _state.in_flight, _state.resume) if part)
    return f"{word} ({name})" + (f": {rest}" if rest else "")


def report_once() -> bool:
    """Whether the caller is the one to print the line (the main thread or the watcher, never both)."""
    with _state.lock:
        if _state.reported:
            return False
        _state.reported = True
        return True


def _on_signal(signum: int, frame) -> None:
    if _state.signum is None:
        _state.signum = signum
    if _state.zone is None and not _state.reported:
        raise Stopped(_state.signum)


def _watch(reader: socket.socket) -> None:
    while True:
        try:
            data = reader.recv(64)
        except OSError:
            return
        if not data:
            reader.close()
            return
        for signum in data:
            if signum in SIGNALS:
                _handle(signum)


def _handle(signum: int) -> None:
    now = time.monotonic()
    if _state.first_at and now - _state.first_at < SAME_STOP_S:
        return  # one Ctrl-C sometimes arrives twice within milliseconds while py-rattler-build runs
    _state.count += 1
    _state.first_at = _state.first_at or now
    if _state.signum is None:
        _state.signum = signum
    if _state.count > 1:
        end_children(grace_s=0)
        exit_now(_state.signum, "a second signal: stopped at once; the next run tidies up")
        return
    threading.Thread(target=_stop_within_deadline, daemon=True).start()


def _stop_within_deadline() -> None:
    started = time.monotonic()
    end_children(grace_s=KILL_AFTER_S)
    while time.monotonic() - started < EXIT_AFTER_S or _state.zone == CRITICAL:
        if _state.reported or _installed is None:
            return
        time.sleep(0.05)
    exit_now(_state.signum, "")


def exit_now(signum: int, note: str = "") -> None:
    """Print the stop line (unless the main thread did) and end the process now."""
    if report_once() or note:
        sys.stderr.write(line(signum) + (f" ({note})" if note else "") + "\n")
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(128 + signum)


# -- the processes this run started ---------------------------------------------------------------------
def descendants(root: int | None = None) -> list[int]:
    """Every live process below `root` (default: this one), read from /proc; zombies are not running."""
    root = os.getpid() if root is None else root
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()  # after "(comm)", which may contain spaces
        if fields[0] == "Z":
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def end_children(grace_s: float) -> None:
    """SIGTERM to every process this run started, SIGKILL to those still there after grace_s."""
    deadline = time.monotonic() + grace_s
    signum = signal.SIGTERM if grace_s > 0 else signal.SIGKILL
    while True:
        pids = descendants()
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signum)
            except OSError:
                continue
        if signum == signal.SIGKILL and time.monotonic() > deadline + 1.0:
            return  # what survives SIGKILL for a second (uninterruptible I/O) is the kernel's now
        time.sleep(0.05)
        if time.monotonic() >= deadline:
            signum = signal.SIGKILL


def _set_child_subreaper(on: bool) -> None:
    """Orphans (a compiler whose make was stopped first) become our children, so descendants() finds them."""
    if not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0)
    except (OSError, AttributeError):
        pass
