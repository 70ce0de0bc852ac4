#!/usr/bin/env python3
"""Install wheels into $PREFIX the way pip lays them out, with the Python standard library only.

Usage (as a recipe's build script; each wheel is a `file_name:` source in the work dir):
    python3 "$RECIPE_DIR/../_shared/install-wheels.py" WHEEL...
Reads: PREFIX, PYTHON_VERSION ("3.12": the site-packages the package is for, not the interpreter
  running this script, which is the build machine's), SATISFIED_BY (space-separated conda names of the
  recipe's run requirements).
Does: unpacks every wheel into lib/pythonX.Y/site-packages (its .data/ folders where pip puts them),
  merging trees (a device wheel's files land inside torch/, as pip does) and refusing to overwrite a
  file another wheel brought; writes each dist-info's INSTALLER and RECORD for the installed paths;
  writes console_scripts wrappers into bin/ as pip does; then checks that every Requires-Dist of every
  wheel (extras aside) is satisfied by a wheel installed here or by a conda package named in
  SATISFIED_BY, so a new requirement in AMD's metadata fails the build instead of the user's import.
Nothing is patched: ELF files are written byte for byte (the recipe turns relocation off).
"""
from __future__ import annotations

import base64
import hashlib
import os
import re
import sys
import zipfile
from email.parser import HeaderParser
from pathlib import Path, PurePosixPath

# PyPI names whose conda package has another name. The ROCm SDK wheels (rocm[libraries], the rocm_sdk
# selector and rocm-bootstrap) are all repackaged as our rocm-sdk; torch is pytorch-base (host wheel)
# or pytorch (per arch, its device kernels merged), either satisfies a wheel that needs torch.
CONDA_NAMES = {
    "rocm": {"rocm-sdk"},
    "rocm-bootstrap": {"rocm-sdk"},
    "torch": {"pytorch", "pytorch-base"},
    "typing-extensions": {"typing_extensions"},
}


def fail(message: str) -> None:
    print(f"install-wheels: {message}", file=sys.stderr)
    sys.exit(1)


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def conda_names_for(pypi_name: str) -> set[str]:
    return CONDA_NAMES.get(pypi_name, {pypi_name})


def record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


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


def console_script(module: str, function: str, prefix: Path) -> str:
    # pip's wrapper; the prefix is replaced at install time (bin/ is the one place prefix detection sees)
    return (f"#!{prefix}/bin/python\n# -*- coding: utf-8 -*-\nimport re\nimport sys\n"
            f"from {module} import {function.split('.')[0]}\n"
            f"if __name__ == \"__main__\":\n"
            f"    sys.argv[0] = re.sub(r\"(-script\\.pyw|\\.exe)?$\", \"\", sys.argv[0])\n"
            f"    sys.exit({function}())\n")


def install(wheel: Path, prefix: Path, site: Path, python_version: str, owners: dict[Path, str]) -> tuple[dict, Path]:
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        dist_infos = {PurePosixPath(n).parts[0] for n in names if PurePosixPath(n).parts[0].endswith(".dist-info")}
        if len(dist_infos) != 1:
            fail(f"{wheel.name} has {len(dist_infos)} .dist-info folders, not one: not a wheel")
        dist_info = dist_infos.pop()
        data_dir = dist_info[: -len(".dist-info")] + ".data"
        metadata = HeaderParser().parsestr(zf.read(f"{dist_info}/METADATA").decode())
        installed: list[Path] = []
        for info in zf.infolist():
            if info.is_dir() or info.filename == f"{dist_info}/RECORD":
                continue
            target = target_for(info.filename, data_dir, prefix, site, python_version)
            if target in owners:
                fail(f"{wheel.name} and {owners[target]} both install {target.relative_to(prefix)}: the wheels do not fit together")
            owners[target] = wheel.name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(zf.read(info))
            mode = (info.external_attr >> 16) & 0o777
            if mode:
                target.chmod(mode)
            installed.append(target)
        entry_points = zf.read(f"{dist_info}/entry_points.txt").decode() if f"{dist_info}/entry_points.txt" in names else ""
    installed += write_console_scripts(entry_points, prefix)
    dist_path = site / dist_info
    (dist_path / "INSTALLER").write_text("conda\n")
    installed.append(dist_path / "INSTALLER")
    record = [f"{os.path.relpath(p, site)},{record_hash(p.read_bytes())},{p.stat().st_size}" for p in installed]
    record.append(f"{dist_info}/RECORD,,")
    (dist_path / "RECORD").write_text("\n".join(sorted(record)) + "\n")
    return metadata, dist_path


def write_console_scripts(entry_points: str, prefix: Path) -> list[Path]:
    scripts, section = [], ""
    for line in entry_points.splitlines():
        line = line.strip()
        if line.startswith("["):
            section = line.strip("[]")
        elif section == "console_scripts" and "=" in line:
            name, target = (s.strip() for s in line.split("=", 1))
            module, _, function = target.partition(":")
            path = prefix / "bin" / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(console_script(module, function.split()[0], prefix))
            path.chmod(0o755)
            scripts.append(path)
    return scripts


def unsatisfied(requirements: list[str], installed_here: set[str], satisfied_by: set[str]) -> list[str]:
    missing = []
    for requirement in requirements:
        spec, _, marker = requirement.partition(";")
        if "extra" in marker:  # optional extras (torch's device-<gfx> selectors): not a run requirement
            continue
        name = canonical(re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", spec).group(1))
        if name in installed_here or conda_names_for(name) & satisfied_by:
            continue
        missing.append(requirement.strip())
    return missing


def main(argv: list[str]) -> None:
    if not argv:
        fail("usage: install-wheels.py WHEEL...")
    prefix = Path(os.environ["PREFIX"])
    python_version = os.environ["PYTHON_VERSION"]
    satisfied_by = set(os.environ.get("SATISFIED_BY", "").split())
    site = prefix / "lib" / f"python{python_version}" / "site-packages"
    owners: dict[Path, str] = {}
    requirements: dict[str, list[str]] = {}
    installed_here = set()
    for wheel in map(Path, argv):
        if not wheel.is_file():
            fail(f"{wheel} is missing: the recipe's source did not provide it")
        metadata, _ = install(wheel, prefix, site, python_version, owners)
        installed_here.add(canonical(metadata["Name"]))
        requirements[wheel.name] = metadata.get_all("Requires-Dist") or []
        print(f"install-wheels: {wheel.name} -> {site.relative_to(prefix)}")
    for wheel_name, reqs in requirements.items():
        missing = unsatisfied(reqs, installed_here, satisfied_by)
        if missing:
            fail(f"{wheel_name} requires {', '.join(missing)}, which no run requirement of the recipe provides: "
                 f"add the conda package to requirements.run and SATISFIED_BY (or to CONDA_NAMES)")


if __name__ == "__main__":
    main(sys.argv[1:])
