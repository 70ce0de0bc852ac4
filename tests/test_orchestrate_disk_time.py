"""Bounded disk (work folders removed after success, kept after failure until `orchestrate clean`, a free
space check before building) and time (expected durations in `plan`, recorded durations, ETA)."""
from __future__ import annotations

import fcntl
import os
import re
import time

from orchestrate.channel import STAMP_FORMAT
from source_helpers import sourced_recipe
from test_orchestrate_build import states

ARCH = "gfx1151"


def work_folders(workspace):
    work = workspace / ".orchestrate/work"
    return sorted(p.name for p in work.iterdir() if p.is_dir()) if work.is_dir() else []


def test_successful_builds_leave_no_copies_behind(orchestrate, workspace, channel):
    assert orchestrate("build-all", "--arch", ARCH).code == 0
    assert work_folders(workspace) == []
    assert not (channel.path / ".tmp").exists()
    entries = channel.manifest().values()
    assert entries and all(e.package_bytes == (channel.path / e.file).stat().st_size for e in entries)
    assert all(e.seconds > 0 and e.host for e in entries)  # durations and sizes recorded for estimates


def test_a_failed_build_keeps_its_folder_until_clean(orchestrate, workspace, channel):
    recipe = workspace / "recipes/aotriton/recipe.yaml"
    recipe.write_text(recipe.read_text().replace("content:\n", "content:\n      - exit 4\n"))
    result = orchestrate("build-all", "--arch", ARCH)
    assert result.code == 1
    kept = re.search(r"work folder kept for a look: (\S+);", result.err).group(1)
    assert [os.path.basename(kept)] == work_folders(workspace)
    assert os.path.isdir(os.path.join(kept, "bld"))  # what the build left, to look at
    cleaned = orchestrate("clean")
    assert cleaned.code == 0 and f"removed work folder {kept}" in cleaned.out and "freed" in cleaned.out
    assert work_folders(workspace) == []
    assert (workspace / ".orchestrate/sources").is_dir()  # the source cache is not the work area
    assert orchestrate("clean").out.strip() == "nothing to clean"


def test_clean_waits_for_a_running_build(orchestrate, workspace):
    work = workspace / ".orchestrate/work"
    work.mkdir(parents=True)
    (work / "pytorch-abc").mkdir()
    with open(work / ".in-use", "w") as held:
        fcntl.flock(held, fcntl.LOCK_SH)  # what a running build-all holds
        result = orchestrate("clean")
    assert result.code == 2 and "in use by a running build" in result.err
    assert work_folders(workspace) == ["pytorch-abc"]


def test_clean_superseded_by_age(orchestrate, workspace, channel):
    assert orchestrate("build", "rocm-sdk", "--arch", ARCH).code == 0
    old = channel.path / ".superseded" / time.strftime(STAMP_FORMAT, time.localtime(time.time() - 10 * 86400))
    new = channel.path / ".superseded" / time.strftime(STAMP_FORMAT)
    for stamp in (old, new):
        (stamp / "linux-64").mkdir(parents=True)
        (stamp / "linux-64" / "rocm-sdk-7.14.0-old_0.conda").write_bytes(b"x" * 1000)
    result = orchestrate("clean", "--superseded", "7")
    assert result.code == 0 and f"removed superseded {old}" in result.out
    assert not old.exists() and new.exists()


def test_plan_refuses_to_start_without_the_disk_it_needs(orchestrate, workspace, tmp_path, channel):
    with sourced_recipe(workspace, tmp_path, disk_gib=10**6):
        assert orchestrate("build", "rocm-sdk", "--arch", ARCH).code == 0
        before = channel.snapshot()
        result = orchestrate("build", "sourced", "--arch", ARCH)
        assert result.code == 2
        [line] = result.err.strip().splitlines()
        assert "not enough free disk at" in line and "sourced's build peaks at 1000000.0 GiB" in line
        assert str(workspace / ".orchestrate") in line or str(workspace) in line
        assert channel.snapshot() == before
        forced = orchestrate("build", "sourced", "--arch", ARCH, "--skip-disk-check")
        assert forced.code == 0


def test_the_disk_check_counts_the_sources_not_yet_in_the_source_cache(orchestrate, workspace, tmp_path, channel):
    """The source cache keeps every archive, its unpacked tree and every clone after the build: a plan needs
    that room too, until the sources are there (issue 38)."""
    with sourced_recipe(workspace, tmp_path, source_gib=10**6):
        assert orchestrate("build", "rocm-sdk", "--arch", ARCH).code == 0
        result = orchestrate("build", "sourced", "--arch", ARCH)
        assert result.code == 2
        [line] = result.err.strip().splitlines()
        assert "sources not yet in the source cache 1000000.0 GiB (2 of 2 sources" in line
        assert str(workspace / ".orchestrate") in line
        assert orchestrate("fetch", "sourced", "--arch", ARCH).code == 0
        assert orchestrate("build", "sourced", "--arch", ARCH).code == 0  # both sources cached: nothing to add


def test_plan_shows_declared_then_measured_durations(orchestrate, workspace, tmp_path):
    with sourced_recipe(workspace, tmp_path):
        plan = orchestrate("plan", "--arch", ARCH, "sourced")
        row = next(l for l in plan.out.splitlines() if re.match(r"^\d+\s+sourced ", l))
        assert "will build  1h30m" in row  # the recipe's extra.estimate.build_minutes: 90
        assert "expected 1h30m" in plan.out and "declared by the recipe" in plan.out
        assert "1 without an estimate" not in plan.out

        built = orchestrate("build", "sourced", "--arch", ARCH)
        assert "(1/1, 0s of ~1h30m, ETA " in built.out  # the plain progress line

        gfx1100 = orchestrate("plan", "--arch", "gfx1100", "sourced")
        row = next(l for l in gfx1100.out.splitlines() if re.match(r"^\d+\s+sourced ", l))
        assert "1h30m" not in row and "measured here" in gfx1100.out  # another arch's real build wins


def test_build_all_shows_position_and_eta_per_package(orchestrate, workspace):
    result = orchestrate("build-all", "--arch", ARCH)
    starts = [l for l in result.out.splitlines() if l.startswith("building ")]
    assert len(starts) == 10 and starts[0].endswith(", ETA ?)") and "(1/10, " in starts[0]
    assert "(10/10, " in starts[-1]
    assert set(sum(states(result.out).values(), [])) == {"built"}


def test_a_source_shared_by_recipes_is_counted_once_and_a_cached_one_not_at_all(tmp_path):
    """CK's clone serves composable-kernel, flash-attn and aiter: one copy in the cache, counted once."""
    from orchestrate.estimates import Estimate, source_cache_need
    from orchestrate.sources import METADATA, Source, SourceCache
    from orchestrate.ui import GIB

    ck = Source("git", ("https://github.com/ROCm/composable_kernel.git",), "a" * 40)
    fa = Source("git", ("https://github.com/Dao-AILab/flash-attention.git",), "b" * 40)
    tarball = Source("url", ("https://example.org/pytorch.tar.gz",), "c" * 64)
    license_ = Source("path", ("../../LICENSE",), "")

    def build(name, gib, *sources):
        return name, Estimate(60, 0, 0, "declared by the recipe", int(gib * GIB)), list(sources)

    cache = SourceCache(tmp_path / "sources")
    builds = [build("composable-kernel", 4, ck, license_), build("flash-attn", 6, fa, ck),
              build("pytorch-rocm", 2, tarball), build("rocm-stack", 0, license_)]
    need = source_cache_need(builds, cache)
    assert need.bytes == (4 + 3 + 2) * GIB  # ck at the larger of 4 and 6/2; the path source is no download
    assert "(3 of 3 sources" in need.part
    (tmp_path / "sources" / METADATA).mkdir(parents=True)
    (tmp_path / "sources" / "pytorch").mkdir()
    (tmp_path / "sources" / METADATA / "pytorch.json").write_text(
        '{"source_type": "url", "url": "https://example.org/pytorch.tar.gz", "checksum": "%s", "cache_path": "pytorch"}'
        % ("c" * 64))
    need = source_cache_need(builds, cache)
    assert need.bytes == 7 * GIB and "(2 of 3 sources" in need.part
    assert "none declared by" not in need.part
    assert "none declared by aiter" in source_cache_need([build("aiter", 0, ck)], SourceCache(tmp_path / "x")).part
