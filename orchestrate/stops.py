"""Ctrl-C and SIGTERM stop a run within seconds, at any moment, and say so in one line.

Why Python's own handling was not enough (measured with py-rattler-build 0.73): `run_build` holds the GIL
for the whole build and calls back into Python only for its progress events. A signal's Python handler
runs at the next Python bytecode of the main thread, so KeyboardInterrupt surfaced inside those
callbacks, where py-rattler-build prints "Error in Python progress callback on_log: KeyboardInterrupt" and
goes on building: Ctrl-C was swallowed whenever it arrived during a build. While a build script runs
without printing, no Python code runs at all, in any thread: SIGTERM sent to our process alone (docker
stop, a CI cancel) never reached the script's compilers, and nothing in the process could act on it.

So the command runs in a child process (the worker) under a small supervisor, the process the shell
waits for (`supervise`, called first thing by the launcher):
- the supervisor holds no GIL-bound library and answers a signal at once: it passes it on to the worker,
  ends every process of the build (SIGTERM, SIGKILL after KILL_AFTER_S; it is their child subreaper, so
  an orphaned compiler is still found), and if the worker has not stopped after EXIT_AFTER_S (stuck in
  a download or a solve) it ends the worker and prints the line itself. A second signal ends all at once.
- the worker's Python handler raises Stopped where that is safe: at once in our own code; at the end of
  a `zone` otherwise (FOREIGN: inside py-rattler-build, where an exception is swallowed; CRITICAL: adding
  a package to the channel, which must complete). The command then prints the line and exits 128+signal.
  It raises only while the command runs (`armed`), and only once per stop: before, while Python imports
  and parses (where an exception can land in an import lock's callback and be printed, not raised),
  nothing is done yet, so the line is printed and the process ends at once (`exit_now`, AT_ONCE); after,
  the command is done and a stop changes nothing. A Stopped that Python swallowed anyway (raised inside
  a weakref callback or a __del__) is not printed but raised again at the next safe instruction.
The worker keeps the supervisor informed through a shared page: the zone it is in, whether it has
printed the line, and the line's text as it would read now.
"""
from __future__ import annotations

import _thread
import ctypes
import mmap
import os
import signal
import struct
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable

FOREIGN, CRITICAL = "foreign", "critical"
ZONE_CODES = {None: 0, FOREIGN: 1, CRITICAL: 2}
SIGNALS = (signal.SIGINT, signal.SIGTERM)
WORDS = {signal.SIGINT: ("interrupted", "Ctrl-C"), signal.SIGTERM: ("terminated", "SIGTERM")}
KILL_AFTER_S = 2.0  # build processes still running this long after SIGTERM get SIGKILL
EXIT_AFTER_S = 4.0  # the worker must have stopped by then, or the supervisor ends it
SAME_STOP_S = 0.5  # signals this close to the first are the same stop, not a second Ctrl-C
PR_SET_CHILD_SUBREAPER, PR_SET_PDEATHSIG = 36, 1
PAGE = 4096  # shared page: zone, reported, text length (2 bytes), text
AT_ONCE, HOLD, RAISE = "at once", "hold", "raise"  # what a stop does: _on_signal says
BEFORE_START = "before anything was done"


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
        self.zone: str | None = None
        self.in_flight = ""  # what was under way, for the line ("the build of X was stopped, ...")
        self.done: Callable[[], str] = lambda: ""  # what the command has done that stays, for the line
        self.resume = "run the same command again to continue"
        self.reported = False
        self.mode = HOLD
        self.raised = False  # a stop raises Stopped once; the signals that follow it are the same stop
        self.exiting = False
        self.shared: mmap.mmap | None = None  # the page the supervisor reads
        self.supervisor: int | None = None


_state = _State()
_previous_handlers: dict | None = None
_previous_unraisable_hook = None


# -- the worker (and any in-process caller of cli.main) -------------------------------------------------
def start(held: list[int]) -> None:
    """The launcher's first call: from here until the command runs, a stop prints the line and ends the
    process at once (`held`: the signals the launcher's first handler kept while this module loaded)."""
    install(AT_ONCE)
    if held:
        exit_now(held[0], BEFORE_START)


def install(mode: str = HOLD) -> bool:
    """Take over SIGINT and SIGTERM in this process (main thread only); False when already installed.
    HOLD (in-process callers): a stop before the command runs is kept until `armed` raises it."""
    global _previous_handlers, _previous_unraisable_hook
    if _previous_handlers is not None:
        return False
    shared, supervisor = _state.shared, _state.supervisor
    _state.__init__()
    _state.shared, _state.supervisor, _state.mode = shared, supervisor, mode
    _previous_unraisable_hook, sys.unraisablehook = sys.unraisablehook, _on_unraisable
    _previous_handlers = {s: signal.signal(s, _on_signal) for s in SIGNALS}
    return True


def uninstall() -> None:
    """Give the signals back (in-process callers, the tests)."""
    global _previous_handlers
    if _previous_handlers is None:
        return
    for signum, handler in _previous_handlers.items():
        signal.signal(signum, handler)
    sys.unraisablehook = _previous_unraisable_hook
    _previous_handlers = None


@contextmanager
def armed():
    """The command itself: a stop raises Stopped in it (the caller reports it). Once it returned, a stop
    changes nothing: what it did is done."""
    _state.mode = RAISE
    try:
        if _state.signum is not None and not _state.raised:  # kept while HOLD (in-process callers)
            _state.raised = True
            raise Stopped(_state.signum)
        yield
    finally:
        _state.mode = HOLD


def supervisor_pid() -> int | None:
    return _state.supervisor


def describe(done: Callable[[], str], resume: str = "run the same command again to continue") -> None:
    """What the stop line says stays done, and how to go on (each command says it once it knows)."""
    _state.done, _state.resume = done, resume
    _publish()


@contextmanager
def naming(in_flight: str):
    """Our own code (a stop raises at once) during which the stop line must name something a stop leaves behind,
    such as a build's work folder between its build and its removal; kept in the line if a stop ends it."""
    outer_flight, _state.in_flight = _state.in_flight, in_flight
    _publish()
    yield
    _state.in_flight = outer_flight
    _publish()


@contextmanager
def zone(kind: str, in_flight: str = ""):
    """Code where a stop must not raise at once: FOREIGN (inside py-rattler-build) or CRITICAL. Raises
    Stopped when it ends, if a stop arrived meanwhile."""
    outer, outer_flight = _state.zone, _state.in_flight
    _state.zone = kind if outer != CRITICAL else CRITICAL
    if in_flight:
        _state.in_flight = in_flight
    _publish()
    try:
        yield
    finally:
        _state.zone = outer
    if _state.signum is not None and outer is None:
        _state.raised = True
        raise Stopped(_state.signum)
    _state.in_flight = outer_flight
    _publish()


def line(signum: int) -> str:
    """The one line a stop prints: what stopped it, what stays, what was under way, how to go on."""
    word, name = WORDS.get(signum, ("stopped", f"signal {signum}"))
    return f"{word} ({name}): {_rest_of_line()}"


def report_once() -> bool:
    """Whether the caller is the one to print the line (the worker or the supervisor, never both)."""
    if _state.reported:
        return False
    _state.reported = True
    if _state.shared is not None:
        _state.shared[1] = 1
    return True


def exit_now(signum: int, note: str = "") -> None:
    """Print the stop line and end the process at once (a stop before the command started). A signal that
    comes meanwhile (the supervisor passing on the same Ctrl-C) is the same stop: it returns here at once,
    and the first call prints the line, once, and ends the process."""
    if _state.exiting:  # no call between this test and the next line, so no handler runs in between
        return
    _state.exiting = True
    signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
    if report_once():
        text = (line(signum) + (f" ({note})" if note else "") + "\n").encode(errors="replace")
        while text:  # os.write: sys.stderr may be in the middle of a write this signal interrupted
            try:
                text = text[os.write(2, text):]
            except OSError:
                break
    os._exit(128 + signum)


def _on_signal(signum: int, frame) -> None:
    if _state.signum is None:
        _state.signum = signum
    if _state.mode == AT_ONCE:
        exit_now(_state.signum, BEFORE_START)
    elif _state.mode == RAISE and _state.zone is None and not _state.raised and not _state.reported:
        if _inside(frame, _on_unraisable.__code__):  # raised here, it would be printed and lost
            _raise_again_soon(signum)
            return
        _state.raised = True
        raise Stopped(_state.signum)


def _on_unraisable(unraisable) -> None:
    """A Stopped that Python swallowed (raised inside an import lock's weakref callback, a __del__, the gc):
    raise it again once the main thread is back in code where it propagates, instead of printing it."""
    if isinstance(unraisable.exc_value, Stopped):
        _state.raised = False
        _raise_again_soon(unraisable.exc_value.signum)
        return
    (_previous_unraisable_hook or sys.__unraisablehook__)(unraisable)


def _raise_again_soon(signum: int) -> None:
    """Run the handler again in a moment: from another thread, because a handler asked for from this one
    runs at its next instruction, still inside the hook."""
    timer = threading.Timer(0.01, _thread.interrupt_main, (signum,))
    timer.daemon = True
    timer.start()


def _inside(frame, code) -> bool:
    while frame is not None:
        if frame.f_code is code:
            return True
        frame = frame.f_back
    return False


def _rest_of_line() -> str:
    try:
        done = _state.done()
    except Exception:  # the line must come out even if counting what stays fails
        done = ""
    return "; ".join(part for part in (done, _state.in_flight, _state.resume) if part)


def _publish() -> None:
    """Tell the supervisor the zone and the line as it would read now."""
    shared = _state.shared
    if shared is None:
        return
    text = _rest_of_line().encode()[:PAGE - 4]
    shared[4:4 + len(text)] = text
    shared[2:4] = struct.pack("<H", len(text))
    shared[0] = ZONE_CODES[_state.zone]


# -- the supervisor ----------------------------------------------------------------------------------------
def supervise() -> None:
    """Fork: the child (the worker) returns and runs the command; this process supervises it and exits
    with its status. Call before importing anything that starts threads."""
    shared = mmap.mmap(-1, PAGE)
    parent = os.getpid()
    signal.pthread_sigmask(signal.SIG_BLOCK, [*SIGNALS, signal.SIGCHLD])  # queued for sigtimedwait below
    _set_child_subreaper(True)
    worker = os.fork()
    if worker == 0:
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # the supervisor killed with SIGKILL takes the worker along
        if os.getppid() != parent:
            os._exit(1)
        _set_child_subreaper(False)
        install(AT_ONCE)  # the launcher's start() did it; a caller without it gets it here
        _state.shared, _state.supervisor = shared, parent
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [*SIGNALS, signal.SIGCHLD])
        return
    _supervise(worker, shared)


def _supervise(worker: int, shared: mmap.mmap) -> None:
    stop: int | None = None
    first_at = kill_at = exit_at = 0.0
    while True:
        done, status = os.waitpid(worker, os.WNOHANG)
        if done:
            break
        info = signal.sigtimedwait([*SIGNALS, signal.SIGCHLD], 0.1)
        now = time.monotonic()
        if info is not None and info.si_signo in SIGNALS:
            if stop is None:
                stop, first_at = info.si_signo, now
                kill_at, exit_at = now + KILL_AFTER_S, now + EXIT_AFTER_S
                _kill(worker, stop)  # a terminal's Ctrl-C reached it already; `docker stop` did not
            elif now - first_at > SAME_STOP_S:  # one Ctrl-C can arrive twice within milliseconds
                _end_all(worker, shared, stop, "a second signal: stopped at once; the next run tidies up")
        if stop is not None:
            _signal_build(worker, signal.SIGKILL if now >= kill_at else signal.SIGTERM)
            if now >= exit_at and shared[0] != ZONE_CODES[CRITICAL] and not shared[1]:
                _end_all(worker, shared, stop, "")
    if stop is not None:
        _signal_build(worker, signal.SIGKILL)  # what the worker's end orphaned
    if os.WIFSIGNALED(status):  # die the same way, so the caller sees what happened to the worker
        died_by = os.WTERMSIG(status)
        if died_by != signal.SIGKILL:
            signal.signal(died_by, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, [died_by])
        os.kill(os.getpid(), died_by)
    os._exit(os.waitstatus_to_exitcode(status) if not os.WIFSIGNALED(status) else 128 + os.WTERMSIG(status))


def _end_all(worker: int, shared: mmap.mmap, signum: int, note: str) -> None:
    _kill(worker, signal.SIGKILL)
    _signal_build(worker, signal.SIGKILL)
    if not shared[1] or note:
        length = struct.unpack("<H", shared[2:4])[0]
        word, name = WORDS[signum]
        rest = shared[4:4 + length].decode(errors="replace")
        sys.stderr.write(f"{word} ({name}): {rest}" + (f" ({note})" if note else "") + "\n")
        sys.stderr.flush()
    os._exit(128 + signum)


def _signal_build(worker: int, signum: int) -> None:
    """Signal every process of the build: below the worker, or orphaned to us."""
    for pid in descendants():
        if pid != worker:
            _kill(pid, signum)


def _kill(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except OSError:
        pass


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
        if fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _set_child_subreaper(on: bool) -> None:
    """Orphans (a compiler whose make was stopped first) become our children, so descendants() finds them."""
    _prctl(PR_SET_CHILD_SUBREAPER, int(on))


def _prctl(option: int, value: int) -> None:
    if not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)
    except (OSError, AttributeError):
        pass
