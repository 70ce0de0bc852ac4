"""Without NumPy, PyTorch warns "Failed to initialize NumPy" (once per import and call site); the check
tool needs no NumPy, so it says so once, as a note, instead of repeating PyTorch's warning."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

SRC = Path(__file__).resolve().parent.parent / "recipes" / "rocm-stack-check" / "src"
WITHOUT_NUMPY = "import sys; sys.modules['numpy'] = None; "  # `import numpy` now fails, as when it is absent


def run_python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", WITHOUT_NUMPY + code], capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"})


def test_pytorch_itself_warns_without_numpy():
    """The premise: without the check tool's filter, PyTorch prints its warning."""
    assert "Failed to initialize NumPy" in run_python("import torch").stderr


@pytest.mark.parametrize("arguments", [["check", "--allow-no-gpu"], ["check", "--json", "--allow-no-gpu"]])
def test_check_says_once_that_numpy_is_missing(arguments):
    result = run_python(f"from rocm_stack_check.cli import main; sys.exit(main({arguments!r}))")
    assert result.returncode == 0, result.stderr
    assert "Failed to initialize NumPy" not in result.stderr + result.stdout
    assert (result.stdout + result.stderr).count("NumPy is not installed") == 1
