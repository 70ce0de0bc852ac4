"""`orchestrate doctor`: is this machine ready for a multi-hour build, and for running what it builds?

One line per check, `ok` / `warn` / `fail`, with the fix on the same line; exit 0 only when nothing
fails. Hardware is read through a `Machine` (the roots of /sys, /proc and /dev), and every network probe
takes its URL as a parameter, so tests point doctor at fake trees and servers on 127.0.0.1. The network
probes and pixi run in parallel, each with a short timeout, under one deadline.
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable
from urllib.parse import urlparse

from . import detect, glibc, runner, web
from .architectures import (ARCH_OVERRIDE_ENV, FLASH_ATTN_BACKENDS, GPU_OVERRIDE_ENV, GPU_OVERRIDE_ON, Architecture,
                            SHARED_VARIANTS_FILE, ArchitectureTable, choose_arch, override_hint)
from .channels import FIX_CHANNEL, base_url, local_folder
from .diagnose import FIX_SOURCE
from .doctor_gpus import FAIL, OK, WARN, Check, gpu_checks, hsa_override_check, solver_pick
from .errors import UserError
from .estimates import existing_parent
from .share.consumer import PIXI_MIN_VERSION
from .options import ARCH_ENV, GIB_PER_JOB, Options, default_max_jobs, options_from_args
from .ui import GIB, format_bytes
from .yaml_files import read_mapping

SCHEMA = "orchestrate/doctor/1"
PROBE_TIMEOUT_S = 5.0  # one HTTP probe (connect + answer)
DEADLINE_S = 12.0  # all probes together: doctor answers within 15 s even when DNS hangs
PIXI_TIMEOUT_S = 10.0
ISA = re.compile(r"^\d+\.\d+\.\d+$")
PAGE = 4096  # ttm.pages_limit counts 4 KiB pages
# Strix Halo guides leave the OS at least 4 GiB and give the GPU the rest of the RAM through GTT:
# `amdgpu.gttsize=126976 ttm.pages_limit=32505856` is 124 GiB on a 128 GiB machine
# (kyuz0/amd-strix-halo-toolboxes README, "Kernel Parameters"; amdgpu.gttsize is deprecated on newer
# kernels, which read ttm.pages_limit and ttm.page_pool_size).
OS_RESERVE = 4 * GIB
GTT_TOLERANCE = 2 * GIB
# MemTotal lacks the BIOS carve-out and what the kernel keeps; RAM comes in multiples of 8 GiB.
RAM_STEP = 8 * GIB


@dataclass(frozen=True)
class Machine:
    """Where doctor reads the hardware; tests pass fake trees."""

    sys: Path = Path("/sys")
    proc: Path = Path("/proc")
    dev: Path = Path("/dev")

    @property
    def kfd_nodes(self) -> Path:
        return self.sys / "class/kfd/kfd/topology/nodes"

    def meminfo(self) -> dict[str, int]:
        """/proc/meminfo in bytes."""
        values = {}
        for line in _read(self.proc / "meminfo").splitlines():
            match = re.match(r"(\w+):\s+(\d+)\s*kB", line)
            if match:
                values[match.group(1)] = int(match.group(2)) * 1024
        return values

    def cmdline(self) -> dict[str, str]:
        return dict(item.partition("=")[::2] for item in _read(self.proc / "cmdline").split())


MACHINE = Machine()  # this machine; tests replace it with fake trees
Probe = Callable[[str, float], tuple[int | None, str]]


def probe_url(url: str, timeout: float = PROBE_TIMEOUT_S) -> tuple[int | None, str]:
    """(HTTP status, "") when a server answered, (None, why) when none did. Honours HTTPS_PROXY."""
    try:
        return web.head(url, timeout), ""
    except web.HTTPStatus as exc:
        return exc.code, ""
    except web.Unreachable as exc:
        return None, str(exc)


def run_doctor(options: Options, machine: Machine | None = None, probe: Probe | None = None
               ) -> tuple[str | None, list[Check]]:
    """The architecture doctor judged for (None when there is none) and its checks, in order."""
    machine, probe = machine or MACHINE, probe or probe_url
    table = ArchitectureTable.load(options.variants_dir)
    chosen = options.arch  # --arch, orchestrate.toml, $ORCHESTRATE_ARCH (options.arch_from)
    for name in options.archs:
        choose_arch(name, table, options.arch_given_by)  # an unknown one is a usage error, as everywhere else
    gpus = detect.detect_gpus(machine.kfd_nodes) or [(found, 0) for found in [detect.detect_gpu_arch(machine.kfd_nodes)]
                                                      if found]
    detected = solver_pick(gpus)  # the GPU an environment is solved for
    here = table.architectures.get(detected or "")
    arch = table.architectures.get(chosen or "") or here
    build_only = bool(chosen) and not detected  # a build machine needs no GPU

    checks = gpu_checks(options.archs, gpus, table) + [c for c in [hsa_override_check(gpus, table)] if c]
    if arch:
        checks.append(support_check(arch))
    checks.append(driver_check(machine, build_only))
    if any(table.architectures[gfx].apu for gfx, _ in gpus if gfx in table.architectures):  # an iGPU beside an eGPU too
        checks.append(gtt_check(machine))
    checks.append(memory_check(machine, options))
    plan = None
    if arch:
        try:
            plan = runner.make_plan(dataclasses.replace(options, arch=arch.name))
        except UserError as exc:
            checks.append(Check("plan", FAIL, str(exc), "fix what the message names (`orchestrate plan` shows it too)"))
    checks.append(glibc_check(glibc.machine_glibc(), *stack_glibc(options, plan)))
    if plan:
        builds = sum(1 for s in plan.steps if s.state == runner.BUILD)
        checks.append(disk_check(runner.plan_disk_needs(plan, options), disk_folders(options), builds))
    slow = [lambda c=c: channel_check(c, probe) for c in options.source_channels]
    slow += [lambda h=h, p=p: source_host_check(h, p, probe) for h, p in source_hosts(plan, options).items()]
    slow.append(lambda: pixi_check(arch.isa if arch else None))
    checks += run_parallel(slow, DEADLINE_S)
    if plan and not any(c.name == "sources" for c in checks):
        checks.append(Check("sources", OK, "nothing to download: every source the builds need is in the source cache"))
    checks.append(override_check(os.environ.get(ARCH_OVERRIDE_ENV), os.environ.get(GPU_OVERRIDE_ENV), here, arch, table))
    return (arch.name if arch else None), checks


def add_arguments(parser) -> None:
    parser.add_argument("--json", action="store_true", help="print the checks as JSON (for scripts)")


def run(args, reporter) -> int:
    """`orchestrate doctor`: exit 0 when no check fails, 1 otherwise."""
    options = options_from_args(args)
    arch, checks = run_doctor(options)
    if args.json:
        reporter.line(json.dumps(report(arch, checks), indent=2))
    else:
        for check in checks:
            reporter.item(check.line(), hanging=16)  # under the detail, after status and name
        reporter.paragraph(summary_line(arch, checks))
    return 0 if all(c.status != FAIL for c in checks) else 1


def support_check(arch: Architecture) -> Check:
    """What the table says this architecture gets, in one line."""
    labels = {"aotriton": "Flash SDPA (aotriton)", "ck_mha": "CK attention", "flash_attn_ck": "flash-attn CK",
              "flash_attn_triton": "flash-attn Triton", "aiter": "aiter", "ck_sdpa": "CK SDPA",
              "fbgemm_genai": "FBGEMM GenAI"}
    has, lacks = [], []
    backend_of = {cap: backend for backend, cap in FLASH_ATTN_BACKENDS.items()}
    for cap in arch.capabilities.values():
        label = labels.get(cap.name, cap.name)
        if cap.value == "no":
            lacks.append(label)
            continue
        if cap.name in backend_of:  # as plan builds it: the default backend in build-all, the other on request
            label += " (default)" if arch.flash_attn_reason(backend_of[cap.name])[0] else " (on request)"
        has.append(label + (" (experimental)" if cap.value == "experimental" else ""))
    detail = f"{arch.name} gets {', '.join(has) or 'PyTorch only'}" + (f"; not {', '.join(lacks)}" if lacks else "")
    return Check("support", OK, detail + " (`orchestrate plan` says why)")


def driver_check(machine: Machine, build_only: bool) -> Check:
    missing_status = WARN if build_only else FAIL
    if not (machine.sys / "module/amdgpu").is_dir():
        return Check("driver", missing_status, "the amdgpu kernel driver is not loaded",
                     "use a kernel with amdgpu (or install amdgpu-dkms), then `sudo modprobe amdgpu`")
    kfd = machine.dev / "kfd"
    if not (machine.sys / "class/kfd").is_dir() or not kfd.exists():
        return Check("driver", missing_status, "amdgpu is loaded but ROCm's compute interface (KFD, /dev/kfd) is not",
                     "use a kernel built with CONFIG_HSA_AMD=y")
    if not os.access(kfd, os.R_OK | os.W_OK):
        return Check("driver", missing_status, f"{kfd} is there but you cannot open it",
                     "`sudo usermod -aG render,video $USER`, then log in again")
    return Check("driver", OK, f"amdgpu loaded, {kfd} usable")


def gtt_check(machine: Machine) -> Check:
    """On an APU the GPU's memory is system RAM through GTT, capped by the kernel far below the RAM."""
    total = machine.meminfo().get("MemTotal", 0)
    if not total:
        return Check("gtt", WARN, f"cannot read MemTotal from {machine.proc / 'meminfo'}", "")
    ram = -(-total // RAM_STEP) * RAM_STEP
    target = ram - OS_RESERVE
    gtt = max((_read_int(p) or 0 for p in machine.sys.glob("class/drm/card*/device/mem_info_gtt_total")), default=0)
    gttsize_mib = _read_int(machine.sys / "module/amdgpu/parameters/gttsize") or -1  # -1: the driver's default
    if not gtt and gttsize_mib > 0:
        gtt = gttsize_mib * 2**20  # no card reports its GTT (older kernels): the module parameter is the size
    pages = next((v for v in (_read_int(machine.sys / f"module/{m}/parameters/pages_limit") for m in ("ttm", "amdttm"))
                  if v and v > 0), 0)
    limits = [x for x in (gtt, pages * PAGE) if x]
    usable = min(limits) if limits else 0
    cmdline = machine.cmdline()
    set_now = [f"{k}={cmdline[k]}" for k in ("amdgpu.gttsize", "ttm.pages_limit", "ttm.page_pool_size",
                                             "amdttm.pages_limit") if k in cmdline]
    given = f"kernel command line: {' '.join(set_now) if set_now else 'no GTT settings'}"
    fix = (f"add `amdgpu.gttsize={target // 2**20} ttm.pages_limit={target // PAGE} ttm.page_pool_size="
           f"{target // PAGE}` to the kernel command line (GRUB_CMDLINE_LINUX) and reboot: {target // GIB} GiB of "
           f"{ram // GIB} GiB for the GPU, {OS_RESERVE // GIB} GiB left to the OS")
    if not usable:
        return Check("gtt", WARN, f"cannot read the GTT limit (no mem_info_gtt_total, no ttm pages_limit); {given}", fix)
    parts = [f"GTT {format_bytes(gtt)}" if gtt else "", f"ttm.pages_limit {format_bytes(pages * PAGE)}" if pages else ""]
    detail = f"the GPU can use {format_bytes(usable)} of {ram // GIB} GiB RAM ({', '.join(p for p in parts if p)}; {given})"
    if usable + GTT_TOLERANCE >= target:
        return Check("gtt", OK, detail)
    return Check("gtt", WARN, detail, fix)


def memory_check(machine: Machine, options: Options) -> Check:
    info = machine.meminfo()
    total, free = info.get("MemTotal", 0), info.get("MemFree", 0)
    if not total:
        return Check("memory", WARN, f"cannot read {machine.proc / 'meminfo'}", "")
    cores = os.cpu_count() or 1
    free_gib = free / GIB
    default = default_max_jobs(cores, free_gib)
    jobs = options.max_jobs or default
    detail = (f"{format_bytes(total)} RAM, {format_bytes(free)} free, {cores} cores: MAX_JOBS={jobs} "
              f"({'max_jobs/--jobs' if options.max_jobs else 'default'}; compiles take up to {GIB_PER_JOB} GiB each)")
    if free_gib < GIB_PER_JOB:
        return Check("memory", WARN, detail, f"under {GIB_PER_JOB} GiB free: one compile may not fit; close programs "
                     "or add swap before a build")
    if options.max_jobs and options.max_jobs * GIB_PER_JOB > free_gib:
        return Check("memory", WARN, detail, f"{jobs} jobs need about {jobs * GIB_PER_JOB} GiB: pass --jobs {default} "
                     "(or set max_jobs in orchestrate.toml) so compiles are not killed for memory")
    return Check("memory", OK, detail)


def disk_folders(options: Options) -> dict[str, Path]:
    return {"channel": options.channel, "work area": options.work_dir, "source cache": options.source_cache}


def disk_check(needs, folders: dict[str, Path], builds: int) -> Check:
    """Free space on each disk the folders live on against what the plan's `builds` need there (`needs`:
    objects with .folder, .bytes and .parts, as estimates.disk_needs gives them)."""
    disks: dict[int, dict] = {}

    def disk_of(folder: Path) -> dict:
        where = existing_parent(folder)
        return disks.setdefault(os.stat(where).st_dev, {"at": where, "labels": [], "need": 0, "parts": []})

    for label, folder in folders.items():
        disk_of(folder)["labels"].append(label)
    for need in needs:
        disk = disk_of(need.folder)
        disk["need"] += need.bytes
        disk["parts"] += need.parts
    short, lines = [], []
    for disk in disks.values():
        free = shutil.disk_usage(disk["at"]).free
        need = (f", the plan needs about {format_bytes(disk['need'])} ({'; '.join(disk['parts'])})"
                if disk["need"] else "")
        lines.append(f"{format_bytes(free)} free at {disk['at']} ({', '.join(disk['labels']) or 'work'}){need}")
        if free < disk["need"]:
            short.append(str(disk["at"]))
    if not builds:
        lines.append("nothing to build")
    elif not any(d["need"] for d in disks.values()):
        lines.append(f"no disk estimate for the {builds} package(s) to build")
    detail = "; ".join(lines)
    if short:
        return Check("disk", FAIL, detail, f"free space at {', '.join(short)}, or point --channel / --source-cache "
                     "(or the workspace) at a larger disk")
    return Check("disk", OK, detail)


def channel_check(channel: str, probe: Probe) -> Check:
    parsed = urlparse(channel)
    if parsed.scheme in ("s3", "prefix", "quetz", "artifactory", "anaconda"):
        return Check("channel", OK, f"{channel}: not probed ({parsed.scheme} channels are checked when used)")
    path = local_folder(channel)
    if path is not None:
        if (path / "noarch" / "repodata.json").is_file():
            return Check("channel", OK, f"{channel} is a channel")
        return Check("channel", FAIL, f"{channel} is not a conda channel (no noarch/repodata.json)",
                     "fix source_channels in orchestrate.toml")
    url = _channel_url(channel)
    status, why = probe(url + "noarch/repodata.json", PROBE_TIMEOUT_S)
    if status is None:
        return Check("channel", FAIL, f"{channel} cannot be reached ({why})", FIX_CHANNEL)
    if status < 400:
        return Check("channel", OK, f"{channel} answers ({url})")
    if status == 404:
        return Check("channel", FAIL, f"{channel} answers, but has no noarch/repodata.json: not a conda channel",
                     "fix source_channels in orchestrate.toml")
    if status in (401, 403):
        return Check("channel", FAIL, f"{channel} refuses us (HTTP {status})", "log in (`pixi auth login`) or fix "
                     "the credentials")
    return Check("channel", WARN, f"{channel} answers HTTP {status}", "try again later, or use a mirror")


def source_hosts(plan: runner.Plan | None, options: Options) -> dict[str, list[str]]:
    """Where the sources of what the plan builds come from and are not cached yet: host URL -> packages."""
    if plan is None:
        return {}
    hosts: dict[str, list[str]] = {}
    for name, source in runner.uncached_sources(plan, options):
        host = _host_url(source.location)
        if host and name not in hosts.setdefault(host, []):
            hosts[host].append(name)
    return hosts


def source_host_check(host: str, packages: list[str], probe: Probe) -> Check:
    needed = ", ".join(packages[:4]) + (f" and {len(packages) - 4} more" if len(packages) > 4 else "")
    status, why = probe(host, PROBE_TIMEOUT_S)
    if status is None:
        return Check("sources", FAIL, f"{host} cannot be reached ({why}); the sources of {needed} are there",
                     FIX_SOURCE)
    return Check("sources", OK, f"{host} answers (sources of {needed})")


def pixi_check(isa: str | None) -> Check:
    exe = shutil.which("pixi")
    if not exe:
        return Check("pixi", WARN, "pixi is not on PATH", "install pixi for the pixi tasks (`pixi run build-all`, "
                     "`pixi run check`); orchestrate itself runs without it")
    probe_isa = isa or "11.5.1"
    env = {**os.environ, ARCH_OVERRIDE_ENV: probe_isa}
    env.setdefault(GPU_OVERRIDE_ENV, GPU_OVERRIDE_ON)
    try:
        done = subprocess.run([exe, "info", "--json"], capture_output=True, text=True, timeout=PIXI_TIMEOUT_S, env=env,
                              cwd=tempfile.gettempdir())
        info = json.loads(done.stdout)
    except (OSError, subprocess.SubprocessError, json.JSONDecodeError) as exc:
        return Check("pixi", WARN, f"{exe} did not answer `pixi info --json` ({type(exc).__name__})",
                     "check that pixi runs: `pixi info`")
    version = info.get("version", "?")
    if _older(str(version), PIXI_MIN_VERSION):
        return Check("pixi", WARN, f"pixi {version} is older than {PIXI_MIN_VERSION}, the first that reads the AMD GPU "
                     "platforms of our manifests (docs/sharing.md)", "`pixi self-update`")
    if any(str(v).startswith("__amdgpu_arch") for v in info.get("virtual_packages") or []):
        return Check("pixi", OK, f"pixi {version} knows __amdgpu_arch: it picks the build for this GPU")
    return Check("pixi", WARN, f"pixi {version} does not know __amdgpu_arch: from a channel with several "
                 "architectures it may install another GPU's build",
                 "update pixi, or pin builds: `pixi add \"pytorch * *gfx1151*\"` (your architecture)")


def _older(version: str, than: str) -> bool:
    numbers = [tuple(int(n) for n in re.findall(r"\d+", v)[:3]) for v in (version, than)]
    return bool(numbers[0]) and numbers[0] < numbers[1]


def stack_glibc(options: Options, plan: runner.Plan | None) -> tuple[str, str]:
    """The newest glibc any package of the stack requires, and where that bound comes from."""
    shared = options.variants_dir / SHARED_VARIANTS_FILE
    best = (glibc.stack_bound(read_mapping(shared)) if shared.is_file() else "", f"variants/shared.yaml {glibc.STACK_BOUND_KEY}")
    for step in plan.steps if plan else []:
        for spec in (step.output.rendered.get("requirements") or {}).get("run") or []:
            found = re.fullmatch(r"__glibc >=([\d.]+)", str(spec))
            if found and (not best[0] or glibc.older(best[0], found.group(1))):
                best = (found.group(1), f"{step.output.name}'s wheel")
    return best


def glibc_check(found: str | None, bound: str, source: str) -> Check:
    if not bound:
        return Check("glibc", OK, f"glibc {found or 'unknown'}; the stack declares no bound ({source} is not set)")
    if found is None:
        return Check("glibc", WARN, f"this machine's C library is not glibc or cannot be read; the stack needs glibc "
                     f">={bound} ({source})", "run the stack on a glibc Linux (or in a container with one)")
    if glibc.older(found, bound):
        return Check("glibc", FAIL, f"glibc {found} is older than the {bound} the stack needs ({source}): packages will "
                     f"not install here", f"use a system with glibc >={bound} (RHEL 8, Debian 10, Ubuntu 20.04 or newer) or a container with one")
    return Check("glibc", OK, f"glibc {found}, the stack needs >={bound} ({source})")


def override_check(value: str | None, gpu_switch: str | None, here: Architecture | None, arch: Architecture | None,
                   table: ArchitectureTable) -> Check:
    """CONDA_OVERRIDE_AMDGPU_ARCH (and CONDA_OVERRIDE_AMDGPU, without which the solver drops the ISA where it
    detects no GPU) against this machine's GPU and the architecture built here."""
    isas = ", ".join(f"{a.isa} ({a.name})" for a in table.architectures.values())
    if gpu_switch not in (None, "", GPU_OVERRIDE_ON):
        fix = f"export {override_hint(arch.isa)}" if arch else f"export {GPU_OVERRIDE_ENV}={GPU_OVERRIDE_ON}"
        return Check("override", FAIL, f"{GPU_OVERRIDE_ENV}={gpu_switch}: the solver accepts only "
                     f"{GPU_OVERRIDE_ON} (an AMD GPU is there) or an empty value (none is)", fix)
    if not value:
        if here:
            return Check("override", OK, f"{ARCH_OVERRIDE_ENV} not set (needed only to install for another GPU, or "
                         "without one)")
        hint = f"; to install {arch.name} builds here anyway (a container build, CI): {override_hint(arch.isa)}" if arch else ""
        return Check("override", OK, f"{ARCH_OVERRIDE_ENV} not set{hint}")
    named = table.by_isa(value)
    if not ISA.match(value):
        match = table.architectures.get(value)
        fix = f"export {override_hint(match.isa)}" if match else f"use an ISA version: {isas}"
        return Check("override", FAIL, f"{ARCH_OVERRIDE_ENV}={value} is not an ISA version (like 11.5.1): pixi rejects it",
                     fix)
    if named is None:
        return Check("override", FAIL, f"{ARCH_OVERRIDE_ENV}={value}: no architecture in the table has that ISA",
                     f"use one of {isas}, or unset it")
    if here and named.name != here.name:
        return Check("override", WARN, f"{ARCH_OVERRIDE_ENV}={value} makes pixi install {named.name} builds on this "
                     f"{here.name}: they will not run here", f"unset {ARCH_OVERRIDE_ENV}")
    if not here and arch and named.name != arch.name:
        return Check("override", WARN, f"{ARCH_OVERRIDE_ENV}={value} selects {named.name} builds, you build {arch.name}",
                     f"export {override_hint(arch.isa)}")
    if gpu_switch != GPU_OVERRIDE_ON and (not here or gpu_switch == ""):
        why = f"{GPU_OVERRIDE_ENV} is empty (no GPU)" if gpu_switch == "" else "no AMD GPU is seen here"
        return Check("override", WARN, f"{ARCH_OVERRIDE_ENV}={value} selects nothing: {why}, and the solver drops the ISA "
                     f"without a GPU (pixi install of rocm-stack fails)", f"export {override_hint(value)}")
    return Check("override", OK, f"{ARCH_OVERRIDE_ENV}={value} selects {named.name} builds")


def run_parallel(tasks: list[Callable[[], Check]], deadline_s: float) -> list[Check]:
    """Run each task in a daemon thread; one that has not answered by the deadline fails as timed out."""
    results: list[Check | None] = [None] * len(tasks)

    def run(index: int, task: Callable[[], Check]) -> None:
        try:
            results[index] = task()
        except Exception as exc:  # a probe's own bug must not hide the other checks
            results[index] = Check("probe", WARN, f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=run, args=(i, t), daemon=True) for i, t in enumerate(tasks)]
    for thread in threads:
        thread.start()
    end = time.monotonic() + deadline_s
    for thread in threads:
        thread.join(max(0.0, end - time.monotonic()))
    return [r if r is not None else Check("probe", FAIL, f"no answer within {deadline_s:.0f} s",
                                          "check the network, DNS or a proxy") for r in results]


def report(arch: str | None, checks: list[Check]) -> dict:
    counts = {s: sum(1 for c in checks if c.status == s) for s in (OK, WARN, FAIL)}
    return {"schema": SCHEMA, "arch": arch, "ok": counts[FAIL] == 0, "counts": counts,
            "checks": [dataclasses.asdict(c) for c in checks]}


def summary_line(arch: str | None, checks: list[Check]) -> str:
    counts = report(arch, checks)["counts"]
    verdict = "ready" if counts[FAIL] == 0 else "not ready: fix the fail lines first"
    return f"doctor: {counts[OK]} ok, {counts[WARN]} warn, {counts[FAIL]} fail for {arch or 'no architecture'}: {verdict}"


def _channel_url(channel: str) -> str:
    """A channel's base URL with a trailing slash: names like conda-forge expand as pixi expands them."""
    return base_url(channel) + "/"


def _host_url(location: str) -> str | None:
    parsed = urlparse(location)
    if parsed.scheme in ("http", "https") and parsed.netloc:
        return f"{parsed.scheme}://{parsed.netloc}/"
    ssh = re.match(r"^[\w.-]+@([\w.-]+):", location)
    return f"https://{ssh.group(1)}/" if ssh else None


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _read_int(path: Path) -> int | None:
    try:
        return int(_read(path).strip())
    except ValueError:
        return None
