"""Synthetic AMD ROCm 10.1.0 Python artifacts with AMD's exact file names and layout, and a loopback PEP 503 index
serving them with `#sha256=` fragments. Nothing here reaches AMD.

Layout (TheRock build_tools/packaging/python/templates and _therock_utils/py_packaging.py, read at 89553ce3):
  rocm-<v>.tar.gz                               sdist: src/rocm_sdk (the `rocm-sdk` CLI), src/rocm.egg-info
  rocm_sdk_core-<v>-py3-none-linux_x86_64.whl   _rocm_sdk_core/{bin/hipcc, lib/llvm/bin/clang, lib/libamdhip64.so.7,
                                                include/hip, lib/llvm/amdgcn/bitcode}, rocm_sdk_core/_cli.py,
                                                console scripts (hipcc, hipconfig, amdclang, ...)
  rocm_sdk_libraries-<v>-...whl                 _rocm_sdk_libraries/lib/libhipblas.so.3, .kpack/blas_lib.kpm
  rocm_sdk_devel-<v>-...whl                     rocm_sdk_devel/_devel.tar: _rocm_sdk_devel/ with real devel-only files
                                                (lib/cmake/hip/hip-config.cmake, sysdeps headers) and relative
                                                symlinks to everything the runtime wheels carry
  rocm_sdk_device_<gfx>-<v>-...whl              _rocm_sdk_libraries/.kpack/blas_lib_<gfx>.kpack, kernel DBs,
                                                _rocm_sdk_libraries/.devel_links/<gfx>.json; no license file
                                                (install_wheels.py says why), Requires-Dist rocm-sdk-libraries==<v>

The synthetic `rocm_sdk` follows the rules of TheRock's rocm_sdk (rewritten, not copied) that decide whether an
installed tree works: find_libraries imports _rocm_sdk_core / _rocm_sdk_libraries and globs lib/; `path` and
`init` treat the devel tree as initialized when _rocm_sdk_devel/__init__.py exists and the tarball is gone, and
re-link device files (writing into the prefix) whenever a device wheel's RECORD lists a .devel_links manifest
whose links are not hard links.
"""
from __future__ import annotations

import base64
import hashlib
import html
import io
import json
import tarfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

VERSION = "10.1.0"
PLATFORM_TAG = "py3-none-linux_x86_64"

ROCM_SDK_INIT = '''
import importlib, importlib.metadata as md, json
from pathlib import Path
__version__ = "{version}"
LIBRARIES = {{"amdhip64": ("_rocm_sdk_core", "lib", "libamdhip64.so*"),
             "hipblas": ("_rocm_sdk_libraries", "lib", "libhipblas.so*"),
             "rocm-openblas": ("_rocm_sdk_core", "lib/host-math/lib", "librocm-openblas.so.*")}}

def find_libraries(*shortnames):
    paths = []
    for name in shortnames:
        package, relpath, pattern = LIBRARIES[name]
        root = Path(importlib.import_module(package).__file__).parent / relpath
        found = sorted(root.glob(pattern))
        if not found:
            raise FileNotFoundError(f"Could not find rocm library {{name!r}} at {{root}}")
        paths.append(found[0])
    return paths

def initialize_process(*, preload_shortnames=None, check_version=None, **kwargs):
    if check_version and check_version != __version__:
        raise RuntimeError(f"compiled against {{check_version}}, installed {{__version__}}")
    return find_libraries(*(preload_shortnames or []))

def get_devel_root():
    import rocm_sdk_devel
    pure = Path(rocm_sdk_devel.__file__).parent
    devel = pure.parent / "_rocm_sdk_devel"
    if any((pure / t).exists() for t in ("_devel.tar", "_devel.tar.xz")) or not (devel / "__init__.py").exists():
        raise RuntimeError("devel tree not expanded: rocm-sdk init would write into " + str(pure.parent))
    for dist in md.distributions(path=[str(pure.parent)]):
        if not dist.metadata["Name"].startswith("rocm-sdk-device-"):
            continue
        for f in dist.files or []:
            if f.parent.name == ".devel_links" and f.suffix == ".json":
                for link in json.loads(Path(f.locate()).read_text())["links"]:
                    dest = devel / link["relpath"]
                    if dest.is_symlink() or not dest.is_file():
                        raise RuntimeError("device links are not hard links: rocm-sdk init would rewrite " + str(dest))
    return devel
'''

ROCM_SDK_MAIN = '''
import sys
from . import __version__, get_devel_root
def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["version"]:
        print(__version__); return 0
    root = get_devel_root()
    print({"--root": root, "--bin": root / "bin", "--cmake": root / "lib" / "cmake"}[argv[1]])
    return 0
if __name__ == "__main__":
    sys.exit(main())
'''

# What torch's generated _rocm_init.py does (TheRock external-builds/pytorch/build_prod_wheels.py
# get_rocm_init_contents), with two of its preloads.
TORCH_ROCM_INIT = '''
def initialize():
    import rocm_sdk
    return rocm_sdk.initialize_process(preload_shortnames=['amdhip64', 'hipblas'], check_version='{version}')
'''

CORE_CLI = '''
import os, sys, importlib
from pathlib import Path
def _exec(relpath):
    root = Path(importlib.import_module("_rocm_sdk_devel").__file__).parent
    os.execv(root / relpath, [str(root / relpath)] + sys.argv[1:])
def hipcc(): _exec("bin/hipcc")
def hipconfig(): _exec("bin/hipconfig")
def amdclang(): _exec("lib/llvm/bin/amdclang")
'''

CORE_TOOL = "#!/bin/sh\necho \"{name} (synthetic ROCm {version}) $*\"\n"

# runtime files of core and libraries: (wheel, site-packages relative path, content, executable)
CORE_FILES = {
    "_rocm_sdk_core/bin/hipcc": (CORE_TOOL, True),
    "_rocm_sdk_core/bin/hipconfig": ("#!/bin/sh\necho {version}-synthetic\n", True),
    "_rocm_sdk_core/lib/llvm/bin/clang": (CORE_TOOL, True),
    "_rocm_sdk_core/lib/llvm/bin/amdclang": (CORE_TOOL, True),
    "_rocm_sdk_core/lib/libamdhip64.so.7": ("\x7fELF synthetic libamdhip64\n", False),
    "_rocm_sdk_core/lib/host-math/lib/librocm-openblas.so.0": ("\x7fELF synthetic openblas\n", False),
    "_rocm_sdk_core/lib/llvm/amdgcn/bitcode/ockl.bc": ("BC synthetic\n", False),
    "_rocm_sdk_core/include/hip/hip_runtime.h": ("#pragma once\n", False),
}
LIBRARIES_FILES = {
    "_rocm_sdk_libraries/lib/libhipblas.so.3": ("\x7fELF synthetic libhipblas\n", False),
    "_rocm_sdk_libraries/.kpack/blas_lib.kpm": ("kpack manifest\n", False),
}
DEVEL_ONLY_FILES = {
    "_rocm_sdk_devel/__init__.py": "",
    "_rocm_sdk_devel/lib/cmake/hip/hip-config.cmake": "set(hip_FOUND TRUE)\n",
    "_rocm_sdk_devel/lib/rocm_sysdeps/include/libdrm/drm.h": "#pragma once\n",
    # the `doc` component, which only the devel tree takes (rocm_wheels.py expand_devel)
    "_rocm_sdk_devel/share/doc/hip/LICENSE.md": "synthetic license of HIP\n",
}


def device_files(gfx: str) -> dict[str, str]:
    """Relative to _rocm_sdk_libraries/: the kernel pack and a Tensile kernel database for one ISA."""
    return {f".kpack/blas_lib_{gfx}.kpack": f"kernels for {gfx}\n",
            f"lib/rocblas/library/TensileLibrary_lazy_{gfx}.dat": f"kernel db for {gfx}\n"}


def write_wheel(folder: Path, project: str, files: dict[str, tuple[bytes, bool]], entry_points: str = "",
                requires: list[str] = (), license: bool = True) -> Path:
    """One of AMD's ROCm SDK wheels (py3-none-linux_x86_64 at VERSION); make_wheel below writes it."""
    return make_wheel(folder, project, VERSION, PLATFORM_TAG, files, entry_points=entry_points, requires=requires,
                      license=license)


def _text(files: dict[str, tuple[str, bool]]) -> dict[str, tuple[bytes, bool]]:
    return {k: (v.format(name=Path(k).name, version=VERSION).encode(), x) for k, (v, x) in files.items()}


def _devel_tar() -> bytes:
    """_rocm_sdk_devel/: devel-only files verbatim, runtime files as relative symlinks (py_packaging.py
    populate_devel_files), bin/amdclang as the symlink init preserves."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        def add(name: str, data: bytes | None = None, link: str | None = None, mode: int = 0o644) -> None:
            info = tarfile.TarInfo(name)
            info.mtime, info.mode = 0, mode
            if link is not None:
                info.type, info.linkname = tarfile.SYMTYPE, link
                archive.addfile(info)
            else:
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
        for name, text in DEVEL_ONLY_FILES.items():
            add(name, text.encode())
        for runtime in {**CORE_FILES, **LIBRARIES_FILES}:
            top, relpath = runtime.split("/", 1)
            depth = len(Path(relpath).parts)
            add(f"_rocm_sdk_devel/{relpath}", link="/".join([".."] * depth + [top, relpath]))
        add("_rocm_sdk_devel/bin/amdclang", link="../lib/llvm/bin/amdclang")
    return buffer.getvalue()


def _rocm_sdist(folder: Path) -> Path:
    top = f"rocm-{VERSION}"
    members = {
        "PKG-INFO": f"Metadata-Version: 2.1\nName: rocm\nVersion: {VERSION}\nRequires-Dist: rocm-sdk-core=={VERSION}\n",
        "setup.py": "raise SystemExit('not run by the recipe')\n",
        "src/rocm_sdk/__init__.py": ROCM_SDK_INIT.format(version=VERSION),
        "src/rocm_sdk/__main__.py": ROCM_SDK_MAIN,
        "src/rocm.egg-info/PKG-INFO": f"Metadata-Version: 2.1\nName: rocm\nVersion: {VERSION}\n",
        "src/rocm.egg-info/entry_points.txt": "[console_scripts]\nrocm-sdk = rocm_sdk.__main__:main\n",
        "src/rocm.egg-info/top_level.txt": "rocm_sdk\n",
    }
    path = folder / f"rocm-{VERSION}.tar.gz"
    with tarfile.open(path, "w:gz") as archive:
        for name, text in members.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size, info.mtime = len(data), 0
            archive.addfile(info, io.BytesIO(data))
    return path


def write_host_artifacts(folder: Path, core_extra: dict[str, tuple[bytes, bool]] | None = None) -> dict[str, Path]:
    """The four arch-neutral artifacts, keyed like variants/prebuilt.yaml; `core_extra`: more rocm-sdk-core files."""
    folder.mkdir(parents=True, exist_ok=True)
    core_scripts = "[console_scripts]\n" + "".join(
        f"{name} = rocm_sdk_core._cli:{name}\n" for name in ("hipcc", "hipconfig", "amdclang"))
    core = {**_text(CORE_FILES), "_rocm_sdk_core/__init__.py": (b"", False),
            "rocm_sdk_core/__init__.py": (b"", False), "rocm_sdk_core/_cli.py": (CORE_CLI.encode(), False),
            **(core_extra or {})}
    libraries = {**_text(LIBRARIES_FILES), "_rocm_sdk_libraries/__init__.py": (b"", False),
                 "rocm_sdk_libraries/__init__.py": (b"", False)}
    devel = {"rocm_sdk_devel/__init__.py": (b"", False), "rocm_sdk_devel/_devel.tar": (_devel_tar(), False)}
    return {
        "rocm_sdk_core": write_wheel(folder, "rocm-sdk-core", core, core_scripts),
        "rocm_sdk_libraries": write_wheel(folder, "rocm-sdk-libraries", libraries),
        "rocm_sdk_devel": write_wheel(folder, "rocm-sdk-devel", devel),
        "rocm": _rocm_sdist(folder),
    }


def write_device_wheel(folder: Path, gfx: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    files = {f"_rocm_sdk_libraries/{relpath}": (text.encode(), False) for relpath, text in device_files(gfx).items()}
    links = [{"relpath": relpath, "target": "/".join([".."] * len(Path(relpath).parts) + ["_rocm_sdk_libraries", relpath])}
             for relpath in device_files(gfx)]
    files[f"_rocm_sdk_libraries/.devel_links/{gfx}.json"] = (json.dumps({"version": VERSION, "links": links}).encode(), False)
    files["_rocm_sdk_libraries/__init__.py"] = (b"", False)  # the overlay folder is a package (setuptools adds it)
    # TheRock's rocm-sdk-device setup.py: install_requires rocm-sdk-libraries==<version>, and no license file
    return write_wheel(folder, f"rocm-sdk-device-{gfx}", files, requires=[f"rocm-sdk-libraries=={VERSION}"],
                       license=False)


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@dataclass
class PrebuiltIndex:
    """A PEP 503 index in `root`: <root>/<project>/index.html links ../<file>#sha256=<hex>; files at the root."""

    root: Path
    url: str = ""  # set once served, e.g. http://127.0.0.1:PORT/ (with the trailing slash)
    files: dict[str, Path] = field(default_factory=dict)  # artifact key (gfx-qualified for devices) -> file

    def add(self, key: str, project: str, path: Path) -> None:
        self.files[key] = path
        page = self.root / project / "index.html"
        page.parent.mkdir(parents=True, exist_ok=True)
        links = page.read_text() if page.exists() else ""
        links += f'<a href="../{path.name}#sha256={sha256_of(path)}">{path.name}</a><br/>\n'
        page.write_text(links)
        root_page = self.root / "index.html"
        projects = sorted({p.parent.name for p in self.root.glob("*/index.html")})
        root_page.write_text("".join(f'<a href="{p}/">{p}</a><br/>\n' for p in projects))

    def lock_keys(self, gfx: str) -> dict[str, str]:
        """What the orchestrator merges for one architecture from a complete lock: KEY_url and KEY_sha256."""
        keys = {}
        for key, path in self.files.items():
            if ":" in key:
                key, arch = key.split(":")
                if arch != gfx:
                    continue
            keys[f"{key}_url"] = self.url + path.name
            keys[f"{key}_sha256"] = sha256_of(path)
        return keys


def make_index(root: Path, gfxs: list[str], core_extra: dict[str, tuple[bytes, bool]] | None = None) -> PrebuiltIndex:
    """Every SDK artifact of 10.1.0 (host + one device wheel per gfx) on one synthetic index."""
    root.mkdir(parents=True, exist_ok=True)
    index = PrebuiltIndex(root)
    projects = {"rocm_sdk_core": "rocm-sdk-core", "rocm_sdk_libraries": "rocm-sdk-libraries",
                "rocm_sdk_devel": "rocm-sdk-devel", "rocm": "rocm"}
    for key, path in write_host_artifacts(root, core_extra).items():
        index.add(key, projects[key], path)
    for gfx in gfxs:
        index.add(f"rocm_sdk_device:{gfx}", f"rocm-sdk-device-{gfx}", write_device_wheel(root, gfx))
    return index


# =========================================================================================================
# PyTorch wheels (recipes/pytorch-prebuilt): torch host + amd-torch-device-<gfx> (+ family) wheels, triton,
# torchvision (+ device), torchaudio, and a plain PEP 503 index for them.
# ---------------------------------------------------------------------------------------------------------
# Shared: wheels and a PEP 503 index


def make_wheel(folder: Path, name: str, version: str, tag: str, files: dict[str, str | bytes | tuple],
               requires: list[str] = (), extras: dict[str, list[str]] | None = None,
               entry_points: str = "", license: bool = True, metadata: str | None = None) -> Path:
    """A wheel as pip and AMD's tools write it: <name>-<version>-<tag>.whl with a dist-info (METADATA,
    WHEEL, licenses/LICENSE unless `license` is false, as in AMD's device wheels, RECORD with sha256 of every file).
    `version` may carry a local part (+rocm10.1.0). A file is executable when its value is (data, True), and shared
    libraries always are. `metadata`: the METADATA text of the real wheel this one stands for (tests/real_metadata.py),
    written as it is, instead of one made from `requires` and `extras`."""
    dist = name.replace("-", "_")
    dist_info = f"{dist}-{version}.dist-info"
    lines = [f"Metadata-Version: 2.4", f"Name: {name}", f"Version: {version}"]
    lines += [f"Requires-Dist: {r}" for r in requires]
    for extra, reqs in (extras or {}).items():
        lines.append(f"Provides-Extra: {extra}")
        lines += [f'Requires-Dist: {r}; extra == "{extra}"' for r in reqs]
    executable = {path for path, data in files.items() if isinstance(data, tuple) and data[1]}
    contents = {path: data[0] if isinstance(data, tuple) else data for path, data in files.items()}
    if license:  # where PEP 639 puts it; the recipes copy it into info/licenses/
        lines.append("License-File: LICENSE")
        contents[f"{dist_info}/licenses/LICENSE"] = f"synthetic license of {name}\n"
    contents[f"{dist_info}/METADATA"] = metadata if metadata is not None else "\n".join(lines) + "\n"
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
            info.external_attr = (0o755 if path in executable or path.endswith(".so") or ".so." in path else 0o644) << 16
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
TORCH_DEVICE_FAMILY = {"gfx1151": ("gfx115x", "gfx115x"), "gfx1150": ("gfx115x", "gfx115x"), "gfx1100": ("gfx110x", "gfx110x"),
                       "gfx1201": ("gfx120x", "gfx12-0"), "gfx942": ("gfx942", ""), "gfx90a": ("gfx90a", "")}


TRITON_LOCAL = "git669b31ac"  # AMD's 10.1.0 triton: ROCm/triton 669b31ac (variants/prebuilt.yaml `triton` says why)


# TheRock's workflow passes the splitter --device-requires-dist "rocm-sdk-device-@GFXARCH@ == ${ROCM_SDK_VERSION}"
# (https://github.com/ROCm/TheRock/blob/89553ce3746eda74ade42557470d25e37c91b6f0/.github/workflows/multi_arch_build_portable_linux_pytorch_wheels.yml,
# "Split fat wheels (torch + torchvision)")
DEVICE_REQUIRES_DIST = "rocm-sdk-device-@GFXARCH@ == {sdk}"
# The display name the splitter puts in a family/sub-family device wheel's Summary (rocm_bootstrap.lookup_bundle(key)
# .display_name in rocm-bootstrap 0.3.0, https://pypi.org/project/rocm-bootstrap/0.3.0/); a target's is its own name
BUNDLE_DISPLAY = {"gfx115x": "RDNA3.5", "gfx110x": "RDNA3", "gfx12-0": "RDNA4"}


def device_metadata(host: str, version: str, prefix: str, bundle: str, sdk: str, parents: list[str] | None) -> str:
    """A device wheel's METADATA as rocm_kpack's splitter writes it: generate_device_metadata in
    https://github.com/ROCm/rocm-systems/blob/2d9bbf453473e02359187472859c5e3e3d07489e/shared/kpack/python/rocm_kpack/wheel_splitter.py.
    No license field; the host at exactly its version; for a TARGET bundle (`parents` a list), TheRock's
    DEVICE_REQUIRES_DIST for it, then each family/sub-family bundle of its packaging chain that the split produced
    (`parents`), at exactly the host's version; a family/sub-family bundle (`parents` None) gets no @GFXARCH@
    requirement (rocm-sdk-device-* is published per target only: rocm-systems PR #5555, merged 2026-04). `bundle`
    is the bundle's name in the dist name (gfx1151, gfx115x, gfx12-0). The parents' lines come from rocm-systems
    PR #10685 (opened 2026-08-25); whether AMD's 10.1.0 wheels carry them is unverified (docs/index.md says
    what would verify it)."""
    target = parents is not None
    lines = ["Metadata-Version: 2.4", f"Name: {prefix}-{bundle}", f"Version: {version}",
             f"Summary: AMD device kernels ({bundle if target else BUNDLE_DISPLAY[bundle]}) for {host}",
             f"Requires-Dist: {host} == {version}"]
    if target:
        lines.append("Requires-Dist: " + DEVICE_REQUIRES_DIST.format(sdk=sdk).replace("@GFXARCH@", bundle))
        lines += [f"Requires-Dist: {prefix}-{parent} == {version}" for parent in parents]
    return "\n".join(lines) + "\n"


def torch_device_wheels(folder: Path, arch: str, torch_v: str, sdk: str) -> dict[str, Path]:
    """AMD's torch device wheels for one target, by project: amd-torch-device-<arch> and, where AotritonHandler keys
    its aotriton images to a family bundle, amd-torch-device-<family>, which the target's wheel requires."""
    image_dir, family = TORCH_DEVICE_FAMILY[arch]
    image = {f"torch/lib/aotriton.images/amd-{image_dir}/flash/attn_fwd/kernel.aks2": b"aks2"}
    files = {f"torch/.kpack/torch_{arch}.kpack": f"kpack {arch}".encode(), **({} if family else image)}
    wheels = {f"amd-torch-device-{arch}": make_wheel(
        folder, f"amd-torch-device-{arch}", torch_v, CP312, files, license=False,
        metadata=device_metadata("torch", torch_v, "amd-torch-device", arch, sdk, [family] if family else []))}
    if family:
        wheels[f"amd-torch-device-{family}"] = make_wheel(
            folder, f"amd-torch-device-{family}", torch_v, CP312, image, license=False,
            metadata=device_metadata("torch", torch_v, "amd-torch-device", family, sdk, None))
    return wheels


def torch_wheels(folder: Path, archs: list[str], torch: str = "2.14.0", sdk: str = "10.1.0",
                 triton: str = "3.8.0", vision: str = "0.29.0a0", audio: str = "2.11.0.3") -> dict[str, list[Path]]:
    """AMD's PyTorch set for `archs`, by index project: torch host wheel, amd-torch-device-<gfx> (+ family),
    triton, torchvision (+ amd-torchvision-device-<gfx>), torchaudio. The device wheels carry no license file, as
    AMD's wheel splitter writes them (install_wheels.py says where). Every METADATA is the real one: PyPI's wheel of
    the same source with AMD's differences, each from AMD's own source (tests/real_metadata.py says which)."""
    from real_metadata import (CUDA_BUILD_REQUIREMENT, TORCH, TORCHAUDIO, TORCHVISION, TRITON, metadata,
                               splitter_lines, with_version)

    local = f"+rocm{sdk}"
    torch_v, triton_v, vision_v = torch + local, f"{triton}+{TRITON_LOCAL}.rocm{sdk}", vision + local
    wheels: dict[str, list[Path]] = {}
    chains = {a: [a] + ([TORCH_DEVICE_FAMILY[a][1]] if TORCH_DEVICE_FAMILY[a][1] else []) for a in archs}
    torch_metadata = with_version(
        metadata(TORCH), "torch", torch_v, drop=CUDA_BUILD_REQUIREMENT,
        instead=[f"rocm[libraries]=={sdk}", f"triton=={triton_v}"],
        add=splitter_lines("amd-torch-device", torch_v, chains))
    wheels["torch"] = [make_wheel(folder, "torch", torch_v, CP312, {
        "torch/__init__.py": "from . import _rocm_init\n__version__ = '%s'\n" % torch_v,
        # build_prod_wheels.py get_rocm_init_contents()
        "torch/_rocm_init.py": ("def initialize():\n    import rocm_sdk\n    rocm_sdk.initialize_process(\n"
                                "        preload_shortnames=['amd_comgr', 'amdhip64', 'hipblaslt', 'miopen', 'rccl'],\n"
                                f"        check_version='{sdk}')\n"),
        "torch/lib/libtorch_hip.so": b"\x7fELF stub: kpack reference ../.kpack/torch_@GFXARCH@.kpack",
        "torch/lib/libaotriton_v2.so.0.13": b"\x7fELF stub",
        "torchgen/__init__.py": "",
    }, metadata=torch_metadata, entry_points="[console_scripts]\ntorchrun = torch.distributed.run:main\n")]
    for arch in archs:
        for project, wheel in torch_device_wheels(folder, arch, torch_v, sdk).items():
            if wheel not in wheels.setdefault(project, []):  # a family's wheel: once for its members
                wheels[project].append(wheel)
        wheels[f"amd-torchvision-device-{arch}"] = [make_wheel(
            folder, f"amd-torchvision-device-{arch}", vision_v, CP312,
            {f"torchvision/.kpack/torchvision_{arch}.kpack": b"kpack"}, license=False,
            metadata=device_metadata("torchvision", vision_v, "amd-torchvision-device", arch, sdk, []))]
    wheels["triton"] = [make_wheel(folder, "triton", triton_v, CP312, {
        "triton/__init__.py": f"__version__ = '{triton}'\n", "triton/backends/amd/__init__.py": ""},
        metadata=with_version(metadata(TRITON), "triton", triton_v))]
    # torchvision's setup.py pins the torch it was built with; the splitter adds its lines (no family bundles:
    # torchvision has no kernel databases, so one device wheel per target)
    vision_metadata = with_version(
        metadata(TORCHVISION), "torchvision", vision_v, replace={"Requires-Dist: torch (==2.14.0)": f"Requires-Dist: torch (=={torch_v})"},
        add=splitter_lines("amd-torchvision-device", vision_v, {a: [a] for a in archs}))
    wheels["torchvision"] = [make_wheel(folder, "torchvision", vision_v, CP312, {
        "torchvision/__init__.py": "", "torchvision/_C.so": b"\x7fELF stub"}, metadata=vision_metadata)]
    wheels["torchaudio"] = [make_wheel(folder, "torchaudio", audio + local, CP312, {
        "torchaudio/__init__.py": "", "torchaudio/lib/libtorchaudio.so": b"\x7fELF stub"},
        metadata=with_version(metadata(TORCHAUDIO), "torchaudio", audio + local))]
    return wheels


def conda_gcc_layout(build_prefix: Path, *, sysroot: bool = True, cxx: bool = True) -> Path:
    """Where conda-forge's gcc_impl, libstdcxx-devel (with gxx; cxx=False is `gcc` alone) and sysroot_linux-64 put a
    GCC install, libstdc++'s headers and the C library's headers (file names only: tests/test_hip_build.py compiles
    through a working one)."""
    gcc = build_prefix / "lib/gcc/x86_64-conda-linux-gnu/14.3.0"
    gcc.mkdir(parents=True)
    (gcc / "crtbegin.o").touch()
    if cxx:
        (build_prefix / "x86_64-conda-linux-gnu/include/c++/14.3.0").mkdir(parents=True)
        (build_prefix / "x86_64-conda-linux-gnu/include/c++/14.3.0/cmath").touch()
    if sysroot:
        (build_prefix / "x86_64-conda-linux-gnu/sysroot/usr/include").mkdir(parents=True)
        (build_prefix / "x86_64-conda-linux-gnu/sysroot/usr/include/stdio.h").touch()
    return build_prefix
