"""The check a person runs (`pixi run rocm-stack-check check`, README's teammate and container commands) fails
when no GPU is usable, its first line naming the cause and the fix; a recipe test (--allow-no-gpu) passes and
says so. With several GPUs each is checked and each line names its GPU."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from rocm_stack_check import check, exit_codes, usable
from rocm_stack_check.attention import Shape
from rocm_stack_check.cli import main

torch = pytest.importorskip("torch")

# A PyTorch as a user's broken environment has it: `import torch` fails on a missing ROCm library, or a ROCm build
# that sees no device. Put first on PYTHONPATH; /dev is redirected the same way.
BROKEN_TORCH = "raise ImportError('libamdhip64.so.7: cannot open shared object file: No such file or directory')\n"
ROCM_TORCH_WITHOUT_GPU = """\
__version__ = "2.14.0+rocm10.1.0"
class version:
    hip = "10.1.0"
    cuda = None
class cuda:
    is_available = staticmethod(lambda: False)
    device_count = staticmethod(lambda: 0)
"""


def run_check(tmp_path: Path, torch_source: str | None, dev: Path | None = None, *flags: str):
    """`rocm-stack-check check` in a child process, as a user runs it, with that PyTorch and /dev."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path / "site"), os.environ.get("PYTHONPATH")]))}
    for name in usable.HIDING:
        env.pop(name, None)
    if torch_source is not None:
        (tmp_path / "site" / "torch").mkdir(parents=True, exist_ok=True)
        (tmp_path / "site" / "torch" / "__init__.py").write_text(torch_source)
    redirect = f"import rocm_stack_check.usable as u, pathlib; u.DEV = pathlib.Path({str(dev)!r}); " if dev else ""
    code = f"import sys; {redirect}from rocm_stack_check.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, "check", *flags], capture_output=True, text=True, env=env,
                          timeout=120)


def test_torch_that_does_not_import_fails_naming_it(tmp_path):
    result = run_check(tmp_path, BROKEN_TORCH)
    assert result.returncode == exit_codes.NO_GPU
    assert result.stdout.splitlines()[0] == (
        "rocm-stack-check check: no-gpu: PyTorch does not import (ImportError: libamdhip64.so.7: cannot open shared "
        "object file: No such file or directory): reinstall this environment (`pixi install`; `pixi run "
        "rocm-stack-check check` runs it there)")
    allowed = run_check(tmp_path, BROKEN_TORCH, None, "--allow-no-gpu", "--json")
    assert allowed.returncode == exit_codes.OK
    assert "GPU checks skipped, allowed by --allow-no-gpu (a recipe test on a build machine)" in allowed.stderr


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU")
def test_a_cpu_only_torch_fails_naming_it(tmp_path):
    result = run_check(tmp_path, None)  # this environment's real PyTorch, a CPU build
    assert result.returncode == exit_codes.NO_GPU
    assert result.stdout.splitlines()[0] == (f"rocm-stack-check check: no-gpu: PyTorch {torch.__version__} is a "
                                             "CPU-only build: install the ROCm build (`pytorch-rocm` from the stack's "
                                             "channel)")


def test_no_dev_kfd_and_a_kfd_that_does_not_open_are_named(tmp_path):
    dev = tmp_path / "dev"
    dev.mkdir()
    result = run_check(tmp_path, ROCM_TORCH_WITHOUT_GPU, dev)
    assert result.returncode == exit_codes.NO_GPU
    first = result.stdout.splitlines()[0]
    assert first.startswith("rocm-stack-check check: no-gpu: PyTorch 2.14.0+rocm10.1.0 (HIP 10.1.0) sees no GPU: "
                            f"no {dev / 'kfd'}: the amdgpu driver is not loaded")
    assert "`--device /dev/kfd --device /dev/dri`" in first
    if os.geteuid() == 0:
        (dev / "kfd").mkdir()  # root opens any device file; a folder cannot be opened for writing either
    else:
        (dev / "kfd").write_text("")
        (dev / "kfd").chmod(0)
    first = run_check(tmp_path, ROCM_TORCH_WITHOUT_GPU, dev).stdout.splitlines()[0]
    assert f"sees no GPU: cannot open {dev / 'kfd'} (" in first
    assert "add your user to the render and video groups (`sudo usermod -aG render,video $USER`" in first
    assert "`--group-add render --group-add video`" in first


def test_every_gpu_is_checked_and_named_on_its_lines(monkeypatch, capsys):
    """Two GPUs, stood in by the CPU (PyTorch's flash kernel runs there): a block of lines for each, each line
    naming its GPU, and the worst status of the two."""
    names = {0: ("NVIDIA H200", 9, 0), 1: ("NVIDIA H100", 9, 0)}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: SimpleNamespace(
        name=names[i][0], major=names[i][1], minor=names[i][2], total_memory=2**37))
    monkeypatch.setattr(torch.cuda, "device", lambda i: __import__("contextlib").nullcontext())
    monkeypatch.setattr(torch.version, "cuda", "12.8")
    monkeypatch.setattr(check, "torch_device", lambda index: "cpu")
    monkeypatch.setattr(check, "REPRESENTATIVE_SHAPE", Shape(1, 2, 64, 16))  # seconds on the CPU, not minutes
    monkeypatch.setattr(torch.backends.cuda, "cudnn_sdp_enabled", lambda: False)
    code = main(["check"])
    out = capsys.readouterr().out.splitlines()
    assert code == exit_codes.OK, out
    assert "  2 GPUs visible: each is checked, and named on every line about it" in out
    assert "  GPU 0: NVIDIA H200 [sm_90], 131072 MiB" in out and "  GPU 1: NVIDIA H100 [sm_90], 131072 MiB" in out
    for index in (0, 1):
        runs = [line for line in out if line.startswith(f"  GPU {index} forced FLASH_ATTENTION fwd+bwd, flash ")]
        assert len(runs) == 2 and all(": ok (" in line for line in runs), out
    # a package's test for another architecture: no GPU here is that one
    assert main(["check", "--expect-arch", "gfx1151"]) == exit_codes.NO_GPU
    assert capsys.readouterr().out.splitlines()[0] == (
        "rocm-stack-check check: no-gpu: no GPU here is the expected gfx1151 (PyTorch sees sm_90, sm_90)")
    # the worst status of the GPUs: one whose Flash computes wrong fails the whole check
    report = {"sdpa": {}, "gpus": [{"flash_runs": [{"passed": True}], "flash_attn": {"installed": False},
                                    "expectations": None},
                                   {"flash_runs": [{"passed": False}], "flash_attn": {"installed": False},
                                    "expectations": None}]}
    assert check.decide_status(report) == ("flash-unusable", exit_codes.FAILED)
