"""`orchestrate pypi add NAME==VERSION`: write or refresh an entry of the PyPI table (variants/pypi.yaml, read by
orchestrate/pypi_table.py) from PyPI: which file, its url and sha256, and the package's run requirements
translated from the wheel's own metadata. Every download goes through orchestrate/web.py.
"""
from __future__ import annotations

import argparse
import datetime
import email.parser
import fnmatch
import hashlib
import importlib.util
import io
import os
import re
import shutil
import urllib.parse
import zipfile
from pathlib import Path

import yaml
from packaging.licenses import InvalidLicenseExpression, canonicalize_license_expression
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from . import glibc, recipes, web
from .architectures import SHARED_VARIANTS_FILE
from .errors import UserError
from .input_hash import SHARED_SCRIPTS
from .options import existing_folder, find_workspace, seconds
from .pypi_table import LICENSE_FILE_NAME, LICENSES_FOLDER, RECIPE_FOLDER, SHA256, Entry, Table, load_table
from .grammar import NotGrammar, checked_file, checked_pin, checked_url
from .yaml_files import read_mapping

PYPI_FILES_HOST = "https://files.pythonhosted.org"
WHEEL_BOUND = 4 * 2**30  # a wheel PyPI's JSON lists without its size: no wheel we add comes near it
TEMPLATE_OR_CONTROL = re.compile(r"\$\{\{|\{\{|\{%|[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # rendered, or acted on by a terminal
# A PyPI file URL is content-addressed: /packages/<2 hex>/<2 hex>/<60 hex>/<file>, whichever host serves it.
CONTENT_PATH = re.compile(r"/packages/([0-9a-f]{2}/[0-9a-f]{2}/[0-9a-f]{60}/[^/]+)$")
WHEEL_NAME = re.compile(r"^(?P<name>[^-]+)-(?P<version>[^-]+)(?:-\d[^-]*)?-(?P<python>[^-]+)-(?P<abi>[^-]+)-(?P<platform>[^-]+)\.whl$")
LINUX_X86_64 = re.compile(r"^(manylinux\d*_?(\d+_\d+_)?x86_64|manylinux1_x86_64|manylinux2010_x86_64|manylinux2014_x86_64|linux_x86_64)$")
DOWNLOAD_TIMEOUT = 120.0


# --- translating PyPI metadata -------------------------------------------------------------------

def marker_environment(python: str) -> dict[str, str]:
    """Where the packages are installed: Linux x86_64, CPython `python`; no extras."""
    return {"implementation_name": "cpython", "implementation_version": f"{python}.0", "os_name": "posix",
            "platform_machine": "x86_64", "platform_python_implementation": "CPython", "platform_release": "",
            "platform_system": "Linux", "platform_version": "", "python_full_version": f"{python}.0",
            "python_version": python, "sys_platform": "linux", "extra": ""}


def conda_depends(requires_dist: list[str], requires_python: str, noarch: bool, python: str,
                  table: Table) -> list[str]:
    """Run requirements from a release's Requires-Dist: markers evaluated for Linux x86_64 and `python`,
    extras' requirements dropped, names mapped to conda-forge's where they differ."""
    environment = marker_environment(python)
    depends = []
    for line in requires_dist:
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            raise UserError(f"Requires-Dist {line!r} is not a valid requirement: add the entry by hand")
        if requirement.marker is not None and not requirement.marker.evaluate(environment):
            continue
        spec = conda_version_spec(requirement.specifier)
        depends.append(f"{table.conda_name(requirement.name)} {spec}".strip())
    if noarch:  # a noarch: python package names the Pythons it works with
        lower = [s.version for s in SpecifierSet(requires_python or "") if s.operator in (">=", ">")]
        depends.insert(0, f"python >={lower[0]}" if lower else "python")
    return list(dict.fromkeys(depends))


def conda_version_spec(specifier: SpecifierSet) -> str:
    """PEP 440 specifiers as a conda version spec (conda reads ==, !=, <, <=, >, >= and ~= alike)."""
    parts = []
    for spec in sorted(specifier, key=str):
        if spec.operator == "===":
            parts.append(f"=={spec.version}")
        else:
            parts.append(f"{spec.operator}{spec.version}")
    return ",".join(parts)


def choose_file(files: list[dict], python: str) -> tuple[dict, bool]:
    """(file, noarch): a pure-Python wheel, else a wheel for CPython `python` (its own ABI, then the
    stable ABI) on Linux x86_64. Source distributions are not repackaged: they need a real recipe."""
    cp = "cp" + python.replace(".", "")
    usable = [f for f in files if not f.get("yanked") and str(f.get("filename", "")).endswith(".whl")]
    ranked = []
    for f in usable:
        match = WHEEL_NAME.match(f["filename"])
        if not match:
            continue
        pythons, abis, platforms = (match.group(k).split(".") for k in ("python", "abi", "platform"))
        if "none" in abis and "any" in platforms and any(p.startswith("py3") for p in pythons):
            ranked.append((0, f["filename"], f, True))
        elif any(LINUX_X86_64.match(p) for p in platforms):
            if cp in pythons and cp in abis:
                ranked.append((1, f["filename"], f, False))
            elif "abi3" in abis and any(_cp_at_most(p, cp) for p in pythons):
                ranked.append((2, f["filename"], f, False))
    if not ranked:
        raise LookupError(f"no pure-Python wheel and no Linux x86_64 wheel for CPython {python}")
    _, _, chosen, noarch = min(ranked, key=lambda r: (r[0], r[1]))
    return chosen, noarch


def _cp_at_most(tag: str, cp: str) -> bool:
    return tag.startswith("cp") and tag[2:].isdigit() and int(tag[2:]) <= int(cp[2:])


def canonical_url(url: str) -> str:
    """PyPI's files live on files.pythonhosted.org; a mirror that answers with its own (or relative) links
    keeps the content-addressed path, so the table records the address anyone can fetch."""
    match = CONTENT_PATH.search(urllib.parse.urlparse(url).path)
    return f"{PYPI_FILES_HOST}/packages/{match.group(1)}" if match else url


def wheel_metadata(wheel: bytes) -> tuple[dict, list[str]]:
    """(METADATA headers as a message, top-level importable names) of a wheel."""
    with zipfile.ZipFile(io.BytesIO(wheel)) as archive:
        names = archive.namelist()
        metadata_path = next((n for n in names if re.match(r"^[^/]+\.dist-info/METADATA$", n)), None)
        if metadata_path is None:
            raise LookupError("the wheel has no .dist-info/METADATA")
        message = email.parser.Parser().parsestr(archive.read(metadata_path).decode("utf-8", "replace"), headersonly=True)
    imports = set()
    for name in names:
        top = name.split("/")[0]
        if top.endswith((".dist-info", ".data")) or top.startswith(("_", ".")):
            continue
        if "/" in name and name.split("/")[1] == "__init__.py":
            imports.add(top)
        elif "/" not in name and re.match(r"^[A-Za-z]\w*(\.py|\..*\.so|\.so)$", name):
            imports.add(top.split(".")[0])
    return message, sorted(imports)


# --- `orchestrate pypi add NAME==VERSION` ----------------------------------------------------------

# A conda package name: lowercase letters, digits, `-`, `_` and `.` (conda-build's and rattler's rule).
CONDA_NAME = re.compile(r"[a-z0-9_][a-z0-9_.-]*")


def conda_name(text: str) -> str:
    if not CONDA_NAME.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a conda package name: pass lowercase letters, digits, "
                                         "'-', '_' and '.', e.g. flydsl")
    return text


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="pypi_command", required=True)
    add = sub.add_parser("add", help="write or refresh a variants/pypi.yaml entry from PyPI (file, sha256, dependencies)")
    add.add_argument("requirement", metavar="NAME==VERSION", help="the PyPI project and the version to pin")
    add.add_argument("--workspace", type=existing_folder, metavar="DIR",
                     help="folder with recipes/ and variants/ (default: found from here)")
    add.add_argument("--conda-name", type=conda_name, help="the conda package name (default: the normalized PyPI name, or the "
                                          "table's `names` mapping)")
    add.add_argument("--version-key", help="a variants/shared.yaml key that pins the same version (e.g. flydsl_version)")
    add.add_argument("--license-file", metavar="FILE",
                     help="for a wheel that ships no license file: the standard text of the license its metadata "
                          "declares, its first line saying where that was read (copied to recipes/pypi/licenses/NAME/)")
    add.add_argument("--pypi-url", help=f"PyPI JSON API base (default: ${web.PYPI_URL_ENV}, else {web.DEFAULT_PYPI_URL})")
    add.add_argument("--timeout", type=seconds, default=DOWNLOAD_TIMEOUT, help="seconds per download (default: %(default)s)")
    add.add_argument("--quiet", "-q", action="store_true", help="plain lines, no progress")


def run(args, reporter) -> int:
    workspace = (args.workspace or find_workspace(Path.cwd())).resolve()
    variants_dir = workspace / "variants"
    requirement = _pinned_requirement(args.requirement)
    name, version = requirement
    given = _license_text(args.license_file)
    pypi_url = web.pypi_base(args.pypi_url)
    shared = read_mapping(variants_dir / SHARED_VARIANTS_FILE)
    python = str((shared.get("python") or ["3.12"])[0] if isinstance(shared.get("python"), list) else shared.get("python") or "3.12")
    table = load_table(variants_dir)
    refuse_what_recipes_build(workspace, name, args.conda_name or table.conda_name(name))
    json_url = f"{pypi_url}/{name}/json"
    try:
        data = web.get_json(json_url, args.timeout)
    except web.Unreachable as exc:
        raise UserError(f"cannot reach {json_url} ({exc}): check the network or a proxy, or pass --pypi-url")
    except LookupError as exc:
        raise UserError(f"{exc}: is {name} a PyPI project?")
    releases = data.get("releases") or {}
    label = next((v for v in releases if _same_version(v, version)), None)
    if label is None:
        raise UserError(f"PyPI has no {name} {version} ({json_url}): pick one of its releases, e.g. "
                        f"{(data.get('info') or {}).get('version') or 'the newest'}")
    try:
        chosen, noarch = choose_file(releases[label], python)
    except LookupError as exc:
        raise UserError(f"{name} {label}: {exc} on PyPI: write a recipe for it under recipes/")
    url = urllib.parse.urljoin(json_url, str(chosen.get("url") or ""))
    expected = str((chosen.get("digests") or {}).get("sha256") or "")
    if not SHA256.match(expected):
        raise UserError(f"{json_url} gives no sha256 for {chosen['filename']}: no pin without a checksum")
    checked_url(url, f"{json_url} ({name})", [pypi_url, PYPI_FILES_HOST])  # no other host is even asked
    try:
        wheel = web.get(url, args.timeout, accept="*/*", limit=web.listed_size(chosen, WHEEL_BOUND)).body
    except web.Unreachable as exc:
        raise UserError(f"cannot download {url} ({exc}): check the network or a proxy")
    except LookupError as exc:
        raise UserError(f"{exc}: PyPI's JSON names a file it does not serve; try again later")
    actual = hashlib.sha256(wheel).hexdigest()
    if actual != expected:
        raise UserError(f"sha256 mismatch for {url}: expected {expected} (PyPI JSON), actual {actual}: "
                        "do not pin it; try again or report it to the index")
    conda = args.conda_name or (table.entries[_existing(table, name)].name if _existing(table, name) else table.conda_name(name))
    previous = table.entries.get(conda)
    try:
        entry = entry_for(name, label, chosen["filename"], url, expected, wheel, noarch, previous, python, table,
                          f"sha256 from PyPI JSON ({json_url}), checked against the download, read {datetime.date.today()}")
    except (LookupError, zipfile.BadZipFile) as exc:
        raise UserError(f"{chosen['filename']} is not a usable wheel ({exc}): write a recipe for it under recipes/")
    depends = entry["depends"]
    version_key = args.version_key or (previous.version_key if previous else "")
    if version_key:
        entry["version_key"] = version_key
    license_file = license_file_for(conda, chosen["filename"], license_members(workspace, wheel), given, previous,
                                    entry["license"])
    if given is not None and license_file:  # last, once nothing can refuse the entry: the table and this file go together
        target = workspace / "recipes" / RECIPE_FOLDER / license_file
        target.parent.mkdir(parents=True, exist_ok=True)
        if given.resolve() != target.resolve():
            shutil.copyfile(given, target)
    entry["license_file"] = license_file
    checked_entry(entry, pypi_url, json_url)
    write_entry(table.path, conda, {k: v for k, v in entry.items() if v != "" or k in ("depends", "imports")})
    floor = glibc.wheel_floor(chosen["filename"])
    kind = "noarch: python" if noarch else f"linux-64, Python {python}, " + (
        f"glibc >={floor} (its manylinux tag)" if floor else f"glibc >= variants/shared.yaml {glibc.STACK_BOUND_KEY}")
    reporter.line(f"{'refreshed' if previous else 'added'} {conda} {label} ({chosen['filename']}, {kind}) in "
                  f"{table.path}: depends on {', '.join(depends) or 'nothing'}")
    if license_file:
        reporter.line(f"{chosen['filename']} ships no license file: the package carries recipes/{RECIPE_FOLDER}/{license_file}"
                      + ("" if given else f" (kept: check it is still the {entry['license'] or 'license'} its metadata declares)"))
    elif previous and previous.license_file:
        reporter.line(f"{chosen['filename']} ships its own license files: {conda}'s license_file is dropped (remove "
                      f"recipes/{RECIPE_FOLDER}/{previous.license_file})")
    if not entry["license"]:
        reporter.line(f"{name} {label}'s metadata names no SPDX license: set `license:` of {conda} in {table.path} "
                      "to its SPDX expression, read from the license file in its dist-info")
    for where, spec in (pin for pin in pins_on(workspace, table, conda, exclude=conda) if unsatisfied(pin[1], label)):
        reporter.line(f"warning: {where} requires {conda} {spec}, which {label} does not satisfy: the plan will not "
                      f"solve until the two agree (pin the version it names: orchestrate pypi add {name}=={_pinned(spec)})")
    if version_key and str(shared.get(version_key, [None])[0] if isinstance(shared.get(version_key), list) else shared.get(version_key)) != label:
        reporter.line(f"variants/shared.yaml {version_key} is not {label}: set it to [\"{label}\"] (dependents read it)")
    return 0


def recipe_outputs(workspace: Path) -> dict[str, Path]:
    """Package name (or fnmatch pattern, for a name templated on the variant) -> the recipe that builds it, read
    from every recipe of the workspace but the PyPI table's own."""
    built: dict[str, Path] = {}
    for path in recipes.discover(workspace / "recipes"):
        if path.parent.name == RECIPE_FOLDER:
            continue
        data = recipes.load_recipe_yaml(path)
        context = {k: str(v) for k, v in (data.get("context") or {}).items() if not isinstance(v, (dict, list))}
        packages = [data.get("package")] + [o.get("package") for o in data.get("outputs") or [] if isinstance(o, dict)]
        for package in packages:
            if isinstance(package, dict) and package.get("name"):
                name = re.sub(r"\$\{\{\s*(\w+)\s*\}\}", lambda m: context.get(m[1], "*"), str(package["name"]))
                built.setdefault(name.lower(), path)
    return built


def refuse_what_recipes_build(workspace: Path, pypi_name: str, conda: str) -> None:
    """A PyPI wheel of a package a recipe builds would be a second `vllm` in every plan, and PyPI's is the CUDA
    build: refused before anything is downloaded."""
    for built, recipe in recipe_outputs(workspace).items():
        if any(fnmatch.fnmatchcase(n, built) for n in {conda.lower(), canonicalize_name(pypi_name)}):
            raise UserError(f"{pypi_name} is built by this project ({recipe.relative_to(workspace)} makes {conda}): "
                            f"a PyPI wheel of it would be a second {conda} in the plan: leave it out; to move its version, "
                            "move the pin that recipe reads (`orchestrate pins --bump` finds upstream's newest)")


def pins_on(workspace: Path, table: Table, conda: str, exclude: str = "") -> list[tuple[str, str]]:
    """(where, spec) for every version requirement on `conda` that the recipes write and the other PyPI entries'
    depends carry (from their wheels' METADATA), e.g. vLLM's `conch-triton-kernels ==1.2.1`."""
    wanted = re.compile(rf"{re.escape(conda)}\s+([<>=!~].*|\d[^\s]*)", re.I)
    found = []
    for path in recipes.discover(workspace / "recipes"):
        if path.parent.name != RECIPE_FOLDER:
            found += [(str(path.relative_to(workspace)), m[1].strip()) for text in _strings(recipes.load_recipe_yaml(path))
                      if (m := wanted.fullmatch(text.strip())) and "${{" not in text]
    for entry in table.entries.values():
        if entry.name != exclude:
            found += [(f"{table.path.name} {entry.name} (its wheel's METADATA)", m[1].strip()) for spec in entry.depends
                      if (m := wanted.fullmatch(spec.strip()))]
    return list(dict.fromkeys(found))


def _strings(node) -> list[str]:
    if isinstance(node, dict):
        return [s for value in node.values() for s in _strings(value)]
    if isinstance(node, list):
        return [s for item in node for s in _strings(item)]
    return [node] if isinstance(node, str) else []


def unsatisfied(spec: str, version: str) -> bool:
    """Whether `version` misses a conda version spec (`==1.2.1`, `>=1,<2`, `1.2.*`); a spec PEP 440 cannot read is
    not judged."""
    text = ",".join(part if part[0] in "<>=!~" else f"=={part}" for part in spec.replace(" ", "").split(",") if part)
    try:
        return not SpecifierSet(text).contains(version, prereleases=True)
    except (InvalidSpecifier, InvalidVersion):
        return False


def _pinned(spec: str) -> str:
    return re.sub(r"^[=\s]+", "", spec.split(",")[0])


def license_members(workspace: Path, wheel: bytes) -> list[str]:
    """The wheel's files its build copies into info/licenses/, by the build's own rule (the workspace's
    recipes/_shared/install_wheels.py, which the PyPI recipe runs)."""
    script = workspace / "recipes" / SHARED_SCRIPTS / "install_wheels.py"
    spec = importlib.util.spec_from_file_location("install_wheels", script)
    if spec is None or not script.is_file():
        raise UserError(f"{script} is missing: the PyPI recipe installs wheels with it; restore it from the repository")
    installer = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(installer)
    with zipfile.ZipFile(io.BytesIO(wheel)) as archive:
        names = [n for n in archive.namelist() if not n.endswith("/")]
    dist_info = next((n.split("/")[0] for n in names if n.split("/")[0].endswith(".dist-info")), "")
    return [n for n in names if installer.is_license(n, dist_info)]


def license_file_for(conda: str, filename: str, members: list[str], given: Path | None, previous: Entry | None,
                     license: str) -> str:
    """The entry's license_file: none for a wheel that ships license files; for one that ships none, the file
    given (copied to licenses/<conda>/) or the entry's own, kept on refresh; else the entry is refused."""
    if members:
        if given is not None:
            raise UserError(f"{filename} ships its own license files ({', '.join(members[:3])}): drop --license-file")
        return ""
    if given is not None:
        return f"{LICENSES_FOLDER}/{conda}/{given.name}"
    if previous and previous.license_file:
        return previous.license_file
    raise UserError(f"{filename} ships no license file (no dist-info licenses/, LICENSE*, COPYING*, NOTICE*), so its package "
                    f"cannot build: pass --license-file FILE, the standard text of {license or 'the license its metadata declares'}, "
                    "its first line saying where that license was read")


def _license_text(text: str | None) -> Path | None:
    if text is None:
        return None
    path = Path(text).expanduser()
    if not path.is_file():
        raise UserError(f"--license-file {text} is not a file: pass the license text's file")
    if not LICENSE_FILE_NAME.match(path.name):
        raise UserError(f"--license-file {text} is not a file named with letters, digits, '.', '_' or '-': pass the "
                        "license text's file")
    return path


def spdx_license(metadata) -> str:
    """The license as an SPDX expression (rattler-build accepts nothing else): PEP 639's License-Expression, else
    a License field that is one; free text ("Apache 2.0") and words that are no SPDX id ("BSD", "GPL") are
    left out rather than guessed."""
    for field in ("License-Expression", "License"):
        try:
            return canonicalize_license_expression(str(metadata.get(field) or "").strip())
        except InvalidLicenseExpression:  # also an empty field
            continue
    return ""


def _pinned_requirement(text: str) -> tuple[str, str]:
    try:
        requirement = Requirement(text)
    except InvalidRequirement:
        requirement = None
    specs = list(requirement.specifier) if requirement else []
    if not requirement or len(specs) != 1 or specs[0].operator != "==" or "*" in specs[0].version:
        raise UserError(f"{text!r} is not NAME==VERSION: name one release, e.g. flydsl==0.3.1")
    return requirement.name, specs[0].version


def _same_version(a: str, b: str) -> bool:
    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a == b


def _existing(table: Table, pypi_name: str) -> str | None:
    return next((e.name for e in table.entries.values() if canonicalize_name(e.pypi) == canonicalize_name(pypi_name)), None)


def entry_for(name: str, label: str, filename: str, url: str, sha256: str, wheel: bytes, noarch: bool,
              previous: Entry | None, python: str, table: Table, evidence: str) -> dict:
    """A table entry for one wheel (already checked against `sha256`), from the wheel's own METADATA; an
    entry's own judgements (imports, conflicts, version_key) are kept on refresh."""
    metadata, imports = wheel_metadata(wheel)
    entry = {
        "pypi": name,
        "version": label,
        "file": filename,
        "url": canonical_url(url),
        "sha256": sha256,
        "noarch": noarch,
        "depends": conda_depends(metadata.get_all("Requires-Dist") or [], metadata.get("Requires-Python") or "",
                                 noarch, python, table),
        # what the recipe's test imports: the wheel's top-level modules on first add; an entry's own list
        # (edited, or [] where importing needs a GPU) is kept on refresh
        "imports": list(previous.imports) if previous else imports,
        "summary": str(metadata.get("Summary") or "").strip(),
        "license": spdx_license(metadata),
        "evidence": evidence,
    }
    if previous and previous.conflicts:
        entry["conflicts"] = list(previous.conflicts)  # a judgement of ours, not PyPI's: kept on refresh
    if previous and previous.version_key:
        entry["version_key"] = previous.version_key
    if previous and previous.license_file:  # ours too (`pins --bump --write` refreshes through here); pypi add decides anew
        entry["license_file"] = previous.license_file
    return entry


def write_entry(path: Path, name: str, entry: dict) -> None:
    """Replace (or append) one entry under `packages:`, keeping the file's header and other entries as written."""
    tmp = path.with_suffix(".yaml.tmp")
    tmp.write_text(with_entry(path.read_text() if path.is_file() else HEADER, name, entry))
    os.replace(tmp, path)


def with_entry(text: str, name: str, entry: dict) -> str:
    """The table's text with one entry replaced (or appended); the rest as written."""
    if not re.search(r"^packages:", text, re.M):
        text = text.rstrip("\n") + "\npackages:\n"
    block = yaml.safe_dump({name: entry}, sort_keys=False, width=200, default_flow_style=False)
    block = "".join(f"  {line}\n" for line in block.splitlines())
    head, _, body = text.partition("\npackages:\n")
    pattern = re.compile(rf"^  {re.escape(name)}:\n(?:    .*\n|\s*\n)*", re.M)
    body = pattern.sub(lambda m: block, body, count=1) if pattern.search(body) else body.rstrip("\n") + ("\n" if body.strip() else "") + block
    body = body.lstrip("\n")
    return head + "\npackages:\n" + body


HEADER = """# PyPI-only dependencies, repackaged as conda packages by the one recipe in recipes/pypi (see
# orchestrate/pypi_table.py). Write or refresh an entry with `orchestrate pypi add NAME==VERSION`.
names: {}
"""


def checked_entry(entry: dict, pypi_url: str, source: str) -> dict:
    """A table entry whose upstream values match their grammar (issue 37, a13/a20): the version, the file name, an
    https URL on PyPI's file host or the lookup's own host, the sha256; the summary without template or control
    characters. Else NotGrammar, naming the value and `source`, and nothing is written."""
    where = f"{source} ({entry.get('pypi')})"
    checked_pin(entry.get("version"), f"{where} version")
    checked_file(entry.get("file"), f"{where} file name")
    checked_url(entry.get("url"), f"{where} URL", [pypi_url, PYPI_FILES_HOST])
    if not SHA256.match(str(entry.get("sha256") or "")):
        raise NotGrammar(f"{where} gave sha256 {str(entry.get('sha256'))[:80]!r}, which is not one: refused, nothing written")
    for key in ("summary", "license"):
        text = str(entry.get(key) or "")
        if TEMPLATE_OR_CONTROL.search(text):
            raise NotGrammar(f"{where} gave a {key} {text[:80]!r} holding template syntax or control characters: "
                             "refused, nothing written (check that upstream)")
    return entry
