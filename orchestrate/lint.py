"""`orchestrate lint`: the conda-smithy rules that fit a private channel, checked on every recipe.

conda-forge's linter (conda-smithy, conda_smithy/linter/) reviews every feedstock; a team channel wants the
same packages: a glibc bound from the sysroot, sources that cannot change under a build, a license and its
text in info/licenses/, a test, requirements in the environment they belong to, and sibling outputs pinned
to each other. This is our own check of those rules, not conda-smithy's code: it reads each recipe twice,
- as written (stage 0), where rendering loses what was said: whether a hash or build number was given at
  all, whether `${{ stdlib("c") }}` stands beside `${{ compiler(...) }}` in every branch;
- as py-rattler-build renders it for every architecture and both PyTorch paths, where only the rendered
  output tells: the commit a git source resolves to, the license each output ends up with, its tests.
One rule is ours alone: our channel sits in front of conda-forge, so every requirement name no recipe builds is
one variants/conda-forge-names.txt records as checked on conda-forge (conda-forge-name).
docs/reference.md ("orchestrate lint") lists the rules and the conda-smithy function each comes from.
"""
from __future__ import annotations

import argparse
import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any


from . import pypi_table
from .architectures import SHARED_VARIANTS_FILE, ArchitectureTable
from .errors import UserError
from .options import Options, existing_folder, find_workspace
from .prebuilt import PYTORCH_FROM
from .recipes import Output, discover, load_recipe_yaml, render_all, variant_config
from .plan_sources import unlocked_urls
from .sources import ZERO_SHA256, sources_of
from .ui import Reporter

# rule -> the conda-smithy check it follows (conda_smithy/linter/lints.py unless said otherwise)
RULES = {
    "renders": "lint_recipe_is_parsable",
    "stdlib": "lint_stdlib",
    "source-hash": "lint_sources_should_have_hash",
    "license": "lint_about_contents, lint_license_cannot_be_unknown",
    "license-file": "lint_license_family_should_be_valid (v1 recipes: license_file is required)",
    "about": "lint_about_contents",
    "tests": "lint_recipe_have_tests (conda_recipe_v1_linter.lint_recipe_tests)",
    "build-number": "lint_build_section_should_have_a_number",
    "build-in-host": "lint_non_noarch_builds, hints.hint_pip_no_build_backend",
    "pin-subpackage": "lint_pin_subpackages",
    "noarch": "lint_require_lower_bound_on_python_version, conda_recipe_v1_linter.lint_usage_of_selectors_for_noarch",
    "conda-forge-name": "none (ours): each external requirement name is one conda-forge/feedstock-outputs lists",
    "package-contents": "none (ours): rattler-build matches package_contents entries against files only",
}

PATHS = ("prebuilt", "source")  # the two values of pytorch_from: each renders other recipes
COMPILER = re.compile(r"\$\{\{\s*compiler\(\s*['\"](c|cxx|fortran|rust|go-cgo)['\"]")
C_STDLIB = re.compile(r"\$\{\{\s*stdlib\(\s*['\"]c['\"]\s*\)")
SYSROOT = re.compile(r"^sysroot_linux")
RENDERED_COMPILER = re.compile(r"^(gcc|gxx|gfortran|clang|clangxx|rust|go-cgo)_linux-")
STDLIB_FIX = ('requirements.build has ${{ compiler(...) }} but no ${{ stdlib("c") }}: add `- ${{ stdlib("c") }}` '
              "beside the compilers, in the same branch (it picks the sysroot and exports the __glibc bound)")
FULL_COMMIT = re.compile(r"^[0-9a-f]{40}$")
# What the package is built against or installs into, so host's (the target's), never build's (the build
# machine's): conda-forge puts them in build only when cross-compiling, beside cross-python.
HOST_ONLY = {"python", "pip", "setuptools", "wheel", "numpy", "cython", "pybind11", "nanobind", "pytorch",
             "setuptools-scm", "scikit-build-core", "hatchling", "flit-core", "poetry-core", "meson-python"}
CROSS_PYTHON = re.compile(r"^cross-python_")
CONDA_FORGE_NAMES_FILE = "conda-forge-names.txt"  # in variants/
FEEDSTOCK_OUTPUTS = "https://github.com/conda-forge/feedstock-outputs/blob/main/outputs"
NEVER_INSTALLED = "<0.0a0"
# package_contents sections whose entries are paths inside the package; rattler-build (py-rattler-build 0.73) matches
# each against the package's files, never its folders: `site_packages: [foo_meta/csrc]` fails "No match for
# site_packages glob" on a package holding foo_meta/csrc/include/x.h (tests/test_recipe_lint.py builds one). A path
# whose last part has no dot and no wildcard names a folder in these two sections (Python and header files have
# extensions; a site_packages entry without "/" is a module name, which rattler-build resolves itself). `files:` entries
# are left alone but for a trailing "/": `bin/hipcc` is a file.
CONTENTS_PATH_SECTIONS = ("site_packages", "include")
GLOB_CHARS = re.compile(r"[*?\[]")
# compilers, the C stdlib and cross-python as rendered: conda-forge's toolchain, picked by ${{ compiler() }}
TOOLCHAIN = re.compile(r"^[a-z0-9.+\-]+_(linux|osx|win)-[a-z0-9]+$")


@dataclass(frozen=True, order=True)
class Problem:
    rule: str
    where: str  # the recipe file (and output) to change
    fix: str

    def line(self) -> str:
        return f"{self.rule}: {self.where}: {self.fix}"


@dataclass
class LintResult:
    problems: list[Problem]
    archs: list[str]
    outputs: int  # rendered outputs checked (every architecture, both paths, skipped ones left out)
    recipes: int


def lint_workspace(workspace: Path, archs: list[str] | None = None) -> LintResult:
    """Every recipe of the workspace as written, then as rendered for each architecture (all by default)
    on both PyTorch paths."""
    options = Options(workspace=workspace, channel=workspace / "channel", source_channels=[])
    table = ArchitectureTable.load(options.variants_dir)
    archs = archs or table.names()
    problems: set[Problem] = set()
    uses: set[NameUse] = set()
    own: set[str] = set()
    every_render = set(archs) >= set(table.names())  # else a name only other architectures use looks unused
    recipe_files = discover(options.recipes_dir)
    for recipe_path in recipe_files:
        try:
            problems.update(written_problems(recipe_path, load_recipe_yaml(recipe_path), workspace))
        except UserError:  # not YAML: rendering it below reports that, as a `renders` problem
            continue
    checked = 0
    for arch_name in archs:
        arch = table.get(arch_name)
        for path in _paths(options, table, arch):
            arch_options = dataclasses.replace(options, arch=arch_name, variant_overrides=path)
            try:
                config = variant_config(arch_options, table, arch)
                outputs = render_all(arch_options, config, arch)
            except UserError as exc:
                problems.add(Problem("renders", " ".join(filter(None, (arch_name, _path_name(path)))), str(exc)))
                every_render = False
                continue
            built = [o for o in outputs if not o.skipped]
            checked += len(built)
            own.update(o.name for o in outputs)
            uses.update(NameUse(output_label(o, workspace), *use) for o in built for use in requirement_names(o))
            problems.update(rendered_problems(built, outputs, workspace))
            problems.update(stdlib_version_problems(built, config.to_dict(), options.variants_dir))
    problems.update(conda_forge_name_problems(uses, own, options.variants_dir, check_unused=every_render))
    return LintResult(sorted(problems), archs, checked, len(recipe_files))


def _paths(options: Options, table: ArchitectureTable, arch) -> list[dict[str, str]]:
    """Both PyTorch paths where the variant files have the key, else the one configuration there is; only the
    source path where AMD publishes no PyTorch for the arch (the table's prebuilt_torch: no)."""
    values = variant_config(dataclasses.replace(options, arch=arch.name), table, arch).to_dict()
    if PYTORCH_FROM not in values:
        return [{}]
    return [{PYTORCH_FROM: p} for p in PATHS if p != "prebuilt" or arch.prebuilt_torch.value != "no"]


def _path_name(path: dict[str, str]) -> str:
    return f"{PYTORCH_FROM}={path[PYTORCH_FROM]}" if path else ""


# -- the recipe as written ---------------------------------------------------------------------------------
def written_problems(recipe_path: Path, data: dict, workspace: Path) -> list[Problem]:
    where = _relative(recipe_path, workspace)
    problems = []
    outputs = [o for o in data.get("outputs") or [] if isinstance(o, dict)]
    parts = [("", data)] + [(f" output {_written_name(o, i)}", o) for i, o in enumerate(outputs)]
    for label, part in parts:
        build_reqs = _flatten(((part.get("requirements") or {}).get("build")))
        texts = [str(r) for r in build_reqs]
        if any(COMPILER.search(t) for t in texts) and not any(C_STDLIB.search(t) for t in texts):
            problems.append(Problem("stdlib", where + label, STDLIB_FIX))
        for text in texts:
            if SYSROOT.match(text.strip()):
                problems.append(Problem("stdlib", where + label, f"requirements.build names {text.split()[0]}: "
                                        'use ${{ stdlib("c") }} and set c_stdlib_version in variants/shared.yaml'))
        for source in _flatten(part.get("source")):
            if not isinstance(source, dict):
                continue
            if "url" in source and not (source.get("sha256") or source.get("md5")):
                problems.append(Problem("source-hash", where + label, f"source {source['url']} has no sha256: "
                                        "add `sha256:` (what the download is checked against)"))
            if "git" in source and not source.get("rev"):
                problems.append(Problem("source-hash", where + label, f"git source {source['git']} has no rev: "
                                        "pin it with `rev:` and the full 40-hex commit (not tag or branch)"))
    if (data.get("build") or {}).get("number") is None:
        unnumbered = [o for o in outputs if (o.get("build") or {}).get("number") is None]
        if not outputs or unnumbered:
            problems.append(Problem("build-number", where, "build.number is not given: add `number: 0` under "
                                    "build (raise it to rebuild the same version)"))
    return problems


def _written_name(output: dict, index: int) -> str:
    return str((output.get("package") or {}).get("name") or f"#{index + 1}")


def _flatten(items: Any) -> list:
    """A v1 list with its `if`/`then`/`else` entries opened: every branch counts."""
    found = []
    for item in items if isinstance(items, list) else ([] if items is None else [items]):
        if isinstance(item, dict) and "if" in item:
            found += _flatten(item.get("then")) + _flatten(item.get("else"))
        else:
            found.append(item)
    return found


# -- the recipe as rendered --------------------------------------------------------------------------------
def rendered_problems(built: list[Output], rendered: list[Output], workspace: Path) -> list[Problem]:
    """`built`: the outputs the architecture gets; `rendered`: every output, skipped ones too (the siblings
    a pin may name)."""
    problems = []
    for output in built:
        where = output_label(output, workspace)
        data = output.rendered
        about = data.get("about") or {}
        unlocked = unlocked_urls(output)  # the recipe names a sha256; the lock has none yet, and builds refuse it
        for source in sources_of(data):
            if source.kind == "url" and (not source.pin or source.pin == ZERO_SHA256) and source.location not in unlocked:
                problems.append(Problem("source-hash", where, f"{source.location} renders without a sha256: give "
                                        "the sha256 of the file (or the variant key it comes from) a value"))
            if source.kind == "git" and not FULL_COMMIT.match(source.pin):
                problems.append(Problem("source-hash", where, f"git {source.location} rev {source.pin!r} is not a "
                                        "full commit: pin the 40-hex commit the tag or branch points at"))
        if not str(about.get("license") or "").strip():
            problems.append(Problem("license", where, "no about.license: add its SPDX expression"))
        if not about.get("license_file"):
            problems.append(Problem("license-file", where, "no about.license_file: name the license text(s) the "
                                    "package ships, so they land in info/licenses/"))
        if not str(about.get("summary") or "").strip():
            problems.append(Problem("about", where, "no about.summary: add one line saying what the package is"))
        if not data.get("tests"):
            problems.append(Problem("tests", where, "no tests: add at least a package_contents or an import test"))
        problems += _stdlib_rendered(output, workspace)
        problems += _build_in_host(output, where)
        problems += _pins(output, rendered, where)
        problems += _noarch(output, where)
        problems += package_contents_problems(data.get("tests") or [], where)
    return problems


def package_contents_problems(tests: list, where: str) -> list[Problem]:
    """Entries of the rendered tests' package_contents that name a folder, which rattler-build never matches."""
    problems = []
    for test in tests:
        contents = test.get("package_contents") if isinstance(test, dict) else None
        for section, entries in (contents or {}).items():
            if isinstance(entries, dict):  # exists / not_exists
                entries = [e for key in ("exists", "not_exists") for e in entries.get(key) or []]
            for entry in entries if isinstance(entries, list) else []:
                entry = str(entry)
                last = entry.rstrip("/").rsplit("/", 1)[-1]
                folder = entry.endswith("/") or (section in CONTENTS_PATH_SECTIONS and "/" in entry
                                                 and "." not in last and not GLOB_CHARS.search(last))
                if folder:
                    problems.append(Problem("package-contents", where, f"package_contents {section} entry {entry!r} "
                                            "names a folder, and rattler-build matches files only: name a file in "
                                            f"it, or write {entry.rstrip('/') + '/**'!r}"))
    return problems


def output_label(output: Output, workspace: Path) -> str:
    if output.recipe_name == pypi_table.RECIPE_FOLDER:
        return f"variants/{pypi_table.TABLE_FILE} {output.name} ({_relative(output.recipe_path, workspace)})"
    return f"{_relative(output.recipe_path, workspace)} {output.name}"


def _requirements(data: dict, section: str) -> list:
    value = (data.get("requirements") or {}).get(section)
    if isinstance(value, dict):  # run_exports: {weak: [...], strong: [...]}
        return [spec for specs in value.values() for spec in specs or []]
    return list(value or [])


def _stdlib_rendered(output: Output, workspace: Path) -> list[Problem]:
    """The compilers this variant gets without the sysroot: `${{ stdlib("c") }}` written in another `if` branch
    than they are, which the check of the recipe as written cannot tell."""
    build = [str(s) for s in _requirements(output.rendered, "build")]
    if not any(RENDERED_COMPILER.match(s) for s in build) or any(SYSROOT.match(s) for s in build):
        return []
    where = _relative(output.recipe_path, workspace)
    if (output.stage0 or {}).get("outputs"):
        where += f" output {output.name}"
    return [Problem("stdlib", where, STDLIB_FIX)]


def _build_in_host(output: Output, where: str) -> list[Problem]:
    build = [str(s) for s in _requirements(output.rendered, "build")]
    if any(CROSS_PYTHON.match(s) for s in build):
        return []
    return [Problem("build-in-host", where, f"{name} is in requirements.build: move it to requirements.host "
                    "(build is the build machine's tools; what the package builds against or installs into is "
                    "host's)") for name in sorted({_name(s) for s in build} & HOST_ONLY)]


def _pins(output: Output, rendered: list[Output], where: str) -> list[Problem]:
    siblings = {o.name for o in rendered if o.stage0 is output.stage0}
    problems = []
    for section in ("host", "run", "run_exports"):
        for spec in _requirements(output.rendered, section):
            if isinstance(spec, dict):
                pin, inner = next(iter(spec.items()))
                name = inner.get("name") if isinstance(inner, dict) else str(inner)
                # (a pin_subpackage of anything else does not render: py-rattler-build says MissingOutput)
                if pin == "pin_compatible" and name in siblings:
                    problems.append(Problem("pin-subpackage", where, f"{section} pins {name}, an output of this recipe, "
                                            f'with pin_compatible: use ${{{{ pin_subpackage("{name}", ...) }}}}'))
            elif _name(spec) in siblings:
                problems.append(Problem("pin-subpackage", where, f"{section} names {_name(spec)}, an output of this "
                                        f'recipe, as `{spec}`: use ${{{{ pin_subpackage("{_name(spec)}", ...) }}}} '
                                        "(exact=True, or bounds and build=) so the two are built and installed together"))
    return problems


def _noarch(output: Output, where: str) -> list[Problem]:
    noarch = (output.rendered.get("build") or {}).get("noarch")
    if not noarch:
        return []
    problems = []
    skips = _written_skips(output)
    if skips:
        problems.append(Problem("noarch", where, f"noarch: {noarch} with build.skip ({'; '.join(skips)}): a noarch "
                                "package is built once for every platform and architecture; drop the skip or noarch"))
    if noarch == "python":
        pythons = [str(s) for s in _requirements(output.rendered, "run") if _name(s) == "python"]
        if not any(s.split(None, 1)[1:] for s in pythons):
            problems.append(Problem("noarch", where, "noarch: python without a lower bound on python in "
                                    "requirements.run: add `python >=3.X` (the oldest Python it supports)"))
    return problems


def _written_skips(output: Output) -> list[str]:
    data = output.stage0 or {}
    skips = _flatten((data.get("build") or {}).get("skip"))
    for part in data.get("outputs") or []:
        name = str((part.get("package") or {}).get("name", ""))
        if name == output.name or "${{" in name:
            skips += _flatten((part.get("build") or {}).get("skip"))
    return [str(s) for s in skips]


def stdlib_version_problems(built: list[Output], values: dict, variants_dir: Path) -> list[Problem]:
    """c_stdlib_version is set where a recipe uses `${{ stdlib("c") }}`. Not compared with the `__glibc >=` bounds
    outputs declare: a repackaged manylinux_2_34 wheel rightly requires 2.34 without the compiled packages
    needing that sysroot, and the solver takes the highest bound along a chain (`orchestrate doctor` reports the
    stack's)."""
    uses_sysroot = [o for o in built if any(SYSROOT.match(str(s)) for s in _requirements(o.rendered, "build"))]
    declared = values.get("c_stdlib_version")
    if not uses_sysroot or (declared[0] if isinstance(declared, list) and declared else declared):
        return []
    where = f"{_relative(variants_dir / SHARED_VARIANTS_FILE, variants_dir.parent)} c_stdlib_version"
    return [Problem("stdlib", where, f"not set, and {uses_sysroot[0].name} uses ${{{{ stdlib(\"c\") }}}}: set it "
                    "to the oldest glibc the stack supports")]


# -- conda-forge names -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class NameUse:
    where: str
    name: str
    section: str  # build, host, run, run_constraints, run_exports, "tests run", "tests build"
    spec: str


def requirement_names(output: Output) -> list[tuple[str, str, str]]:
    """(name, section, spec) of every requirement of a rendered output, its tests' too."""
    found = []
    for section in ("build", "host", "run", "run_constraints", "run_exports"):
        found += [(_spec_name(spec), section, str(spec)) for spec in _requirements(output.rendered, section)]
    for test in output.rendered.get("tests") or []:
        for section, specs in (test.get("requirements") or {}).items():
            found += [(_spec_name(spec), f"tests {section}", str(spec)) for spec in specs or []]
    return found


def _spec_name(spec: Any) -> str:
    if isinstance(spec, dict):  # {pin_compatible: {name: ...}}
        inner = next(iter(spec.values()), "")
        return _name(inner.get("name", "") if isinstance(inner, dict) else inner)
    return _name(spec)


def read_conda_forge_names(path: Path) -> tuple[dict[str, str], list[Problem]]:
    """NAME -> "" (conda-forge has it) or "<0.0a0" (it has not: allowed only as that run constraint)."""
    names: dict[str, str] = {}
    problems = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        words = line.split("#", 1)[0].split()
        if words and (len(words) > 2 or words[1:] not in ([], [NEVER_INSTALLED])):
            problems.append(Problem("conda-forge-name", f"{_relative(path, path.parent.parent)} line {number}",
                                    f"{line.strip()!r} is neither NAME nor `NAME {NEVER_INSTALLED}`: write one per line"))
        elif words:
            names[words[0].lower()] = " ".join(words[1:])
    return names, problems


def feedstock_outputs_url(name: str) -> str:
    """Where conda-forge/feedstock-outputs records a name (its shard: the first three letters or digits)."""
    shard = ([c for c in name if c.isalnum()] + ["z"] * 3)[:3]
    return f"{FEEDSTOCK_OUTPUTS}/{'/'.join(shard)}/{name}.json"


def conda_forge_name_problems(uses: set[NameUse], own: set[str], variants_dir: Path, *,
                              check_unused: bool) -> list[Problem]:
    """Every external requirement name is one variants/conda-forge-names.txt records as on conda-forge; with
    `check_unused` (every architecture and path rendered), every name it records is still required."""
    path = variants_dir / CONDA_FORGE_NAMES_FILE
    label = _relative(path, variants_dir.parent)
    if not path.is_file():
        return [Problem("conda-forge-name", label, "missing: list there, one per line, every requirement name "
                        "no recipe builds, each checked on https://github.com/conda-forge/feedstock-outputs")]
    declared, problems = read_conda_forge_names(path)
    used = set()
    for use in sorted(uses, key=lambda u: (u.where, u.name, u.section)):
        if not use.name or use.name.startswith("__") or TOOLCHAIN.match(use.name) or use.name in own:
            continue
        used.add(use.name)
        if use.name not in declared:
            problems.append(Problem("conda-forge-name", use.where, f"{use.section} names {use.name}, which {label} "
                                    f"does not list: check that conda-forge has it ({feedstock_outputs_url(use.name)}"
                                    f"), then add it to {label} (a name conda-forge lacks fails every user's solve)"))
        elif declared[use.name] and (use.section, use.spec.split(None, 1)[1:]) != ("run_constraints",
                                                                                  [NEVER_INSTALLED]):
            problems.append(Problem("conda-forge-name", use.where, f"{use.section} names {use.name} as `{use.spec}`, "
                                    f"but conda-forge has no {use.name}: {label} allows it only as the run "
                                    f"constraint `{use.name} {NEVER_INSTALLED}`; package it here or drop it"))
    if check_unused:
        problems += [Problem("conda-forge-name", f"{label} {name}", "no recipe requires it any more (every "
                             "architecture, both PyTorch paths; or it is now one of our own outputs): delete the line")
                     for name in sorted(set(declared) - used)]
    return problems


def _name(spec: Any) -> str:
    match = re.match(r"^\s*([A-Za-z0-9_.\-]+)", str(spec))
    return match.group(1).lower() if match else ""


def _relative(path: Path, workspace: Path) -> str:
    try:
        return str(Path(path).resolve().relative_to(workspace.resolve()))
    except ValueError:
        return str(path)


# -- the command -------------------------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workspace", type=existing_folder, metavar="DIR",
                        help="folder with recipes/ and variants/ (default: found from here)")
    choice = parser.add_mutually_exclusive_group()
    choice.add_argument("--arch", help="render for this architecture only (default: every architecture)")
    choice.add_argument("--all-archs", action="store_true", help="every architecture in the table (the default)")
    parser.add_argument("--quiet", "-q", action="store_true", help="plain lines")


def run(args, reporter: Reporter) -> int:
    workspace = (args.workspace or find_workspace(Path.cwd())).resolve()
    if args.arch:
        known = ArchitectureTable.load(workspace / "variants").names()
        if args.arch not in known:
            raise UserError(f"--arch {args.arch} is not in variants/architectures.yaml: pass one of {', '.join(known)}")
    result = lint_workspace(workspace, [args.arch] if args.arch else None)
    for problem in result.problems:
        reporter.line(problem.line())
    scope = (f"{result.recipes} recipes, {result.outputs} rendered outputs ({len(result.archs)} architecture(s), "
             "both PyTorch paths)")
    if result.problems:
        rules = sorted({p.rule for p in result.problems})
        reporter.error(f"error: {len(result.problems)} lint problem(s) ({', '.join(rules)}) in {scope}: fix each "
                       "as its line says")
        return 1
    reporter.line(f"lint: {scope} pass all {len(RULES)} rules")
    return 0
