"""A package that finished is never lost or rebuilt: build-all killed with SIGKILL at every step of adding a
package to the channel (and at random moments), then run again, builds exactly what is not complete in
the channel, and leaves package files, index and manifest in agreement."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest

from orchestrate.channel import Channel, read_provenance
from orchestrate.crashpoints import ENV as CRASH_ENV
from test_orchestrate_build import states

pytestmark = pytest.mark.timeout(240)

ARCH = "gfx1151"
PACKAGES_IN_PLAN = 10  # the test graph for gfx1151 (flash-attn twice: ck and triton)
# The steps of one package: built (still in its work folder), staged in the channel under a temporary name,
# renamed into place, indexed, recorded in the manifest.
CRASH_POINTS = ["built", "add.staged", "add.replaced", "add.indexed", "add.recorded"]


def build_all_killed(workspace, env_extra: dict | None = None, after_s: float | None = None) -> int:
    env = {**os.environ, **(env_extra or {})}
    env.pop("ORCHESTRATE_ARCH", None)
    command = [sys.executable, "-m", "orchestrate", "build-all", "--arch", ARCH, "-q"]
    process = subprocess.Popen(command, cwd=workspace, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if after_s is not None:
        time.sleep(after_s)
        process.send_signal(signal.SIGKILL)
    process.wait(timeout=120)
    return process.returncode


def complete_packages(channel: Channel) -> Counter:
    """Package files sitting in the channel under their final name, whether recorded yet or not."""
    return Counter(file.split("/")[1].rsplit("-", 2)[0] for file in channel.package_files())


def assert_consistent(channel: Channel) -> None:
    files = set(channel.package_files())
    manifest = channel.manifest()
    assert files == set(channel.repodata_records()) == set(manifest), "files, index and manifest disagree"
    for file, entry in manifest.items():
        assert read_provenance(channel.path / file)["input_hash"] == entry.input_hash
    leftovers = [p.name for p in channel.path.rglob(".*") if p.name not in (".orchestrate.lock", ".superseded")]
    assert leftovers == []


def rerun_and_check(orchestrate, channel: Channel) -> None:
    complete = complete_packages(channel) if channel.path.exists() else Counter()
    result = orchestrate("build-all", "--arch", ARCH)
    assert result.code == 0, result.err
    built = Counter({name: results.count("built") for name, results in states(result.out).items()})
    planned = Counter({name: len(results) for name, results in states(result.out).items()})
    assert sum(planned.values()) == PACKAGES_IN_PLAN
    assert +built == +(planned - complete), result.out  # exactly what was not complete
    assert_consistent(channel)
    assert sum(complete_packages(channel).values()) == PACKAGES_IN_PLAN


@pytest.mark.parametrize("nth", [1, 6])
@pytest.mark.parametrize("point", CRASH_POINTS)
def test_killed_at_each_step_of_adding_a_package(orchestrate, workspace, channel, point, nth):
    code = build_all_killed(workspace, {CRASH_ENV: f"{point}:{nth}"})
    assert code == -signal.SIGKILL
    unrecorded = set(channel.package_files()) - set(channel.manifest()) if channel.path.exists() else set()
    assert len(unrecorded) == (1 if point in ("add.replaced", "add.indexed") else 0)
    rerun_and_check(orchestrate, channel)


@pytest.mark.parametrize("after_s", [1.5, 2.5, 3.5])
def test_killed_at_a_random_moment(orchestrate, workspace, channel, after_s):
    build_all_killed(workspace, after_s=after_s)
    rerun_and_check(orchestrate, channel)


def test_recovery_reports_what_it_adopted(orchestrate, workspace, channel):
    build_all_killed(workspace, {CRASH_ENV: "add.indexed:3"})
    [orphan] = set(channel.package_files()) - set(channel.manifest())
    result = orchestrate("build-all", "--arch", ARCH)
    assert result.code == 0
    assert f"recovered {orphan}: complete and built from this plan's inputs" in result.out
    name = orphan.split("/")[1].rsplit("-", 2)[0]
    assert states(result.out)[name] == ["up to date"]


def test_a_package_built_from_other_inputs_is_set_aside_not_adopted(orchestrate, workspace, channel):
    assert orchestrate("build", "rocm-sdk", "--arch", ARCH).code == 0
    build_all_killed(workspace, {CRASH_ENV: "add.replaced:1"})  # the next package lands unrecorded
    [orphan] = set(channel.package_files()) - set(channel.manifest())
    name = orphan.split("/")[1].rsplit("-", 2)[0]
    recipe = next(r for r in (workspace / "recipes").glob("*/recipe.yaml") if f"name: {name}\n" in r.read_text())
    recipe.write_text(recipe.read_text() + "\n# changed after the crash\n")
    result = orchestrate("build-all", "--arch", ARCH)
    assert result.code == 0
    assert f"set aside {orphan} to .superseded/" in result.out
    assert list((channel.path / ".superseded").rglob(orphan.split("/")[1]))  # kept, not deleted
    assert_consistent(channel)


def test_a_package_of_another_architecture_is_adopted_for_that_architecture(orchestrate, workspace, channel):
    env = {CRASH_ENV: "add.indexed:3"}  # rocm-sdk, rocm-stack-check (noarch), then a gfx1100 package
    process = subprocess.run([sys.executable, "-m", "orchestrate", "build-all", "--arch", "gfx1100", "-q"],
                             cwd=workspace, env={**os.environ, **env}, capture_output=True)
    assert process.returncode == -signal.SIGKILL
    [orphan] = set(channel.package_files()) - set(channel.manifest())
    assert "gfx1100" in orphan
    result = orchestrate("build-all", "--arch", ARCH)  # another architecture's run finds it
    assert result.code == 0
    assert f"recovered {orphan}" in result.out
    assert_consistent(channel)
