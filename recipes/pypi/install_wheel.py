"""Install a wheel's files into a conda prefix the way pip would, without pip: no network, no build
backend, no dependency resolution (the conda package's run requirements do that).

usage: install_wheel.py WHEEL PREFIX SITE_PACKAGES (relative to PREFIX, e.g. lib/python3.12/site-packages)
"""
import os
import re
import stat
import sys
import zipfile
from pathlib import Path

# <name>-<version>.data/<scheme>/... goes where the scheme points (the wheel spec's install schemes)
SCHEMES = {"purelib": None, "platlib": None, "scripts": "bin", "headers": "include", "data": ""}


def install(wheel: Path, prefix: Path, site_packages: str) -> None:
    site = prefix / site_packages
    with zipfile.ZipFile(wheel) as archive:
        for info in archive.infolist():
            if info.is_dir():
                continue
            parts = info.filename.split("/")
            if parts[0].endswith(".data") and len(parts) > 2:
                scheme = SCHEMES.get(parts[1])
                if parts[1] not in SCHEMES:
                    sys.exit(f"install_wheel: {wheel.name} has unknown install scheme {parts[1]!r}")
                base = site if scheme is None else prefix / scheme
                target = base.joinpath(*parts[2:])
            else:
                target = site.joinpath(*parts)
            if ".." in parts:
                sys.exit(f"install_wheel: {wheel.name} has a path outside its tree: {info.filename}")
            target.parent.mkdir(parents=True, exist_ok=True)
            data = archive.read(info)
            if len(parts) > 2 and parts[1] == "scripts" and data.startswith(b"#!python"):
                data = b"#!/usr/bin/env python" + data[len(b"#!python"):]  # the prefix's python
            target.write_bytes(data)
            mode = (info.external_attr >> 16) & 0o777
            if mode & stat.S_IXUSR or (len(parts) > 2 and parts[1] == "scripts"):
                target.chmod(0o755)
    dist_info = [p for p in site.glob("*.dist-info") if re.match(r"^[^-]+-[^-]+\.dist-info$", p.name)]
    for folder in dist_info:  # as conda-forge's pip installs mark it: conda manages this distribution
        (folder / "INSTALLER").write_text("conda\n")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    install(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3])
