"""Why no GPU is usable here, in one line with its fix: what `check` says, and exits 3 on, when a person runs it.

The commonest faults of a fresh install, in a container or on a desktop: PyTorch does not import, a CPU-only
PyTorch, no /dev/kfd (the amdgpu driver not loaded, or the container started without the device), /dev/kfd or
the render node not openable (the user is not in the `render` group), or the GPUs hidden by a variable."""
from __future__ import annotations

import os
from pathlib import Path

DEV = Path("/dev")  # where the kernel's device files are; tests point it at a fake tree
GROUP_FIX = ("add your user to the render and video groups (`sudo usermod -aG render,video $USER`, then log in "
             "again; in a container: `--group-add render --group-add video`)")
HIDING = ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")


def _open_error(path: Path) -> OSError | None:
    try:
        os.close(os.open(path, os.O_RDWR))
    except OSError as error:
        return error
    return None


def rocm_devices_problem(dev: Path | None = None) -> str:
    """What keeps ROCm from the GPU at the device files, or "" when /dev/kfd and a render node open."""
    dev = dev or DEV
    kfd = dev / "kfd"
    if not kfd.exists():
        return (f"no {kfd}: the amdgpu driver is not loaded (`sudo modprobe amdgpu`; `orchestrate doctor` checks "
                "it), or this container was started without `--device /dev/kfd --device /dev/dri`")
    error = _open_error(kfd)
    if error is not None:
        return f"cannot open {kfd} ({error.strerror}): {GROUP_FIX}"
    nodes = sorted((dev / "dri").glob("renderD*"))
    if not nodes:
        return (f"no render node in {dev / 'dri'}: pass `--device /dev/dri` to the container, or load the amdgpu "
                "driver (`orchestrate doctor`)")
    errors = [(node, _open_error(node)) for node in nodes]
    if all(error is not None for _, error in errors):
        node, error = errors[0]
        return f"cannot open {node} ({error.strerror}): {GROUP_FIX}"
    return ""


def why_no_gpu(platform: dict) -> str:
    """The cause, for a PyTorch that sees no GPU (or does not import), and its fix."""
    if platform["torch_version"] is None:
        return (f"PyTorch does not import ({platform['torch_error']}): reinstall this environment (`pixi install`; "
                "`pixi run rocm-stack-check check` runs it there)")
    torch = f"PyTorch {platform['torch_version']}"
    if platform["gpu_runtime"] == "none":
        return f"{torch} is a CPU-only build: install the ROCm build (`pytorch-rocm` from the stack's channel)"
    hidden = [f"{name}={os.environ[name]}" for name in HIDING if os.environ.get(name) is not None]
    hides = f"; {', '.join(hidden)} may hide it: unset it" if hidden else ""
    raised = f" ({platform['torch_error']})" if platform["torch_error"] else ""
    if platform["gpu_runtime"] == "rocm":
        devices = rocm_devices_problem()
        if devices:
            return f"{torch} (HIP {platform['hip_version']}) sees no GPU: {devices}"
        return (f"{torch} (HIP {platform['hip_version']}) sees no GPU{raised}, though /dev/kfd opens{hides or ''}: "
                "see what ROCm sees with `rocminfo`, and `orchestrate doctor`")
    return f"{torch} (CUDA {platform['cuda_version']}) sees no GPU{raised}{hides}: check the driver with `nvidia-smi`"
