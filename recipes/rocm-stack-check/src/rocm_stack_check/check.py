"""`rocm-stack-check check`: does Flash Attention run on this GPU, and does it compute the right thing?"""
from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

from . import exit_codes
from .architecture_facts import expectations_for, find_aotriton_files, load_architecture_table
from .attention import DTYPES, FlashAttnBackend, SdpaBackend, Shape, check_against_math, make_inputs
from .environment import (SDPA_ENVIRONMENT_VARIABLES, describe_platform, import_flash_attn, import_torch,
                          numpy_note, sdpa_environment)

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
        "environment": sdpa_environment(),
        "problems": [],
        "notes": [],
    }
    if torch is None:
        report["notes"].append(f"PyTorch not importable ({torch_error}): no GPU checks")
        return report
    if numpy_note():
        report["notes"].append(numpy_note())
    if not found_platform.device_present:
        report["notes"].append(f"no GPU: PyTorch {torch.__version__} sees no CUDA or ROCm device; GPU checks skipped")
        return report
    if expect_arch and found_platform.arch != expect_arch:
        report["notes"].append(
            f"GPU is {found_platform.arch}, not the expected {expect_arch}: GPU checks skipped")
        return report

    expected = expectations_for(found_platform.arch, table) if table else None
    if expected:
        report["expectations"] = expected.to_dict()
        for name, value in expected.required_environment.items():
            if report["environment"].get(name) != value:
                report["problems"].append(
                    f"{found_platform.arch}: aotriton is {expected.aotriton} ({expected.aotriton_why}); "
                    f"set {name}={value}")
    if found_platform.gpu_runtime == "rocm":
        torch_lib_dir = Path(torch.__file__).parent / "lib"
        files = find_aotriton_files(torch_lib_dir, expected.aotriton_image_family if expected else "")
        report["aotriton"] = files.to_dict()
        if expected and expected.aotriton != "no" and not files.complete:
            report["problems"].append(
                f"aotriton library or amd-{expected.aotriton_image_family} kernel images missing "
                f"(searched {', '.join(files.searched)})")

    device = "cuda"
    report["sdpa"] = sdpa_availability(torch, found_platform.gpu_runtime, device)
    flash = SdpaBackend(torch, "flash", "FLASH_ATTENTION", "")
    report["flash_runs"] = [
        check_against_math(torch, flash, REPRESENTATIVE_SHAPE, dtype, REPRESENTATIVE_CAUSAL, device) for dtype in DTYPES
    ]
    if include_flash_attn:
        flash_attn_module, version_or_error = import_flash_attn()
        if flash_attn_module is not None:
            report["flash_attn"].update(installed=True, version=version_or_error)
            try:
                backend = FlashAttnBackend(torch, flash_attn_module)
                report["flash_attn"]["runs"] = [
                    check_against_math(torch, backend, REPRESENTATIVE_SHAPE, dtype, REPRESENTATIVE_CAUSAL, device)
                    for dtype in DTYPES
                ]
            except ImportError as error:
                report["flash_attn"]["error"] = f"ImportError: {error}"
        elif "No module named" not in version_or_error:
            report["flash_attn"].update(installed=True, error=version_or_error)  # present but broken
    return report


def decide_status(report: dict, require_gpu: bool = False, require_flash_attn: bool = False) -> tuple[str, int]:
    """(status, exit code) from a report; separate from gathering so every branch is testable without a GPU."""
    if report["sdpa"] is None:
        return "no-gpu", exit_codes.NO_GPU if require_gpu else exit_codes.OK
    flash_ok = bool(report["flash_runs"]) and all(run["passed"] for run in report["flash_runs"])
    flash_attn = report["flash_attn"]
    if flash_attn["installed"]:
        flash_attn_ok = not flash_attn["error"] and bool(flash_attn["runs"]) and all(
            run["passed"] for run in flash_attn["runs"])
    else:
        flash_attn_ok = not require_flash_attn
    expected = report.get("expectations")
    flash_expected = expected["flash_expected"] if expected else True
    if flash_ok and flash_attn_ok:
        return "ok", exit_codes.OK
    if not flash_ok and not flash_expected and flash_attn_ok:
        return "flash-not-expected", exit_codes.OK
    return "flash-unusable", exit_codes.FAILED


def _run_line(run: dict) -> str:
    if not run["forward_ok"] or not run["backward_ok"]:
        stage = "forward" if not run["forward_ok"] else "backward"
        return f"{run['backend']} {run['dtype']}: {stage} FAILED ({run['error']})"
    errors = ", ".join(f"{name} {value:.1e}" for name, value in run["errors"].items())
    verdict = "ok" if run["passed"] else "WRONG RESULT"
    return f"{run['backend']} {run['dtype']}: {verdict} (relative error vs math: {errors}; tolerance {run['tolerance']:.0e})"


def format_summary(report: dict) -> str:
    found = report["platform"]
    lines = [f"rocm-stack-check check: {report['status']}"]
    lines.append(f"  Python {found['python']} on {found['system']}")
    if found["torch_version"] is None:
        lines.append(f"  PyTorch: not importable ({found['torch_error']})")
    else:
        runtime = f"HIP {found['hip_version']}" if found["hip_version"] else (
            f"CUDA {found['cuda_version']}" if found["cuda_version"] else "CPU-only build")
        lines.append(f"  PyTorch {found['torch_version']} ({runtime})")
    if found["device_present"]:
        lines.append(f"  GPU: {found['device_name']} [{found['arch_full']}], {found['total_memory_mib']} MiB"
                     f" ({found['device_count']} device(s))")
    expected = report["expectations"]
    if expected and expected["known"]:
        lines.append(f"  architecture table ({report['architecture_table']['source']}): {expected['arch']} = "
                     f"{expected['product']}; aotriton {expected['aotriton']}, CK SDPA {expected['ck_sdpa']}, "
                     f"flash-attn backends {', '.join(expected['flash_attn_backends']) or 'none'}")
    elif expected:
        lines.append(f"  architecture table: {expected['arch']} not listed (no expectations)")
    if report["aotriton"]:
        aotriton = report["aotriton"]
        lines.append(f"  aotriton library: {aotriton['library'] or 'not found'}")
        lines.append(f"  aotriton images: {aotriton['images_dir'] or 'not found'} ({aotriton['image_count']} files)")
    sdpa = report["sdpa"]
    if sdpa:
        if sdpa["preferred_rocm_fa_library"] is not None:
            lines.append(f"  preferred_rocm_fa_library(): {sdpa['preferred_rocm_fa_library']}"
                         f" (CK SDPA available: {sdpa['ck_sdpa_available']})")
        lines.append(f"  Flash available: {sdpa['flash_available']}, enabled: {sdpa['flash_enabled']}; "
                     f"memory-efficient enabled: {sdpa['mem_efficient_enabled']}")
        for name in ("flash", "efficient"):
            reasons = "; ".join(sdpa[f"can_use_{name}_attention_reasons"])
            lines.append(f"  can_use_{name}_attention({sdpa['representative_input']['shape']}, fp16, causal): "
                         f"{sdpa[f'can_use_{name}_attention']}" + (f" ({reasons})" if reasons else ""))
    for run in report["flash_runs"]:
        lines.append(f"  forced FLASH_ATTENTION fwd+bwd, {_run_line(run)}")
    flash_attn = report["flash_attn"]
    if flash_attn["installed"]:
        lines.append(f"  flash-attn {flash_attn['version'] or ''}" + (f": {flash_attn['error']}" if flash_attn["error"] else ""))
        lines.extend(f"    flash_attn_func fwd+bwd, {_run_line(run)}" for run in flash_attn["runs"])
    set_variables = {k: v for k, v in report["environment"].items() if v is not None}
    lines.append("  SDPA environment: " + (", ".join(f"{k}={v}" for k, v in set_variables.items()) or "none set"))
    for name in set_variables:
        lines.append(f"    {name}: {SDPA_ENVIRONMENT_VARIABLES[name]}")
    lines.extend(f"  note: {note}" for note in report["notes"])
    lines.extend(f"  problem: {problem}" for problem in report["problems"])
    return "\n".join(lines)


def run_check(as_json: bool, require_gpu: bool, require_flash_attn: bool, expect_arch: str | None,
              output: Path | None = None) -> int:
    report = gather_report(expect_arch=expect_arch)
    report["status"], report["exit_code"] = decide_status(report, require_gpu, require_flash_attn)
    if output:
        output.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2) if as_json else format_summary(report))
    if as_json:  # stdout stays pure JSON; a log reader (a recipe's test output) still gets one line to grep
        print(f"rocm-stack-check check: {report['status']} (exit {report['exit_code']})", file=sys.stderr)
    return report["exit_code"]
