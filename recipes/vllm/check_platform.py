"""vllm's recipe test: vLLM's own platform detection (vllm/platforms/__init__.py, v0.33.0), which on ROCm opens
amdsmi and counts its processors. Where an AMD GPU is (the amdgpu driver's /dev/kfd), it must resolve to ROCm;
where none is, it says so and passes: a build machine needs no GPU."""
import os
import sys

import amdsmi  # noqa: F401  (a failing import is what leaves vLLM on an unspecified platform)
from vllm.platforms import resolve_current_platform_cls_qualname

platform = resolve_current_platform_cls_qualname()
if not os.path.exists("/dev/kfd"):
    print(f"no AMD GPU seen (/dev/kfd absent): vLLM resolves {platform}; ROCm detection runs where a GPU is")
    sys.exit(0)
if platform != "vllm.platforms.rocm.RocmPlatform":
    sys.exit(f"an AMD GPU is here (/dev/kfd) but vLLM resolves {platform}, not ROCm: amdsmi found no GPU "
             "(python -c 'import amdsmi; amdsmi.amdsmi_init(); print(amdsmi.amdsmi_get_processor_handles())')")
print(f"vLLM detects ROCm: {platform}")
