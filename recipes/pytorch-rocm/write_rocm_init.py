"""Write torch/_rocm_init.py for a PyTorch built against AMD's ROCm wheels in a conda prefix.

    python write_rocm_init.py SITE_PACKAGES/torch/_rocm_init.py

torch/__init__.py (v2.14.1, git_version 5c488690) imports torch._rocm_init when it exists and calls its
initialize() before it loads libtorch. AMD's own wheels carry the file TheRock writes
(external-builds/pytorch/build_prod_wheels.py get_rocm_init_contents, read at TheRock 89553ce3): it calls
rocm_sdk.initialize_process, which dlopens each named SDK library from site-packages with RTLD_GLOBAL and warns
when the installed SDK is not the one torch was built against. The same file works in a conda prefix, where the
rocm-sdk package installs rocm_sdk and the SDK's wheels as pip would. One difference: TheRock's list is fixed,
and rocm_sdk raises for a listed library the SDK lacks (RCCL on some iGPU families), which would break
`import torch`; here the list keeps the libraries this build's SDK has, the SDK the package requires at run time.
"""
from __future__ import annotations

import sys
from pathlib import Path

# TheRock build_prod_wheels.py LINUX_LIBRARY_PRELOADS at 89553ce3, in its order.
LINUX_LIBRARY_PRELOADS = (
    "amd_comgr", "amd_smi", "amdhip64", "hiprtc", "hipblas", "hipfft", "hiprand", "hipsparse", "hipsparselt",
    "hipsolver", "hipblaslt", "miopen", "hipdnn", "rocm_sysdeps_liblzma", "rocm-openblas", "rocm_smi64",
    "rocprofiler-sdk", "rocprofiler-sdk-roctx", "roctracer64", "roctx64", "rccl", "hipfile",
)


def contents(version: str, preloads: list[str]) -> str:
    names = ", ".join(repr(name) for name in preloads)
    return ("def initialize():\n"
            "    import rocm_sdk\n"
            "    rocm_sdk.initialize_process(\n"
            f"        preload_shortnames=[{names}],\n"
            f"        check_version={version!r})\n")


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: write_rocm_init.py SITE_PACKAGES/torch/_rocm_init.py", file=sys.stderr)
        return 2
    target = Path(argv[0])
    if not target.parent.is_dir():
        print(f"write_rocm_init.py: {target.parent} does not exist: the torch install before this step put nothing there",
              file=sys.stderr)
        return 1
    try:
        import rocm_sdk
    except ImportError as exc:
        print(f"write_rocm_init.py: cannot import rocm_sdk ({exc}); add rocm-sdk to requirements.host", file=sys.stderr)
        return 1
    present, missing = [], []
    for name in LINUX_LIBRARY_PRELOADS:
        try:
            (present if rocm_sdk.find_libraries(name) else missing).append(name)
        except (ModuleNotFoundError, FileNotFoundError, KeyError):
            missing.append(name)
    if not present:
        print(f"write_rocm_init.py: rocm_sdk {rocm_sdk.__version__} finds none of torch's libraries "
              f"({', '.join(LINUX_LIBRARY_PRELOADS)}); is the SDK installed in this prefix?", file=sys.stderr)
        return 1
    target.write_text(contents(rocm_sdk.__version__, present))
    print(f"write_rocm_init.py: {target} preloads {len(present)} libraries, checks ROCm {rocm_sdk.__version__}"
          + (f"; not in this SDK: {', '.join(missing)}" if missing else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
