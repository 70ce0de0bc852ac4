"""An independent timing of PyTorch's scaled-dot-product attention, to check rocm-stack-check's bench against.

Plain PyTorch and Triton's own benchmark helper; nothing from this project is imported, so a mistake in our
timer cannot repeat itself here. Each figure is a median, by each of these methods:

- `do_bench`: `triton.testing.do_bench(fn, return_mode="median")` with Triton's defaults (25 ms warm-up,
  100 ms of repetitions, the L2 cache cleared before every call, one pair of CUDA events per call);
- `events`: the same method written in plain torch (a 256 MiB buffer zeroed before each call, events around
  the call), for a machine without Triton;
- `do_bench_x10`: do_bench over a closure of 10 calls, divided by 10. A call shorter than the host's time to
  launch it (a backward at 4,8,1024,64: autograd's launch is ~0.1 ms) times the host when timed alone, and
  the L2 clear lands once per 10 calls; the backward closure uses `torch.autograd.grad` (nothing accumulates);
- `cudagraph` (with --cudagraph, forward only): `triton.testing.do_bench_cudagraph` (the calls replayed from
  a CUDA graph, no launch cost at all).

Forward is `F.scaled_dot_product_attention(q, k, v, is_causal=...)` on inputs that require grad (a training
forward); backward is `out.backward(grad, retain_graph=True)` with q, k, v's `.grad` reset to None before each
call, as do_bench's `grad_to_none` does. The backend is pinned with `sdpa_kernel` so nothing falls back.

    python tests/benchmarks/sdpa_reference.py --shape 1,16,4096,128 --json reference.json
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

BACKENDS = {"flash": SDPBackend.FLASH_ATTENTION, "math": SDPBackend.MATH}
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


def events_median(fn, grad_to_none=(), calls: int = 100, warmup: int = 10) -> float:
    """Median ms of single calls, each after an L2 clear, each between its own pair of events."""
    flush = torch.empty(256 * 2**20, dtype=torch.int8, device="cuda")
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
    for start, end in zip(starts, ends):
        for tensor in grad_to_none:
            tensor.grad = None
        flush.zero_()
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends))


BATCH = 10  # calls in one timed closure for do_bench_x10


def timings(fn, grad_to_none=(), batched=None, cudagraph: bool = False) -> dict:
    """Median ms of one call of `fn` by each method; `batched` runs BATCH calls (default: fn BATCH times)."""
    result = {"events": events_median(fn, grad_to_none)}
    try:
        from triton.testing import do_bench, do_bench_cudagraph
    except ImportError:
        return result
    result["do_bench"] = do_bench(fn, grad_to_none=list(grad_to_none) or None, return_mode="median")
    batched = batched or (lambda: [fn() for _ in range(BATCH)])
    result["do_bench_x10"] = do_bench(batched, return_mode="median") / BATCH
    if not cudagraph:
        return result
    try:
        result["cudagraph"] = do_bench_cudagraph(fn, return_mode="median")
    except Exception as error:  # a pass that cannot be captured in a graph: the other methods stand
        result["cudagraph_error"] = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"[:160]
    return result


def measure(shape, dtype: str, causal: bool, backend: str, cudagraph: bool = False) -> dict:
    batch, heads, seq_len, head_dim = shape
    generator = torch.Generator(device="cuda").manual_seed(1)
    q, k, v = (torch.randn(batch, heads, seq_len, head_dim, device="cuda", dtype=DTYPES[dtype],
                           generator=generator).requires_grad_() for _ in range(3))
    grad = torch.randn_like(q)
    row = {"shape": list(shape), "dtype": dtype, "causal": causal, "backend": backend}
    with sdpa_kernel([BACKENDS[backend]]):
        row["forward"] = timings(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal),
                                 cudagraph=cudagraph)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        # Batched backward through autograd.grad: fresh gradients each call, none accumulated into .grad.
        batched = lambda: [torch.autograd.grad(out, (q, k, v), grad, retain_graph=True) for _ in range(BATCH)]  # noqa: E731
        row["backward"] = timings(lambda: out.backward(grad, retain_graph=True), grad_to_none=(q, k, v),
                                  batched=batched)
        # No CUDA graph for the backward: capturing autograd's backward failed on the H200 (2026-12-01) and
        # left the CUDA generator unusable for the rows after it ("Offset increment outside graph capture").
    del out
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    return row


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", action="append", help="B,H,S,D (repeatable)")
    parser.add_argument("--dtype", action="append", choices=sorted(DTYPES))
    parser.add_argument("--backend", action="append", choices=sorted(BACKENDS))
    parser.add_argument("--full", action="store_true", help="no causal mask (default: causal)")
    parser.add_argument("--cudagraph", action="store_true",
                        help="also time CUDA-graph replays (a failed capture can upset later calls: run it alone)")
    parser.add_argument("--json", help="write the figures here")
    arguments = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("sdpa_reference: no GPU visible to PyTorch", file=sys.stderr)
        return 1
    shapes = [tuple(int(p) for p in text.split(",")) for text in arguments.shape or ["1,16,4096,128"]]
    started = time.perf_counter()
    rows = []
    for shape in shapes:
        for dtype in arguments.dtype or ["fp16", "bf16"]:
            for backend in arguments.backend or ["flash"]:
                row = measure(shape, dtype, not arguments.full, backend, arguments.cudagraph)
                rows.append(row)
                cells = "  ".join(f"{p} " + " ".join(f"{m}={v:.4f}" for m, v in row[p].items() if isinstance(v, float))
                                  for p in ("forward", "backward"))
                print(f"{backend:6} {dtype} {','.join(map(str, shape)):>14}  {cells}", flush=True)
    document = {"tool": "tests/benchmarks/sdpa_reference.py", "torch": torch.__version__,
                "triton": getattr(sys.modules.get("triton"), "__version__", None),  # None: do_bench not used
                "gpu": torch.cuda.get_device_name(), "wall_seconds": round(time.perf_counter() - started, 1),
                "rows": rows}
    if arguments.json:
        with open(arguments.json, "w") as handle:
            json.dump(document, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
