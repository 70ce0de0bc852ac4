"""The contract between our recipes and upstream sources, checked against checkouts at the pinned commits.

A folder of checkouts (one per recipe folder name: DIR/aotriton, DIR/pytorch-rocm (the source recipe of `pytorch`), ...; each the recipe's
first source) answers: is each pinned commit the checkout's HEAD, does each file that pins something
(PyTorch's triton.txt, a submodule, a version file) agree with our pins, and is every environment
variable and CMake option our build scripts set read somewhere in the upstream build at that commit.
For Python packages, orchestrate/import_contract.py checks the run requirements against what users' path imports.
tests/test_upstream_contract.py runs it; this module only reads.
"""
from __future__ import annotations

import fnmatch
import os
import re
import shlex
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from .input_hash import shared_files_named
from .recipes import SHARED_SCRIPTS, load_recipe_yaml
from .upstreams import MINIMUM, Check, Pins, Upstreams, parse_version, same_release

ENV, CMAKE = "env", "cmake"
OK, FAILED, SKIPPED = "ok", "failed", "skipped"
# Where upstream reads an environment variable (its build files and the Python the build runs) or a CMake
# option (CMake code only); CI, container and test folders are not the build.
ENV_FILES = ("*.py", "*.cmake", "*CMakeLists.txt", "*.toml", "*.cfg")
CMAKE_FILES = ("*.cmake", "*CMakeLists.txt")
NOT_THE_BUILD = (".ci", ".github", "docker", "dockerfile", "docs", "test", "tests", "op_tests", "benchmarks")
# Names our scripts set that no upstream project is meant to read, and why.
NOT_FOR_UPSTREAM = {
    (ENV, "GPU_ARCH"): "our scripts' input; rocm-env.sh turns it into the names upstreams read",
    (ENV, "COMPILER_LAUNCHER"): "our knob; build-knobs.sh turns it into CMake's *_COMPILER_LAUNCHER",
    (ENV, "CCACHE_DIR"): "read by ccache itself (--compiler-launcher): its cache outlives the work folder",
    (ENV, "SCCACHE_DIR"): "read by sccache itself (--compiler-launcher): its cache outlives the work folder",
    (ENV, "ROCM_STACK_PATCHES"): "read by record-patches.sh",
    (ENV, "WITH_AOTRITON"): "read by pytorch-rocm/build.sh",
    (ENV, "FLASH_ATTN_BACKEND"): "read by flash-attn/build.sh",
    (ENV, "AITER_TAG"): "read by aotriton/build.sh, which tags the aiter source with it",
    (ENV, "AITER_PREBUILD_KERNELS"): "our knob; aiter/build.sh hands it on as PREBUILD_KERNELS",
    (ENV, "AOTRITON_EXPERIMENTAL"): "read by rocm-sdk/build.sh",
    (ENV, "BUILD_MHA_LIB"): "read by composable-kernel/build.sh, which passes -DBUILD_MHA_LIB",
    (ENV, "NINJA_JOBS_FLAG"): "for our scripts' own ninja calls",
    (ENV, "ROCM_CMAKE_ARGS"): "for our scripts' own CMake calls",
    (ENV, "SITE_PACKAGES"): "read by rocm-sdk/build.sh and rocm-sdk-device/build.sh: where under $PREFIX the wheels go",
    (ENV, "PYTHON_VERSION"): "read by _shared/install_wheels.py and rocm_wheels.py: whose site-packages the wheels go to",
    (ENV, "PATH"): "the shell's",
    (ENV, "CPPFLAGS"): "the compilers'",
    (ENV, "CXXFLAGS"): "the compilers'",
    (ENV, "LDFLAGS"): "the linker's",
    (ENV, "PKG_CONFIG_PATH"): "pkg-config's",
    (ENV, "HIP_CLANG_LAUNCHER"): "read by hipcc, not by the project",
    (ENV, "HIP_DEVICE_LIB_PATH"): "read by ROCm's clang, not by the project",
    (ENV, "HIPCC_COMPILE_FLAGS_APPEND"): "read by hipcc, not by the project (hip-toolchain.sh: conda's GCC and sysroot)",
    (ENV, "HIPCC_LINK_FLAGS_APPEND"): "read by hipcc, not by the project (hip-toolchain.sh: conda's GCC and sysroot)",
    (ENV, "HIP_PLATFORM"): "read by hipcc and hip-config.cmake, not by the project",
    (ENV, "ROCM_CLANG_TOOLCHAIN_FLAGS"): "read by _shared/rocm-toolchain.cmake",
    (ENV, "SETUPTOOLS_SCM_PRETEND_VERSION"): "read by setuptools-scm",
    (ENV, "VCS_VERSIONING_PRETEND_VERSION"): "read by vcs-versioning (setuptools-scm >= 10)",
    (CMAKE, "Python3_EXECUTABLE"): "CMake's FindPython3",
    (CMAKE, "BUILD_SHARED_LIBS"): "CMake's own",
    (CMAKE, "BUILD_TESTING"): "CMake's CTest module",
}
# Whole families of names that belong to a tool.
NOT_FOR_UPSTREAM_PREFIXES = {(ENV, "CMAKE_"): "CMake's own", (ENV, "PIP_"): "pip's configuration",
                             (CMAKE, "CMAKE_"): "CMake's own"}


@dataclass(frozen=True)
class BuildName:
    """An environment variable or CMake option a script sets, and where."""

    kind: str  # ENV or CMAKE
    name: str
    where: str  # file:line
    source_dir: str | None = None  # the directory a `cmake -S` call points at (relative to $SRC_DIR), if any


@dataclass
class NameUse:
    """One name, the scripts that set it and the checkouts (recipe folders) one of which must read it."""

    kind: str
    name: str
    owner: str  # a recipe folder, or _shared/<script>
    where: list[str] = field(default_factory=list)
    readers: list[str] = field(default_factory=list)
    unchecked_source: str = ""  # set when the name is for a recipe's second source (no checkout convention)

    @property
    def id(self) -> str:
        return f"{self.owner}:{self.kind}:{self.name}"


@dataclass
class Outcome:
    status: str
    message: str


def not_for_upstream(kind: str, name: str) -> str | None:
    """Why a name is left out of the check, or None when upstream must read it."""
    if (kind, name) in NOT_FOR_UPSTREAM:
        return NOT_FOR_UPSTREAM[(kind, name)]
    return next((why for (k, prefix), why in NOT_FOR_UPSTREAM_PREFIXES.items() if k == kind and name.startswith(prefix)), None)


def names_in_script(text: str, label: str) -> list[BuildName]:
    """Variables a shell script exports or unsets, and every -DNAME=... option it writes."""
    found = []
    for number, line in _logical_lines(text):
        try:
            words = shlex.split(line, comments=True)
        except ValueError:
            words = line.split()
        where = f"{label}:{number}"
        if words[:1] == ["export"]:
            for word in words[1:]:
                match = re.match(r"([A-Za-z_]\w*)(?:=|$)", word)
                if match:
                    found.append(BuildName(ENV, match.group(1), where))
        elif words[:1] == ["unset"]:  # clearing an environment variable (upper case) is setting it too
            found += [BuildName(ENV, w, where) for w in words[1:] if re.fullmatch(r"[A-Z][A-Z0-9_]*", w)]
        source_dir = None
        if "cmake" in words and "-S" in words[:-1]:
            source_dir = words[words.index("-S") + 1]
        for word in words:
            for match in re.finditer(r"(?:^|[\s=])-D([A-Za-z_]\w*)(?::\w+)?=", word):
                found.append(BuildName(CMAKE, match.group(1), where, source_dir))
    return found


def _logical_lines(text: str):
    """(first line number, line) with backslash continuations joined and comment lines dropped."""
    pending, start = "", 0
    for number, raw in enumerate(text.splitlines(), 1):
        if not pending:
            start = number
            if raw.lstrip().startswith("#"):
                continue
        if raw.endswith("\\"):
            pending += raw[:-1] + " "
            continue
        yield start, pending + raw
        pending = ""
    if pending:
        yield start, pending


def recipe_scripts(recipe_dir: Path) -> tuple[list[tuple[str, str]], list[str], list[str]]:
    """(own scripts as (label, text), build.script.env names, shared scripts it runs, transitively)."""
    stage0 = load_recipe_yaml(recipe_dir / "recipe.yaml")
    script = (stage0.get("build") or {}).get("script")
    label = f"recipes/{recipe_dir.name}"
    own: list[tuple[str, str]] = []
    env_names: list[str] = []
    if isinstance(script, dict):
        env_names = sorted(script.get("env") or {})
        if script.get("content"):
            content = script["content"]
            own.append((f"{label}/recipe.yaml", "\n".join(content) if isinstance(content, list) else str(content)))
        else:
            path = recipe_dir / str(script.get("file") or "build.sh")
            if path.is_file():
                own.append((f"{label}/{path.name}", path.read_text()))
    elif isinstance(script, (str, list)):
        own.append((f"{label}/recipe.yaml", "\n".join(script) if isinstance(script, list) else script))
    elif (recipe_dir / "build.sh").is_file():
        own.append((f"{label}/build.sh", (recipe_dir / "build.sh").read_text()))
    shared_dir = recipe_dir.parent / SHARED_SCRIPTS
    shared = sorted(_shared_scripts_run(shared_dir, [text for _, text in own]))
    return own, env_names, shared


def _shared_scripts_run(shared_dir: Path, texts: list[str]) -> set[str]:
    available = {p.name for p in shared_dir.glob("*.sh")} if shared_dir.is_dir() else set()
    return shared_files_named(shared_dir, texts, available,
                              code=lambda text: "\n".join(line for _, line in _logical_lines(text)))


def name_uses(workspace: Path, pins: Pins, upstreams: Upstreams) -> list[NameUse]:
    """Every name the build scripts of upstream components set for upstream, with the checkouts one of
    which must read it."""
    component_recipes = {c.recipe for c in upstreams.components.values() if c.recipe}
    recipes_dir = workspace / "recipes"
    uses: dict[tuple, NameUse] = {}
    shared_users: dict[str, list[str]] = {}
    shared_names: dict[str, list[BuildName]] = {}

    def add(kind, name, owner, where, readers, unchecked=""):
        if not_for_upstream(kind, name):
            return
        use = uses.setdefault((owner, kind, name), NameUse(kind, name, owner, readers=list(readers), unchecked_source=unchecked))
        use.where.append(where)

    for recipe in sorted(pins.outputs):
        if recipe not in component_recipes:
            continue
        own, env_names, shared = recipe_scripts(recipes_dir / recipe)
        for script in shared:
            shared_users.setdefault(script, []).append(recipe)
            shared_names.setdefault(script, names_in_script((recipes_dir / SHARED_SCRIPTS / script).read_text(),
                                                            f"recipes/{SHARED_SCRIPTS}/{script}"))
        exported_by_shared = {n.name for s in shared for n in shared_names[s] if n.kind == ENV}
        for name in env_names:  # handed to the build by rattler-build; a shared script exporting it owns it
            if name not in exported_by_shared:
                add(ENV, name, recipe, f"recipes/{recipe}/recipe.yaml build.script.env", [recipe])
        for label, text in own:
            for found in names_in_script(text, label):
                second = _second_source(pins, recipe, found.source_dir)
                add(found.kind, found.name, recipe, found.where, [] if second else [recipe], second or "")
    for script, names in shared_names.items():
        for found in names:
            add(found.kind, found.name, f"{SHARED_SCRIPTS}/{script}", found.where, shared_users[script])
    return sorted(uses.values(), key=lambda u: u.id)


def _second_source(pins: Pins, recipe: str, source_dir: str | None) -> str | None:
    """The target directory of the recipe's non-first source a `cmake -S DIR` configures, if it is one."""
    if not source_dir:
        return None
    relative = re.sub(r"^\$\{?SRC_DIR\}?/?", "", source_dir).strip("/")
    top = relative.split("/", 1)[0] if relative not in ("", ".") else ""
    sources = pins.sources(recipe)
    for index, source in enumerate(sources):
        target = source.target_directory
        if top and target and top == target.split("/", 1)[0]:
            return None if index == 0 else target
    return None


def files_reading(checkout: Path, use_kind: str, name: str) -> list[str]:
    """Build files in the checkout that mention the name as a whole word (git grep; a plain walk without .git)."""
    patterns = ENV_FILES if use_kind == ENV else CMAKE_FILES
    if (checkout / ".git").exists():
        pathspecs = list(patterns) + [f":(exclude,glob){d}/**" for d in NOT_THE_BUILD] + \
                    [f":(exclude,glob)**/{d}/**" for d in ("test", "tests")]
        result = subprocess.run(["git", "-C", str(checkout), "grep", "-l", "-w", "-F", "-e", name, "--", *pathspecs],
                                capture_output=True, text=True)
        return result.stdout.splitlines()
    hits = []
    word = re.compile(rf"(?<!\w){re.escape(name)}(?!\w)")
    for path in _build_files(checkout, patterns):
        if word.search(path.read_text(errors="ignore")):
            hits.append(str(path.relative_to(checkout)))
    return hits


def _build_files(checkout: Path, patterns: tuple[str, ...]):
    for root, dirs, files in os.walk(checkout):
        rel = Path(root).relative_to(checkout)
        dirs[:] = [d for d in dirs if not (d in ("test", "tests", ".git") or (rel == Path(".") and d in NOT_THE_BUILD))]
        for file in files:
            if any(fnmatch.fnmatch(str(rel / file), p) for p in patterns):
                yield Path(root) / file


def check_name(use: NameUse, sources: Path) -> Outcome:
    where = ", ".join(use.where)
    if use.unchecked_source:
        return Outcome(SKIPPED, f"{use.name} ({where}) is for {use.owner}'s {use.unchecked_source} source, which "
                                "has no checkout under the sources folder")
    present = [r for r in use.readers if (sources / r).is_dir()]
    missing = [r for r in use.readers if r not in present]
    if not present:
        return Outcome(SKIPPED, f"no checkout of {', '.join(use.readers)}")
    for reader in present:
        files = sorted(files_reading(sources / reader, use.kind, use.name), key=_build_files_first)
        if files:
            return Outcome(OK, f"{use.name} is read by {reader}: {', '.join(files[:3])}")
    if missing:
        return Outcome(SKIPPED, f"{use.name} ({where}) is not read by {', '.join(present)}; "
                                f"{', '.join(missing)} not checked out")
    kind = "environment variable" if use.kind == ENV else "CMake option"
    return Outcome(FAILED, f"{kind} {use.name} ({where}) is read nowhere in {', '.join(present)}'s build files at "
                           "this commit: upstream renamed or dropped it; follow upstream or remove it")


def _build_files_first(path: str) -> tuple:
    name = path.rsplit("/", 1)[-1]
    return (name not in ("setup.py", "CMakeLists.txt", "pyproject.toml") and not name.endswith(".cmake"), path.count("/"), path)


def head_commit(checkout: Path) -> str | None:
    result = subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True)
    return result.stdout.strip() if result.returncode == 0 else None


def check_head(recipe: str, pins: Pins, sources: Path) -> Outcome:
    rev = pins.git_rev(recipe)
    checkout = sources / recipe
    if not checkout.is_dir():
        return Outcome(SKIPPED, f"no checkout of {recipe}")
    if rev is None:
        return Outcome(SKIPPED, f"{recipe}'s first source is not git: its version file is checked instead")
    head = head_commit(checkout)
    if head is None:
        return Outcome(FAILED, f"{checkout} is not a git checkout: clone {recipe}'s source there at {rev}")
    if head.lower() != rev.lower():
        return Outcome(FAILED, f"{checkout} is at {head[:12]}, the recipe pins {rev[:12]}: "
                               f"`git -C {checkout} checkout {rev}` (or fix the pin)")
    return Outcome(OK, f"HEAD is {rev[:12]}")


def check_value(check: Check, upstreams: Upstreams, pins: Pins, sources: Path) -> Outcome:
    checkout = sources / check.checkout
    if not pins.applies(check):
        return Outcome(SKIPPED, f"{check.where} is read only while {check.checkout}'s source is a {check.when_source} source")
    if not checkout.is_dir():
        return Outcome(SKIPPED, f"no checkout of {check.checkout}")
    expected = pins.expected(check)
    if expected is None:
        return Outcome(FAILED, f"our pins have no value for {check.wants.removeprefix('= ')}: fix {upstreams.path.name}")
    found = read_value(check, checkout)
    if found.status != OK:
        return found
    if _agrees(found.message, expected, check, upstreams):
        return Outcome(OK, f"{check.where} says {found.message}")
    needs = "at least " if check.upstream_is == MINIMUM else ""
    return Outcome(FAILED, f"{check.where} says {needs}{found.message}, our pin is {expected} "
                           f"({check.expect.get('version') or check.wants.removeprefix('= ')}): move the pins together")


def read_value(check: Check, checkout: Path) -> Outcome:
    if check.gitlink:
        result = subprocess.run(["git", "-C", str(checkout), "ls-tree", "HEAD", "--", check.gitlink],
                                capture_output=True, text=True)
        fields = result.stdout.split()
        if result.returncode != 0 or len(fields) < 3 or fields[1] != "commit":
            return Outcome(FAILED, f"{check.where}: no submodule at this commit (upstream moved it)")
        return Outcome(OK, fields[2])
    path = checkout / str(check.file)
    if not path.is_file():
        return Outcome(FAILED, f"{check.where}: no such file at this commit (upstream moved it)")
    match = re.search(str(check.pattern), path.read_text(errors="ignore"), re.M)
    if not match:
        return Outcome(FAILED, f"{check.where}: pattern {check.pattern!r} not found (upstream changed the file)")
    return Outcome(OK, ".".join(g for g in match.groups() if g is not None) or match.group(0))


def _agrees(found: str, expected: str, check: Check, upstreams: Upstreams) -> bool:
    if found.strip().lower() == expected.strip().lower():
        return True
    if "version" not in check.expect:
        return False
    owner = next((c for c in upstreams.components.values() if c.version_key == check.expect["version"]), None)
    parse = owner.parse_pin if owner else parse_version
    upstream, ours = parse(found.strip()), parse(expected.strip())
    if upstream is None or ours is None:
        return False
    return same_release(upstream, ours) or (check.upstream_is == MINIMUM and ours >= upstream)


def check_patch(patch: Path, recipe: str, sources: Path) -> Outcome:
    checkout = sources / recipe
    if not checkout.is_dir():
        return Outcome(SKIPPED, f"no checkout of {recipe}")
    result = subprocess.run(["git", "apply", "--check", str(patch)], cwd=checkout, capture_output=True, text=True)
    if result.returncode != 0:
        return Outcome(FAILED, f"{patch.name} does not apply to {checkout}: {result.stderr.strip()}")
    return Outcome(OK, f"{patch.name} applies")
