"""What PyTorch and the GPU are: shared by `check` and `bench` so both describe a machine the same way."""
from __future__ import annotations

import importlib.util
import os
import platform
import sys
import warnings
from dataclasses import asdict, dataclass, field

# Variables that change which SDPA kernel runs, or how fast, or whether the GPU is seen at all.
SDPA_ENVIRONMENT_VARIABLES = {
    "TORCH_ROCM_AOTRITON_ENABLE_EXPERIMENTAL": "1 lets SDPA use AOTriton on archs it marks experimental",
    "TORCH_ROCM_FA_PREFER_CK": "1 prefers composable_kernel over AOTriton for Flash (where CK SDPA is built)",
    "FLASH_ATTENTION_TRITON_AMD_ENABLE": "TRUE selects flash-attn's Triton backend on AMD",
    "HSA_OVERRIDE_GFX_VERSION": "makes ROCm report another ISA: kernels for the wrong arch may load",
    "HIP_VISIBLE_DEVICES": "restricts the GPUs HIP sees",
    "ROCR_VISIBLE_DEVICES": "restricts the GPUs ROCr sees",
    "CUDA_VISIBLE_DEVICES": "restricts the GPUs CUDA (and HIP) see",
    "TORCH_CUDNN_SDPA_ENABLED": "switches PyTorch's cuDNN attention backend",
    "AMD_SERIALIZE_KERNEL": "serializes every kernel launch: correct but slow, skews benchmarks",
    "HIP_LAUNCH_BLOCKING": "synchronizes every launch: skews benchmarks",
    "CUDA_LAUNCH_BLOCKING": "synchronizes every launch: skews benchmarks",
}


def sdpa_environment() -> dict[str, str | None]:
    return {name: os.environ.get(name) for name in SDPA_ENVIRONMENT_VARIABLES}


# PyTorch warns "Failed to initialize NumPy" when NumPy is missing, on import and again on later calls;
# nothing here needs NumPy, so the report says it once (numpy_note) instead.
NUMPY_WARNING = r"Failed to initialize NumPy"


def numpy_note() -> str | None:
    if importlib.util.find_spec("numpy") is None:
        return "NumPy is not installed: PyTorch works without it, and so does this tool"
    return None


def import_torch():
    """torch, or None with the reason: a missing PyTorch is a reportable state here, not a crash."""
    warnings.filterwarnings("ignore", message=NUMPY_WARNING, category=UserWarning)
    try:
        import torch
    except Exception as error:  # a broken install raises more than ImportError (missing libs, ABI)
        return None, f"{type(error).__name__}: {error}"
    return torch, ""


@dataclass
class Platform:
    python: str = field(default_factory=lambda: sys.version.split()[0])
    system: str = field(default_factory=platform.platform)
    torch_version: str | None = None
    torch_error: str = ""
    hip_version: str | None = None
    cuda_version: str | None = None
    gpu_runtime: str = "none"  # rocm | cuda | none: what this PyTorch was built for
    device_present: bool = False
    device_count: int = 0
    device_name: str | None = None
    # gcnArchName's base name on ROCm (gfx1151), sm_XY on CUDA: the key into the architecture table.
    arch: str | None = None
    arch_full: str | None = None  # gcnArchName with its feature flags (gfx90a:sramecc+:xnack-)
    total_memory_mib: int | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def label(self) -> str:
        runtime = f"HIP {self.hip_version}" if self.hip_version else f"CUDA {self.cuda_version}"
        return f"{self.device_name} ({self.arch}), PyTorch {self.torch_version}, {runtime}"


def describe_platform(torch) -> Platform:
    found = Platform()
    if torch is None:
        return found
    found.torch_version = torch.__version__
    found.hip_version = getattr(torch.version, "hip", None)
    found.cuda_version = getattr(torch.version, "cuda", None)
    found.gpu_runtime = "rocm" if found.hip_version else ("cuda" if found.cuda_version else "none")
    try:
        found.device_count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception as error:  # a driver/runtime mismatch surfaces here
        found.torch_error = f"{type(error).__name__}: {error}"
    found.device_present = found.device_count > 0
    if found.device_present:
        properties = torch.cuda.get_device_properties(0)
        found.device_name = properties.name
        found.total_memory_mib = properties.total_memory // 2**20
        if found.hip_version:
            found.arch_full = getattr(properties, "gcnArchName", None)
            found.arch = found.arch_full.split(":")[0] if found.arch_full else None
        else:
            found.arch = f"sm_{properties.major}{properties.minor}"
            found.arch_full = found.arch
    return found


def describe_device(torch, index: int, gpu_runtime: str) -> dict:
    """One visible GPU: its index, name, architecture (gcnArchName's base on ROCm, sm_XY on CUDA) and memory."""
    properties = torch.cuda.get_device_properties(index)
    arch_full = getattr(properties, "gcnArchName", None) if gpu_runtime == "rocm" else \
        f"sm_{properties.major}{properties.minor}"
    return {"index": index, "name": properties.name, "arch": arch_full.split(":")[0] if arch_full else None,
            "arch_full": arch_full, "total_memory_mib": properties.total_memory // 2**20}


def import_flash_attn():
    """flash-attn's module and version, or None: it is optional everywhere."""
    try:
        import flash_attn
    except Exception as error:
        return None, f"{type(error).__name__}: {error}"
    return flash_attn, getattr(flash_attn, "__version__", "unknown")
