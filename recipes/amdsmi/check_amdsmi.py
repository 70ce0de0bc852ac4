"""amdsmi's recipe test: `import amdsmi` as vLLM does (vllm/platforms/rocm.py), then the process's own memory map
says which libamd_smi was opened. Loader-neutral: the old find_smi_library() sets `location`, the generated
_load_library() sets `_loaded_lib_path` and, when nothing loads, installs a stand-in that fails only on the first
call, so a successful import alone proves nothing."""
import pathlib
import sys

import _rocm_sdk_core
import amdsmi  # noqa: F401

core = pathlib.Path(_rocm_sdk_core.__file__).resolve().parent
bindings = pathlib.Path(amdsmi.__file__).resolve()
if not bindings.is_relative_to(core / "share" / "amd_smi"):
    sys.exit(f"amdsmi was imported from {bindings}, not from the SDK's {core / 'share/amd_smi'}: another amdsmi "
             "(a pip-installed one?) shadows it; `pip uninstall amdsmi`")
maps = pathlib.Path("/proc/self/maps").read_text().split("\n")
opened = sorted({line.split()[-1] for line in maps if "/libamd_smi" in line})
if [pathlib.Path(path).resolve().parent for path in opened] != [core / "lib"]:
    sys.exit(f"amdsmi opened {opened or 'no libamd_smi'}, not the SDK's one in {core / 'lib'}")
print("amdsmi opened", opened[0])
