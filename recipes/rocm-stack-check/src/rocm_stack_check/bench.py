"""`rocm-stack-check bench`: attention speed per backend, shape, dtype, mask and pass."""
from __future__ import annotations

import json
import math
import statistics
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone

from .attention import DTYPES, Backend, Shape, all_backends, backward_flops, forward_flops, make_inputs
from .environment import describe_platform, import_flash_attn

SCHEMA = "rocm-stack-check/bench/1"
DEFAULT_SHAPES = [Shape(1, 1, 128, 64), Shape(2, 4, 512, 64), Shape(4, 8, 1024, 64), Shape(8, 16, 2048, 64),
                  Shape(16, 16, 4096, 64)]
DEFAULT_SHAPES += [Shape(s.batch, s.heads, s.seq_len, 128) for s in DEFAULT_SHAPES]
PASSES = ("forward", "backward")
ROW_KEY_FIELDS = ("backend", "batch", "heads", "seq_len", "head_dim", "dtype", "causal")
# The math backend materialises the B·H·S² score matrix several times over (scores, probabilities, their
# gradients): at 16,16,4096 in fp16/bf16 its peak was 8.2 copies (65.7 GiB, H200, PyTorch 2.11). Rows whose
# estimate exceeds free device memory are skipped rather than run into an out-of-memory error, which is slow
# to recover from on some drivers and can push an integrated GPU (shared system memory) into swapping.
MATH_SCORE_COPIES = 9


@dataclass
class TimingSettings:
    warmup: int = 3
    min_reps: int = 3
    max_reps: int = 20
    target_ms: float = 200.0  # repetitions are chosen so that one measurement takes about this long
    # One repetition is a batch of calls queued back to back under one pair of device events, enough of them
    # to keep the GPU busy this long. A batch of one call measures the host's launch time too: a 0.8 ms
    # flash backward read 0.93-1.06 ms that way on an H200, where an independent timing read 0.80 (issue 38).
    batch_ms: float = 10.0

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class Measurement:
    status: str = "ok"  # ok | unsupported | oom | skipped | error
    ms: float | None = None  # median over repetitions of the mean time of one call in a repetition
    tflops: float | None = None
    peak_mib: float | None = None
    reps: int = 0
    calls_per_rep: int = 0
    note: str = ""

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class Row:
    backend: str
    shape: Shape
    dtype: str
    causal: bool
    forward: Measurement = field(default_factory=Measurement)
    backward: Measurement = field(default_factory=Measurement)

    def to_dict(self) -> dict:
        return {"backend": self.backend, "batch": self.shape.batch, "heads": self.shape.heads,
                "seq_len": self.shape.seq_len, "head_dim": self.shape.head_dim, "dtype": self.dtype,
                "causal": self.causal, "forward": self.forward.to_dict(), "backward": self.backward.to_dict()}


class Timer:
    """Median milliseconds of repeated calls: device events on a GPU (work is asynchronous), the host clock on
    the CPU. Warm-up runs first so that kernel selection, compilation and allocation stay out of the numbers.

    Each repetition is one batch of calls between one pair of events, long enough (batch_ms) that the host's
    cost of launching a call hides behind the GPU's work on the calls queued before it. One untimed call goes
    first in every batch, so the GPU is already busy when the start event is reached: the host's time to
    launch the first timed call is not counted either."""

    # A call this short is bounded by the host's launch rate anyway; capping the batch keeps it from spending
    # seconds of host time on a microsecond kernel.
    MAX_CALLS = 10_000

    def __init__(self, torch, device: str, settings: TimingSettings):
        self.torch, self.device, self.settings = torch, device, settings

    def _synchronize(self):
        if self.device != "cpu":
            self.torch.cuda.synchronize()

    def _time_batch(self, function, calls: int) -> float:
        """Mean milliseconds of one call over `calls` calls enqueued back to back."""
        if self.device == "cpu":
            start = time.perf_counter()
            for _ in range(calls):
                function()
            return (time.perf_counter() - start) * 1e3 / calls
        start, end = (self.torch.cuda.Event(enable_timing=True) for _ in range(2))
        function()  # untimed: keeps the GPU busy while the timed calls are being queued
        start.record()
        for _ in range(calls):
            function()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / calls

    def _calls_per_batch(self, per_call_ms: float) -> int:
        return min(self.MAX_CALLS, max(1, math.ceil(self.settings.batch_ms / max(per_call_ms, 1e-4))))

    def median_ms(self, function) -> tuple[float, int, int]:
        """(median ms of one call, repetitions, calls per repetition)."""
        for _ in range(self.settings.warmup):
            function()
        self._synchronize()
        # A first guess from a single call (an overestimate where launch cost dominates), then one from a
        # batch of the size that guess asks for: the batch's per-call time is the one the host can't inflate.
        calls = self._calls_per_batch(self._time_batch(function, 1))
        if calls > 1:
            calls = self._calls_per_batch(self._time_batch(function, calls))
        per_call = self._time_batch(function, calls)
        wanted = int(self.settings.target_ms / max(per_call * calls, 1e-4))
        reps = max(self.settings.min_reps, min(self.settings.max_reps, wanted))
        times = [per_call] + [self._time_batch(function, calls) for _ in range(reps - 1)]
        return statistics.median(times), reps, calls


def classify_failure(error: BaseException) -> tuple[str, str]:
    message = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    lowered = str(error).lower()
    if "out of memory" in lowered:
        return "oom", message[:200]
    if isinstance(error, NotImplementedError) or "no available kernel" in lowered or "no viable backend" in lowered:
        return "unsupported", message[:200]
    return "error", f"{type(error).__name__}: {message}"[:200]


def math_needs_more_memory_than_free(torch, device: str, shape: Shape, dtype: str) -> str:
    if device == "cpu":
        return ""
    element_size = 2 if dtype in DTYPES else 4
    needed = MATH_SCORE_COPIES * shape.batch * shape.heads * shape.seq_len**2 * element_size
    free, _ = torch.cuda.mem_get_info()
    if needed > 0.9 * free:
        return f"math backend would need ~{needed / 2**30:.0f} GiB, {free / 2**30:.0f} GiB free"
    return ""


class Benchmark:
    def __init__(self, torch, device: str, settings: TimingSettings):
        self.torch, self.device, self.timer = torch, device, Timer(torch, device, settings)

    def _reset_peak(self):
        if self.device != "cpu":
            self.torch.cuda.reset_peak_memory_stats()

    def _peak_mib(self) -> float | None:
        return self.torch.cuda.max_memory_allocated() / 2**20 if self.device != "cpu" else None

    def _measure(self, backend: Backend, function, flops: float) -> Measurement:
        self._reset_peak()
        with backend.context():  # entered once: its cost is the host's, not the kernel's
            ms, reps, calls = self.timer.median_ms(function)
        return Measurement(ms=ms, tflops=flops / (ms * 1e-3) / 1e12, peak_mib=self._peak_mib(), reps=reps,
                           calls_per_rep=calls)

    def run_row(self, backend: Backend, shape: Shape, dtype: str, causal: bool, passes=PASSES) -> Row:
        row = Row(backend.name, shape, dtype, causal)
        if "backward" not in passes:
            row.backward = Measurement(status="skipped", note="not asked for")
        if backend.name == "math":
            too_big = math_needs_more_memory_than_free(self.torch, self.device, shape, dtype)
            if too_big:
                row.forward = Measurement(status="skipped", note=too_big)
                row.backward = Measurement(status="skipped", note=too_big)
                return row
        q, k, v = make_inputs(self.torch, shape, dtype, self.device)
        grad_out = self.torch.randn_like(q)
        try:
            row.forward = self._measure(backend, lambda: backend.attention(q, k, v, causal),
                                        forward_flops(shape, causal))
        except Exception as error:  # one backend or shape failing must not stop the run
            status, note = classify_failure(error)
            row.forward = Measurement(status=status, note=note)
            row.backward = Measurement(status=status, note="forward failed")
            self._release()
            return row
        if "backward" in passes:
            try:
                out = backend(q, k, v, causal)
                # autograd.grad returns fresh gradients each time: no accumulation kernels in the timing.
                gradients = lambda: self.torch.autograd.grad(out, (q, k, v), grad_out, retain_graph=True)
                row.backward = self._measure(backend, gradients, backward_flops(shape, causal))
            except Exception as error:
                status, note = classify_failure(error)
                row.backward = Measurement(status=status, note=note)
            finally:
                out = None
        self._release()
        return row

    def _release(self):
        if self.device != "cpu":
            self.torch.cuda.synchronize()
            self.torch.cuda.empty_cache()


def run_benchmark(torch, device: str, shapes, dtypes, causal_modes, backend_names, settings: TimingSettings,
                  passes=PASSES, progress=print) -> dict:
    platform = describe_platform(torch)
    flash_attn_module, flash_attn_version = import_flash_attn()
    backends = all_backends(torch, platform.gpu_runtime if device != "cpu" else "none",
                            flash_attn_module if device != "cpu" else None)
    if backend_names:
        backends = [b for b in backends if b.name in backend_names]
    # math first: every later row of the same case can then show its speed-up over math as it is printed.
    backends.sort(key=lambda b: b.name != "math")
    benchmark = Benchmark(torch, device, settings)
    rows = []
    progress(table_header())
    for shape in shapes:
        for dtype in dtypes:
            for causal in causal_modes:
                for backend in backends:
                    row = benchmark.run_row(backend, shape, dtype, causal, passes).to_dict()
                    rows.append(row)
                    progress(format_row(row, rows))
    return {
        "schema": SCHEMA,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "platform": {**platform.to_dict(), "device": device,
                     "flash_attn_version": flash_attn_version if flash_attn_module else None},
        "settings": {**settings.to_dict(), "passes": list(passes),
                     "flops": "forward 4*B*H*S^2*D, halved when causal; backward 2.5x forward",
                     "timing": "after warm-up, the median over repetitions of the mean time of one call in a "
                               "back-to-back batch of at least batch_ms under one pair of device events (one "
                               "untimed call queued first); host clock on CPU"},
        "backends": [{"name": b.name, "description": b.description} for b in backends],
        "rows": rows,
    }


def row_key(row: dict) -> tuple:
    return tuple(row[name] for name in ROW_KEY_FIELDS)


def validate_document(document: dict) -> list[str]:
    """What is wrong with a bench JSON document (empty when it follows SCHEMA)."""
    problems = []
    if document.get("schema") != SCHEMA:
        return [f"schema is {document.get('schema')!r}, expected {SCHEMA!r}"]
    for name in ("created", "platform", "settings", "rows"):
        if name not in document:
            problems.append(f"missing {name}")
    for index, row in enumerate(document.get("rows", [])):
        missing = [name for name in ROW_KEY_FIELDS + PASSES if name not in row]
        if missing:
            problems.append(f"row {index}: missing {', '.join(missing)}")
            continue
        for pass_name in PASSES:
            measurement = row[pass_name]
            if measurement.get("status") == "ok" and not (isinstance(measurement.get("ms"), (int, float))
                                                          and measurement["ms"] > 0):
                problems.append(f"row {index} {pass_name}: status ok without a positive ms")
    return problems


def load_document(path) -> dict:
    document = json.loads(open(path).read())
    problems = validate_document(document)
    if problems:
        raise ValueError(f"{path}: " + "; ".join(problems))
    return document


@dataclass
class Comparison:
    lines: list[str]
    regressions: list[str]
    compared: int
    judged: int = 0


def compare_documents(current: dict, baseline: dict, threshold: float, min_ms: float = 0.0) -> Comparison:
    """Speed-ups of current over baseline, row by row and pass by pass. A regression is a pass that is more
    than `threshold` (a fraction) slower, or one that ran in the baseline and fails now. Passes that took
    under `min_ms` in the baseline are shown but not judged: launch overhead makes them noise."""
    baseline_rows = {row_key(row): row for row in baseline["rows"]}
    lines, regressions, compared, judged_count = [], [], 0, 0
    for row in current["rows"]:
        old = baseline_rows.get(row_key(row))
        if old is None:
            continue
        label = f"{row['backend']} {row['dtype']} {'causal' if row['causal'] else 'full'} " \
                f"B={row['batch']} H={row['heads']} S={row['seq_len']} D={row['head_dim']}"
        for pass_name in PASSES:
            new_pass, old_pass = row[pass_name], old[pass_name]
            if old_pass["status"] != "ok":
                continue
            compared += 1
            if new_pass["status"] != "ok":
                if new_pass["status"] != "skipped":
                    regressions.append(f"{label} {pass_name}: was {old_pass['ms']:.3f} ms, now {new_pass['status']}")
                continue
            speedup = old_pass["ms"] / new_pass["ms"]
            judged = old_pass["ms"] >= min_ms
            judged_count += judged
            slower = judged and new_pass["ms"] > old_pass["ms"] * (1 + threshold)
            verdict = "  REGRESSION" if slower else ("" if judged else "  (under --min-ms, not judged)")
            lines.append(f"{label} {pass_name}: {old_pass['ms']:.3f} -> {new_pass['ms']:.3f} ms, {speedup:.2f}x{verdict}")
            if slower:
                regressions.append(lines[-1])
    return Comparison(lines, regressions, compared, judged_count)


COLUMNS = ("backend", "dtype", "mask", "B", "H", "S", "D", "fwd ms", "fwd TFLOP/s", "bwd ms", "bwd TFLOP/s",
           "peak MiB", "fwd/bwd vs math")
WIDTHS = (10, 5, 6, 3, 3, 5, 4, 9, 11, 9, 11, 9, 15)


def table_header() -> str:
    header = " ".join(f"{c:>{w}}" for c, w in zip(COLUMNS, WIDTHS))
    return header + "\n" + "-" * len(header)


def _math_row(row: dict, rows: list[dict]) -> dict | None:
    key = row_key({**row, "backend": "math"})
    return next((r for r in rows if row_key(r) == key), None)


def _tflops_text(tflops: float) -> str:
    return f"{tflops:.0f}" if tflops >= 100 else (f"{tflops:.1f}" if tflops >= 10 else f"{tflops:.2f}")


def row_cells(row: dict, rows: list[dict]) -> tuple[list[str], str]:
    """A row's table cells and its notes; `rows` supplies the matching math row for the speed-up column."""
    cells = [row["backend"], row["dtype"], "causal" if row["causal"] else "full", row["batch"], row["heads"],
             row["seq_len"], row["head_dim"]]
    for pass_name in PASSES:
        measurement = row[pass_name]
        if measurement["status"] == "ok":
            cells += [f"{measurement['ms']:.3f}", _tflops_text(measurement["tflops"])]
        else:
            cells += [measurement["status"], "-"]
    peaks = [row[p]["peak_mib"] for p in PASSES if row[p].get("peak_mib") is not None]
    cells.append(f"{max(peaks):.0f}" if peaks else "-")
    math = _math_row(row, rows)
    speedups = []
    for pass_name in PASSES:
        ok = math and row[pass_name]["status"] == "ok" and math[pass_name]["status"] == "ok"
        speedups.append(f"{math[pass_name]['ms'] / row[pass_name]['ms']:.1f}x" if ok else "-")
    cells.append("/".join(speedups) if row["backend"] != "math" else "-")
    notes = [f"{p}: {row[p]['note'][:90]}" for p in PASSES if row[p]["status"] != "ok" and row[p]["note"]
             and row[p]["note"] not in ("forward failed", "not asked for")]
    return [str(c) for c in cells], "; ".join(notes)


def format_row(row: dict, rows: list[dict]) -> str:
    cells, notes = row_cells(row, rows)
    line = " ".join(f"{c:>{w}}" for c, w in zip(cells, WIDTHS))
    return line + (f"  ({notes})" if notes else "")


def format_table(document: dict) -> str:
    rows = document["rows"]
    return "\n".join([table_header()] + [format_row(row, rows) for row in rows])


def format_markdown_table(document: dict) -> str:
    """The table for a README: the same cells as the terminal table."""
    rows = document["rows"]
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for row in rows:
        lines.append("| " + " | ".join(row_cells(row, rows)[0]) + " |")
    return "\n".join(lines)
