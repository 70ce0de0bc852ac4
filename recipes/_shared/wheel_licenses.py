"""The license files of the wheels install_wheels.py installs (its sibling: the build scripts run that one): each
wheel's own (its dist-info's PEP 639 licenses/ folder and top-level LICENSE*, COPYING*, NOTICE*, AUTHORS*, and those
of a share/doc/<component>/ folder) copied to $SRC_DIR/wheel-licenses/ for the recipes' `about.license_file:
wheel-licenses/**/*`; for a wheel with none of its own, those of what it was split from (LICENSES_FROM) or the
recipe's LICENSE_FILE, saying so; `--licenses-only`'s copy of a wheel's license files alone. install_wheels.py's
docstring says what each variable means. Standard library only; also what the two scripts share to fail and to
compare project names.
"""
from __future__ import annotations

import json
import os
import re
import sys
import zipfile
from email.parser import HeaderParser
from pathlib import Path, PurePosixPath

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



def fail(message: str) -> None:
    print(f"install_wheels: {message}", file=sys.stderr)
    sys.exit(1)


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def is_license(member: str, dist_info: str) -> bool:
    parts = PurePosixPath(member).parts
    if parts[0] == dist_info:
        return (len(parts) > 2 and parts[1] == "licenses") or (len(parts) == 2 and bool(LICENSE_NAME.match(parts[1])))
    in_doc_folder = any(parts[i:i + 2] == ("share", "doc") for i in range(len(parts) - 2))
    return in_doc_folder and bool(LICENSE_NAME.match(parts[-1]))



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
