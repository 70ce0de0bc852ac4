"""The attention backends, their inputs, FLOP counts and the accuracy check: one implementation used by both
`check` (does the backend compute the right thing?) and `bench` (how fast?)."""
from __future__ import annotations

import contextlib
from dataclasses import dataclass

DTYPES = ("fp16", "bf16")
# Relative L2 error ‖x − ref‖ / ‖ref‖ against the math backend run in float32 on the same (rounded)
# inputs. Rounding the output alone costs about the unit roundoff (fp16 4.9e-4, bf16 3.9e-3); fused kernels
# also round the softmax probabilities before the second matmul, and gradients go through more roundings.
# The bounds leave room for that and still catch a wrong kernel, whose error is of order 1.
TOLERANCE = {"fp16": 5e-3, "bf16": 3e-2}


def torch_dtype(torch, name: str):
    return {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[name]


@dataclass(frozen=True)
class Shape:
    batch: int
    heads: int
    seq_len: int
    head_dim: int

    @classmethod
    def parse(cls, text: str) -> "Shape":
        parts = [int(p) for p in text.replace("x", ",").split(",")]
        if len(parts) != 4 or min(parts) < 1:
            raise ValueError(f"shape {text!r}: expected B,H,S,D with four positive integers")
        return cls(*parts)

    def __str__(self) -> str:
        return f"{self.batch},{self.heads},{self.seq_len},{self.head_dim}"


def forward_flops(shape: Shape, causal: bool) -> float:
    """4·B·H·S²·D (two matmuls, 2 FLOPs a multiply-add); a causal mask skips half of the score matrix."""
    flops = 4.0 * shape.batch * shape.heads * shape.seq_len**2 * shape.head_dim
    return flops / 2 if causal else flops


def backward_flops(shape: Shape, causal: bool) -> float:
    """Five matmuls against the forward's two (recomputing scores included): 2.5× the forward."""
    return 2.5 * forward_flops(shape, causal)


def make_inputs(torch, shape: Shape, dtype: str, device: str, seed: int = 0, requires_grad: bool = True):
    """q, k, v of shape (B, H, S, D), random (never zeros: they hide unwritten outputs and run faster)."""
    generator = torch.Generator(device=device).manual_seed(seed)
    tensors = [
        torch.randn(
            (shape.batch, shape.heads, shape.seq_len, shape.head_dim),
            generator=generator,
            device=device,
            dtype=torch_dtype(torch, dtype),
        ).requires_grad_(requires_grad)
        for _ in range(3)
    ]
    return tuple(tensors)


class Backend:
    """One way to compute attention on (B, H, S, D) tensors."""

    name = ""
    description = ""

    def __init__(self, torch):
        self.torch = torch

    def context(self):
        return contextlib.nullcontext()

    def attention(self, q, k, v, causal: bool):
        raise NotImplementedError

    def __call__(self, q, k, v, causal: bool):
        with self.context():
            return self.attention(q, k, v, causal)


class SdpaBackend(Backend):
    """F.scaled_dot_product_attention restricted to one SDPBackend, so a backend that can't run raises
    instead of silently falling back to another."""

    def __init__(self, torch, name: str, sdp_backend: str, description: str):
        super().__init__(torch)
        self.name, self.sdp_backend, self.description = name, sdp_backend, description

    def context(self):
        from torch.nn.attention import SDPBackend, sdpa_kernel

        return sdpa_kernel([getattr(SDPBackend, self.sdp_backend)])

    def attention(self, q, k, v, causal: bool):
        return self.torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)


class RocmFaLibraryBackend(SdpaBackend):
    """Flash SDPA with one ROCm FA library preferred (composable_kernel instead of AOTriton)."""

    def __init__(self, torch, name: str, library: str, description: str):
        super().__init__(torch, name, "FLASH_ATTENTION", description)
        self.library = library

    @contextlib.contextmanager
    def context(self):
        cuda_backends = self.torch.backends.cuda
        previous = cuda_backends.preferred_rocm_fa_library()
        cuda_backends.preferred_rocm_fa_library(self.library)
        try:
            with super().context():
                yield
        finally:
            cuda_backends.preferred_rocm_fa_library(previous)


class FlashAttnBackend(Backend):
    """flash-attn's own flash_attn_func, which takes (B, S, H, D)."""

    name = "flash_attn"
    description = "flash-attn package, flash_attn_func"

    def __init__(self, torch, flash_attn_module):
        super().__init__(torch)
        from flash_attn import flash_attn_func

        self.flash_attn_func = flash_attn_func
        self.version = getattr(flash_attn_module, "__version__", "unknown")

    def attention(self, q, k, v, causal: bool):
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        return self.flash_attn_func(q, k, v, causal=causal).transpose(1, 2)


# Every backend's name, as all_backends names them (bench --backend takes these).
BACKEND_NAMES = ("flash", "efficient", "math", "cudnn", "flash-ck", "flash_attn")


def all_backends(torch, gpu_runtime: str, flash_attn_module=None) -> list[Backend]:
    """Every backend worth trying on this build; whether each runs is found out by running it."""
    backends = [
        SdpaBackend(torch, "flash", "FLASH_ATTENTION", "SDPA Flash (AOTriton on ROCm, FA2 on CUDA)"),
        SdpaBackend(torch, "efficient", "EFFICIENT_ATTENTION", "SDPA memory-efficient"),
        SdpaBackend(torch, "math", "MATH", "SDPA math (unfused reference)"),
    ]
    if gpu_runtime == "cuda":
        backends.append(SdpaBackend(torch, "cudnn", "CUDNN_ATTENTION", "SDPA cuDNN"))
    ck_available = getattr(torch.backends.cuda, "is_ck_sdpa_available", lambda: False)
    if gpu_runtime == "rocm" and ck_available():
        backends.append(RocmFaLibraryBackend(torch, "flash-ck", "ck", "SDPA Flash, composable_kernel preferred"))
    if flash_attn_module is not None:
        try:
            backends.append(FlashAttnBackend(torch, flash_attn_module))
        except ImportError:
            pass  # the module imported but lacks flash_attn_func: check reports the import separately
    return backends


def relative_error(torch, value, reference) -> float:
    value, reference = value.detach().double(), reference.detach().double()
    if not torch.isfinite(value).all():
        return float("inf")
    return float((value - reference).norm() / reference.norm().clamp_min(1e-30))


def check_against_math(torch, backend: Backend, shape: Shape, dtype: str, causal: bool, device: str) -> dict:
    """Run the backend forward and backward and compare output and gradients with the math backend in
    float32 on the same inputs. Returns a JSON-ready dict; never raises for a backend failure."""
    result = {"backend": backend.name, "shape": str(shape), "dtype": dtype, "causal": causal,
              "tolerance": TOLERANCE[dtype], "forward_ok": False, "backward_ok": False,
              "errors": {}, "passed": False, "error": ""}
    q, k, v = make_inputs(torch, shape, dtype, device)
    grad_out = torch.randn_like(q)
    try:
        out = backend(q, k, v, causal)
        result["forward_ok"] = True
        grads = torch.autograd.grad(out, (q, k, v), grad_out)
        result["backward_ok"] = True
    except Exception as error:
        result["error"] = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
        return result
    math = SdpaBackend(torch, "math", "MATH", "")
    reference_inputs = [t.detach().float().requires_grad_() for t in (q, k, v)]
    reference_out = math(*reference_inputs, causal)
    reference_grads = torch.autograd.grad(reference_out, reference_inputs, grad_out.float())
    for name, value, reference in zip(("out", "dq", "dk", "dv"), (out, *grads), (reference_out, *reference_grads)):
        result["errors"][name] = relative_error(torch, value, reference)
    result["passed"] = all(e <= result["tolerance"] for e in result["errors"].values())
    return result
