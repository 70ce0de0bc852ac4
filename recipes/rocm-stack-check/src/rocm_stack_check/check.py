"""`rocm-stack-check check`: does Flash Attention run on this GPU, and does it compute the right thing?"""
from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

from . import exit_codes
from .architecture_facts import expectations_for, find_aotriton_files, load_architecture_table
from .attention import DTYPES, FlashAttnBackend, SdpaBackend, Shape, check_against_math, make_inputs
from .environment import (SDPA_ENVIRONMENT_VARIABLES, describe_device, describe_platform, import_flash_attn,
                          import_torch, numpy_note, sdpa_environment)
from .usable import why_no_gpu

SCHEMA = "rocm-stack-check/check/1"
# Large enough to take the fused kernels' tiled paths, small enough for an integrated GPU in a second.
REPRESENTATIVE_SHAPE = Shape(batch=2, heads=8, seq_len=1024, head_dim=64)
REPRESENTATIVE_CAUSAL = True


def _call(function, *args):
    """(value, debug messages) of an SDPA query; PyTorch gives its reasons as warnings when debug=True."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            value = function(*args)
        except Exception as error:
            value = f"{type(error).__name__}: {error}"
    return value, [str(w.message).splitlines()[0] for w in caught]


def sdpa_availability(torch, gpu_runtime: str, device: str) -> dict:
    cuda_backends = torch.backends.cuda
    found = {
        "flash_available": cuda_backends.is_flash_attention_available(),
        "flash_enabled": cuda_backends.flash_sdp_enabled(),
        "mem_efficient_enabled": cuda_backends.mem_efficient_sdp_enabled(),
        "math_enabled": cuda_backends.math_sdp_enabled(),
        "cudnn_enabled": cuda_backends.cudnn_sdp_enabled() if gpu_runtime == "cuda" else None,
        "preferred_rocm_fa_library": None,
        "ck_sdpa_available": None,
        "representative_input": {"shape": str(REPRESENTATIVE_SHAPE), "dtype": "fp16", "causal": REPRESENTATIVE_CAUSAL},
    }
    if gpu_runtime == "rocm":
        found["preferred_rocm_fa_library"] = str(cuda_backends.preferred_rocm_fa_library())
        found["ck_sdpa_available"] = getattr(cuda_backends, "is_ck_sdpa_available", lambda: None)()
    q, k, v = make_inputs(torch, REPRESENTATIVE_SHAPE, "fp16", device, requires_grad=False)
    # SDPAParams gained enable_gqa in PyTorch 2.5; older builds take six arguments.
    try:
        params = cuda_backends.SDPAParams(q, k, v, None, 0.0, REPRESENTATIVE_CAUSAL, False)
    except TypeError:
        params = cuda_backends.SDPAParams(q, k, v, None, 0.0, REPRESENTATIVE_CAUSAL)
    for name in ("flash", "efficient"):
        query = getattr(cuda_backends, f"can_use_{name}_attention")
        value, reasons = _call(query, params, True)
        found[f"can_use_{name}_attention"] = value is True
        found[f"can_use_{name}_attention_reasons"] = reasons if value is not True else []
    return found


def gather_report(expect_arch: str | None = None, include_flash_attn: bool = True) -> dict:
    """What PyTorch, every visible GPU and the table say. With several GPUs each is checked (`gpus`, in device
    order); the top-level GPU fields are the first one checked. `no_gpu_reason`: why none is usable, with the fix."""
    torch, torch_error = import_torch()
    found_platform = describe_platform(torch)
    found_platform.torch_error = found_platform.torch_error or torch_error
    table, table_problem = load_architecture_table()
    report = {
        "schema": SCHEMA,
        "platform": found_platform.to_dict(),
        "architecture_table": {"source": table.source if table else None, "problem": table_problem},
        "expectations": None,
        "aotriton": None,
        "sdpa": None,
        "flash_runs": [],
        "flash_attn": {"installed": False, "version": None, "error": "", "runs": []},
        "gpus": [],
        "no_gpu_reason": "",
        "environment": sdpa_environment(),
        "problems": [],
        "notes": [],
    }
    if torch is None:
        report["notes"].append(f"PyTorch not importable ({torch_error}): no GPU checks")
        report["no_gpu_reason"] = why_no_gpu(report["platform"])
        return report
    if numpy_note():
        report["notes"].append(numpy_note())
    if not found_platform.device_present:
        report["notes"].append(f"no GPU: PyTorch {torch.__version__} sees no CUDA or ROCm device; GPU checks skipped")
        report["no_gpu_reason"] = why_no_gpu(report["platform"])
        return report
    flash_attn = import_flash_attn() if include_flash_attn else (None, "No module named flash_attn (not asked for)")
    seen = []
    for index in range(found_platform.device_count):
        gpu = describe_device(torch, index, found_platform.gpu_runtime)
        seen.append(gpu["arch"] or "?")
        if expect_arch and gpu["arch"] not in expect_arch.split(","):  # a package built for several GPUs: any
            report["notes"].append(f"GPU {index} is {gpu['arch']}, not the expected {expect_arch}: its checks skipped")
            continue
        with torch.cuda.device(index):
            report["gpus"].append(check_gpu(torch, gpu, table, found_platform.gpu_runtime, report["environment"],
                                            flash_attn))
    if not report["gpus"]:
        report["no_gpu_reason"] = f"no GPU here is the expected {expect_arch} (PyTorch sees {', '.join(seen)})"
        return report
    first = report["gpus"][0]
    report.update({key: first[key] for key in ("expectations", "aotriton", "sdpa", "flash_runs", "flash_attn")})
    several = len(report["gpus"]) > 1 or found_platform.device_count > 1
    report["problems"] = [f"GPU {gpu['index']}: {problem}" if several else problem
                          for gpu in report["gpus"] for problem in gpu["problems"]]
    return report


def torch_device(index: int) -> str:
    """PyTorch's name for GPU `index` (ROCm's GPUs are `cuda:N` too)."""
    return f"cuda:{index}"


def check_gpu(torch, gpu: dict, table, gpu_runtime: str, environment: dict, flash_attn: tuple) -> dict:
    """One GPU's checks: what the table expects of its architecture, aotriton's files, SDPA's view, Flash against
    math and flash-attn against math, on that device."""
    found = {**gpu, "expectations": None, "aotriton": None, "sdpa": None, "flash_runs": [],
             "flash_attn": {"installed": False, "version": None, "error": "", "runs": []}, "problems": []}
    expected = expectations_for(gpu["arch"], table) if table else None
    if expected:
        found["expectations"] = expected.to_dict()
        for name, value in expected.required_environment.items():
            if environment.get(name) != value:
                found["problems"].append(f"{gpu['arch']}: aotriton is {expected.aotriton} ({expected.aotriton_why}); "
                                         f"set {name}={value}")
    if gpu_runtime == "rocm":
        torch_lib_dir = Path(torch.__file__).parent / "lib"
        files = find_aotriton_files(torch_lib_dir, expected.aotriton_image_family if expected else "")
        found["aotriton"] = files.to_dict()
        if expected and expected.aotriton != "no" and not files.complete:
            found["problems"].append(f"aotriton library or amd-{expected.aotriton_image_family} kernel images missing "
                                     f"(searched {', '.join(files.searched)})")
    device = torch_device(gpu["index"])
    found["sdpa"] = sdpa_availability(torch, gpu_runtime, device)
    flash = SdpaBackend(torch, "flash", "FLASH_ATTENTION", "")
    found["flash_runs"] = [check_against_math(torch, flash, REPRESENTATIVE_SHAPE, dtype, REPRESENTATIVE_CAUSAL, device)
                           for dtype in DTYPES]
    flash_attn_module, version_or_error = flash_attn
    if flash_attn_module is not None:
        found["flash_attn"].update(installed=True, version=version_or_error)
        try:
            backend = FlashAttnBackend(torch, flash_attn_module)
            found["flash_attn"]["runs"] = [
                check_against_math(torch, backend, REPRESENTATIVE_SHAPE, dtype, REPRESENTATIVE_CAUSAL, device)
                for dtype in DTYPES]
        except ImportError as error:
            found["flash_attn"]["error"] = f"ImportError: {error}"
    elif "No module named" not in version_or_error:
        found["flash_attn"].update(installed=True, error=version_or_error)  # present but broken
    return found


def decide_status(report: dict, require_gpu: bool = False, require_flash_attn: bool = False) -> tuple[str, int]:
    """(status, exit code) from a report; separate from gathering so every branch is testable without a GPU. With
    several GPUs, the worst of theirs."""
    if report["sdpa"] is None:
        return "no-gpu", exit_codes.NO_GPU if require_gpu else exit_codes.OK
    statuses = [_status_of(gpu, require_flash_attn) for gpu in report.get("gpus") or [report]]
    worst = next((s for s in ("flash-unusable", "flash-not-expected") if s in statuses), "ok")
    return worst, exit_codes.FAILED if worst == "flash-unusable" else exit_codes.OK


def _status_of(gpu: dict, require_flash_attn: bool) -> str:
    flash_ok = bool(gpu["flash_runs"]) and all(run["passed"] for run in gpu["flash_runs"])
    flash_attn = gpu["flash_attn"]
    if flash_attn["installed"]:
        flash_attn_ok = not flash_attn["error"] and bool(flash_attn["runs"]) and all(
            run["passed"] for run in flash_attn["runs"])
    else:
        flash_attn_ok = not require_flash_attn
    expected = gpu.get("expectations")
    flash_expected = expected["flash_expected"] if expected else True
    if flash_ok and flash_attn_ok:
        return "ok"
    if not flash_ok and not flash_expected and flash_attn_ok:
        return "flash-not-expected"
    return "flash-unusable"


def _run_line(run: dict) -> str:
    if not run["forward_ok"] or not run["backward_ok"]:
        stage = "forward" if not run["forward_ok"] else "backward"
        return f"{run['backend']} {run['dtype']}: {stage} FAILED ({run['error']})"
    errors = ", ".join(f"{name} {value:.1e}" for name, value in run["errors"].items())
    verdict = "ok" if run["passed"] else "WRONG RESULT"
    return f"{run['backend']} {run['dtype']}: {verdict} (relative error vs math: {errors}; tolerance {run['tolerance']:.0e})"


def status_line(report: dict) -> str:
    """The first line: the status, and where no GPU is usable, why and the fix (or that a recipe test allowed it)."""
    line = f"rocm-stack-check check: {report['status']}"
    if report["status"] != "no-gpu":
        return line
    reason = report.get("no_gpu_reason") or "no usable GPU"
    if report["exit_code"] == exit_codes.OK:
        return f"{line}: GPU checks skipped, allowed by --allow-no-gpu (a recipe test on a build machine): {reason}"
    return f"{line}: {reason}"


def format_summary(report: dict) -> str:
    found = report["platform"]
    lines = [status_line(report)]
    lines.append(f"  Python {found['python']} on {found['system']}")
    if found["torch_version"] is None:
        lines.append(f"  PyTorch: not importable ({found['torch_error']})")
    else:
        runtime = f"HIP {found['hip_version']}" if found["hip_version"] else (
            f"CUDA {found['cuda_version']}" if found["cuda_version"] else "CPU-only build")
        lines.append(f"  PyTorch {found['torch_version']} ({runtime})")
    if found["device_present"] and found["device_count"] > 1:
        lines.append(f"  {found['device_count']} GPUs visible: each is checked, and named on every line about it")
    first = {"index": 0, "name": found["device_name"], "arch": found.get("arch"), "arch_full": found["arch_full"],
             "total_memory_mib": found["total_memory_mib"]} if found["device_present"] else None
    for gpu in report.get("gpus") or ([{**first, **report}] if first else []):
        lines += _gpu_lines(gpu, report["architecture_table"]["source"], f"  GPU {gpu['index']}")
    set_variables = {k: v for k, v in report["environment"].items() if v is not None}
    lines.append("  SDPA environment: " + (", ".join(f"{k}={v}" for k, v in set_variables.items()) or "none set"))
    for name in set_variables:
        lines.append(f"    {name}: {SDPA_ENVIRONMENT_VARIABLES[name]}")
    lines.extend(f"  note: {note}" for note in report["notes"])
    lines.extend(f"  problem: {problem}" for problem in report["problems"])
    return "\n".join(lines)


def _gpu_lines(gpu: dict, table_source: str | None, said: str) -> list[str]:
    """One GPU's lines, each starting with `said` (GPU 0, GPU 1, ...)."""
    lines = [f"{said}: {gpu['name']} [{gpu['arch_full']}], {gpu['total_memory_mib']} MiB"]
    expected = gpu["expectations"]
    if expected and expected["known"]:
        lines.append(f"{said} architecture table ({table_source}): {expected['arch']} = "
                     f"{expected['product']}; aotriton {expected['aotriton']}, CK SDPA {expected['ck_sdpa']}, "
                     f"flash-attn backends {', '.join(expected['flash_attn_backends']) or 'none'}")
    elif expected:
        lines.append(f"{said} architecture table: {expected['arch']} not listed (no expectations)")
    if gpu["aotriton"]:
        aotriton = gpu["aotriton"]
        lines.append(f"{said} aotriton library: {aotriton['library'] or 'not found'}")
        lines.append(f"{said} aotriton images: {aotriton['images_dir'] or 'not found'} ({aotriton['image_count']} files)")
    sdpa = gpu["sdpa"]
    if sdpa:
        if sdpa["preferred_rocm_fa_library"] is not None:
            lines.append(f"{said} preferred_rocm_fa_library(): {sdpa['preferred_rocm_fa_library']}"
                         f" (CK SDPA available: {sdpa['ck_sdpa_available']})")
        lines.append(f"{said} Flash available: {sdpa['flash_available']}, enabled: {sdpa['flash_enabled']}; "
                     f"memory-efficient enabled: {sdpa['mem_efficient_enabled']}")
        for name in ("flash", "efficient"):
            reasons = "; ".join(sdpa[f"can_use_{name}_attention_reasons"])
            lines.append(f"{said} can_use_{name}_attention({sdpa['representative_input']['shape']}, fp16, causal): "
                         f"{sdpa[f'can_use_{name}_attention']}" + (f" ({reasons})" if reasons else ""))
    for run in gpu["flash_runs"]:
        lines.append(f"{said} forced FLASH_ATTENTION fwd+bwd, {_run_line(run)}")
    flash_attn = gpu["flash_attn"]
    if flash_attn["installed"]:
        lines.append(f"{said} flash-attn {flash_attn['version'] or ''}"
                     + (f": {flash_attn['error']}" if flash_attn["error"] else ""))
        lines.extend(f"{said} flash_attn_func fwd+bwd, {_run_line(run)}" for run in flash_attn["runs"])
    return lines


def run_check(as_json: bool, require_gpu: bool, require_flash_attn: bool, expect_arch: str | None,
              output: Path | None = None) -> int:
    report = gather_report(expect_arch=expect_arch)
    report["status"], report["exit_code"] = decide_status(report, require_gpu, require_flash_attn)
    if output:
        output.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2) if as_json else format_summary(report))
    if as_json:  # stdout stays pure JSON; a log reader (a recipe's test output) still gets one line to grep
        print(f"{status_line(report)} (exit {report['exit_code']})", file=sys.stderr)
    return report["exit_code"]
