"""Does `rocm-stack-check bench` read what an independent timing reads? Side by side in one run on a GPU.

    python tests/benchmarks/bench_accuracy.py measure OUT [--old-src DIR]   # on the GPU machine
    python tests/benchmarks/bench_accuracy.py report OUT                    # here: writes results/

`measure` runs, one after another in one process tree on one GPU: the independent script
(tests/benchmarks/sdpa_reference.py, plain PyTorch and triton.testing.do_bench), `rocm-stack-check bench
--quick` (timed from the shell's side: Python start and CUDA initialisation included), the quick mode of the
timer this replaced (--old-src: that commit's package, when given), the full mode at the judged shape, then
the reference and the quick mode again, so each side's own spread shows. `report` compares, for SDPA flash
and math at every quick shape (causal, fp16 and bf16, forward and backward), our figure with the reference's:
the reference figure is the mean of its two runs' `do_bench_x10` medians (do_bench over 10 calls: timed one
call at a time, a 0.1 ms backward measures the host's launch, and the reference's own two runs then differed
by 36% at 4,8,1024,64 on the H200); ours is each quick run's figure. The bar (issue 38): within 10%.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPOSITORY = HERE.parents[1]
PACKAGE_SOURCE = REPOSITORY / "recipes" / "rocm-stack-check" / "src"
RESULTS = HERE / "results"
QUICK_SHAPES = ("4,8,1024,64", "2,16,2048,128", "1,16,4096,128")  # = rocm_stack_check.quick.QUICK_SHAPES
JUDGED_SHAPE = "1,16,4096,128"
BAR = 0.10


def _run(command: list[str], log: Path, source: Path | None = None) -> float:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    if source is not None:
        env["PYTHONPATH"] = str(source)
    started = time.perf_counter()
    with open(log, "w") as handle:
        try:
            code = subprocess.run(command, stdout=handle, stderr=subprocess.STDOUT, env=env, cwd=REPOSITORY,
                                  timeout=240).returncode
        except subprocess.TimeoutExpired:
            code = "timed out after 240 s"
    seconds = time.perf_counter() - started
    print(f"{' '.join(command[1:4])}...: exit {code}, {seconds:.1f} s", flush=True)
    return round(seconds, 1)


def measure(out: Path, old_source: Path | None) -> None:
    out.mkdir(parents=True, exist_ok=True)
    python = sys.executable
    reference = [python, str(HERE / "sdpa_reference.py"), *[a for s in QUICK_SHAPES for a in ("--shape", s)],
                 "--backend", "flash", "--backend", "math"]
    quick = [python, "-m", "rocm_stack_check", "bench", "--quick", "--log-json"]
    walls = {}
    walls["reference-1"] = _run(reference + ["--json", str(out / "reference-1.json")], out / "reference-1.log")
    walls["quick-1"] = _run(quick + ["--output", str(out / "quick-1.json")], out / "quick-1.log", PACKAGE_SOURCE)
    if old_source:
        walls["quick-old"] = _run(quick + ["--output", str(out / "quick-old.json")], out / "quick-old.log", old_source)
    walls["full"] = _run([python, "-m", "rocm_stack_check", "bench", "--shape", JUDGED_SHAPE, "--causal", "yes",
                          "--backend", "flash", "--backend", "math", "--output", str(out / "full.json")],
                         out / "full.log", PACKAGE_SOURCE)
    walls["reference-2"] = _run(reference + ["--json", str(out / "reference-2.json")], out / "reference-2.log")
    walls["quick-2"] = _run(quick + ["--output", str(out / "quick-2.json")], out / "quick-2.log", PACKAGE_SOURCE)
    walls["reference-graph"] = _run(reference + ["--cudagraph", "--json", str(out / "reference-graph.json")],
                                    out / "reference-graph.log")
    (out / "walls.json").write_text(json.dumps(walls, indent=1))


def _ours(document: dict) -> dict:
    return {(r["backend"], f"{r['batch']},{r['heads']},{r['seq_len']},{r['head_dim']}", r["dtype"], p):
            r[p] for r in document["rows"] for p in ("forward", "backward") if r["causal"]}


def _reference(document: dict) -> dict:
    return {(r["backend"], ",".join(map(str, r["shape"])), r["dtype"], p): r[p]
            for r in document["rows"] for p in ("forward", "backward")}


def report(raw: Path) -> dict:
    load = lambda name: json.loads((raw / name).read_text()) if (raw / name).exists() else None  # noqa: E731
    references = [_reference(load(f"reference-{i}.json")) for i in (1, 2)]
    graph = _reference(load("reference-graph.json") or {"rows": []})
    quick_runs = {name: _ours(load(f"{name}.json")) for name in ("quick-1", "quick-2", "quick-old", "full")
                  if load(f"{name}.json")}
    platform = load("quick-1.json")["platform"]
    rows = []
    for key in sorted(references[0], key=lambda k: (k[1] != JUDGED_SHAPE, k)):
        reference_runs = [ref[key]["do_bench_x10"] for ref in references]
        row = {"backend": key[0], "shape": key[1], "dtype": key[2], "pass": key[3],
               "reference_ms": round(statistics.mean(reference_runs), 4),
               "reference_runs_ms": [round(v, 4) for v in reference_runs],
               "reference_per_call_ms": [round(ref[key]["do_bench"], 4) for ref in references],
               "reference_events_ms": [round(ref[key]["events"], 4) for ref in references],
               "reference_cudagraph_ms": graph.get(key, {}).get("cudagraph"),
               "reference_cudagraph_error": graph.get(key, {}).get("cudagraph_error")}
        for name, ours in quick_runs.items():
            measured = ours.get(key)
            if measured and measured["status"] == "ok":
                row[f"{name}_ms"] = round(measured["ms"], 4)
                row[f"{name}_ratio"] = round(measured["ms"] / row["reference_ms"], 3)
                row[f"{name}_calls_per_rep"] = measured["calls_per_rep"]
        # A reference whose own two runs differ by more than the bar cannot tell a 10% error: such a row is
        # shown, not judged (on the H200: flash fp16 backward at 4,8,1024,64, a 0.1-0.2 ms pass).
        low, high = min(reference_runs), max(reference_runs)
        row["judged"] = high / low - 1 <= BAR
        row["within_bar"] = all(abs(row[f"{n}_ratio"] - 1) <= BAR for n in ("quick-1", "quick-2", "full")
                                if f"{n}_ratio" in row)
        rows.append(row)
    walls = load("walls.json")
    document = {"created": load("quick-1.json")["created"], "gpu": platform.get("device_name"),
                "torch": platform.get("torch_version"), "reference": load("reference-1.json")["tool"],
                "triton": load("reference-1.json")["triton"], "bar": BAR, "walls_seconds": walls,
                "quick_wall_in_document": [load(f"quick-{i}.json")["settings"]["wall_seconds"] for i in (1, 2)],
                "status_line": status_line(raw / "quick-1.log"),
                "rows": rows, "all_within_bar": all(r["within_bar"] for r in rows if r["judged"])}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "h200-bench-accuracy.json").write_text(json.dumps(document, indent=1) + "\n")
    (RESULTS / "h200-bench-accuracy.md").write_text(markdown(document))
    return document


def status_line(log: Path) -> str:
    """What `orchestrate status` shows for this run: the quick run's marked log line through orchestrate's own
    reader (orchestrate/benchlog.py), as a recipe test's would be."""
    import shutil
    import tempfile

    sys.path.insert(0, str(REPOSITORY))
    from orchestrate import benchlog

    with tempfile.TemporaryDirectory() as folder:
        kept = shutil.copy(log, Path(folder) / "quick-1.log")
        benchlog.collect(Path(kept), "rocm-stack-check")
        return "\n".join(benchlog.summary_lines(Path(folder))[1:])


def graph_cell(row: dict) -> str:
    return f"{row['reference_cudagraph_ms']:.3f}" if row.get("reference_cudagraph_ms") else "-"


def markdown(document: dict) -> str:
    walls = document["walls_seconds"]
    lines = [f"# `rocm-stack-check bench` against an independent timing ({document['gpu']}, {document['created'][:10]})",
             "",
             f"Measured side by side in one run (`tests/benchmarks/bench_accuracy.py measure`) on the lent GPU, "
             f"PyTorch {document['torch']}, Triton {document['triton']}. Reference: `{document['reference']}` "
             "(plain PyTorch and `triton.testing.do_bench`, the L2 cache cleared before each timed closure of 10 "
             "calls), the mean of its two runs, one before and one after ours; `per call`: do_bench timing one "
             "call at a time (launch cost included where a call is shorter than its launch); `graph`: CUDA-graph "
             "replay, no launch cost (forward only). Ours: the quick mode "
             "(`bench --quick`) twice, and the full mode at the judged shape. `old`: the quick mode of the timer "
             "this replaced (batches of 1 ms, sized from one call timed alone: one call a batch where that read over 1 ms), in the same run. Causal; times in ms; "
             f"ratio = ours / reference; the bar is within {document['bar']:.0%}.",
             "",
             "| backend | B,H,S,D | dtype | pass | reference (runs) | per call | graph | quick 1 | quick 2 | full | old | calls a batch (quick, old) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in document["rows"]:
        cell = lambda name: (f"{row[name + '_ms']:.3f} ({row[name + '_ratio']:.2f})" if name + "_ms" in row  # noqa: E731
                             else "-")
        runs = "/".join(f"{v:.3f}" for v in row["reference_runs_ms"])
        calls = f"{row.get('quick-1_calls_per_rep', '-')}, {row.get('quick-old_calls_per_rep', '-')}"
        per_call = "/".join(f"{v:.3f}" for v in row["reference_per_call_ms"])
        lines.append(f"| {row['backend']} | {row['shape']} | {row['dtype']} | {row['pass']} | "
                     f"{row['reference_ms']:.3f} ({runs}) | {per_call} | {graph_cell(row)} | {cell('quick-1')} | {cell('quick-2')} | {cell('full')} | "
                     f"{cell('quick-old')} | {calls} |")
    judged = [r for r in document["rows"] if r["backend"] == "flash" and r["judged"]]
    worst = max(judged, key=lambda r: max(abs(r.get(f"{n}_ratio", 1) - 1) for n in ("quick-1", "quick-2", "full")))
    unjudged = [r for r in document["rows"] if not r["judged"]]
    lines += ["",
              f"Every judged row within the bar: **{'yes' if document['all_within_bar'] else 'no'}**. The judged "
              f"flash row furthest from the reference: {worst['shape']} {worst['dtype']} {worst['pass']}, quick "
              f"{worst.get('quick-1_ratio')} / {worst.get('quick-2_ratio')} of the reference.",
              "",
              "Not judged, because the reference's own two runs differ by more than the bar: "
              + ("; ".join(f"{r['backend']} {r['shape']} {r['dtype']} {r['pass']} (reference "
                           f"{'/'.join(f'{v:.3f}' for v in r['reference_runs_ms'])}, ours {r.get('quick-1_ms')}/"
                           f"{r.get('quick-2_ms')})" for r in unjudged) or "none")
              + ". Every method scatters there, ours and the reference's alike (the `--cudagraph` reference run "
                "read it one call at a time at about 0.11 ms): likely the host's launch of autograd's kernels "
                "bounds a pass that short (not measured further). The verdict and the channel page use the "
                "largest shape only.",
              "",
              "The run's quick result as `orchestrate status` shows it (its marked log line read by "
              "orchestrate/benchlog.py; sm_90 is not in the architecture table, so nothing was enforced):",
              "",
              "```text",
              document["status_line"],
              "```",
              "",
              f"Wall time of `rocm-stack-check bench --quick` (the whole command: Python start, CUDA initialisation, "
              f"12 rows, the verdict), measured from outside: **{walls['quick-1']} s** and **{walls['quick-2']} s** "
              f"(the limit is 60 s; the document's own `wall_seconds`: {document['quick_wall_in_document']}).",
              "",
              "The plain-torch events column (one call at a time after an L2 clear, for machines without Triton) "
              "is in h200-bench-accuracy.json. Raw files of the run: h200-bench-accuracy-raw.tar.gz."]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=("measure", "report"))
    parser.add_argument("folder", type=Path)
    parser.add_argument("--old-src", type=Path, help="measure: the replaced timer's package folder")
    arguments = parser.parse_args()
    if arguments.step == "measure":
        measure(arguments.folder, arguments.old_src)
    else:
        document = report(arguments.folder)
        print((RESULTS / "h200-bench-accuracy.md").read_text())
        return 0 if document["all_within_bar"] else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
