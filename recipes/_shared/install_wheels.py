#!/usr/bin/env python3
"""Install wheels into $PREFIX the way pip lays them out, with the Python standard library (and `packaging` for the
Requires-Dist check): the one wheel installer of the recipes (AMD's PyTorch and ROCm wheels, the PyPI-only packages; rocm_wheels.py adds
what is particular to the ROCm SDK).

Usage (as a recipe's build script; each wheel is a `file_name:` source in the work dir):
    "$PYTHON" "$RECIPE_DIR/../_shared/install_wheels.py" WHEEL...
    "$PYTHON" "$RECIPE_DIR/../_shared/install_wheels.py" --licenses-only WHEEL...   (their license files, nothing else)
Reads: PREFIX, PYTHON_VERSION ("3.12": the site-packages the package is for, and the Python whose markers
  apply; not taken from the interpreter running this script), SATISFIED_BY (space-separated conda names of the
  recipe's run requirements; unset: the Requires-Dist check is skipped, for packages whose run
  requirements are translated from that same metadata), SKIP_FILES (colon-separated wheel members that
  another package of the recipe set already installs), SKIP_FILES_MATCHING (space-separated fnmatch patterns of
  members the recipe leaves out, for names holding a colon: torch_gfx90a:xnack+.kpack).
Does: unpacks every wheel into lib/pythonX.Y/site-packages (its .data/ folders where pip puts them),
  merging trees (a device wheel's files land inside torch/, as pip does) and refusing to overwrite a
  file another wheel brought; writes each dist-info's INSTALLER and RECORD for the installed paths;
  writes console_scripts wrappers into bin/ (relocatable: they run the python next to them), and a
  `#!python` script of a wheel's .data/scripts gets the environment's python; then checks that every Requires-Dist of every
  wheel that applies where the package is installed (its marker evaluated for Linux x86_64 and CPython PYTHON_VERSION,
  no extra asked for: `python_version < "3.10"` and `extra == "device-gfx942"` lines do not apply) is satisfied by a
  wheel installed here or by a conda package named in SATISFIED_BY, so a new requirement in AMD's metadata fails the
  build instead of the user's import. That check needs the `packaging` module (markers are PEP 508's grammar, which
  only packaging evaluates correctly); everything else here is the standard library, so a recipe that sets
  SATISFIED_BY has `packaging` beside `python` in requirements.host (the python that runs this script as
  $PYTHON), and one that does not needs only python.
  Copies each wheel's license files (its dist-info's PEP 639 licenses/ folder and top-level LICENSE*, COPYING*,
  NOTICE*, AUTHORS*, and those of a share/doc/<component>/ folder) to $SRC_DIR/wheel-licenses/, where the
  recipes' `about.license_file: wheel-licenses/**/*` puts them into the package's info/licenses/. A wheel
  with none of its own (AMD's device wheels) takes those of what it was split from, and says so: from
  LICENSES_FROM (colon-separated), each a wheel or folder of wheels that is not installed (the host wheel it
  requires at exactly that wheel's version), or a license folder of a conda package in the build's host
  environment, e.g. $PREFIX/share/licenses/rocm-sdk of rocm-sdk-licenses (taken when that package's version is
  the one the wheel requires).
  A wheel that still has none takes LICENSE_FILE (a license text of the recipe's, relative to $RECIPE_DIR: the
  PyPI table's license_file for a wheel published without its license), and says so.
Nothing is patched: ELF files are written byte for byte (the recipe turns relocation off).
"""
from __future__ import annotations

import base64
import csv
import fnmatch
import hashlib
import io
import json
import os
import re
import shutil
import sys
import zipfile
from email.parser import HeaderParser
from pathlib import Path, PurePosixPath

# PyPI names whose conda package has another name. The ROCm SDK wheels (rocm[libraries] and the rocm_sdk
# selector) are repackaged as our rocm-sdk; torch is pytorch-base (host wheel) or pytorch (per arch, its device
# kernels merged), either satisfies a wheel that needs torch. rocm-bootstrap is not the SDK: it is its own PyPI
# project ("GPU detection and target groupings"), repackaged under its own name (variants/pypi.yaml).
CONDA_NAMES = {
    "rocm": {"rocm-sdk"},
    "torch": {"pytorch", "pytorch-base"},
    "typing-extensions": {"typing_extensions"},
}


LICENSE_DIR = "wheel-licenses"
LICENSE_NAME = re.compile(r"^(LICEN[CS]E|COPYING|NOTICE|AUTHORS)", re.IGNORECASE)
# What a license-less wheel's package says about the license files it carries instead.
HOST_LICENSE_NOTE = "LICENSES-FROM-HOST-WHEEL.txt"
# AMD's kpack-split device wheels carry no license file, by their makers' source:
# - amd_torch_device_<gfx|family>, amd_torchvision_device_<gfx>: rocm_kpack's wheel splitter writes a device wheel's
#   dist-info as METADATA, WHEEL, top_level.txt and RECORD only (WheelSplitter._create_device_wheel,
#   https://github.com/ROCm/rocm-systems/blob/7d605fca43de8be3e8423ccfe60a9328d8b5698e/shared/kpack/python/rocm_kpack/wheel_splitter.py);
# - rocm_sdk_device_<gfx>: TheRock's template has no LICENSE and sets no license_files
#   (https://github.com/ROCm/TheRock/blob/89553ce3746eda74ade42557470d25e37c91b6f0/build_tools/packaging/python/templates/rocm-sdk-device/setup.py),
#   and its files are only the artifacts' `lib` component
#   (https://github.com/ROCm/TheRock/blob/89553ce3746eda74ade42557470d25e37c91b6f0/build_tools/build_python_packages.py#L594-L621),
#   never `doc`, which takes share/doc/**
#   (https://github.com/ROCm/TheRock/blob/89553ce3746eda74ade42557470d25e37c91b6f0/build_tools/_therock_utils/artifact_builder.py#L100).
# Read from source, not from the published wheels: unverified: `unzip -l` of stable.repo.amd.com's 10.1.0
# amd_torch_device_gfx942 and rocm_sdk_device_gfx942 wheels verifies it. Each is part of the host wheel it pins
# at its exact version (Requires-Dist: torch == <version>; rocm-sdk-libraries==<version>), whose license covers it.


def is_license(member: str, dist_info: str) -> bool:
    parts = PurePosixPath(member).parts
    if parts[0] == dist_info:
        return (len(parts) > 2 and parts[1] == "licenses") or (len(parts) == 2 and bool(LICENSE_NAME.match(parts[1])))
    in_doc_folder = any(parts[i:i + 2] == ("share", "doc") for i in range(len(parts) - 2))
    return in_doc_folder and bool(LICENSE_NAME.match(parts[-1]))


def fail(message: str) -> None:
    print(f"install_wheels: {message}", file=sys.stderr)
    sys.exit(1)


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def conda_names_for(pypi_name: str) -> set[str]:
    return CONDA_NAMES.get(pypi_name, {pypi_name})


def record_hash(data: bytes) -> str:
    return record_digest(hashlib.sha256(data))


def record_digest(digest) -> str:
    return "sha256=" + base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode()


# The grammar of what an upstream archive names, checked before any of it becomes a path or code: a console
# script's name is one file name in bin/ (no separator, no leading dot), its object reference dotted Python
# identifiers (PyPA entry-points spec: `module.sub:attr.attr [extras]`); project names and versions as PyPA's
# name-normalization spec and PEP 440 (the canonical pattern of PEP 440's appendix) define them.
SCRIPT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")
PROJECT_NAME = re.compile(r"[A-Z0-9]|[A-Z0-9][A-Z0-9._-]*[A-Z0-9]", re.IGNORECASE)
PEP440_VERSION = re.compile(r"""
    v?(?:[0-9]+!)?[0-9]+(?:\.[0-9]+)*
    (?:[-_.]?(?:a|b|c|rc|alpha|beta|pre|preview)[-_.]?[0-9]*)?
    (?:-[0-9]+|[-_.]?(?:post|rev|r)[-_.]?[0-9]*)?
    (?:[-_.]?dev[-_.]?[0-9]*)?
    (?:\+[a-z0-9]+(?:[-_.][a-z0-9]+)*)?""", re.VERBOSE | re.IGNORECASE)


def dotted_name(text: str) -> bool:
    return all(part.isidentifier() and part.isascii() for part in text.split("."))


def check_project(name: str, version: str, source: str) -> None:
    """A distribution's Name and Version, before they name a dist-info folder."""
    if not PROJECT_NAME.fullmatch(name or ""):
        fail(f"{source} names the project {name!r}, which is no valid project name: refusing to install it")
    if not PEP440_VERSION.fullmatch(version or ""):
        fail(f"{source} gives the version {version!r}, which is no PEP 440 version: refusing to install it")


def write_new(target: Path, root: Path, source=None, data: bytes = b"") -> tuple[str, int]:
    """Write a file at `target`, which must lie under `root` with no symlink on the way and is never written
    through (an existing file or link there is replaced): `data`, then `source` (a file object) streamed in 1 MiB
    chunks. Returns its RECORD hash and size, computed while writing, so no member is ever held whole in memory."""
    relative = target.relative_to(root)
    folder = root
    for part in relative.parts[:-1]:
        folder = folder / part
        if folder.is_symlink():
            fail(f"{str(relative)!r} would be written through the symlink {str(folder.relative_to(root))!r}: refusing it")
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.is_symlink() or target.exists():
        target.unlink()
    descriptor = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with open(descriptor, "wb") as out:
        writer = HashingWriter(out)
        writer.write(data)
        if source is not None:
            shutil.copyfileobj(source, writer, 1 << 20)
    return record_digest(writer.digest), writer.size


class HashingWriter:
    """A file's writer that hashes what passes through it (RECORD's sha256 and size, with no second read)."""

    def __init__(self, out):
        self.out, self.digest, self.size = out, hashlib.sha256(), 0

    def write(self, chunk: bytes) -> int:
        self.digest.update(chunk)
        self.size += len(chunk)
        return self.out.write(chunk)


def target_for(member: str, data_dir: str, prefix: Path, site: Path, python_version: str) -> Path:
    """Where pip puts one wheel member (PEP 427 .data/ scheme keys)."""
    parts = PurePosixPath(member).parts
    if member.startswith("/") or ".." in parts:
        fail(f"unsafe path {member!r} in a wheel: refusing to install it")
    if parts[0] != data_dir:
        return site.joinpath(*parts)
    scheme, rest = parts[1], parts[2:]
    roots = {"purelib": site, "platlib": site, "scripts": prefix / "bin", "data": prefix,
             "headers": prefix / "include" / f"python{python_version}"}
    if scheme not in roots:
        fail(f"unknown wheel scheme {scheme!r} in {member!r}")
    return roots[scheme].joinpath(*rest)


# Relocatable (no absolute interpreter path, so the package needs no prefix rewriting): the shell finds the
# environment's python next to the script, then python reads the rest of the file.
SCRIPT = """#!/bin/sh
'''exec' "$(dirname -- "$0")/python{python_version}" "$0" "$@"
' '''
import sys
from {module} import {attribute}
if __name__ == "__main__":
    sys.exit({call}())
"""


def install(wheel: Path, prefix: Path, site: Path, python_version: str, owners: dict[Path, str],
            skip: frozenset[str] = frozenset(), skip_matching: tuple[str, ...] = ()) -> tuple[dict, Path]:
    """Unpack one wheel as pip does; `owners` (target -> wheel) refuses two wheels writing one file. Returns the
    wheel's METADATA and its dist-info folder."""
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        dist_infos = {PurePosixPath(n).parts[0] for n in names if PurePosixPath(n).parts[0].endswith(".dist-info")}
        if len(dist_infos) != 1:
            fail(f"{wheel.name} has {len(dist_infos)} .dist-info folders, not one: not a wheel")
        dist_info = dist_infos.pop()
        data_dir = dist_info[: -len(".dist-info")] + ".data"
        metadata = HeaderParser().parsestr(zf.read(f"{dist_info}/METADATA").decode())
        check_project(metadata["Name"], metadata["Version"], f"{wheel.name}'s METADATA")
        installed: list[Path] = []
        hashes: dict[Path, tuple[str, int]] = {}
        for info in zf.infolist():
            if info.is_dir() or info.filename == f"{dist_info}/RECORD" or info.filename in skip:
                continue
            if any(fnmatch.fnmatchcase(info.filename, pattern) for pattern in skip_matching):
                print(f"install_wheels: {wheel.name}: {info.filename} left out (SKIP_FILES_MATCHING)")
                continue
            target = target_for(info.filename, data_dir, prefix, site, python_version)
            if target in owners:
                fail(f"{wheel.name} and {owners[target]} both install {target.relative_to(prefix)}: the wheels do not fit together")
            owners[target] = wheel.name
            is_script = info.filename.startswith(f"{data_dir}/scripts/")
            # streamed: a member (the devel wheel's uncompressed _devel.tar is gigabytes) is never read whole
            with zf.open(info) as source:
                head = source.read(len(b"#!python")) if is_script else b""
                if head == b"#!python":  # the environment's python, as pip does
                    head = b"#!/usr/bin/env python"
                hashes[target] = write_new(target, prefix, source, head)
            if is_license(info.filename, dist_info) and "SRC_DIR" in os.environ:  # in a rattler-build build
                keep_license(dist_info, info.filename, target.read_bytes())
            mode = (info.external_attr >> 16) & 0o777
            target.chmod(0o755 if (mode & 0o111 or is_script) else 0o644)
            installed.append(target)
        entry_points = zf.read(f"{dist_info}/entry_points.txt").decode() if f"{dist_info}/entry_points.txt" in names else ""
    installed += write_console_scripts(entry_points, prefix, python_version, source=wheel.name)
    dist_path = site / dist_info
    (dist_path / "INSTALLER").write_text("conda\n")
    installed.append(dist_path / "INSTALLER")
    write_record(dist_path, site, installed, hashes)
    if "SRC_DIR" in os.environ:
        kept = Path(os.environ["SRC_DIR"]) / LICENSE_DIR / dist_info
        if not kept.exists():
            take_host_licenses(wheel, metadata, dist_info)
        if os.environ.get("LICENSE_FILE"):
            take_recipe_license(wheel, dist_info, Path(os.environ["LICENSE_FILE"]), brought=kept.exists())
    return metadata, dist_path


def keep_license(dist_info: str, member: str, data: bytes) -> str:
    """A copy in the work dir, under the wheel's dist-info name, for `about.license_file` to pick up; returns
    its path in info/licenses/."""
    parts = PurePosixPath(member).parts
    relative = PurePosixPath(LICENSE_DIR, dist_info, *(parts[1:] if parts[0] == dist_info else parts))
    target = Path(os.environ["SRC_DIR"]) / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    return str(relative)


def exact_pins(requirements: list[str]) -> dict[str, str]:
    """name -> version of every unconditional `name == version` requirement."""
    pins = {}
    for requirement in requirements:
        match = re.fullmatch(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*\(?\s*===?\s*([^\s,;()]+)\s*\)?\s*", requirement)
        if match:
            pins[canonical(match.group(1))] = match.group(2)
    return pins


def license_sources() -> list[Path]:
    """Wheels, and license folders of host packages (a folder without wheels)."""
    sources = []
    for entry in filter(None, os.environ.get("LICENSES_FROM", "").split(":")):
        path = Path(entry)
        wheels = sorted(path.glob("*.whl")) if path.is_dir() else [path]
        sources += wheels or [path]
    return sources


def host_licenses(host: Path, pins: dict[str, str]) -> tuple[str, dict, list[str]] | None:
    """The dist-info, METADATA and license members of `host` where `pins` requires exactly its name and version."""
    if not host.is_file():
        fail(f"{host} (LICENSES_FROM) is missing: neither a source of the recipe nor a package of its "
             "requirements.host provides it")
    with zipfile.ZipFile(host) as zf:
        names = zf.namelist()
        dist_info = next((PurePosixPath(n).parts[0] for n in names if PurePosixPath(n).parts[0].endswith(".dist-info")), "")
        if f"{dist_info}/METADATA" not in names:
            fail(f"{host.name} (LICENSES_FROM) has no .dist-info/METADATA: not a wheel")
        metadata = HeaderParser().parsestr(zf.read(f"{dist_info}/METADATA").decode())
        if pins.get(canonical(metadata["Name"])) != metadata["Version"]:
            return None
        members = [n for n in names if is_license(n, dist_info)]
        kept = [keep_license(dist_info, member, zf.read(member)) for member in members]
    return (dist_info, metadata, kept) if kept else None


def package_licenses(folder: Path, pins: dict[str, str]) -> tuple[str, str, list[str]] | None:
    """The files of `folder`, a license folder that a package of the build's host environment installed (its
    conda-meta record says which), where that package's version is one `pins` requires exactly: "name version",
    why they apply, and their paths as kept for info/licenses/."""
    prefix = Path(os.environ["PREFIX"])
    owner = installed_by(folder, prefix)
    if owner is None:
        fail(f"{folder} (LICENSES_FROM) is neither a wheel nor a license folder of a package in the host environment: "
             "name the wheel, or add the package that installs the folder to requirements.host")
    record, relative, files = owner
    pinned = sorted(name for name, version in pins.items() if version == record["version"])
    if not pinned:
        return None
    label = f"{record['name']}-{record['version']}"
    kept = [keep_license(label, f"{label}/{f[len(relative):]}", (prefix / f).read_bytes()) for f in files]
    return (f"{record['name']} {record['version']}",
            f"It is part of what the conda package {record['name']} {record['version']} holds the license files of "
            f"(in {relative}): it requires {' and '.join(pinned)} at exactly that version, so this package carries "
            "that package's license files", kept)


def installed_by(folder: Path, prefix: Path) -> tuple[dict, str, list[str]] | None:
    """The conda-meta record of the package that installed the files under `folder`, the folder relative to
    the prefix, and those files."""
    try:
        relative = folder.resolve().relative_to(prefix.resolve()).as_posix() + "/"
    except ValueError:
        return None
    for record_file in sorted((prefix / "conda-meta").glob("*.json")):
        record = json.loads(record_file.read_text())
        files = sorted(f for f in record.get("files", []) if f.startswith(relative))
        if files:
            return record, relative, files
    return None


def take_host_licenses(wheel: Path, metadata, dist_info: str) -> None:
    """A wheel that brought no license file takes those of a LICENSES_FROM source that it requires at exactly
    that source's version (the host wheel it was split from, or the license package of the SDK it is part of),
    and a note saying so. Without one, nothing: the recipe's license_file glob then fails the build if the
    package carries no license at all."""
    pins = exact_pins(metadata.get_all("Requires-Dist") or [])
    for source in license_sources():
        if source.is_dir():
            found = package_licenses(source, pins)
            if found is None:
                continue
            origin, why, kept = found
        else:
            found = host_licenses(source, pins)
            if found is None:
                continue
            origin, host_metadata, kept = found
            why = (f"It is the device part of {host_metadata['Name']} {host_metadata['Version']}, which it requires "
                   "at exactly that version, so this package carries the license files of that wheel")
        note = Path(os.environ["SRC_DIR"]) / LICENSE_DIR / dist_info / HOST_LICENSE_NOTE
        note.parent.mkdir(parents=True, exist_ok=True)
        note.write_text(f"{metadata['Name']} {metadata['Version']} carries no license file of its own. {why}:\n"
                        + "".join(f"  {path}\n" for path in kept))
        print(f"install_wheels: {wheel.name} has no license file: the package carries those of {origin} "
              f"({LICENSE_DIR}/{dist_info}/{HOST_LICENSE_NOTE} says so)")
        return


def take_recipe_license(wheel: Path, dist_info: str, license_file: Path, brought: bool) -> None:
    """The recipe's license text for a wheel that brought none; a wheel with its own keeps only those."""
    if brought:
        print(f"install_wheels: {wheel.name} brings its own license files: LICENSE_FILE {license_file} is not used "
              "(remove the table entry's license_file)")
        return
    source = Path(os.environ.get("RECIPE_DIR", ".")) / license_file
    if not source.is_file():
        fail(f"LICENSE_FILE {source} is missing: the recipe names a license text it does not have")
    keep_license(dist_info, f"{dist_info}/{license_file.name}", source.read_bytes())
    print(f"install_wheels: {wheel.name} has no license file: the package carries {license_file} of the recipe "
          f"({LICENSE_DIR}/{dist_info}/{license_file.name})")


def record_row(path: Path, site: Path, hashes: dict[Path, tuple[str, int]]) -> list[str]:
    """A RECORD row: the hash taken while writing, else the file's, read in chunks."""
    if path not in hashes:
        digest, size = hashlib.sha256(), 0
        with path.open("rb") as stream:
            for chunk in iter(lambda: stream.read(1 << 20), b""):
                digest.update(chunk)
                size += len(chunk)
        hashes[path] = (record_digest(digest), size)
    recorded, size = hashes[path]
    return [os.path.relpath(path, site), recorded, str(size)]


def write_record(dist_path: Path, site: Path, installed: list[Path], hashes: dict | None = None) -> None:
    """The dist-info's RECORD for what was installed (csv, as pip writes it)."""
    hashes = {} if hashes is None else hashes
    rows = sorted(record_row(p, site, hashes) for p in installed) + [[f"{dist_path.name}/RECORD", "", ""]]
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(rows)
    (dist_path / "RECORD").write_text(buffer.getvalue())


def console_scripts(entry_points: str, source: str) -> list[tuple[str, str, str]]:
    """(name, module, attribute path) of each console_scripts entry, every part checked against its grammar
    (SCRIPT_NAME, dotted identifiers) before it becomes a file name or Python text; anything else stops the
    install, naming the entry and where it came from."""
    entries, section = [], ""
    for line in entry_points.splitlines():
        line = line.strip()
        if line.startswith("["):
            section = line.strip("[]").strip()
        elif section == "console_scripts" and "=" in line:
            name, target = (s.strip() for s in line.split("=", 1))
            module, _, function = target.partition(":")
            function = re.sub(r"\s*\[[^\]]*\]\s*$", "", function).strip()  # extras do not change the call
            if not SCRIPT_NAME.fullmatch(name) or not dotted_name(module.strip()) or not dotted_name(function):
                fail(f"{source}: the console script {line[:120]!r} is not `name = module:function` with a plain file "
                     "name and Python names: refusing to write it")
            entries.append((name, module.strip(), function))
    return entries


def write_console_scripts(entry_points: str, prefix: Path, python_version: str, source: str = "entry_points.txt") -> list[Path]:
    scripts = []
    for name, module, function in console_scripts(entry_points, source):
        path = prefix / "bin" / name
        write_new(path, prefix, data=SCRIPT.format(python_version=python_version, module=module,
                                                   attribute=function.split(".")[0], call=function).encode())
        path.chmod(0o755)
        scripts.append(path)
    return scripts


def marker_environment(python_version: str) -> dict[str, str]:
    """PEP 508 marker values where the package is installed: Linux x86_64 (every repack recipe skips other
    platforms), CPython `python_version`, no extra asked for. The same values as orchestrate/pypi.py
    marker_environment, which translates the PyPI table's Requires-Dist (tests/test_real_metadata.py
    holds the two together)."""
    return {"implementation_name": "cpython", "implementation_version": f"{python_version}.0", "os_name": "posix",
            "platform_machine": "x86_64", "platform_python_implementation": "CPython", "platform_release": "",
            "platform_system": "Linux", "platform_version": "", "python_full_version": f"{python_version}.0",
            "python_version": python_version, "sys_platform": "linux", "extra": ""}


def unsatisfied(requirements: list[str], installed_here: set[str], satisfied_by: set[str],
                python_version: str | None = None, extras: frozenset[str] = frozenset()) -> list[str]:
    """The Requires-Dist lines that apply where the package is installed (markers evaluated for
    marker_environment(python_version), by default the Python running this, which in a build is $PYTHON, the
    host's; a line marked `extra == "x"` only when x is in `extras`) and that neither a wheel installed here nor a
    conda package of SATISFIED_BY provides."""
    try:
        from packaging.requirements import InvalidRequirement, Requirement
    except ImportError:
        fail("the Requires-Dist check (SATISFIED_BY) needs the `packaging` module in the python running this script: "
             "add `packaging` beside `python` to the recipe's requirements.host")
    environment = marker_environment(python_version or "%d.%d" % sys.version_info[:2])
    missing = []
    for line in requirements:
        try:
            requirement = Requirement(line)
        except InvalidRequirement as exc:
            fail(f"Requires-Dist {line!r} is not a PEP 508 requirement ({exc}): the wheel's METADATA is broken")
        marker = requirement.marker
        if marker is not None and not any(marker.evaluate({**environment, "extra": extra}) for extra in {"", *extras}):
            continue
        name = canonical(requirement.name)
        if name in installed_here or conda_names_for(name) & satisfied_by:
            continue
        missing.append(line.strip())
    return missing


def keep_licenses_only(wheel: Path) -> None:
    """The license files of a wheel this package installs none of (the thin `pytorch`, which requires the packages
    that hold torch's files and carries torch's license)."""
    if not wheel.is_file():
        fail(f"{wheel} is missing: the recipe's source did not provide it")
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        dist_info = next((PurePosixPath(n).parts[0] for n in names if PurePosixPath(n).parts[0].endswith(".dist-info")), "")
        kept = [keep_license(dist_info, n, zf.read(n)) for n in names if dist_info and is_license(n, dist_info)]
    if not kept:
        fail(f"{wheel.name} has no license file: --licenses-only has nothing to carry")
    print(f"install_wheels: {wheel.name}: its license files only ({', '.join(kept)})")


def main(argv: list[str]) -> None:
    if argv[:1] == ["--licenses-only"]:
        for wheel in argv[1:] or fail("usage: install_wheels.py --licenses-only WHEEL..."):
            keep_licenses_only(Path(wheel))
        return
    if not argv:
        fail("usage: install_wheels.py WHEEL...")
    prefix = Path(os.environ["PREFIX"])
    python_version = os.environ["PYTHON_VERSION"]
    check = "SATISFIED_BY" in os.environ
    satisfied_by = set(os.environ.get("SATISFIED_BY", "").split())
    skip = frozenset(filter(None, os.environ.get("SKIP_FILES", "").split(":")))
    skip_matching = tuple(os.environ.get("SKIP_FILES_MATCHING", "").split())
    site = prefix / "lib" / f"python{python_version}" / "site-packages"
    owners: dict[Path, str] = {}
    requirements: dict[str, list[str]] = {}
    installed_here = set()
    for wheel in map(Path, argv):
        if not wheel.is_file():
            fail(f"{wheel} is missing: the recipe's source did not provide it")
        try:
            metadata, _ = install(wheel, prefix, site, python_version, owners, skip, skip_matching)
        except (OSError, ValueError, EOFError, zipfile.BadZipFile, UnicodeDecodeError, KeyError) as exc:
            fail(f"{wheel.name} could not be installed: {exc}")
        installed_here.add(canonical(metadata["Name"]))
        requirements[wheel.name] = metadata.get_all("Requires-Dist") or []
        print(f"install_wheels: {wheel.name} -> {site.relative_to(prefix)}")
    for wheel_name, reqs in requirements.items() if check else ():
        missing = unsatisfied(reqs, installed_here, satisfied_by, python_version)
        if missing:
            fail(f"{wheel_name} requires {', '.join(missing)}, which no run requirement of the recipe provides: "
                 f"add the conda package to requirements.run and SATISFIED_BY (or to CONDA_NAMES)")


if __name__ == "__main__":
    main(sys.argv[1:])
