"""Make the ROCm SDK's own amdsmi bindings importable in place: a .pth file that puts rocm-sdk's
_rocm_sdk_core/share/amd_smi on sys.path (what vLLM's ROCm image does with PYTHONPATH, docker/Dockerfile.rocm_base:130
at v0.33.0), and the distribution's metadata (name and version from that tree's pyproject.toml), so `amdsmi` is an
installed distribution for pip and importlib.metadata.

Why in place and not a copy: the SDK's wrapper finds libamd_smi relative to its own file
(<root>/share/amd_smi/amdsmi/amdsmi_wrapper.py -> <root>/lib/libamd_smi.so.<major>) in both loaders rocm-systems
has shipped: find_smi_library's "# 0." step (amdsmi_wrapper.py at 08514a6c) and the generated _load_library() that
replaced it (projects/amdsmi/tools/generator.py after PR #9340, "relocatable ROCm tree": here.parents[3]/lib/SONAME).
A copy elsewhere in site-packages finds nothing without a patch, and a patch is anchored on one loader's lines.

Usage: python write_path_entry.py CORE_WHEEL_DIR SITE_PACKAGES LICENSE_OUT
Standard library only; runs with the python of requirements.host.
"""
from __future__ import annotations

import re
import sys
import zipfile
from pathlib import Path

TREE = "_rocm_sdk_core/share/amd_smi/"
PTH_NAME = "amdsmi-rocm-sdk.pth"


def fail(message: str) -> None:
    sys.exit(f"amdsmi: {message}")


def project_fields(pyproject: str) -> dict[str, str]:
    project = pyproject.split("[project]", 1)[-1].split("\n[", 1)[0]
    fields = dict(re.findall(r'^(name|version) *= *"([^"]+)"', project, re.M))
    if set(fields) != {"name", "version"} or "@" in fields["version"]:
        fail(f"{TREE}pyproject.toml names no literal [project] name and version: not a configured tree")
    return fields


def main(core_dir: Path, site: Path, license_out: Path) -> None:
    wheels = sorted(core_dir.glob("*.whl"))
    if len(wheels) != 1:
        fail(f"{core_dir} holds {len(wheels)} wheels: expected exactly the rocm-sdk-core wheel")
    with zipfile.ZipFile(wheels[0]) as wheel:
        names = set(wheel.namelist())
        for needed in ("pyproject.toml", "amdsmi/__init__.py", "amdsmi/amdsmi_wrapper.py", "amdsmi/LICENSE"):
            if TREE + needed not in names:
                fail(f"{wheels[0].name} has no {TREE}{needed}: this SDK release no longer ships the amdsmi "
                     "bindings there; find where it does")
        if not any(re.fullmatch(r"_rocm_sdk_core/lib/libamd_smi\.so\.\d+(\.\d+)*", name) for name in names):
            fail(f"{wheels[0].name} has no _rocm_sdk_core/lib/libamd_smi.so.<major>, the library the bindings open")
        fields = project_fields(wheel.read(TREE + "pyproject.toml").decode())
        license_out.parent.mkdir(parents=True, exist_ok=True)
        license_out.write_bytes(wheel.read(TREE + "amdsmi/LICENSE"))
    # a .pth line is a folder relative to the site-packages folder holding the file (site.addpackage)
    (site / PTH_NAME).write_text(TREE.rstrip("/") + "\n")
    dist_info = site / f"{fields['name']}-{fields['version']}.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {fields['name']}\nVersion: {fields['version']}\n"
        "Summary: AMD SMI Python bindings of the ROCm SDK, imported from _rocm_sdk_core/share/amd_smi\n")
    (dist_info / "INSTALLER").write_text("conda\n")
    record = [PTH_NAME, f"{dist_info.name}/METADATA", f"{dist_info.name}/INSTALLER", f"{dist_info.name}/RECORD"]
    (dist_info / "RECORD").write_text("".join(f"{path},,\n" for path in record))
    print(f"amdsmi {fields['version']}: {site / PTH_NAME} -> {TREE}")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        fail("usage: write_path_entry.py CORE_WHEEL_DIR SITE_PACKAGES LICENSE_OUT")
    main(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]))
