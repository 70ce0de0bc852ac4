"""Install AMD's ROCm Python distributions into a conda prefix the way pip lays them out, and do at build time
what `rocm-sdk init` does at first use (TheRock build_tools/packaging/python/templates/rocm/src/rocm_sdk/_devel.py,
read at TheRock 89553ce3). Standard library only: the recipes run it with $PYTHON, the python of requirements.host.

    "$PYTHON" rocm_wheels.py install SITE_PACKAGES BIN_DIR SOURCE_DIR...   wheels or the `rocm` sdist, one per folder
    "$PYTHON" rocm_wheels.py expand-devel SITE_PACKAGES                      rocm-sdk-devel's _devel.tar -> _rocm_sdk_devel/
    "$PYTHON" rocm_wheels.py link-device SITE_PACKAGES                       a device wheel's files -> _rocm_sdk_devel/
    "$PYTHON" rocm_wheels.py licenses DESTINATION DEVEL_WHEEL_DIR            the devel tree's license files -> DESTINATION/
    "$PYTHON" rocm_wheels.py amd-smi-tree DESTINATION CORE_WHEEL_DIR          core's share/amd_smi (no bundled .so) -> DESTINATION/
    "$PYTHON" rocm_wheels.py install-tree SITE_PACKAGES BIN_DIR TREE          a pure-Python pyproject.toml tree, as its wheel

Why the installed tree differs from `rocm-sdk init` in two places (both keep the prefix complete and read-only):
- init turns the devel tarball's file symlinks into hard links. A conda package stores a hard link as a second
  full copy (checked with rattler-build 0.73), which would double the SDK; the relative symlinks stay. init's
  reason is binaries that locate themselves through /proc/self/exe: resolved into _rocm_sdk_core they still
  find HIP headers, clang's resource dir and the device bitcode there (TheRock build_python_packages.py
  core_artifact_filter keeps core-hip `dev` and amd-llvm `lib`), and ROCM_PATH/HIP_PATH name the devel root.
- init hard-links each device file into the devel tree. Hard links cannot cross conda packages and a copy
  would double the device package, so the device package carries relative symlinks (the manifest's targets are
  already relative to the link's folder). The manifest (.devel_links/<isa>.json) is consumed here and not
  installed: rocm_sdk re-links on every `rocm-sdk path`/`init` when it finds one and accepts only hard links,
  which would rewrite (or, read-only, fail on) a conda-managed prefix.
"""
from __future__ import annotations

import csv
import io
import json
import os
import re
import sys
import tarfile
import zipfile
from pathlib import Path

sys.dont_write_bytecode = True  # builds leave no __pycache__ in the user's checkout of recipes/_shared
sys.path.insert(0, str(Path(__file__).resolve().parent))
from install_wheels import (check_project, install, is_license, keep_license, record_hash,  # noqa: E402 (the one wheel installer)
                            write_console_scripts, write_new)

DEVEL_TARBALLS = ("_devel.tar.xz", "_devel.tar")
DEVEL_PURE_PACKAGE = "rocm_sdk_devel"
LIBRARIES_PLATFORM_PREFIX = "_rocm_sdk_libraries"
DEVEL_PLATFORM_PREFIX = "_rocm_sdk_devel"
INSTALLER = "conda\n"  # as conda-build writes it: pip leaves these files to the package manager


class InstallError(Exception):
    pass


# --- RECORD handling --------------------------------------------------------------------------------------

def _read_record(path: Path) -> list[list[str]]:
    return [row for row in csv.reader(io.StringIO(path.read_text())) if row]


def _write_record(path: Path, rows: list[list[str]]) -> None:
    seen, unique = set(), []
    for row in rows:
        if row[0] not in seen:
            seen.add(row[0])
            unique.append(row)
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(unique)
    path.write_text(buffer.getvalue())


def _dist_info_dirs(site: Path) -> list[Path]:
    return sorted(site.glob("*.dist-info"))


# --- install: wheels and the `rocm` sdist -------------------------------------------------------------------

def _safe_member(name: str) -> str:
    path = Path(name)
    if path.is_absolute() or ".." in path.parts:
        raise InstallError(f"archive member {name!r} would land outside site-packages: refusing it")
    return name


def install_wheel(wheel: Path, site: Path, bin_dir: Path, python_version: str, skip: set[str] = frozenset()) -> Path:
    """Unpack like pip (install_wheels.py, the recipes' one wheel installer). Returns the dist-info folder."""
    with zipfile.ZipFile(wheel) as archive:
        for name in archive.namelist():
            _safe_member(name)
            if name.split("/", 1)[0].endswith(".data"):
                raise InstallError(f"{wheel.name}: {name} is in a .data folder, which AMD's ROCm wheels never use")
    _metadata, dist_info = install(wheel, bin_dir.parent, site, python_version, {}, frozenset(skip))
    return dist_info


def install_sdist_tree(tree: Path, site: Path, bin_dir: Path, python_version: str, pkg_info: str | None = None) -> Path:
    """The `rocm` selector is an sdist (TheRock publish_rocm_to_release_buckets.py: rocm-<version>.tar.gz).
    Its setup.py only chooses pip dependencies for the GPU it finds, which conda decides instead, so it is
    installed as the wheel setuptools would build: src/<packages> plus a dist-info from PKG-INFO (or `pkg_info`,
    for a tree that has none) and the egg-info's entry points."""
    if pkg_info is None and (tree / "PKG-INFO").is_symlink():
        raise InstallError(f"{tree.name}/PKG-INFO is a symlink: refusing to read an sdist's metadata through one")
    pkg_info = pkg_info if pkg_info is not None else (tree / "PKG-INFO").read_text()
    fields = dict(re.findall(r"^(Name|Version): *(.+)$", pkg_info, re.M))
    if "Name" not in fields or "Version" not in fields:
        raise InstallError(f"{tree}/PKG-INFO names no Name/Version: not an sdist")
    fields = {key: value.strip() for key, value in fields.items()}
    check_project(fields["Name"], fields["Version"], f"{tree.name}/PKG-INFO")  # they name the dist-info folder
    source_root = tree / "src" if (tree / "src").is_dir() and not (tree / "src").is_symlink() else tree
    egg_infos = [e for e in _tree_files(tree, tree, dirs=True) if e.name.endswith(".egg-info")]
    packages = [p for p in sorted(source_root.iterdir())
                if p.is_dir() and not p.is_symlink() and (p / "__init__.py").is_file()]
    if not packages:
        raise InstallError(f"{tree}: the sdist holds no Python package")
    rows = []
    for package in packages:
        for path in _tree_files(package, tree):
            if "__pycache__" not in path.parts:
                relative = path.relative_to(source_root)
                with path.open("rb") as source:
                    recorded, size = write_new(site / relative, site, source)
                rows.append([str(relative), recorded, str(size)])
    normalized = re.sub(r"[-_.]+", "_", fields["Name"]).lower()
    dist_info = site / f"{normalized}-{fields['Version']}.dist-info"
    dist_info.mkdir(parents=True, exist_ok=True)
    metadata_files = {
        "METADATA": pkg_info,
        "WHEEL": "Wheel-Version: 1.0\nGenerator: rocm-sdk conda recipe (from the sdist)\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        "INSTALLER": INSTALLER,
        "top_level.txt": "".join(p.name + "\n" for p in packages),
    }
    entry_points = next((e / "entry_points.txt" for e in egg_infos
                         if (e / "entry_points.txt").is_file() and not (e / "entry_points.txt").is_symlink()), None)
    if entry_points is not None:
        metadata_files["entry_points.txt"] = entry_points.read_text()
        rows += [[os.path.relpath(p, site), record_hash(p.read_bytes()), str(p.stat().st_size)]
                 for p in write_console_scripts(entry_points.read_text(), bin_dir.parent, python_version)]
    for name, text in metadata_files.items():
        (dist_info / name).write_text(text)
        rows.append([f"{dist_info.name}/{name}", record_hash(text.encode()), str(len(text.encode()))])
    rows.append([f"{dist_info.name}/RECORD", "", ""])
    _write_record(dist_info / "RECORD", rows)
    return dist_info


def _tree_files(folder: Path, tree: Path, dirs: bool = False) -> list[Path]:
    """The files (or with `dirs`, the folders) under `folder`, sorted, never entering a symlinked folder. A
    symlink is taken as the file it names only where that lies inside `tree` (the unpacked sdist): one that
    points outside (an absolute link to a key, `../..`) stops the install, naming it, and is never read."""
    found, root = [], tree.resolve()
    for current, folders, files in os.walk(folder, followlinks=False):
        for name in sorted(folders + files):
            path = Path(current, name)
            if path.is_symlink() and not path.resolve().is_relative_to(root):
                raise InstallError(f"{str(path.relative_to(tree))!r} in the sdist is a symlink to {os.readlink(path)!r}, "
                                   "outside the sdist: refusing to install it")
        if dirs:
            found += [Path(current, name) for name in folders if not Path(current, name).is_symlink()]
        else:
            found += [Path(current, name) for name in files if Path(current, name).is_file()]
    return sorted(found)


def install_source(folder: Path, site: Path, bin_dir: Path, python_version: str, skip: set[str] = frozenset()) -> Path:
    """One downloaded source folder: an unpacked sdist (rattler-build unpacks .tar.gz) or one wheel file."""
    if (folder / "PKG-INFO").is_file():
        return install_sdist_tree(folder, site, bin_dir, python_version)
    wheels = sorted(folder.glob("*.whl"))
    if len(wheels) != 1:
        raise InstallError(f"{folder} holds {len(wheels)} wheels and no sdist: expected exactly one")
    return install_wheel(wheels[0], site, bin_dir, python_version, skip)


# --- amdsmi: the Python bindings rocm-sdk-core ships as sources ------------------------------------------------

AMD_SMI_TREE = "_rocm_sdk_core/share/amd_smi/"


def amd_smi_tree(destination: Path, folder: Path) -> Path:
    """rocm-sdk-core carries the amdsmi bindings as a source tree, _rocm_sdk_core/share/amd_smi (pyproject.toml,
    amdsmi/; rocm-systems projects/amdsmi/py-interface/CMakeLists.txt), which vLLM's ROCm docs and
    docker/Dockerfile.rocm_base pip-install. Copied out of the wheel as a stream, without the libamd_smi*.so copy
    that CMakeLists.txt may bundle into amdsmi/: the patched loader opens the SDK's own library, the one torch
    loads (two loaded copies of libamd_smi see no GPU)."""
    wheels = sorted(folder.glob("*.whl"))
    if len(wheels) != 1:
        raise InstallError(f"{folder} holds {len(wheels)} wheels: expected exactly the rocm-sdk-core wheel")
    written = 0
    with zipfile.ZipFile(wheels[0]) as wheel:
        for name in wheel.namelist():
            relative = _safe_member(name)[len(AMD_SMI_TREE):]
            if not name.startswith(AMD_SMI_TREE) or name.endswith("/") or re.search(r"\.so(\.[0-9.]+)?$", name):
                continue
            with wheel.open(name) as source:
                write_new(destination / relative, destination, source)
            written += 1
    if not (destination / "pyproject.toml").is_file():
        raise InstallError(f"{wheels[0].name} has no {AMD_SMI_TREE}pyproject.toml ({written} files under it): this "
                           "SDK release no longer ships the amdsmi bindings there; find where it does")
    return destination


def install_tree(tree: Path, site: Path, bin_dir: Path, python_version: str) -> Path:
    """A pure-Python source tree with a pyproject.toml, installed as the wheel setuptools would build from it
    (the project's name and version from its [project] table)."""
    if (tree / "pyproject.toml").is_symlink():
        raise InstallError(f"{tree}/pyproject.toml is a symlink: refusing to read a tree's metadata through one")
    project = (tree / "pyproject.toml").read_text().split("[project]", 1)[-1].split("\n[", 1)[0]
    fields = dict(re.findall(r'^(name|version) *= *"([^"]+)"', project, re.M))
    if "name" not in fields or "version" not in fields or "@" in fields["version"]:
        raise InstallError(f"{tree}/pyproject.toml names no literal [project] name and version: not a built tree")
    pkg_info = f"Metadata-Version: 2.1\nName: {fields['name']}\nVersion: {fields['version']}\n"
    return install_sdist_tree(tree, site, bin_dir, python_version, pkg_info)


# --- what `rocm-sdk init` does ------------------------------------------------------------------------------

def _dist_info_of(site: Path, file_relpath: str) -> Path:
    for dist_info in _dist_info_dirs(site):
        record = dist_info / "RECORD"
        if record.exists() and any(row[0] == file_relpath for row in _read_record(record)):
            return dist_info
    raise InstallError(f"no installed distribution lists {file_relpath} in its RECORD")


def expand_devel(site: Path) -> Path:
    """rocm-sdk-devel ships its tree as rocm_sdk_devel/_devel.tar(.xz) (symlinks cannot go in a wheel). Expand
    it next to the other packages, record the new files in the devel distribution's RECORD and delete the
    tarball, as rocm_sdk._devel._lock_and_expand does; rocm_sdk treats the tree as initialized once the
    tarball is gone and _rocm_sdk_devel/__init__.py exists. Its share/doc/<component>/ license files are kept
    for the package's info/licenses/ (wheel_licenses.py keep_license): TheRock puts share/doc/** in the artifacts'
    `doc` component, which only the devel tree takes (build_python_packages.py and _therock_utils/
    artifact_builder.py at 89553ce3), so the runtime wheels may carry no license file of their own."""
    tarballs = [site / DEVEL_PURE_PACKAGE / name for name in DEVEL_TARBALLS if (site / DEVEL_PURE_PACKAGE / name).exists()]
    if len(tarballs) != 1:
        raise InstallError(f"expected one of {', '.join(DEVEL_TARBALLS)} in {site / DEVEL_PURE_PACKAGE}, found {len(tarballs)}")
    tarball = tarballs[0]
    dist_info = _dist_info_of(site, str(tarball.relative_to(site)))
    rows = _read_record(dist_info / "RECORD")
    listed = {row[0] for row in rows}
    roots, regular = set(), set()
    with tarfile.open(tarball, "r|*") as archive:  # a stream: one member at a time, each written in chunks
        for member in archive:
            roots.add(_safe_member(member.name).split("/", 1)[0])
            member = _extract(archive, member, site, regular)
            if member.isfile() and is_license(member.name, dist_info.name) and "SRC_DIR" in os.environ:
                keep_license(dist_info.name, member.name, (site / member.name).read_bytes())
            if not member.isdir() and member.name not in listed:
                rows.append([member.name, "", ""])
            archive.members = []  # tarfile keeps every header it read; a stream needs none of them again
    _write_record(dist_info / "RECORD", rows)
    tarball.unlink()
    devel_roots = [r for r in roots if r.startswith(DEVEL_PLATFORM_PREFIX)]
    if len(devel_roots) != 1 or not (site / devel_roots[0] / "__init__.py").exists():
        raise InstallError(f"{tarball.name} did not produce one {DEVEL_PLATFORM_PREFIX}*/__init__.py (found {sorted(roots)})")
    return site / devel_roots[0]


def devel_licenses(destination: Path, folder: Path) -> list[Path]:
    """The SDK's license files as the devel tree has them (share/doc/<component>/LICENSE*, NOTICE*, COPYING*),
    written to destination/<component>/ (a second, different file of that name under another share/doc/ keeps
    the path to it) and kept for the package's info/licenses/, read from the rocm-sdk-devel
    wheel's tarball as a stream: the tree is never expanded, and only its license members are written. They are
    the license of the packages that carry AMD's files but none of their own (rocm-sdk-licenses)."""
    wheels = sorted(folder.glob("*.whl"))
    if len(wheels) != 1:
        raise InstallError(f"{folder} holds {len(wheels)} wheels: expected exactly the rocm-sdk-devel wheel")
    written = []
    with zipfile.ZipFile(wheels[0]) as wheel:
        names = set(wheel.namelist())
        dist_info = next((n.split("/", 1)[0] for n in sorted(names) if n.split("/", 1)[0].endswith(".dist-info")), "")
        tarballs = [f"{DEVEL_PURE_PACKAGE}/{name}" for name in DEVEL_TARBALLS if f"{DEVEL_PURE_PACKAGE}/{name}" in names]
        if len(tarballs) != 1:
            raise InstallError(f"{wheels[0].name} holds no {DEVEL_PURE_PACKAGE}/{' or '.join(DEVEL_TARBALLS)}: "
                               "not the rocm-sdk-devel wheel")
        with wheel.open(tarballs[0]) as stream, tarfile.open(fileobj=stream, mode="r|*") as archive:
            for member in archive:
                if not (member.isfile() and is_license(_safe_member(member.name), dist_info)):
                    continue
                data = archive.extractfile(member).read()
                parts = Path(member.name).parts
                doc = next(i for i in range(len(parts) - 2) if parts[i:i + 2] == ("share", "doc"))
                target = destination.joinpath(*parts[doc + 2:])
                if target in written and target.read_bytes() != data:  # another tree's share/doc/ names it too
                    target = destination.joinpath(*parts[:doc], *parts[doc + 2:])
                write_new(target, destination, data=data)
                written.append(target)
                if "SRC_DIR" in os.environ:
                    keep_license(dist_info, member.name, data)
    if not written:
        raise InstallError(f"{wheels[0].name}: its devel tree has no share/doc/<component>/ license file, so the SDK's "
                           "license files are unknown: find where this SDK release ships them and take them from there")
    return written


def _extract(archive: tarfile.TarFile, member: tarfile.TarInfo, site: Path, regular: set[str]) -> tarfile.TarInfo:
    """One member of the devel tarball, through tarfile's `data` filter (PEP 706: no absolute or `..` path, no
    link out of `site`, no device file, no setuid bits) and stricter where it is not: nothing is written through a
    symlink (an earlier member's, or one already in site-packages), a hard link names an earlier regular member
    (`regular`, the names extracted so far), and a symlink's target must resolve inside site-packages as well
    when it is written. Symlinks are kept as the tarball has them (the module doc says why). Returns the member
    as the filter passed it."""
    try:
        member = tarfile.data_filter(member, str(site))
    except tarfile.FilterError as exc:
        raise InstallError(f"the devel tarball's member {member.name!r} is refused ({exc}): it would write or "
                           "point outside site-packages") from None
    target = site / member.name
    _no_symlink_between(site, target, member.name)
    if not member.isfile():
        regular.discard(member.name)  # a later hard link may name only what is a regular file now
    if member.isdir():
        if target.is_symlink() or (target.exists() and not target.is_dir()):
            raise InstallError(f"the devel tarball's folder {member.name!r} replaces a file or link of the same name")
        target.mkdir(parents=True, exist_ok=True)
        return member
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.is_symlink() or target.exists():
        target.unlink()  # replaced, never written through
    if member.issym():
        target.symlink_to(member.linkname)
    elif member.islnk():
        if member.linkname not in regular:
            raise InstallError(f"the devel tarball's hard link {member.name!r} names {member.linkname!r}, which is no "
                               "earlier regular file of the tarball: refusing it")
        os.link(site / member.linkname, target, follow_symlinks=False)
        regular.add(member.name)
    elif member.isfile():
        with archive.extractfile(member) as source:
            write_new(target, site, source)
        target.chmod(0o755 if member.mode & 0o111 else 0o644)
        regular.add(member.name)
    else:
        raise InstallError(f"{member.name}: unsupported tar member type in the devel tarball")
    return member


def _no_symlink_between(root: Path, target: Path, name: str) -> None:
    folder = root
    for part in target.relative_to(root).parts[:-1]:
        folder = folder / part
        if folder.is_symlink():
            raise InstallError(f"the devel tarball's member {name!r} would be written through the symlink "
                               f"{folder.relative_to(root)}: refusing it")


def link_device(site: Path) -> list[Path]:
    """Each rocm-sdk-device-<isa> wheel overlays its files into _rocm_sdk_libraries/ and ships
    _rocm_sdk_libraries/.devel_links/<isa>.json ({"links": [{"relpath", "target"}]}, TheRock
    _therock_utils/py_packaging.py populate_device_files). Link each into the devel tree, record the links in
    the device wheel's RECORD (as rocm_sdk._devel._reconcile_device_links does), and drop the manifest."""
    manifests = sorted(site.glob(f"{LIBRARIES_PLATFORM_PREFIX}*/.devel_links/*.json"))
    if not manifests:
        raise InstallError(f"no {LIBRARIES_PLATFORM_PREFIX}*/.devel_links/*.json: not a rocm-sdk-device wheel")
    links = []
    for manifest in manifests:
        overlay = manifest.parent.parent
        devel_root = site / (DEVEL_PLATFORM_PREFIX + overlay.name[len(LIBRARIES_PLATFORM_PREFIX):])
        manifest_relpath = str(manifest.relative_to(site))
        dist_info = _dist_info_of(site, manifest_relpath)
        rows = [row for row in _read_record(dist_info / "RECORD") if row[0] != manifest_relpath]
        for link in json.loads(manifest.read_text()).get("links", []):
            destination = devel_root / _safe_member(link["relpath"])
            resolved = (destination.parent / link["target"]).resolve()
            if not resolved.is_relative_to(overlay.resolve()) or not resolved.is_file():
                raise InstallError(f"{manifest.name}: link {link['relpath']} -> {link['target']} does not name a file of this wheel")
            destination.parent.mkdir(parents=True, exist_ok=True)
            destination.symlink_to(link["target"])
            rows.append([str(destination.relative_to(site)), "", ""])
            links.append(destination)
        _write_record(dist_info / "RECORD", rows)
        manifest.unlink()
        if not any(manifest.parent.iterdir()):
            manifest.parent.rmdir()
    return links


def main(argv: list[str]) -> int:
    try:
        command, site, *rest = argv
        site = Path(site)
        python_version = os.environ.get("PYTHON_VERSION") or "{}.{}".format(*sys.version_info[:2])
        if command == "install":
            bin_dir, *folders = rest
            skip = set(filter(None, os.environ.get("ROCM_WHEELS_SKIP", "").split(":")))
            for folder in folders:
                install_source(Path(folder), site, Path(bin_dir), python_version, skip)
        elif command == "expand-devel":
            expand_devel(site)
        elif command == "link-device":
            link_device(site)
        elif command == "licenses":
            [folder] = rest
            devel_licenses(site, Path(folder))
        elif command == "amd-smi-tree":
            [folder] = rest
            amd_smi_tree(site, Path(folder))
        elif command == "install-tree":
            bin_dir, tree = rest
            install_tree(Path(tree), site, Path(bin_dir), python_version)
        else:
            raise ValueError(command)
    except (InstallError, OSError, ValueError, KeyError, EOFError, UnicodeDecodeError, zipfile.BadZipFile,
            tarfile.TarError) as exc:
        print(f"rocm_wheels.py: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
