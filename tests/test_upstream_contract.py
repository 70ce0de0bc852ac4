"""The contract between our recipes and upstream, checked against checkouts at the pinned commits.

With ROCM_STACK_SOURCES=DIR holding one checkout per recipe folder (DIR/aotriton, DIR/flash-attn,
DIR/pytorch-rocm, ...; each the recipe's first source, TheRock for rocm-sdk): every pinned commit is its
checkout's HEAD, every patch applies, the files upstream pins things in agree with our pins (PyTorch's
triton.txt and aotriton.cmake, submodules, version files; declared in variants/upstreams.yaml), and every
environment variable and CMake option the build scripts set is read by upstream at that commit, and
vllm's run requirements cover what `vllm serve` imports (computed from the checkout, the unpacked
sdist at DIR/vllm) and account for every entry of requirements/common.txt + rocm.txt. Without the variable
these skip; a missing checkout skips its own tests. The last tests run the same logic on a synthetic
checkout, so it runs (and can fail) in CI.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from find_hip import prefix_lines, resolve_hip
from orchestrate import contract, glibc, import_contract
from orchestrate.imports import Root, conda_name, import_closure, normalize
from orchestrate.architectures import ArchitectureTable, write_variant_files
from orchestrate.upstreams import Upstreams, read_pins

REPO = Path(__file__).resolve().parent.parent
SOURCES_ENV = "ROCM_STACK_SOURCES"
SOURCES = Path(os.environ[SOURCES_ENV]) if os.environ.get(SOURCES_ENV) else None
needs_sources = pytest.mark.skipif(
    SOURCES is None, reason=f"set {SOURCES_ENV}=DIR with one checkout per recipe folder at the pinned commits "
                            "(DIR/aotriton, DIR/flash-attn, ...)")

UPSTREAMS = Upstreams.load(REPO / "variants")
PINS = read_pins(REPO, UPSTREAMS)
RECIPES = sorted({c.recipe for c in UPSTREAMS.components.values() if c.recipe})
CHECKS = UPSTREAMS.all_checks()
# patches/<recipe folder>/ holds the patches to that recipe's first source (some only for an opt-in variant)
PATCHES = [(p.parent.name, p) for p in sorted((REPO / "patches").rglob("*.patch"))]
USES = contract.name_uses(REPO, PINS, UPSTREAMS)


def settle(outcome: contract.Outcome) -> None:
    if outcome.status == contract.SKIPPED:
        pytest.skip(outcome.message)
    assert outcome.status == contract.OK, outcome.message


@needs_sources
@pytest.mark.parametrize("recipe", RECIPES)
def test_pinned_commit_is_the_checkouts_head(recipe):
    settle(contract.check_head(recipe, PINS, SOURCES))


@needs_sources
@pytest.mark.parametrize("owner,check", CHECKS, ids=[f"{o}:{c.file or c.gitlink}" for o, c in CHECKS])
def test_upstream_agrees_with_our_pins(owner, check):
    settle(contract.check_value(check, UPSTREAMS, PINS, SOURCES))


@needs_sources
@pytest.mark.parametrize("recipe,patch", PATCHES, ids=[f"{r}:{p.name}" for r, p in PATCHES])
def test_patch_applies_to_the_pinned_source(recipe, patch):
    settle(contract.check_patch(patch, recipe, SOURCES))


@needs_sources
@pytest.mark.parametrize("use", USES, ids=[u.id for u in USES])
def test_upstream_reads_what_the_build_scripts_set(use):
    settle(contract.check_name(use, SOURCES))


@needs_sources
@pytest.mark.parametrize("spec", import_contract.IMPORT_CONTRACTS, ids=[c.recipe for c in import_contract.IMPORT_CONTRACTS])
def test_run_requirements_cover_what_users_run_imports(spec):
    settle(import_contract.check_imports_covered(spec, REPO, SOURCES))


@needs_sources
@pytest.mark.parametrize("spec", import_contract.IMPORT_CONTRACTS, ids=[c.recipe for c in import_contract.IMPORT_CONTRACTS])
def test_every_upstream_requirement_is_required_or_left_out_with_a_reason(spec):
    settle(import_contract.check_requirements_accounted(spec, REPO, SOURCES))


@needs_sources
@pytest.mark.parametrize("spec", import_contract.MODULE_CONTRACTS,
                         ids=[f"{c.importer}->{c.provider}" for c in import_contract.MODULE_CONTRACTS])
def test_every_module_vllm_imports_from_aiter_exists_at_our_aiter_pin(spec):
    settle(import_contract.check_modules_exist(spec, SOURCES))


# --- what runs in CI, without sources ---------------------------------------------------------------------

@needs_sources
@pytest.mark.parametrize("recipe", ["aotriton", "composable-kernel"])
def test_upstreams_own_prefix_path_lines_take_the_sdks_hip_through_the_wiring(recipe, tmp_path):
    """aotriton and CK append /opt/rocm to CMAKE_PREFIX_PATH before find_package(hip): their own lines, run by real
    CMake with a decoy where /opt/rocm was, take the SDK's hip with recipes/_shared/rocm-toolchain.cmake and the
    decoy's without (tests/find_hip.py)."""
    cmakelists = SOURCES / recipe / "CMakeLists.txt"
    if not cmakelists.is_file():
        pytest.skip(f"no checkout at {cmakelists.parent}")
    lines = prefix_lines(cmakelists.read_text())
    assert any("/opt/rocm" in line for line in lines), f"{recipe} no longer appends /opt/rocm: {lines}"
    assert resolve_hip(lines, tmp_path, wired=True) == str(tmp_path / "sdk/lib/cmake/hip")
    assert "DECOY" in resolve_hip(lines, tmp_path, wired=False)


def test_every_pinned_version_has_an_upstream():
    shared = yaml.safe_load((REPO / "variants" / "shared.yaml").read_text())
    declared = {c.version_key for c in UPSTREAMS.components.values() if c.version_key not in UPSTREAMS.table_versions}
    # c_stdlib_version is conda-forge's key for the sysroot's glibc (what `stdlib("c")` reads), no upstream's release
    assert {k for k in shared if k.endswith("_version") and k != glibc.STACK_BOUND_KEY} == declared


def test_every_tarball_source_is_checked_through_a_version_file():
    """A tarball has no commit to compare with HEAD; its checkout's version file stands in."""
    for component in UPSTREAMS.components.values():
        source = PINS.primary_source(component.recipe)
        if source and source.kind == "url":
            assert any(c.checkout == component.recipe and c.expect.get("version") == component.version_key
                       and PINS.applies(c) for c in component.checks), \
                f"{component.name}: declare a version-file check in upstreams.yaml"


def test_every_check_has_a_pinned_value_to_compare_with():
    for owner, check in CHECKS:
        assert PINS.expected(check), f"{owner}: {check.where} {check.wants} names no pin"


def test_names_left_out_are_set_by_some_script():
    """The list of names that are not for upstream must not outlive the scripts that set them."""
    texts = [p.read_text() for p in (REPO / "recipes" / "_shared").iterdir() if p.is_file()]
    texts += [p.read_text() for p in (REPO / "recipes").glob("*/build.sh")]
    texts += [p.read_text() for p in (REPO / "recipes").glob("*/recipe.yaml")]
    for kind, name in contract.NOT_FOR_UPSTREAM:
        marker = f"-D{name}=" if kind == contract.CMAKE else name
        assert any(marker in t for t in texts), f"{name} is set by no script: drop it from NOT_FOR_UPSTREAM"


def test_the_scripts_names_are_found():
    """The extraction itself, on the real scripts: exports, -D options inside strings, unset, recipe env."""
    ids = {u.id for u in USES}
    assert {"pytorch-rocm:env:USE_ROCM", "pytorch-rocm:env:PYTORCH_BUILD_VERSION", "aotriton:cmake:AOTRITON_TARGET_ARCH",
            "vllm:env:VLLM_REQUIRE_RUST_FRONTEND", "_shared/rocm-env.sh:env:PYTORCH_ROCM_ARCH",
            "_shared/rocm-env.sh:cmake:GPU_TARGETS", "_shared/build-knobs.sh:env:MAX_JOBS"} <= ids
    # our own names (rocm-sdk's recipe env sets SITE_PACKAGES and PYTHON_VERSION for our scripts) are not checked
    assert not any(u.name in ("GPU_ARCH", "CMAKE_BUILD_TYPE", "ROCM_STACK_PATCHES", "SITE_PACKAGES", "PYTHON_VERSION")
                   for u in USES)
    llvm = [u for u in USES if u.name == "LLVM_ENABLE_PROJECTS"]
    assert llvm and llvm[0].unchecked_source == "llvm-project"  # triton-rocm's second source


# --- the contract logic on a synthetic upstream ------------------------------------------------------------

def git(*args: str, cwd: Path) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@localhost", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@localhost", "PATH": os.environ["PATH"], "HOME": str(cwd), "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True, env=env).stdout.strip()


SYNTHETIC_CMAKE = """cmake_minimum_required(VERSION 3.20)
project(demo VERSION 1.2.0)
option(DEMO_ENABLE_FAST "fast kernels" OFF)
set(DEMO_HOME "$ENV{DEMO_HOME}")
"""
SYNTHETIC_BUILD = """#!/usr/bin/env bash
set -euo pipefail
# export DEMO_IN_A_COMMENT=1 is not set
export DEMO_HOME="$PREFIX" CMAKE_PREFIX_PATH="$PREFIX"
cmake -S . -B build \\
    -DCMAKE_BUILD_TYPE=Release \\
    -DDEMO_ENABLE_FAST=ON \\
    -DDEMO_GONE:BOOL=ON
"""


@pytest.fixture
def synthetic(tmp_path):
    """A workspace with one recipe, `demo`, whose upstream is a local repository; sources/demo checks it out."""
    upstream = tmp_path / "upstream"
    upstream.mkdir()
    git("init", "-q", cwd=upstream)
    (upstream / "CMakeLists.txt").write_text(SYNTHETIC_CMAKE)
    (upstream / "VERSION").write_text("1.2.0\n")
    (upstream / "MINIMUM").write_text("works with demo >= 1.1.0\n")
    (upstream / "src.c").write_text("int demo(void) { return 1; }\n")
    git("add", "-A", cwd=upstream)
    git("update-index", "--add", "--cacheinfo", f"160000,{'ab' * 20},third_party/dep", cwd=upstream)
    git("commit", "-q", "-m", "demo 1.2.0", cwd=upstream)
    commit = git("rev-parse", "HEAD", cwd=upstream)

    workspace = tmp_path / "ws"
    (workspace / "variants").mkdir(parents=True)
    shutil.copy(REPO / "variants" / "architectures.yaml", workspace / "variants")
    write_variant_files(ArchitectureTable.load(workspace / "variants"), workspace / "variants")
    (workspace / "variants" / "shared.yaml").write_text('demo_version: ["1.2.0"]\n')
    (workspace / "variants" / "upstreams.yaml").write_text(yaml.safe_dump({
        "components": {"demo": {"version": "demo_version", "recipe": "demo", "releases": [{"pypi": "demo"}], "checks": [
            {"checkout": "demo", "file": "VERSION", "pattern": r"^(\S+)", "expect": {"version": "demo_version"}},
            {"checkout": "demo", "gitlink": "third_party/dep", "expect": {"env": "demo", "name": "DEP_COMMIT"}},
            {"checkout": "demo", "file": "PKG-INFO", "pattern": r"^Version: (\S+)", "expect": {"version": "demo_version"},
             "when_source": "url"},  # only sdists have it; demo's source is git
            {"checkout": "demo", "file": "CMakeLists.txt", "pattern": r"cmake_minimum_required\(VERSION (\S+)\)",
             "expect": {"version": "demo_version"}, "upstream_is": "minimum"},  # 3.20 > 1.2.0: fails
            {"checkout": "demo", "file": "MINIMUM", "pattern": r">= (\S+)", "expect": {"version": "demo_version"},
             "upstream_is": "minimum"},  # 1.1.0 <= 1.2.0: holds
        ]}}}))
    recipe = workspace / "recipes" / "demo"
    recipe.mkdir(parents=True)
    patch_dir = workspace / "patches" / "demo"
    patch_dir.mkdir(parents=True)
    (recipe / "build.sh").write_text(SYNTHETIC_BUILD)
    (recipe / "recipe.yaml").write_text(f"""schema_version: 1
package:
  name: demo
  version: ${{{{ demo_version }}}}
source:
  - git: {upstream.as_uri()}
    rev: {commit}
    patches:
      - ../../patches/demo/0001-demo.patch
build:
  script:
    file: build.sh
    env:
      GPU_ARCH: ${{{{ gpu_arch }}}}
      DEMO_FLAVOUR: fast
      DEP_COMMIT: "{'ab' * 20}"
""")
    (patch_dir / "0001-demo.patch").write_text(
        "Why: demo\nUpstream: none\nApplies to: demo 1.2.0\n\n"
        "--- a/src.c\n+++ b/src.c\n@@ -1 +1 @@\n-int demo(void) { return 1; }\n+int demo(void) { return 2; }\n")
    sources = tmp_path / "sources"
    sources.mkdir()
    subprocess.run(["git", "clone", "-q", str(upstream), str(sources / "demo")], check=True, capture_output=True)
    upstreams = Upstreams.load(workspace / "variants")
    return workspace, upstreams, read_pins(workspace, upstreams), sources


def test_contract_logic_on_a_synthetic_checkout(synthetic):
    workspace, upstreams, pins, sources = synthetic
    checkout = sources / "demo"
    assert contract.check_head("demo", pins, sources).status == contract.OK
    checks = upstreams.all_checks()
    outcomes = [contract.check_value(c, upstreams, pins, sources) for _, c in checks]
    assert [o.status for o in outcomes] == [contract.OK, contract.OK, contract.SKIPPED, contract.FAILED, contract.OK]
    assert "says at least 3.20, our pin is 1.2.0" in outcomes[3].message
    patch = workspace / "patches" / "demo" / "0001-demo.patch"
    assert contract.check_patch(patch, "demo", sources).status == contract.OK

    outcomes = {u.id: contract.check_name(u, sources) for u in contract.name_uses(workspace, pins, upstreams)}
    assert set(outcomes) == {"demo:env:DEMO_HOME", "demo:cmake:DEMO_ENABLE_FAST", "demo:cmake:DEMO_GONE",
                             "demo:env:DEMO_FLAVOUR", "demo:env:DEP_COMMIT"}
    assert outcomes["demo:env:DEMO_HOME"].status == contract.OK
    assert outcomes["demo:cmake:DEMO_ENABLE_FAST"].status == contract.OK
    gone = outcomes["demo:cmake:DEMO_GONE"]
    assert gone.status == contract.FAILED and "CMake option DEMO_GONE (recipes/demo/build.sh:5)" in gone.message
    assert outcomes["demo:env:DEMO_FLAVOUR"].status == contract.FAILED

    # upstream moves on: the checkout's HEAD, its version file and its submodule no longer match the pins
    (checkout / "VERSION").write_text("1.3.0\n")
    git("update-index", "--cacheinfo", f"160000,{'cd' * 20},third_party/dep", cwd=checkout)
    git("commit", "-q", "-am", "demo 1.3.0", cwd=checkout)
    head = contract.check_head("demo", pins, sources)
    assert head.status == contract.FAILED and "the recipe pins" in head.message
    version, dep = (contract.check_value(c, upstreams, pins, sources) for _, c in checks[:2])
    assert version.status == contract.FAILED and "demo: VERSION says 1.3.0, our pin is 1.2.0" in version.message
    assert dep.status == contract.FAILED and "cd" * 20 in dep.message
    (checkout / "src.c").write_text("int demo(void) { return 3; }\n")
    assert contract.check_patch(patch, "demo", sources).status == contract.FAILED


def test_contract_skips_what_has_no_checkout(synthetic):
    workspace, upstreams, pins, sources = synthetic
    shutil.rmtree(sources / "demo")
    assert contract.check_head("demo", pins, sources).status == contract.SKIPPED
    assert all(contract.check_value(c, upstreams, pins, sources).status == contract.SKIPPED for _, c in upstreams.all_checks())
    assert all(contract.check_name(u, sources).status == contract.SKIPPED for u in contract.name_uses(workspace, pins, upstreams))


# --- the import analysis on a synthetic package -------------------------------------------------------------

DEMO_PACKAGE = {
    "demo/__init__.py": "import typing\nfrom .core import run\nif typing.TYPE_CHECKING:\n    import typeonly\n",
    "demo/server.py": "from demo.core import run\n",
    "demo/core.py": """import sys
import numpy as np
import yaml
from demo import helpers


def later():
    import lazyfn


try:
    import optional_a
except ImportError:
    optional_a = None
try:
    import fast_json
except (ModuleNotFoundError, AttributeError):
    fast_json = None
try:
    import must_have
except RuntimeError:
    raise
if sys.platform == "win32":
    import winonly


class Settings:
    import inclass


def run():
    return np, yaml, helpers
""",
    "demo/helpers.py": "from . import sub\nfrom .sub.leaf import thing\nfrom PIL import Image\n",
    "demo/sub/__init__.py": "",
    "demo/sub/leaf.py": "import zmq\nthing = 1\n",
    "demo/unreached.py": "import never\n",
    "demo/cli.py": "import os\n\n\ndef main():\n    import demo.commands\n\n\ndef other():\n    import notrun\n",
    "demo/commands.py": "import uvloop\n",
    "requirements/common.txt": "numpy\npyyaml >= 6  # config\npillow\npyzmq\nuvloop\npytest  # tests\n",
    "requirements/rocm.txt": "-r common.txt\nwinonly; sys_platform == 'win32'\n",
}
DEMO_RECIPE = """package: {name: demo, version: "1.0"}
requirements:
  run:
    - python
    - numpy
    - pyyaml
    - pillow
    - pyzmq
    - if: with_extras
      then: [uvloop]
    - ${{ pin_compatible("inclass") }}
    - must-have
extra:
  left_out_requirements:
    pytest: test-only
    winonly: Windows only
"""
DEMO_CONTRACT = import_contract.ImportContract("demo", "demo", (Root("demo.server"), Root("demo.cli", "main")),
                                               ("requirements/rocm.txt",), "`demo serve`")


@pytest.fixture
def demo(tmp_path):
    """A workspace with recipes/demo, and sources/demo: the package source and its requirement files."""
    for name, text in DEMO_PACKAGE.items():
        path = tmp_path / "sources" / "demo" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    recipe = tmp_path / "ws" / "recipes" / "demo" / "recipe.yaml"
    recipe.parent.mkdir(parents=True)
    recipe.write_text(DEMO_RECIPE)
    return tmp_path / "ws", tmp_path / "sources", recipe


def test_import_analysis_follows_what_importing_runs(demo):
    _, sources, _ = demo
    closure = import_closure(sources / "demo", "demo", list(DEMO_CONTRACT.roots))
    # module level, class bodies, relative and `from pkg import submodule` imports, the entry point's main()
    assert set(closure.third_party) == {"numpy", "yaml", "PIL", "zmq", "inclass", "must_have", "uvloop"}
    assert closure.third_party["uvloop"] == "demo/commands.py:1"
    # only under a platform check
    assert set(closure.conditional) == {"winonly"} and "sys.platform == 'win32'" in closure.conditional["winonly"]
    # not followed: other functions, TYPE_CHECKING, try/except ImportError, modules nothing imports
    assert {"demo", "demo.core", "demo.helpers", "demo.sub", "demo.sub.leaf", "demo.cli", "demo.commands"} <= \
        closure.package_modules
    assert "demo.unreached" not in closure.package_modules


def test_import_contract_fails_on_drift(demo):
    workspace, sources, recipe = demo
    covered = import_contract.check_imports_covered(DEMO_CONTRACT, workspace, sources)
    accounted = import_contract.check_requirements_accounted(DEMO_CONTRACT, workspace, sources)
    assert (covered.status, accounted.status) == (contract.OK, contract.OK), (covered.message, accounted.message)

    # upstream starts importing a package the recipe lacks, and lists a new requirement
    commands = sources / "demo" / "demo" / "commands.py"
    commands.write_text(commands.read_text() + "import openai_harmony\n")
    common = sources / "demo" / "requirements" / "common.txt"
    common.write_text(common.read_text() + "xgrammar == 0.2.8\n")
    covered = import_contract.check_imports_covered(DEMO_CONTRACT, workspace, sources)
    assert covered.status == contract.FAILED
    assert "openai_harmony (demo/commands.py:2) needs run requirement oss-harmony" in covered.message
    accounted = import_contract.check_requirements_accounted(DEMO_CONTRACT, workspace, sources)
    assert accounted.status == contract.FAILED
    assert "xgrammar (requirements/common.txt:7) is neither a run requirement" in accounted.message

    # the recipe leaves out something imported unconditionally, and keeps a reason for a dropped requirement
    recipe.write_text(DEMO_RECIPE.replace("    - pyzmq\n", "").replace(
        "    pytest: test-only\n", "    pytest: test-only\n    pyzmq: optional\n    six: was for pandas\n"))
    accounted = import_contract.check_requirements_accounted(DEMO_CONTRACT, workspace, sources)
    assert "pyzmq is imported unconditionally by `demo serve`: it cannot be left out" in accounted.message
    assert "left_out_requirements.six is no longer an upstream requirement nor imported: drop it" in accounted.message
    assert import_contract.check_imports_covered(DEMO_CONTRACT, workspace, sources).status == contract.FAILED


def test_vllm_recipe_leaves_out_nothing_it_requires():
    """What runs without the sdist: every left-out entry has a reason and is not also required."""
    recipe = REPO / "recipes" / "vllm" / "recipe.yaml"
    run, left_out = import_contract.run_requirement_names(recipe), import_contract.left_out_requirements(recipe)
    assert {"oss-harmony", "xgrammar", "uvloop", "pytorch", "triton"} <= run
    assert left_out and all(left_out.values())
    assert not {n for n in left_out if normalize(conda_name(n)) in run}


# A vLLM-like importer and an aiter-like provider: what vLLM's code does (imports in functions, a new module
# path tried before the old one, flat names aiter maps to new ones).
IMPORTER = {
    "user/__init__.py": "",
    "user/ops.py": ("def kernel():\n    from prov.ops.kernel import run\n    import prov.ops.gone\n\n\n"
                    "def routing():\n    try:\n        from prov.ops.moe.routing import r\n"
                    "    except ImportError:\n        from prov.ops.routing import r\n"
                    "    from prov.ops import flat_name\n    from prov.ops.kernel import not_a_module\n"),
    "user/optional.py": "try:\n    import prov.ops.extra\nexcept ImportError:\n    extra = None\n",
}
PROVIDER = {
    "prov/__init__.py": "",
    "prov/ops/__init__.py": "_ALIASES = {'flat_name': 'deep.flat_name'}\n",
    "prov/ops/kernel.py": "def run(): pass\n",
    "prov/ops/routing.py": "r = 1\n",
    "prov/ops/deep/__init__.py": "",
    "prov/ops/deep/flat_name.py": "",
}


def test_module_contract_finds_what_the_provider_lacks(tmp_path):
    for files, root in ((IMPORTER, "user"), (PROVIDER, "prov")):
        for name, text in files.items():
            (tmp_path / root / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / root / name).write_text(text)
    spec = import_contract.ModuleContract("user", "prov", (("prov.ops", "_ALIASES"),))
    outcome = import_contract.check_modules_exist(spec, tmp_path)
    # only prov.ops.gone: the old routing path stands in for the new one, flat_name is mapped, the optional
    # import copes without its module, and not_a_module is a name in kernel.py
    assert outcome.status == contract.FAILED
    assert outcome.message.endswith("do not exist at our prov pin: prov.ops.gone (user/ops.py:3)"), outcome.message
    (tmp_path / "prov/prov/ops/gone.py").write_text("")
    assert import_contract.check_modules_exist(spec, tmp_path).status == contract.OK
    (tmp_path / "prov/prov/ops/routing.py").unlink()
    assert "none of: prov.ops.moe.routing (user/ops.py:8) | prov.ops.routing (user/ops.py:10)" in \
        import_contract.check_modules_exist(spec, tmp_path).message
    assert import_contract.check_modules_exist(spec, tmp_path / "nowhere").status == contract.SKIPPED


@needs_sources
def test_every_module_and_name_vllms_recipe_test_imports_exists_in_the_pinned_vllm():
    """recipes/vllm/check_import_path.py runs vLLM's own import path; each module it names and each name it takes
    from vLLM must be in the pinned sdist (DIR/vllm), or the recipe test fails for our reason, not vLLM's."""
    checkout = SOURCES / "vllm"
    if not checkout.is_dir():
        pytest.skip(f"no {checkout}")
    script = (REPO / "recipes/vllm/check_import_path.py").read_text()
    block = script.split("SERVE_PATH = (", 1)[1].split("\n)", 1)[0]
    modules = re.findall(r'"(vllm[\w.]*)"', block)
    assert modules
    missing = [m for m in modules if not (checkout / (m.replace(".", "/") + ".py")).is_file()
               and not (checkout / m.replace(".", "/") / "__init__.py").is_file()]
    assert not missing, missing
    rocm = (checkout / "vllm/platforms/rocm.py").read_text()
    assert "def _get_backend_priorities(" in rocm and "def import_kernels(cls)" in rocm
    assert "HAS_TRITON" in (checkout / "vllm/triton_utils/__init__.py").read_text()
