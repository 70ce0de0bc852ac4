"""Shared fixtures: a copy of the test graph workspace (tests/workspace) with the real architecture
table, and a way to run the orchestrator's CLI in-process and read what a user would see."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from orchestrate.channel import Channel
from orchestrate.cli import main
from stack import make_workspace

REPO = Path(__file__).resolve().parent.parent

# rattler's package cache keys packages by name-version-build, and the test graph builds the same names with
# different contents in many tests: a cache of this run's own keeps concurrent runs (two developers' suites on
# one machine, CI beside a local run) from installing each other's packages. Builds, tests and subprocesses
# inherit it. pytest-xdist's workers inherit the controller's environment, so each worker makes its own: two
# workers sharing one cache installed each other's test-graph packages.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ["RATTLER_CACHE_DIR"] = tempfile.mkdtemp(
        prefix=f"rocm-stack-tests-rattler-cache-{os.environ['PYTEST_XDIST_WORKER']}-")
else:
    os.environ.setdefault("RATTLER_CACHE_DIR", tempfile.mkdtemp(prefix="rocm-stack-tests-rattler-cache-"))

# One line per table row, as on a wide terminal: the tests read rows. Set here once, so in-process runs, child
# processes and xdist workers all have it; tests/test_user_paths.py unsets it where it checks 80 columns and a pipe.
os.environ["COLUMNS"] = "1000"


@dataclass
class Result:
    code: int
    out: str
    err: str


@pytest.fixture(autouse=True)
def no_amd_index(monkeypatch):
    """Nothing in the tests reaches AMD: `orchestrate pins` reads AMD's releases from a closed loopback port
    (tests that serve an index of their own point variants/prebuilt.yaml at it)."""
    monkeypatch.setenv("ORCHESTRATE_AMD_INDEX", "http://127.0.0.1:9/")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return make_workspace(tmp_path)


@pytest.fixture
def orchestrate(workspace: Path, capsys, monkeypatch):
    """Run `orchestrate ARGS` in the test workspace; returns exit code, stdout and stderr."""
    monkeypatch.chdir(workspace)
    monkeypatch.delenv("ORCHESTRATE_ARCH", raising=False)

    def run(*args: str) -> Result:
        capsys.readouterr()
        code = main([str(a) for a in args])
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run


@pytest.fixture
def channel(workspace: Path) -> Channel:
    return Channel(workspace / "channel")


def run_subprocess(*args: str, cwd: Path, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "orchestrate", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120, env=env)


# The files that take longest (pytest --durations on 2026-12-01, two workers): collected first, so that
# `-n 2 --dist loadfile`, which hands files out in collection order, starts them first and the two workers end
# together instead of one running a long file alone at the end. The order of everything else is kept.
LONGEST_FIRST = ("test_share_concurrent.py", "test_orchestrate_crash.py", "test_orchestrate_build.py",
                 "test_recipes.py", "test_pins_bump.py", "test_orchestrate_stops.py", "test_channel_signed.py",
                 "test_recipe_lint.py", "test_bump_prove.py", "test_hip_build.py")


def pytest_collection_modifyitems(session, config, items):
    rank = {name: place for place, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
