"""A failed build says why, from its log (killed by the OOM killer, a compiler error, a full disk), and a full
disk anywhere the orchestrator writes is one line naming the path and the free bytes: exit 2, the channel
as it was, never a traceback."""
from __future__ import annotations

import builtins
import errno
import io
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrate import diagnose
from orchestrate.channel import Channel
from orchestrate.errors import FAILED_BUILDS_PAGE
from stack import REPO
from test_orchestrate_crash import assert_consistent
from test_orchestrate_stops import script_runs

pytestmark = pytest.mark.timeout(120)

ARCH = "gfx1151"
DISK_FULL = re.compile(r"^error: disk full: no space left on device for .+ \(the filesystem at \S+ has \d+ bytes")


def summary_row(out: str, package: str) -> str:
    return next(line for line in out.splitlines() if line.startswith(package + " "))


def test_a_script_killed_by_sigkill_names_memory_and_max_jobs(orchestrate, workspace):
    script_runs(workspace, ["bash -c 'kill -9 $$'"])  # what the OOM killer does to a compile job
    result = orchestrate("build", "rocm-sdk", "--arch", ARCH, "--jobs", "8")
    assert result.code == 1
    reason = "killed (SIGKILL), most likely out of memory: MAX_JOBS was 8; try 4 (--jobs 4; the orchestrator assumed 4 GiB"
    assert reason in summary_row(result.out, "rocm-sdk")
    failed = next(line for line in result.err.splitlines() if line.startswith("FAILED rocm-sdk"))
    assert reason in failed and "full log: " in failed and ".orchestrate/logs/" in failed


def test_a_compiler_error_is_the_reason(orchestrate, workspace):
    script_runs(workspace, ["echo 'building kernels'",
                            "echo \"src/gemm.cpp:12:7: error: 'half8' was not declared in this scope\" >&2",
                            "echo 'src/gemm.cpp:40:1: error: expected declaration' >&2", "exit 1"])
    result = orchestrate("build", "rocm-sdk", "--arch", ARCH)
    assert result.code == 1
    assert ("the build script failed (exit status 1): src/gemm.cpp:12:7: error: 'half8' was not declared"
            in summary_row(result.out, "rocm-sdk"))
    # the way back in (docs/failed-builds.md, named by the line): the kept work folder holds the script as it ran
    # and its environment, where the page says
    failed = next(line for line in result.err.splitlines() if line.startswith("FAILED rocm-sdk"))
    assert FAILED_BUILDS_PAGE in failed and (REPO / FAILED_BUILDS_PAGE).is_file()
    work = Path(failed.split("work folder kept for a look: ")[1].split(";")[0])
    [script_dir] = work.glob("bld/rattler-build_rocm-sdk_*/work")
    assert (script_dir / "conda_build.sh").is_file() and "source build_env.sh" in (REPO / FAILED_BUILDS_PAGE).read_text()
    environment = (script_dir / "build_env.sh").read_text()
    for variable in ("PREFIX", "BUILD_PREFIX", "SRC_DIR", "RECIPE_DIR", "MAX_JOBS"):
        assert f"export {variable}=" in environment, variable
    rerun = subprocess.run(["bash", "./conda_build.sh"], cwd=script_dir, capture_output=True, text=True, timeout=60)
    assert rerun.returncode == 1 and "'half8' was not declared" in rerun.stderr  # the failure again, in its environment


def test_without_an_error_line_the_last_lines_are_the_reason(orchestrate, workspace):
    script_runs(workspace, ["echo 'make: *** [Makefile:3: all] Error 2'", "exit 2"])
    result = orchestrate("build", "rocm-sdk", "--arch", ARCH)
    assert "the build script failed (exit status 2): make: *** [Makefile:3: all] Error 2" in summary_row(result.out, "rocm-sdk")


def test_a_full_disk_inside_the_build_names_the_filesystem(orchestrate, workspace):
    script_runs(workspace, ["echo 'cc1plus: fatal error: gemm.o: No space left on device' >&2", "exit 1"])
    result = orchestrate("build", "rocm-sdk", "--arch", ARCH)
    assert result.code == 1
    row = summary_row(result.out, "rocm-sdk")
    assert re.search(r"disk full: no space left on device for the build in \S+/\.orchestrate/work/rocm-sdk-\S+ "
                     r"\(the filesystem at \S+ has \d+ bytes", row), row


@pytest.mark.parametrize("log, expected", [
    (["g++: fatal error: Killed signal terminated program cc1plus", "ninja: build stopped", "Script failed with status 1"],
     "cc1plus was killed (SIGKILL), most likely out of memory: MAX_JOBS was 16; try 8"),
    (["Script failed with status 143"], "the build script was killed by SIGTERM"),
])
def test_script_problem_reads_the_compilers_words(log, expected):
    assert expected in diagnose.explain("Script failed to execute", log, "pytorch", max_jobs=16)


# -- ENOSPC at each place the orchestrator writes -----------------------------------------------------------
def enospc(path) -> OSError:
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))


@pytest.fixture
def full_disk_at(monkeypatch):
    """Make every write whose path matches `pattern` fail with ENOSPC, as a full disk does."""

    def install(pattern: str) -> None:
        match = re.compile(pattern).search
        real_open, real_os_open, real_mkdir = builtins.open, os.open, os.mkdir

        def fake_open(file, mode="r", *args, **kwargs):
            if any(m in mode for m in "wax+") and match(str(file)):
                raise enospc(file)
            return real_open(file, mode, *args, **kwargs)

        def fake_os_open(path, flags, *args, **kwargs):
            if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT) and match(str(path)):
                raise enospc(path)
            return real_os_open(path, flags, *args, **kwargs)

        def fake_mkdir(path, *args, **kwargs):
            if match(str(path)):
                raise enospc(path)
            return real_mkdir(path, *args, **kwargs)

        monkeypatch.setattr(builtins, "open", fake_open)
        monkeypatch.setattr(io, "open", fake_open)
        monkeypatch.setattr(os, "open", fake_os_open)
        monkeypatch.setattr(os, "mkdir", fake_mkdir)

    return install


def assert_one_disk_full_line(result, path_part: str) -> None:
    assert result.code == 2, result.err
    lines = [line for line in result.err.splitlines() if line.strip()]
    assert len(lines) == 1 and DISK_FULL.search(lines[0]), result.err
    assert path_part in lines[0] and "Traceback" not in result.err


# site -> (a pattern of the paths that fail, what the line names)
WRITE_SITES = {
    "build log": (r"/\.orchestrate/logs/rocm-stack-check-", ".orchestrate/logs/rocm-stack-check-"),
    "work folder": (r"/\.orchestrate/work/rocm-stack-check-", ".orchestrate/work/rocm-stack-check-"),
    "channel copy": (r"/channel/noarch/\.rocm-stack-check-.*\.incoming$", "rocm-stack-check-"),
    "manifest": (r"/channel/\.orchestrate-manifest\.json\.tmp$", "/channel"),
    "lock file": (r"/channel/\.orchestrate\.lock$", "/channel/.orchestrate.lock"),
}


@pytest.mark.parametrize("site", WRITE_SITES)
def test_a_full_disk_at_each_write_site_is_one_line_and_the_channel_stays(orchestrate, workspace, channel,
                                                                         full_disk_at, site):
    assert orchestrate("build", "rocm-sdk", "--arch", ARCH).code == 0
    before = channel.snapshot()
    pattern, named = WRITE_SITES[site]
    full_disk_at(pattern)
    result = orchestrate("build", "rocm-stack-check", "--arch", ARCH)
    assert_one_disk_full_line(result, named)
    assert channel.snapshot() == before
    assert_consistent(channel)


def test_a_full_disk_while_indexing_rolls_the_package_back(orchestrate, channel, monkeypatch):
    from orchestrate import channel as channel_module

    assert orchestrate("build", "rocm-sdk", "--arch", ARCH).code == 0
    before = channel.snapshot()
    real_index, calls = channel_module.index_fs, []

    async def index_fails_once(*args, **kwargs):  # the rollback's own index then succeeds
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("failed to write repodata.json: No space left on device (os error 28)")
        return await real_index(*args, **kwargs)

    monkeypatch.setattr(channel_module, "index_fs", index_fails_once)
    result = orchestrate("build", "rocm-stack-check", "--arch", ARCH)
    assert_one_disk_full_line(result, "/channel")
    assert channel.snapshot() == before
    assert_consistent(channel)


def test_a_full_source_cache_is_one_line(orchestrate, workspace, full_disk_at):
    full_disk_at(r"/\.orchestrate/sources")
    assert_one_disk_full_line(orchestrate("build-all", "--arch", ARCH), ".orchestrate/sources")


def test_a_full_channel_disk_refuses_before_copying(orchestrate, channel, monkeypatch):
    assert orchestrate("build", "rocm-sdk", "--arch", ARCH).code == 0
    before = channel.snapshot()
    real_usage = shutil.disk_usage
    monkeypatch.setattr(shutil, "disk_usage", lambda p: real_usage(p)._replace(free=40 * 1024))
    result = orchestrate("build", "rocm-stack-check", "--arch", ARCH)
    assert_one_disk_full_line(result, "in the channel")
    assert channel.snapshot() == before


@pytest.mark.parametrize("free_kib", [40, 120])
def test_a_really_full_disk_is_one_line(tmp_path, workspace, free_kib):
    """build-all on a small tmpfs with 40 or 120 KiB left, as the issue measured."""
    mount = tmp_path / "small"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (needs root and mount rights): {made.stderr.decode().strip()}")
    try:
        small = mount / "ws"
        shutil.copytree(workspace, small)
        filler = mount / "filler"
        with open(filler, "wb") as f:
            f.write(b"\0" * (shutil.disk_usage(mount).free - free_kib * 1024))
        env = {k: v for k, v in os.environ.items() if k != "ORCHESTRATE_ARCH"}
        run = subprocess.run([sys.executable, "-m", "orchestrate", "build-all", "--arch", ARCH, "-q"], cwd=small,
                             capture_output=True, text=True, timeout=120, env=env)
        assert "Traceback" not in run.stderr
        assert run.returncode in (1, 2), run.stderr
        assert "disk full: no space left on device" in run.stderr, run.stderr
        if (small / "channel").exists():
            assert_consistent(Channel(small / "channel"))
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)
