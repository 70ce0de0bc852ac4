"""The PyPI table (variants/pypi.yaml): PyPI-only dependencies, each pinned by one file and its sha256, which
the one recipe in recipes/pypi is rendered from once per entry (`recipes_for_table`), so a repackaged
release is planned, built before its dependents, hashed and tested like any other package; the file's
sha256 is checked when it is downloaded. `orchestrate pypi add` (orchestrate/pypi.py) writes the entries.
"""
from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name

from . import glibc
from .errors import UserError
from .yaml_files import read_mapping

TABLE_FILE = "pypi.yaml"
RECIPE_FOLDER = "pypi"  # recipes/pypi/recipe.yaml: the one recipe every entry is rendered from
ENTRY_KEYS = ("pypi", "version", "file", "url", "sha256", "noarch", "depends", "imports", "summary", "license",
              "evidence", "version_key", "conflicts", "license_file")
SHA256 = re.compile(r"^[0-9a-f]{64}$")
# recipes/pypi/licenses/<conda name>/: license texts of ours for wheels that ship none (an entry's license_file)
LICENSES_FOLDER = "licenses"
LICENSE_FILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass(frozen=True)
class Entry:
    """One repackaged PyPI release."""

    name: str  # the conda package name
    pypi: str  # the PyPI project name
    version: str
    file: str
    url: str
    sha256: str
    noarch: bool
    depends: tuple[str, ...]
    imports: tuple[str, ...] = ()
    summary: str = ""
    license: str = ""
    evidence: str = ""
    version_key: str = ""  # a variants/shared.yaml key that pins the same version (dependents read it)
    conflicts: tuple[str, ...] = ()  # conda packages that install the same modules: never in one environment
    # a wheel that ships no license file: the license text we ship instead, relative to recipes/pypi
    # (licenses/<name>/...); install_wheels.py copies it only where the wheel brings none
    license_file: str = ""


@dataclass
class Table:
    path: Path
    names: dict[str, str]  # canonical PyPI name -> conda-forge name, where they differ
    entries: dict[str, Entry]

    def conda_name(self, pypi_name: str) -> str:
        canonical = canonicalize_name(pypi_name)
        return self.names.get(canonical, canonical)


def load_table(variants_dir: Path, shared: dict | None = None) -> Table:
    """The table, checked; an absent file is an empty table. `shared` (variants/shared.yaml) checks that an
    entry's version_key holds the entry's version."""
    path = variants_dir / TABLE_FILE
    if not path.is_file():
        return Table(path, {}, {})
    data = read_mapping(path)
    if not isinstance(data.get("packages") or {}, dict) \
            or not isinstance(data.get("names") or {}, dict):
        raise UserError(f"{path}: needs 'names' and 'packages' mappings: fix the file")
    names = {canonicalize_name(str(k)): str(v) for k, v in (data.get("names") or {}).items()}
    entries = {str(name): _entry(path, str(name), spec) for name, spec in (data.get("packages") or {}).items()}
    if shared is not None:
        for entry in entries.values():
            if entry.version_key:
                pinned = shared.get(entry.version_key)
                pinned = pinned[0] if isinstance(pinned, list) and len(pinned) == 1 else pinned
                if str(pinned) != entry.version:
                    raise UserError(
                        f"{path}: {entry.name} {entry.version} but variants/shared.yaml {entry.version_key} is "
                        f"{pinned}: run `orchestrate pypi add {entry.pypi}=={pinned}` or fix {entry.version_key}")
    return Table(path, names, entries)


def _entry(path: Path, name: str, spec) -> Entry:
    if not isinstance(spec, dict):
        raise UserError(f"{path}: packages.{name} must be a mapping: run `orchestrate pypi add NAME==VERSION`")
    missing = [k for k in ("pypi", "version", "file", "url", "sha256") if not spec.get(k)]
    if missing:
        raise UserError(f"{path}: packages.{name} lacks {', '.join(missing)}: run `orchestrate pypi add "
                        f"{spec.get('pypi') or name}=={spec.get('version') or 'VERSION'}`")
    unknown = sorted(set(spec) - set(ENTRY_KEYS))
    if unknown:
        raise UserError(f"{path}: packages.{name} has unknown keys {', '.join(unknown)}: the keys are {', '.join(ENTRY_KEYS)}")
    if not SHA256.match(str(spec["sha256"])):
        raise UserError(f"{path}: packages.{name} sha256 is not 64 hex digits: run `orchestrate pypi add "
                        f"{spec['pypi']}=={spec['version']}`")
    license_file = str(spec.get("license_file") or "")
    if license_file and not license_file_path(name).match(license_file):
        raise UserError(f"{path}: packages.{name} license_file {license_file!r} is not a file under "
                        f"recipes/{RECIPE_FOLDER}/{LICENSES_FOLDER}/{name}/: run `orchestrate pypi add {spec['pypi']}=="
                        f"{spec['version']} --license-file FILE`")
    return Entry(name, str(spec["pypi"]), str(spec["version"]), str(spec["file"]), str(spec["url"]),
                 str(spec["sha256"]), bool(spec.get("noarch")), tuple(str(d) for d in spec.get("depends") or []),
                 tuple(str(i) for i in spec.get("imports") or []), str(spec.get("summary") or ""),
                 str(spec.get("license") or ""), str(spec.get("evidence") or ""), str(spec.get("version_key") or ""),
                 tuple(str(c) for c in spec.get("conflicts") or []), license_file)


def license_file_path(name: str) -> re.Pattern:
    """What an entry's license_file may be: one file directly in recipes/pypi/licenses/<name>/."""
    return re.compile(rf"^{LICENSES_FOLDER}/{re.escape(name)}/{LICENSE_FILE_NAME.pattern[1:]}")


def recipes_for_table(template: dict, table: Table, recipe_dir: Path) -> list[dict]:
    """The one recipe (its stage-0 dict) filled in for each entry: the recipe is rendered once per entry."""
    for entry in table.entries.values():
        if entry.license_file and not (recipe_dir / entry.license_file).is_file():
            raise UserError(f"{table.path}: packages.{entry.name} license_file {entry.license_file} is not in "
                            f"{recipe_dir}: run `orchestrate pypi add {entry.pypi}=={entry.version} --license-file FILE`")
    return [fill_recipe(template, entry) for entry in table.entries.values()]


def fill_recipe(template: dict, entry: Entry) -> dict:
    data = copy.deepcopy(template)
    data["context"] = {**(data.get("context") or {}), "conda_name": entry.name, "pypi_name": entry.pypi,
                       "version": entry.version, "wheel": entry.file, "url": entry.url, "sha256": entry.sha256,
                       "license_file": entry.license_file}
    build = data.setdefault("build", {})
    requirements = data.setdefault("requirements", {})
    # A pure-Python wheel works with any Python: one noarch package. A binary wheel was built for one
    # CPython (or the stable ABI): its package is linux-64 and pinned to the Python it is installed for.
    if entry.noarch:
        build["noarch"] = "python"
        python = next((d for d in entry.depends if _spec_name(d) == "python"), "python")
    else:
        python = "python ${{ python }}.*"
    requirements["run"] = [python] + [d for d in entry.depends if _spec_name(d) != "python"]
    if not entry.noarch:  # its ELF files need the glibc its manylinux tag promises, else the stack's bound
        requirements["run"].append(glibc.requirement(glibc.wheel_floor(entry.file) or "${{ %s }}" % glibc.STACK_BOUND_KEY))
    if entry.conflicts:  # two packages writing the same module files must not meet in one environment
        requirements["run_constraints"] = [f"{name} <0.0a0" for name in entry.conflicts]
    if entry.imports:
        data["tests"] = [{"python": {"imports": list(entry.imports), "pip_check": False}}] + list(data.get("tests") or [])
    about = data.setdefault("about", {})
    about.update({k: v for k, v in (("summary", entry.summary), ("license", entry.license)) if v})
    return data


def _spec_name(spec: str) -> str:
    return re.split(r"[\s<>=!~]", spec.strip(), maxsplit=1)[0].lower()
