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
  Copies (its sibling wheel_licenses.py does) each wheel's license files (its dist-info's PEP 639 licenses/
  folder and top-level LICENSE*, COPYING*, NOTICE*, AUTHORS*, and those of a share/doc/<component>/ folder) to $SRC_DIR/wheel-licenses/, where the
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
import os
import re
import shutil
import sys
import zipfile
from email.parser import HeaderParser
from pathlib import Path, PurePosixPath

# The license files (each wheel's own, or what it was split from) are its sibling's job: found beside this file
# however it is run or loaded (a build runs it by path; rocm_wheels.py and the tests import it).
LICENSES_MODULE = Path(__file__).resolve().with_name("wheel_licenses.py")
sys.dont_write_bytecode = True  # builds leave no __pycache__ in the user's checkout of recipes/_shared
sys.path.insert(0, str(LICENSES_MODULE.parent))
from wheel_licenses import (LICENSE_DIR, canonical, fail, is_license, keep_license, keep_licenses_only,  # noqa: E402
                            take_host_licenses, take_recipe_license)

# PyPI names whose conda package has another name. The ROCm SDK wheels (rocm[libraries] and the rocm_sdk
# selector) are repackaged as our rocm-sdk; torch is pytorch-base (host wheel) or pytorch (per arch, its device
# kernels merged), either satisfies a wheel that needs torch. rocm-bootstrap is not the SDK: it is its own PyPI
# project ("GPU detection and target groupings"), repackaged under its own name (variants/pypi.yaml).
CONDA_NAMES = {
    "rocm": {"rocm-sdk"},
    "torch": {"pytorch", "pytorch-base"},
    "typing-extensions": {"typing_extensions"},
}


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
