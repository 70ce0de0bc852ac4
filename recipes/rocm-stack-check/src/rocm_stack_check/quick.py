"""`rocm-stack-check bench --quick`: the short benchmark the recipes' test sections run.

A few causal shapes up to S=4096, fp16 and bf16, forward and backward, for the fused backends and math,
timed with bench.run_benchmark (the same code as the full benchmark) in well under a minute. With
--expect-speedup, a fused backend that the architecture table says works must beat the math backend by
MIN_SPEEDUP_OVER_MATH at the largest shape, in both passes and both dtypes: a package whose Flash Attention
silently runs no faster than the unfused reference fails its tests instead of reaching users.
"""
from __future__ import annotations

import json
import time

from .attention import Shape
from .bench import PASSES, TimingSettings, row_key

# Causal: the mask LLM training and inference use. The largest shape is the one judged; math's nine score
# copies at 1,16,4096,128 in fp16 take about 4.5 GiB, which an integrated GPU's shared memory holds.
QUICK_SHAPES = (Shape(4, 8, 1024, 64), Shape(2, 16, 2048, 128), Shape(1, 16, 4096, 128))
QUICK_CAUSAL = (True,)
# The fused backends worth judging (those present: flash-ck only where PyTorch has CK SDPA, flash_attn only
# where the flash-attn package imports) and the reference.
QUICK_BACKENDS = ("flash", "flash-ck", "flash_attn", "math")
# Fewer, shorter repetitions than the full benchmark, so a build machine's test does not spend minutes here;
# each batch still keeps the GPU busy for 5 ms, so launch cost stays out of the figures the verdict and the
# channel page show (tests/benchmarks/results/h200-bench-accuracy.md: within 10% of an independent timing).
QUICK_TIMING = TimingSettings(warmup=2, min_reps=3, max_reps=10, target_ms=60.0, batch_ms=5.0)

# A fused backend must be at least this many times faster than math at the largest quick shape, forward and
# backward. The reference runs at S=4096 range from 6.0x (H200, backward, no mask, head dim 128;
# tests/benchmarks/results/h200-sdpa.json) to 43x (H200 causal forward), and 28x forward / 20x backward on
# gfx1151 (lhl/strix-halo-testing, torch-therock/README.md: against a PyTorch without AOTriton). Half the
# lowest of those leaves room for a slower GPU or a noisy machine, while a Flash path that fell back to unfused
# kernels or a broken build stays near 1x and fails.
MIN_SPEEDUP_OVER_MATH = 3.0

# The one line a recipe's test prints with --log-json: the orchestrator finds it in the build log and keeps
# the document beside the log (orchestrate/benchlog.py has the same marker; a test compares them).
LOG_MARKER = "rocm-stack-check bench json: "


def expected_backends(expectations: dict | None) -> dict[str, str]:
    """Backend name -> why it is expected to beat math here, from the architecture table's expectations."""
    if not expectations or not expectations.get("known"):
        return {}
    expected = {}
    if expectations.get("flash_expected"):
        expected["flash"] = f"aotriton {expectations['aotriton']}, CK SDPA {expectations['ck_sdpa']}"
    if expectations.get("ck_sdpa") not in (None, "no"):
        expected["flash-ck"] = "CK SDPA yes"
    if expectations.get("flash_attn_backends"):
        expected["flash_attn"] = "flash-attn backends " + ", ".join(expectations["flash_attn_backends"])
    return expected


def largest_shape(rows: list[dict]) -> tuple:
    return max((row["seq_len"], row["batch"] * row["heads"], row["head_dim"], row["batch"], row["heads"])
               for row in rows)


def judge_speedup(document: dict, expectations: dict | None, threshold: float = MIN_SPEEDUP_OVER_MATH) -> dict:
    """Each fused backend's speed-up over math at the largest shape, per dtype and pass, and the verdict.

    A backend the table expects here fails when it is slower than `threshold` times math, or did not run;
    other backends are reported, not judged. Returns the JSON-ready `speedup` section of the document."""
    rows = document["rows"]
    expected = expected_backends(expectations)
    verdict = {"threshold": threshold, "shape": None, "expected": expected, "results": [], "failures": [],
               "passed": True}
    if not rows:
        return verdict
    seq_len, _, head_dim, batch, heads = largest_shape(rows)
    verdict["shape"] = str(Shape(batch, heads, seq_len, head_dim))
    at_largest = [row for row in rows if (row["batch"], row["heads"], row["seq_len"], row["head_dim"])
                  == (batch, heads, seq_len, head_dim)]
    math_rows = {row_key({**row, "backend": "math"}): row for row in at_largest if row["backend"] == "math"}
    for row in at_largest:
        if row["backend"] == "math":
            continue
        math = math_rows.get(row_key({**row, "backend": "math"}))
        judged = row["backend"] in expected
        for pass_name in PASSES:
            fused, reference = row[pass_name], (math or {}).get(pass_name, {"status": "missing"})
            result = {"backend": row["backend"], "dtype": row["dtype"], "pass": pass_name, "judged": judged,
                      "speedup": None, "ok": True, "note": ""}
            if reference.get("status") != "ok":
                result["note"] = f"math {reference.get('status')}: no reference"  # nothing to compare with
            elif fused["status"] != "ok":
                result.update(ok=not judged, note=f"{row['backend']} {fused['status']}: {fused.get('note', '')}")
            else:
                result["speedup"] = round(reference["ms"] / fused["ms"], 2)
                result["ok"] = result["speedup"] >= threshold or not judged
            verdict["results"].append(result)
            if not result["ok"]:
                verdict["failures"].append(result)
    verdict["passed"] = not verdict["failures"]
    return verdict


def format_verdict(verdict: dict) -> list[str]:
    """The lines a build log shows under the table."""
    if verdict["shape"] is None:
        return ["speed-up over math: nothing ran"]
    lines = [f"speed-up over math at {verdict['shape']} (causal), required {verdict['threshold']:g}x for "
             f"{', '.join(verdict['expected']) or 'no backend (the architecture table expects none here)'}:"]
    for result in verdict["results"]:
        shown = f"{result['speedup']:.1f}x" if result["speedup"] is not None else result["note"]
        mark = "" if not result["judged"] else ("  ok" if result["ok"] else "  TOO SLOW" if result["speedup"]
                                               is not None else "  FAILED")
        lines.append(f"  {result['backend']} {result['dtype']} {result['pass']}: {shown}{mark}")
    return lines


def summary_line(document: dict) -> str:
    """One line for a build log's end and for `orchestrate status`."""
    verdict = document.get("speedup") or {}
    speedups = {}
    for result in verdict.get("results", []):
        if result["speedup"] is not None:
            speedups.setdefault(result["backend"], []).append(result["speedup"])
    shown = ", ".join(f"{backend} {min(values):.1f}x" for backend, values in speedups.items()) or "no speed-up measured"
    state = "passed" if verdict.get("passed", True) else "FAILED"
    return f"{shown} over math at {verdict.get('shape')} (lowest of fp16/bf16, fwd/bwd); {state}"


def log_line(document: dict) -> str:
    return LOG_MARKER + json.dumps(document, separators=(",", ":"))


def judged_document(document: dict, expect_arch: str | None) -> dict:
    """The document with its `speedup` section, judged against the architecture table's row for its GPU."""
    from .architecture_facts import expectations_for, load_architecture_table

    table, table_problem = load_architecture_table()
    arch = document["platform"].get("arch")
    expectations = expectations_for(arch, table).to_dict() if table and arch else None
    document = {**document, "expect_arch": expect_arch, "expectations": expectations,
                "architecture_table": {"source": table.source if table else None, "problem": table_problem}}
    document["speedup"] = judge_speedup(document, expectations)
    document["summary"] = summary_line(document)  # what `orchestrate status` shows for this run
    return document


def run_quick(torch, expect_arch: str | None, progress=print) -> dict | str:
    """The quick benchmark's judged document, or the one line saying why nothing ran (no GPU)."""
    from .bench import run_benchmark
    from .environment import describe_platform

    found = describe_platform(torch)
    if not found.device_present:
        return (f"rocm-stack-check bench: no GPU: PyTorch {torch.__version__} sees no CUDA or ROCm device; "
                "quick benchmark skipped")
    if expect_arch and found.arch not in expect_arch.split(","):  # a package built for several GPUs: any
        return f"rocm-stack-check bench: GPU is {found.arch}, not the expected {expect_arch}: quick benchmark skipped"
    started = time.perf_counter()
    document = run_benchmark(torch, "cuda", QUICK_SHAPES, ("fp16", "bf16"), QUICK_CAUSAL, QUICK_BACKENDS,
                             QUICK_TIMING, PASSES, progress=progress)
    document["settings"].update(mode="quick", wall_seconds=round(time.perf_counter() - started, 1))
    return judged_document(document, expect_arch)
