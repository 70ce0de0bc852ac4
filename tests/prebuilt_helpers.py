"""Synthetic AMD wheels with AMD's exact names and layout, served by a loopback PEP 503 index (never AMD).

Sections: shared wheel/index builders; PyTorch wheels (helper h5b). Keep additions as separate functions.
"""
from __future__ import annotations

import base64
import hashlib
import html
import zipfile
from pathlib import Path

# ---------------------------------------------------------------------------------------------------------
# Shared: wheels and a PEP 503 index


def make_wheel(folder: Path, name: str, version: str, tag: str, files: dict[str, str | bytes],
               requires: list[str] = (), extras: dict[str, list[str]] | None = None,
               entry_points: str = "") -> Path:
    """A wheel as pip and AMD's tools write it: <name>-<version>-<tag>.whl with a dist-info (METADATA,
    WHEEL, RECORD with sha256 of every file). `version` may carry a local part (+rocm10.1.0)."""
    dist = name.replace("-", "_")
    dist_info = f"{dist}-{version}.dist-info"
    metadata = [f"Metadata-Version: 2.4", f"Name: {name}", f"Version: {version}"]
    metadata += [f"Requires-Dist: {r}" for r in requires]
    for extra, reqs in (extras or {}).items():
        metadata.append(f"Provides-Extra: {extra}")
        metadata += [f'Requires-Dist: {r}; extra == "{extra}"' for r in reqs]
    contents = dict(files)
    contents[f"{dist_info}/METADATA"] = "\n".join(metadata) + "\n"
    contents[f"{dist_info}/WHEEL"] = f"Wheel-Version: 1.0\nGenerator: rocm-kpack-split-python-wheels\nRoot-Is-Purelib: false\nTag: {tag}\n"
    if entry_points:
        contents[f"{dist_info}/entry_points.txt"] = entry_points
    record = []
    for path, data in contents.items():
        raw = data.encode() if isinstance(data, str) else data
        digest = base64.urlsafe_b64encode(hashlib.sha256(raw).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(raw)}")
    contents[f"{dist_info}/RECORD"] = "\n".join(record + [f"{dist_info}/RECORD,,"]) + "\n"
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / f"{dist}-{version}-{tag}.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:
        for path, data in contents.items():
            info = zipfile.ZipInfo(path)
            info.external_attr = (0o755 if path.endswith(".so") or ".so." in path else 0o644) << 16
            zf.writestr(info, data)
    return wheel


def write_pep503_index(root: Path, wheels: dict[str, list[Path]]) -> None:
    """root/simple/<project>/index.html linking root/files/<wheel>#sha256=<hex> (file names %-encoded as on
    AMD's index: '+' -> %2B)."""
    (root / "files").mkdir(parents=True, exist_ok=True)
    projects = []
    for project, files in wheels.items():
        links = []
        for wheel in files:
            target = root / "files" / wheel.name
            target.write_bytes(wheel.read_bytes())
            sha = hashlib.sha256(target.read_bytes()).hexdigest()
            href = "../../files/" + wheel.name.replace("+", "%2B")
            links.append(f'<a href="{href}#sha256={sha}">{html.escape(wheel.name)}</a><br/>')
        page = root / "simple" / project / "index.html"
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text("<!DOCTYPE html><html><body>\n" + "\n".join(links) + "\n</body></html>\n")
        projects.append(f'<a href="{project}/">{project}</a><br/>')
    (root / "simple" / "index.html").write_text("<html><body>\n" + "\n".join(projects) + "\n</body></html>\n")


def file_url_and_sha256(index_url: str, project: str, file_name: str) -> tuple[str, str]:
    """What `pins --lock` records for one file: its URL and the sha256 fragment of the project page."""
    import re
    import urllib.parse
    import urllib.request

    page_url = f"{index_url}{project}/"
    page = urllib.request.urlopen(page_url).read().decode()
    for href, name in re.findall(r'<a href="([^"]+)">([^<]+)</a>', page):
        if html.unescape(name) == file_name:
            url, _, fragment = urllib.parse.urljoin(page_url, href).partition("#sha256=")
            return url, fragment
    raise AssertionError(f"{file_name} is not on {page_url}")


# ---------------------------------------------------------------------------------------------------------
# PyTorch wheels (helper h5b): the ROCm 10.x multi-arch split (TheRock
# multi_arch_build_portable_linux_pytorch_wheels.yml; rocm_kpack wheel_splitter.py and database_handlers.py)

CP312 = "cp312-cp312-linux_x86_64"
# aotriton image folder and the family device wheel that carries it, per architecture (AotritonHandler)
TORCH_DEVICE_FAMILY = {"gfx1151": ("gfx115x", "gfx115x"), "gfx1100": ("gfx110x", "gfx110x"),
                       "gfx1201": ("gfx120x", "gfx12-0"), "gfx942": ("gfx942", ""), "gfx90a": ("gfx90a", "")}


def torch_wheels(folder: Path, archs: list[str], torch: str = "2.14.0", sdk: str = "10.1.0",
                 triton: str = "3.8.0", vision: str = "0.29.0a0", audio: str = "2.11.0.3") -> dict[str, list[Path]]:
    """AMD's PyTorch set for `archs`, by index project: torch host wheel, amd-torch-device-<gfx> (+ family),
    triton, torchvision (+ amd-torchvision-device-<gfx>), torchaudio."""
    local = f"+rocm{sdk}"
    torch_v, triton_v = torch + local, f"{triton}+git675c5987.rocm{sdk}"
    wheels: dict[str, list[Path]] = {}
    extras = {f"device-{a}": [f"amd-torch-device-{a} == {torch_v}"] for a in archs}
    wheels["torch"] = [make_wheel(folder, "torch", torch_v, CP312, {
        "torch/__init__.py": "from . import _rocm_init\n__version__ = '%s'\n" % torch_v,
        # build_prod_wheels.py get_rocm_init_contents()
        "torch/_rocm_init.py": ("def initialize():\n    import rocm_sdk\n    rocm_sdk.initialize_process(\n"
                                "        preload_shortnames=['amd_comgr', 'amdhip64', 'hipblaslt', 'miopen', 'rccl'],\n"
                                f"        check_version='{sdk}')\n"),
        "torch/lib/libtorch_hip.so": b"\x7fELF stub: kpack reference ../.kpack/torch_@GFXARCH@.kpack",
        "torch/lib/libaotriton_v2.so.0.13": b"\x7fELF stub",
        "torchgen/__init__.py": "",
    }, requires=["filelock", "typing-extensions>=4.10.0", "setuptools", "sympy>=1.13.3", "networkx>=2.5.1",
                 "jinja2", "fsspec>=0.8.5", f"rocm[libraries]=={sdk}", f"triton=={triton_v}", "rocm-bootstrap"],
        extras=extras, entry_points="[console_scripts]\ntorchrun = torch.distributed.run:main\n")]
    for arch in archs:
        image_dir, family = TORCH_DEVICE_FAMILY[arch]
        device_files = {f"torch/.kpack/torch_{arch}.kpack": f"kpack {arch}".encode()}
        requires = [f"torch == {torch_v}", f"rocm-sdk-device-{arch} == {sdk}"]
        if family:
            requires.append(f"amd-torch-device-{family} == {torch_v}")
            family_wheel = make_wheel(folder, f"amd-torch-device-{family}", torch_v, CP312, {
                f"torch/lib/aotriton.images/amd-{image_dir}/flash/attn_fwd/kernel.aks2": b"aks2",
            }, requires=[f"torch == {torch_v}"])
            wheels.setdefault(f"amd-torch-device-{family}", []).append(family_wheel)
        else:
            device_files[f"torch/lib/aotriton.images/amd-{image_dir}/flash/attn_fwd/kernel.aks2"] = b"aks2"
        wheels[f"amd-torch-device-{arch}"] = [make_wheel(folder, f"amd-torch-device-{arch}", torch_v, CP312,
                                                         device_files, requires=requires)]
        wheels[f"amd-torchvision-device-{arch}"] = [make_wheel(
            folder, f"amd-torchvision-device-{arch}", vision + local, CP312,
            {f"torchvision/.kpack/torchvision_{arch}.kpack": b"kpack"},
            requires=[f"torchvision == {vision + local}", f"rocm-sdk-device-{arch} == {sdk}"])]
    wheels["triton"] = [make_wheel(folder, "triton", triton_v, CP312, {
        "triton/__init__.py": f"__version__ = '{triton}'\n", "triton/backends/amd/__init__.py": ""})]
    wheels["torchvision"] = [make_wheel(folder, "torchvision", vision + local, CP312, {
        "torchvision/__init__.py": "", "torchvision/_C.so": b"\x7fELF stub"},
        requires=["numpy", f"torch=={torch_v}", "pillow!=8.3.*,>=5.3.0"])]
    wheels["torchaudio"] = [make_wheel(folder, "torchaudio", audio + local, CP312, {
        "torchaudio/__init__.py": "", "torchaudio/lib/libtorchaudio.so": b"\x7fELF stub"},
        requires=[f"torch=={torch_v}"])]
    return wheels
