"""`orchestrate doctor` against fake /sys, /proc and /dev trees and servers on 127.0.0.1: one line per check,
ok / warn / fail with the fix, exit 0 only when nothing fails."""
from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import stat
import time
from pathlib import Path
from urllib.parse import urlparse

import pytest
from rattler.index import index_fs

from orchestrate import doctor
from orchestrate.architectures import override_hint
from orchestrate.channels import FIX_CHANNEL
from orchestrate.estimates import DiskNeed
from orchestrate.ui import GIB
from source_helpers import CountingServer, sourced_recipe

STRIX_HALO = 110501  # gfx_target_version of gfx1151
NAVI31 = 110000  # gfx1100


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch):
    """Every probe doctor makes in these tests goes to 127.0.0.1; anything else fails the test."""
    real, strays = doctor.probe_url, []

    def guarded(url, timeout=doctor.PROBE_TIMEOUT_S):
        if urlparse(url).hostname != "127.0.0.1":
            strays.append(url)
            return None, "blocked by the test"
        return real(url, timeout)

    monkeypatch.setattr(doctor, "probe_url", guarded)
    yield
    assert not strays, f"doctor probed addresses other than 127.0.0.1: {strays}"


@pytest.fixture
def bare_path(tmp_path, monkeypatch):
    """A PATH without rocminfo, rocm_agent_enumerator or pixi; tests put fakes into it."""
    folder = tmp_path / "bin"
    folder.mkdir()
    monkeypatch.setenv("PATH", str(folder))
    monkeypatch.delenv(doctor.ARCH_OVERRIDE_ENV, raising=False)
    monkeypatch.delenv("CONDA_OVERRIDE_AMDGPU", raising=False)
    return folder


def fake_machine(root: Path, gpu: int | None = STRIX_HALO, mem_total_gib: float = 125.0, mem_free_gib: float = 100.0,
                 gtt_gib: float | None = None, pages_limit: int | None = None, cmdline: str = "BOOT_IMAGE=/vmlinuz",
                 driver: bool = True, kfd_mode: int = 0o666) -> doctor.Machine:
    sys_root, proc, dev = root / "sys", root / "proc", root / "dev"
    for folder in (sys_root, proc, dev):
        folder.mkdir(parents=True)
    (proc / "meminfo").write_text(f"MemTotal:       {int(mem_total_gib * 2**20)} kB\n"
                                  f"MemFree:        {int(mem_free_gib * 2**20)} kB\n"
                                  f"MemAvailable:   {int(mem_free_gib * 2**20)} kB\n")
    (proc / "cmdline").write_text(cmdline + "\n")
    if driver:
        (sys_root / "module/amdgpu/parameters").mkdir(parents=True)
        (sys_root / "module/amdgpu/parameters/gttsize").write_text("-1\n")
        nodes = sys_root / "class/kfd/kfd/topology/nodes"
        (nodes / "0").mkdir(parents=True)
        (nodes / "0/properties").write_text("cpu_cores_count 16\ngfx_target_version 0\n")
        if gpu:
            (nodes / "1").mkdir()
            (nodes / "1/properties").write_text(f"cpu_cores_count 0\ngfx_target_version {gpu}\nsimd_count 80\n")
        (dev / "kfd").write_text("")
        (dev / "kfd").chmod(kfd_mode)
    if gtt_gib is not None:
        (sys_root / "class/drm/card1/device").mkdir(parents=True)
        (sys_root / "class/drm/card1/device/mem_info_gtt_total").write_text(f"{int(gtt_gib * GIB)}\n")
    if pages_limit is not None:
        (sys_root / "module/ttm/parameters").mkdir(parents=True)
        (sys_root / "module/ttm/parameters/pages_limit").write_text(f"{pages_limit}\n")
    return doctor.Machine(sys_root, proc, dev)


@pytest.fixture
def machine(tmp_path, monkeypatch, bare_path):
    """Makes a fake machine and makes doctor read it."""
    def make(**kwargs) -> doctor.Machine:
        made = fake_machine(tmp_path / f"machine{len(list(tmp_path.glob('machine*')))}", **kwargs)
        monkeypatch.setattr(doctor, "MACHINE", made)
        return made
    return make


def lines_of(result) -> dict[str, list[str]]:
    """stdout's check lines by check name."""
    found: dict[str, list[str]] = {}
    for line in result.out.splitlines():
        status, _, rest = line.partition("  ")
        if status.strip() in (doctor.OK, doctor.WARN, doctor.FAIL):
            found.setdefault(rest.split()[0], []).append(line)
    return found


def empty_channel(folder: Path) -> Path:
    for subdir in ("noarch", "linux-64"):
        (folder / subdir).mkdir(parents=True)
    asyncio.run(index_fs(folder, write_shards=False))
    return folder


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# --- GPU, driver, GTT ---------------------------------------------------------------------------------

def test_strix_halo_with_the_kernels_default_gtt_gets_the_values_to_set(orchestrate, machine):
    machine(gtt_gib=62.0, pages_limit=62 * 2**18)
    result = orchestrate("doctor")
    checks = lines_of(result)
    assert checks["gpu"][0].startswith("ok") and "gfx1151" in checks["gpu"][0] and "Strix Halo" in checks["gpu"][0]
    assert checks["driver"][0].startswith("ok")
    gtt = checks["gtt"][0]
    assert gtt.startswith("warn") and "the GPU can use 62.0 GiB of 128 GiB RAM" in gtt
    # The values the Strix Halo guides give for 128 GiB: 124 GiB of GTT, 4 GiB left to the OS.
    assert "amdgpu.gttsize=126976 ttm.pages_limit=32505856 ttm.page_pool_size=32505856" in gtt
    assert result.code == 0, result.out  # a low GTT limit slows models, it does not stop a build


def test_strix_halo_with_raised_limits_is_ok(orchestrate, machine):
    machine(gtt_gib=124.0, pages_limit=32505856, cmdline="quiet amdgpu.gttsize=126976 ttm.pages_limit=32505856")
    gtt = lines_of(orchestrate("doctor"))["gtt"][0]
    assert gtt.startswith("ok") and "124.0 GiB of 128 GiB" in gtt
    assert "amdgpu.gttsize=126976 ttm.pages_limit=32505856" in gtt and "fix:" not in gtt


def test_a_low_ttm_pages_limit_caps_a_raised_gtt(orchestrate, machine):
    machine(mem_total_gib=61.0, gtt_gib=60.0, pages_limit=8 * 2**18, cmdline="amdgpu.gttsize=61440")
    gtt = lines_of(orchestrate("doctor"))["gtt"][0]
    assert gtt.startswith("warn") and "the GPU can use 8.0 GiB of 64 GiB RAM" in gtt
    assert "ttm.pages_limit=15728640" in gtt  # 60 GiB of a 64 GiB machine


def test_a_discrete_gpu_has_no_gtt_line(orchestrate, machine):
    machine(gpu=NAVI31)
    checks = lines_of(orchestrate("doctor"))
    assert "gfx1100" in checks["gpu"][0] and "gtt" not in checks


def test_the_support_line_is_the_table(orchestrate, machine):
    machine(gpu=NAVI31)
    support = lines_of(orchestrate("doctor"))["support"][0]
    assert "flash-attn CK" in support and "aiter (experimental)" in support
    assert "not CK attention" in support  # gfx1100: ck_mha no, in the table


def test_glibc_older_than_the_stacks_bound_fails_naming_both(orchestrate, machine, workspace, monkeypatch):
    machine(gtt_gib=124.0, pages_limit=32505856)
    with (workspace / "variants/shared.yaml").open("a") as shared:
        shared.write('c_stdlib_version: ["2.28"]\n')
    monkeypatch.setattr(doctor.glibc, "machine_glibc", lambda: "2.17")
    result = orchestrate("doctor")
    [line] = lines_of(result)["glibc"]
    assert line.startswith("fail") and "glibc 2.17 is older than the 2.28 the stack needs" in line
    assert "c_stdlib_version" in line and "fix: use a system with glibc >=2.28" in line
    assert result.code == 1
    monkeypatch.setattr(doctor.glibc, "machine_glibc", lambda: "2.39")
    [line] = lines_of(orchestrate("doctor"))["glibc"]
    assert line.startswith("ok") and "glibc 2.39, the stack needs >=2.28" in line


def test_no_gpu_and_no_architecture_fails(orchestrate, machine):
    machine(driver=False)
    result = orchestrate("doctor")
    checks = lines_of(result)
    assert result.code == 1
    assert checks["gpu"][0].startswith("fail") and "--arch" in checks["gpu"][0]
    assert checks["driver"][0].startswith("fail") and "modprobe amdgpu" in checks["driver"][0]
    assert result.out.splitlines()[-1].startswith("doctor: ") and "not ready" in result.out.splitlines()[-1]


def test_a_build_machine_without_a_gpu_passes_with_warnings(orchestrate, machine):
    machine(driver=False)
    result = orchestrate("doctor", "--arch", "gfx1151")
    checks = lines_of(result)
    assert result.code == 0, result.out
    assert checks["gpu"][0].startswith("warn") and "build machine" in checks["gpu"][0]
    assert checks["driver"][0].startswith("warn")
    assert "gtt" not in checks  # this machine's memory limits say nothing about a gfx1151 elsewhere


def test_building_for_another_gpu_than_this_one_warns(orchestrate, machine):
    machine(gpu=NAVI31)
    gpu = lines_of(orchestrate("doctor", "--arch", "gfx1151"))["gpu"][0]
    assert gpu.startswith("warn") and "gfx1100" in gpu and "gfx1151" in gpu and "drop --arch" in gpu


@pytest.mark.skipif(os.geteuid() == 0, reason="root opens any device")
def test_a_kfd_the_user_cannot_open_fails_with_the_groups_to_join(orchestrate, machine):
    machine(kfd_mode=0o600)
    (doctor.MACHINE.dev / "kfd").chmod(0)
    driver = lines_of(orchestrate("doctor"))["driver"][0]
    assert driver.startswith("fail") and "usermod -aG render,video" in driver


def test_an_unknown_architecture_is_a_usage_error(orchestrate, machine):
    machine()
    result = orchestrate("doctor", "--arch", "gfx9999")
    assert result.code == 2 and "unknown architecture 'gfx9999'" in result.err


# --- memory, disk -------------------------------------------------------------------------------------

def test_max_jobs_beyond_free_memory_warns_with_a_number_that_fits(orchestrate, machine, workspace):
    machine(gpu=NAVI31, mem_total_gib=32, mem_free_gib=13)
    (workspace / "orchestrate.toml").write_text("source_channels = []\nmax_jobs = 8\n")
    memory = lines_of(orchestrate("doctor"))["memory"][0]
    cores = os.cpu_count()
    assert memory.startswith("warn") and "MAX_JOBS=8" in memory
    assert f"--jobs {min(cores, 3)}" in memory  # 13 GiB free / 4 GiB per job


def test_the_plans_disk_estimate_against_free_space(orchestrate, machine, workspace):
    machine(gpu=NAVI31)
    recipe = workspace / "recipes/composable-kernel/recipe.yaml"
    recipe.write_text(recipe.read_text() + "extra:\n  estimate: {build_minutes: 90, disk_gib: 1000000}\n")
    result = orchestrate("doctor")
    disk = lines_of(result)["disk"][0]
    assert result.code == 1
    assert disk.startswith("fail") and "the plan needs about 1000000.0 GiB" in disk
    assert "composable-kernel's build peaks at" in disk and "--source-cache" in disk


def test_disk_check_groups_folders_by_disk(tmp_path):
    folders = {"channel": tmp_path / "channel", "work area": tmp_path / "work", "source cache": tmp_path / "src"}
    free = shutil.disk_usage(tmp_path).free
    fits = doctor.disk_check([DiskNeed(tmp_path / "work", GIB, ["a build peaks at 1.0 GiB"])], folders, 1)
    assert fits.status == doctor.OK and "(channel, work area, source cache)" in fits.detail
    assert "the plan needs about 1.0 GiB" in fits.detail
    short = doctor.disk_check([DiskNeed(tmp_path / "work", free + 10 * GIB, ["big"])], folders, 1)
    assert short.status == doctor.FAIL and str(tmp_path) in short.fix
    unknown = doctor.disk_check([], folders, 3)
    assert unknown.status == doctor.OK and "no disk estimate for the 3 package(s)" in unknown.detail


# --- channels, sources (servers on 127.0.0.1) ----------------------------------------------------------

def test_channels_answer_or_are_named_with_the_fix(orchestrate, machine, tmp_path):
    machine(gpu=NAVI31)
    served = tmp_path / "served"
    empty_channel(served / "mirror")
    (served / "not-a-channel").mkdir()
    local = empty_channel(tmp_path / "local-channel")
    dead = f"http://127.0.0.1:{closed_port()}/conda-forge"
    with CountingServer(served) as server:
        result = orchestrate("doctor", "--source-channel", f"{server.url}/mirror",
                             "--source-channel", f"{server.url}/not-a-channel", "--source-channel", dead,
                             "--source-channel", str(local))
    channels = lines_of(result)["channel"]
    assert result.code == 1
    assert channels[0].startswith("ok") and f"{server.url}/mirror answers" in channels[0]
    assert channels[1].startswith("fail") and "not a conda channel" in channels[1]
    assert channels[2].startswith("fail") and f"{dead} cannot be reached" in channels[2] and FIX_CHANNEL in channels[2]
    assert channels[3].startswith("ok") and "is a channel" in channels[3]


def test_source_hosts_of_what_will_be_built_are_probed(orchestrate, machine, workspace, tmp_path):
    machine(gpu=NAVI31)
    dead = f"http://127.0.0.1:{closed_port()}"
    recipe = workspace / "recipes/composable-kernel/recipe.yaml"
    recipe.write_text(recipe.read_text().replace(
        "build:\n", f"source:\n  url: {dead}/ck.tar.gz\n  sha256: '{'ab' * 32}'\nbuild:\n", 1))
    with sourced_recipe(workspace, tmp_path) as server:
        result = orchestrate("doctor")
    sources = {line.split()[2]: line for line in lines_of(result)["sources"]}
    assert result.code == 1
    assert sources[server.url + "/"].startswith("ok") and "sources of sourced" in sources[server.url + "/"]
    assert sources[dead + "/"].startswith("fail") and "composable-kernel" in sources[dead + "/"]
    assert "orchestrate fetch" in sources[dead + "/"]


def test_probes_run_in_parallel_under_one_deadline(orchestrate, machine, monkeypatch):
    """Servers that accept and never answer: each probe times out, together in about one timeout."""
    machine(gpu=NAVI31)
    monkeypatch.setattr(doctor, "PROBE_TIMEOUT_S", 1.0)
    silent = []
    for _ in range(4):
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        silent.append(listener)
    arguments = [a for s in silent for a in ("--source-channel", f"http://127.0.0.1:{s.getsockname()[1]}/c")]
    started = time.monotonic()
    result = orchestrate("doctor", *arguments)
    elapsed = time.monotonic() - started
    for listener in silent:
        listener.close()
    channels = lines_of(result)["channel"]
    assert len(channels) == 4 and all(c.startswith("fail") and "cannot be reached" in c for c in channels)
    assert elapsed < 3.5, f"4 probes of 1 s took {elapsed:.1f} s: not in parallel"


def test_a_probe_past_the_deadline_is_a_failure_not_a_hang():
    started = time.monotonic()
    checks = doctor.run_parallel([lambda: time.sleep(5) or doctor.Check("x", doctor.OK, ""),
                                  lambda: doctor.Check("y", doctor.OK, "fast")], deadline_s=0.5)
    assert time.monotonic() - started < 2
    assert checks[0].status == doctor.FAIL and "no answer within" in checks[0].detail
    assert checks[1].detail == "fast"


# --- pixi, CONDA_OVERRIDE_AMDGPU_ARCH ------------------------------------------------------------------

FAKE_PIXI = """#!/bin/sh
# answers `pixi info --json` the way pixi does; lists __amdgpu_arch only if it {knows} it
if [ "$1" = info ]; then
  if [ -n "{knows}" ] && [ -n "$CONDA_OVERRIDE_AMDGPU_ARCH" ]; then
    echo '{{"version": "{version}", "virtual_packages": ["__unix=0=0", "__amdgpu_arch='"$CONDA_OVERRIDE_AMDGPU_ARCH"'=0"]}}'
  else
    echo '{{"version": "{version}", "virtual_packages": ["__unix=0=0", "__glibc=2.36=0"]}}'
  fi
fi
"""


@pytest.mark.parametrize("knows,status", [("knows", "ok"), ("", "warn")])
def test_pixi_on_path_and_whether_it_knows_amdgpu_arch(orchestrate, machine, bare_path, monkeypatch, knows, status):
    machine()
    pixi = bare_path / "pixi"
    pixi.write_text(FAKE_PIXI.format(knows=knows, version="0.99.0"))
    pixi.chmod(pixi.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bare_path}:/bin:/usr/bin")  # the fake is a shell script
    line = lines_of(orchestrate("doctor"))["pixi"][0]
    assert line.startswith(status) and "pixi 0.99.0" in line
    assert ("knows __amdgpu_arch" in line) if knows else ("does not know __amdgpu_arch" in line)


def test_a_pixi_older_than_the_gpu_platforms_is_told_to_update(orchestrate, machine, bare_path, monkeypatch):
    machine()
    pixi = bare_path / "pixi"
    pixi.write_text(FAKE_PIXI.format(knows="knows", version="0.77.0"))
    pixi.chmod(pixi.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bare_path}:/bin:/usr/bin")
    [line] = lines_of(orchestrate("doctor"))["pixi"]
    assert line.startswith("warn") and "pixi 0.77.0 is older than 0.82.0" in line and "fix: `pixi self-update`" in line


def test_no_pixi_is_a_warning(orchestrate, machine):
    machine()
    pixi = lines_of(orchestrate("doctor"))["pixi"][0]
    assert pixi.startswith("warn") and "not on PATH" in pixi


@pytest.mark.parametrize("value,status,fragment", [
    ("11.5.1", "ok", "selects gfx1151 builds"),
    ("gfx1151", "fail", f"export {override_hint('11.5.1')}"),
    ("11.0.0", "warn", "makes pixi install gfx1100 builds on this gfx1151"),
    ("9.9.9", "fail", "no architecture in the table has that ISA"),
])
def test_the_isa_override_must_match_the_gpu(orchestrate, machine, monkeypatch, value, status, fragment):
    machine()
    monkeypatch.setenv(doctor.ARCH_OVERRIDE_ENV, value)
    line = lines_of(orchestrate("doctor"))["override"][0]
    assert line.startswith(status) and fragment in line


@pytest.mark.parametrize("env,status,fragment", [
    ({}, "ok", f"to install gfx1151 builds here anyway (a container build, CI): {override_hint('11.5.1')}"),
    # the ISA alone is dropped by the solver where no GPU is seen: the fix is the whole hint
    ({"CONDA_OVERRIDE_AMDGPU_ARCH": "11.5.1"}, "warn", f"no AMD GPU is seen here, and the solver drops the ISA "
     f"without a GPU (pixi install of rocm-stack fails); fix: export {override_hint('11.5.1')}"),
    ({"CONDA_OVERRIDE_AMDGPU": "", "CONDA_OVERRIDE_AMDGPU_ARCH": "11.5.1"}, "warn", "CONDA_OVERRIDE_AMDGPU is empty"),
    (dict(kv.split("=") for kv in override_hint("11.5.1").split()), "ok", "selects gfx1151 builds"),
    ({"CONDA_OVERRIDE_AMDGPU": "1"}, "fail", f"accepts only 0 (an AMD GPU is there) or an empty value (none is); "
     f"fix: export {override_hint('11.5.1')}"),
])
def test_without_a_gpu_the_override_hint_is_the_one_that_solves(orchestrate, machine, monkeypatch, env, status, fragment):
    machine(gpu=None)  # a build box or a container build: the driver is there, no GPU
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    line = lines_of(orchestrate("doctor", "--arch", "gfx1151"))["override"][0]
    assert line.startswith(status) and fragment in line, line


def test_json_for_scripts(orchestrate, machine):
    machine(driver=False)
    result = orchestrate("doctor", "--json")
    document = json.loads(result.out)
    assert result.code == 1
    assert document["schema"] == doctor.SCHEMA and document["ok"] is False and document["arch"] is None
    statuses = {c["name"]: c["status"] for c in document["checks"]}
    assert statuses["gpu"] == "fail" and document["counts"]["fail"] >= 1
    assert all(set(c) == {"name", "status", "detail", "fix"} for c in document["checks"])


def test_without_a_gtt_report_the_amdgpu_gttsize_parameter_counts(orchestrate, machine):
    made = machine(pages_limit=32505856)
    (made.sys / "module/amdgpu/parameters/gttsize").write_text("126976\n")
    gtt = lines_of(orchestrate("doctor"))["gtt"][0]
    assert gtt.startswith("ok") and "GTT 124.0 GiB" in gtt


# --- several GPUs, a GPU outside the table, HSA_OVERRIDE_GFX_VERSION ------------------------------------------

def add_gpu(made: doctor.Machine, node: int, version: int, simds: int) -> None:
    folder = made.sys / f"class/kfd/kfd/topology/nodes/{node}"
    folder.mkdir()
    (folder / "properties").write_text(f"cpu_cores_count 0\ngfx_target_version {version}\nsimd_count {simds}\n"
                                       "simd_per_cu 2\n")


def test_every_gpu_is_named_with_its_architecture_and_the_one_the_solver_sees(orchestrate, machine):
    """A Strix Halo (40 CUs) with an RX 7900 eGPU (96 CUs): a line for each, and which one an environment gets."""
    made = machine()  # node 1: gfx1151 with 80 SIMDs, no simd_per_cu: counted as 80
    (made.sys / "class/kfd/kfd/topology/nodes/1/properties").write_text(
        f"gfx_target_version {STRIX_HALO}\nsimd_count 80\nsimd_per_cu 2\n")
    add_gpu(made, 2, NAVI31, 192)
    result = orchestrate("doctor")
    gpus = lines_of(result)["gpu"]
    assert len(gpus) == 2
    assert "GPU 0 of 2: gfx1151 (" in gpus[0] and "Strix Halo" in gpus[0] and "40 compute units" in gpus[0]
    assert "GPU 1 of 2: gfx1100 (" in gpus[1] and "96 compute units" in gpus[1]
    assert lines_of(result)["gtt"]  # the Strix Halo's memory limit is checked, though the solver picks the eGPU
    [pick] = lines_of(result)["gpus"]
    assert "solver sees gfx1100 (most compute units)" in pick and "--arch gfx1100,gfx1151" in pick
    both = lines_of(orchestrate("doctor", "--arch", "gfx1151,gfx1100"))["gpu"]
    assert all(line.startswith("ok") for line in both)
    one = lines_of(orchestrate("doctor", "--arch", "gfx1151"))["gpu"]
    assert one[1].startswith("warn") and "not in --arch gfx1151" in one[1] and "--arch gfx1151,gfx1100" in one[1]


def test_a_gpu_outside_the_table_is_one_line_with_its_nearest_family_and_the_page(orchestrate, machine):
    machine(gpu=100103)  # gfx1013: AMD ships no PyTorch for it
    result = orchestrate("doctor")
    [line] = lines_of(result)["gpu"]
    assert line.startswith("fail") and "gfx1013 is not in the architecture table" in line
    assert "nearest family there: gfx1" in line and "docs/adding-a-gpu.md" in line
    assert result.code == 1


@pytest.mark.parametrize("real", [STRIX_HALO, 100103])
def test_hsa_override_says_what_it_pretends_and_what_the_table_offers(orchestrate, machine, monkeypatch, real):
    machine(gpu=real)
    monkeypatch.setenv("HSA_OVERRIDE_GFX_VERSION", "11.0.0")
    [line] = lines_of(orchestrate("doctor", "--arch", "gfx1100"))["hsa"]
    assert line.startswith("warn") and "HSA_OVERRIDE_GFX_VERSION=11.0.0 makes ROCm run this" in line
    if real == STRIX_HALO:
        assert "gfx1151 as gfx1100" in line and "the table has gfx1151: " in line and "--arch gfx1151" in line
    else:
        assert "gfx1013 as gfx1100" in line and "gfx1013 is not in the table" in line and "docs/adding-a-gpu.md" in line
    assert "fix: unset HSA_OVERRIDE_GFX_VERSION" in line
    monkeypatch.delenv("HSA_OVERRIDE_GFX_VERSION")
    assert "hsa" not in lines_of(orchestrate("doctor", "--arch", "gfx1100"))
