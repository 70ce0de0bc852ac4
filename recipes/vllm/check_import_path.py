"""vllm's recipe test: vLLM's own import path on ROCm (v0.33.0), not a hand-picked op (an op named here broke silently
when vLLM 0.33 moved rms_norm from vllm._C to vllm._C_stable_libtorch).

1. The platform module `current_platform` resolves to on ROCm, vllm/platforms/rocm.py: at import it loads amdsmi,
   vllm._C, vllm._C_stable_libtorch and vllm._rocm_C, logging "Failed to import from ..." for each that fails.
2. Its `import_kernels()`, which the engine calls at start (vllm._C, vllm._moe_C_stable_libtorch, vllm._rocm_C,
   the last two under contextlib.suppress(ImportError)).
3. Every module `vllm serve` imports at start: the console script and the OpenAI server, the engine and its
   engine-core process, the executors, the worker class RocmPlatform.check_and_update_config sets
   (vllm.v1.worker.gpu_worker.Worker, rocm.py:1188), its model runner, and each attention backend the platform
   may pick (rocm.py _get_backend_priorities, standard and MLA).
Any "Failed to import" vLLM logs on this path fails the test, and so does any compiled extension module the package
installed under vllm/ that does not load after `import torch` (the suppressed ones fail silently in vLLM).

On a machine without an AMD GPU (no /dev/kfd, a build machine) rocm.py cannot ask the GPU for its architecture at
import (_get_gcn_arch: amdsmi, then torch.cuda.get_device_properties), so the answer is the architecture this
package was built for ($VLLM_CHECK_GPU_ARCH), and current_platform is set to RocmPlatform() as vLLM's own tests set
it (tests/test_config.py). With a GPU, vLLM resolves the platform itself and it must be ROCm.
"""
import importlib
import importlib.machinery
import logging
import os
import pathlib
import sys
import types

import torch

failures = []


class _FailedImports(logging.Handler):
    def emit(self, record):
        message = record.getMessage()
        if message.startswith("Failed to import"):
            failures.append(f"{record.name}: {message}")


import vllm  # noqa: E402
import vllm.logger  # noqa: E402,F401  (configures the "vllm" logger every vLLM module logs under)

logging.getLogger("vllm").addHandler(_FailedImports(logging.WARNING))

has_gpu = os.path.exists("/dev/kfd")
if not has_gpu:
    arch = os.environ["VLLM_CHECK_GPU_ARCH"]
    torch.cuda.get_device_properties = lambda *args, **kwargs: types.SimpleNamespace(gcnArchName=arch)

import vllm.platforms  # noqa: E402
from vllm.platforms import rocm  # noqa: E402

if has_gpu:
    platform = vllm.platforms.current_platform
    if not isinstance(platform, rocm.RocmPlatform):
        sys.exit(f"an AMD GPU is here (/dev/kfd) but vLLM resolves {type(platform).__name__}, not ROCm")
else:
    vllm.platforms._current_platform = vllm.platforms.current_platform = rocm.RocmPlatform()
vllm.platforms.current_platform.import_kernels()

SERVE_PATH = (
    "vllm.entrypoints.cli.main",  # the `vllm` console script (pyproject.toml [project.scripts])
    "vllm.entrypoints.cli.serve",
    "vllm.entrypoints.openai.api_server",
    "vllm.v1.engine.async_llm",
    "vllm.v1.engine.core",
    "vllm.v1.executor.multiproc_executor",
    "vllm.v1.executor.uniproc_executor",
    "vllm.v1.worker.gpu_worker",
    "vllm.v1.worker.gpu_model_runner",
)
for module in SERVE_PATH:
    importlib.import_module(module)
backends = {backend for use_mla in (False, True)
            for backend in rocm._get_backend_priorities(use_mla=use_mla, use_sparse=False)}
# Without a GPU, Triton's HIP driver is not active and vLLM replaces triton with a placeholder
# (vllm/triton_utils/importing.py), which the Triton attention backends cannot import: they are imported where a
# GPU is, as on every user's machine.
from vllm.triton_utils import HAS_TRITON  # noqa: E402

if HAS_TRITON:
    for backend in sorted(backends, key=lambda backend: backend.name):
        backend.get_class()
else:
    print(f"no active Triton driver (no GPU): vLLM disables Triton here, so its {len(backends)} attention backends "
          "are imported where a GPU is")

package = pathlib.Path(vllm.__file__).parent
extensions = sorted(f"vllm.{path.name.split('.')[0]}" for path in package.iterdir()
                    if any(path.name.endswith(suffix) for suffix in importlib.machinery.EXTENSION_SUFFIXES))
if not extensions:
    failures.append(f"no compiled extension module under {package}")
for name in extensions:
    try:
        importlib.import_module(name)
    except ImportError as error:
        failures.append(f"{name}: {error!r}")
if failures:
    sys.exit("vLLM's ROCm import path failed:\n  " + "\n  ".join(failures))
print(f"vLLM's ROCm import path: {len(SERVE_PATH)} serve modules, "
      f"{len(backends) if HAS_TRITON else 0} attention backends, extensions {', '.join(extensions)}")
