"""Ctrl-C and SIGTERM stop build-all at any moment (inside py-rattler-build and its build scripts too): one
line saying so, exit 130/143, the channel consistent, the lock released, no build process left running,
and a second run finishes the job. A second Ctrl-C exits at once."""
from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pytest

from orchestrate.channel import LOCK, Channel
from orchestrate.crashpoints import ENV as CRASH_ENV
from test_orchestrate_crash import PACKAGES_IN_PLAN, assert_consistent, complete_packages

pytestmark = pytest.mark.timeout(120)

ARCH = "gfx1151"
WORDS = {signal.SIGINT: "interrupted (Ctrl-C)", signal.SIGTERM: "terminated (SIGTERM)"}


def start(workspace: Path, env_extra: dict | None = None) -> subprocess.Popen:
    """build-all in its own process group, as a shell runs a foreground job."""
    env = {**os.environ, **(env_extra or {})}
    env.pop("ORCHESTRATE_ARCH", None)
    return subprocess.Popen([sys.executable, "-m", "orchestrate", "build-all", "--arch", ARCH, "-q"], cwd=workspace,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def script_runs(workspace: Path, lines: list[str], recipe: str = "rocm-sdk") -> None:
    """Add lines to a recipe's build script (after it wrote its files)."""
    path = workspace / "recipes" / recipe / "recipe.yaml"
    marker = f"      - bash $RECIPE_DIR/../_shared/write-marker.sh {recipe}\n"
    text = path.read_text()
    assert marker in text
    added = "".join(f"      - {json.dumps(line)}\n" for line in lines)  # a JSON string is a YAML string
    path.write_text(text.replace(marker, marker + added))


def hanging_script(workspace: Path, traps: str = "") -> Path:
    """rocm-sdk's script starts a child that records its pid and sleeps; returns the pid file."""
    pids = workspace / "script-pids"
    script_runs(workspace, [f"{traps}sleep 60 & echo $! >> {pids}; echo $$ >> {pids}; wait"])
    return pids


def wait_for(path: Path, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not (path.exists() and path.read_text().count("\n") >= 2):
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def still_alive(pids: list[int], grace_s: float = 3.0) -> list[int]:
    """The pids still running after a short grace: SIGKILL is sent before the supervisor exits, but on a busy
    machine a killed process may take a moment to be scheduled and die."""
    deadline = time.monotonic() + grace_s
    while (running := [pid for pid in pids if alive(pid)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    return running


def assert_stopped_cleanly(process: subprocess.Popen, workspace: Path, signum: int, err: str) -> str:
    assert process.returncode == 128 + signum, err
    assert "Traceback" not in err and "Error in Python progress callback" not in err, err
    said = [line for line in err.splitlines() if line.startswith(WORDS[signum])]
    assert len(said) == 1, err
    assert "run the same command again to continue" in said[0]
    channel = Channel(workspace / "channel")
    if channel.path.exists():
        assert_consistent(channel)
        assert f"{len(channel.manifest())} package(s) are in channel {channel.path}" in said[0]
        with open(channel.path / LOCK) as lock:  # released: another run could take it now
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return said[0]


def assert_rerun_finishes(orchestrate, workspace: Path) -> None:
    result = orchestrate("build-all", "--arch", ARCH)
    assert result.code == 0, result.err
    channel = Channel(workspace / "channel")
    assert_consistent(channel)
    assert sum(complete_packages(channel).values()) == PACKAGES_IN_PLAN


# Moments named by the crash points the orchestrator reaches (orchestrate/crashpoints.py): while planning,
# inside py-rattler-build's progress callback (where Ctrl-C used to be swallowed), between a build and adding
# its package, at each step of adding, between packages.
SIGINT_POINTS = ["planned:1", "build.log:3", "build.log:40", "built:2", "add.staged:1", "add.indexed:3",
                 "add.recorded:5"]
SIGTERM_POINTS = ["build.log:20", "add.staged:2", "add.recorded:3"]


@pytest.mark.parametrize("point", SIGINT_POINTS)
def test_ctrl_c_at_a_moment_stops_with_one_line(orchestrate, workspace, point):
    process = start(workspace, {CRASH_ENV: f"{point}:SIGINT"})
    _, err = process.communicate(timeout=60)
    said = assert_stopped_cleanly(process, workspace, signal.SIGINT, err)
    if point.startswith(("built", "add.")):  # between a build and its package in the channel: the folder it leaves
        kept = said.split("work folder of ")[1].split(" is kept: ")[1].split(" (")[0]
        assert Path(kept).parent == workspace / ".orchestrate" / "work" and Path(kept).is_dir(), said
    if point in ("build.log:3", "add.staged:1"):
        assert_rerun_finishes(orchestrate, workspace)


@pytest.mark.parametrize("point", SIGTERM_POINTS)
def test_sigterm_at_a_moment_stops_with_one_line(workspace, point):
    process = start(workspace, {CRASH_ENV: f"{point}:SIGTERM"})
    _, err = process.communicate(timeout=60)
    assert_stopped_cleanly(process, workspace, signal.SIGTERM, err)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_inside_a_silent_build_script_ends_its_processes(orchestrate, workspace, signum):
    """SIGINT to the group (a terminal) or SIGTERM to our process alone (docker stop), while the build script
    runs a child that ignores SIGINT: both end within seconds, and so does every process of the build."""
    pids_file = hanging_script(workspace, traps="trap '' INT; ")
    process = start(workspace)
    wait_for(pids_file)
    pids = [int(p) for p in pids_file.read_text().split()]
    signalled = time.monotonic()
    if signum == signal.SIGINT:
        os.killpg(process.pid, signum)
    else:
        process.send_signal(signum)
    _, err = process.communicate(timeout=30)
    assert time.monotonic() - signalled < 5
    said = assert_stopped_cleanly(process, workspace, signum, err)
    work = said.split("work folder kept for a look: ")[1].split(";")[0]
    assert "the build of rocm-sdk" in said and Path(work).is_dir()
    assert not still_alive(pids), "build processes left running"
    if signum == signal.SIGINT:
        script = workspace / "recipes" / "rocm-sdk" / "recipe.yaml"
        hang = json.dumps(f"trap '' INT; sleep 60 & echo $! >> {pids_file}; echo $$ >> {pids_file}; wait")
        script.write_text(script.read_text().replace(hang, "true"))
        assert_rerun_finishes(orchestrate, workspace)


def test_a_second_ctrl_c_exits_at_once(workspace):
    pids_file = hanging_script(workspace, traps="trap '' INT TERM; ")  # the first stop must wait for SIGKILL
    process = start(workspace)
    wait_for(pids_file)
    os.killpg(process.pid, signal.SIGINT)
    time.sleep(0.7)
    second = time.monotonic()
    os.killpg(process.pid, signal.SIGINT)
    _, err = process.communicate(timeout=30)
    assert time.monotonic() - second < 1.5  # the first stop alone would take KILL_AFTER_S (2 s) more
    assert process.returncode == 130
    assert "second signal: stopped at once" in err
    assert not still_alive([int(p) for p in pids_file.read_text().split()])


# A stop in the first half-second: while Python imports our modules, the supervisor starts, the command
# parses and plans (issue 25 saw a traceback in up to half of such stops). SIGINT goes to the group (a
# terminal's Ctrl-C: the supervisor and the worker both get it), SIGTERM to our process alone (docker stop).
EARLY_OFFSETS_S = [n * 0.05 for n in range(11)]  # 0.00-0.50 s, each with SIGINT and with SIGTERM
AT_ONCE = 4  # runs at a time: enough to load 2 cores, few enough that the offsets still mean something


def session_processes(session: int) -> list[int]:
    """Live processes of a session (start_new_session: the supervisor's pid), wherever they were re-parented."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split() if entry.isdigit() else []
        except OSError:
            continue
        if fields and int(fields[3]) == session and fields[0] != "Z":
            found.append(int(entry))
    return found


def stop_after(workspace: Path, command: str, signum: int, offset_s: float) -> tuple[subprocess.Popen, str, str]:
    env = {k: v for k, v in os.environ.items() if k != "ORCHESTRATE_ARCH"}
    process = subprocess.Popen([sys.executable, "-m", "orchestrate", command, "--arch", ARCH, "-q"], cwd=workspace,
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    time.sleep(offset_s)
    try:
        if signum == signal.SIGINT:
            os.killpg(process.pid, signum)
        else:
            process.send_signal(signum)
    except ProcessLookupError:  # a plan can be over already
        pass
    out, err = process.communicate(timeout=60)
    deadline = time.monotonic() + 5  # a build process the supervisor SIGKILLed may take a moment to go
    while session_processes(process.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return process, out, err


def before_our_code(process: subprocess.Popen, signum: int, err: str) -> bool:
    """The stop came while the interpreter was still starting, before launch.entry's first instruction: the
    one moment no code of ours can answer (Python's own KeyboardInterrupt, or death by the signal)."""
    return process.returncode == -signum or ("KeyboardInterrupt" in err and ", in entry\n" not in err)


@contextmanager
def signals_not_ignored():
    """A child inherits an ignored signal, and pytest started as a background job ignores SIGINT: a Ctrl-C
    sent before the child's Python replaced that would be lost (the build goes on), which is not ours."""
    saved = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    for signum, handler in saved.items():
        if handler == signal.SIG_IGN:
            signal.signal(signum, signal.default_int_handler if signum == signal.SIGINT else signal.SIG_DFL)
    try:
        yield
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)


@pytest.mark.parametrize("command", ["build-all", "plan"])
def test_a_stop_in_the_first_half_second_is_one_line(tmp_path, command):
    from stack import make_workspace

    tries = [(make_workspace(tmp_path / str(n)), signum, offset)
             for n, (offset, signum) in enumerate((o, s) for o in EARLY_OFFSETS_S for s in (signal.SIGINT, signal.SIGTERM))]
    with signals_not_ignored(), ThreadPoolExecutor(AT_ONCE) as pool:
        results = list(pool.map(lambda t: stop_after(t[0], command, t[1], t[2]), tries))
    early = 0
    for (workspace, signum, offset), (process, out, err) in zip(tries, results):
        moment = f"{command}, {WORDS[signum]} after {offset:.2f} s"
        assert not session_processes(process.pid), f"{moment}: processes left behind\n{err}"
        if before_our_code(process, signum, err):
            early += 1
        elif process.returncode == 0:  # finished before the signal came: a plan takes well under a second
            assert command == "plan" and "Plan for" in out and "Traceback" not in err, f"{moment}\n{err}"
            assert not [line for line in err.splitlines() if line.startswith(WORDS[signum])], f"{moment}\n{err}"
        else:
            assert "Traceback" not in out, f"{moment}\n{out}"
            assert_stopped_cleanly(process, workspace, signum, err)
    assert early <= len(tries) // 2, f"{early} of {len(tries)} stops came before our code ran: the test proved little"


def test_a_stop_that_python_swallows_is_raised_again_not_printed(capsys):
    """Raised inside a weakref callback (an import lock's, during a lazy import), Stopped would be printed
    as "Exception ignored in ..." and lost: the command would go on."""
    import weakref

    from orchestrate import stops

    class Thing:
        pass

    def stop_inside_the_callback(_):
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(10):  # the handler runs at one of these instructions, inside the callback
            pass

    assert stops.install()
    try:
        with pytest.raises(stops.Stopped), stops.armed():
            thing = Thing()
            reference = weakref.ref(thing, stop_inside_the_callback)
            del thing
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                pass
    finally:
        stops.uninstall()
    assert reference() is None
    assert "Exception ignored" not in capsys.readouterr().err
