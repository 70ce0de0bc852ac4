"""`orchestrate lint` (orchestrate/lint.py): every real recipe passes conda-smithy's rules that fit a private
channel for every architecture on both PyTorch paths, and a copy of a real recipe broken in one way fails
with that rule's name, naming the recipe (and output) to fix. A toy recipe shows the rules that need a
made-up case: a glibc bound above c_stdlib_version that is no problem, and all the rules at once."""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from orchestrate import cli
from orchestrate.architectures import ArchitectureTable
from orchestrate.lint import RULES, lint_workspace, package_contents_problems

REPO = Path(__file__).resolve().parent.parent
ARCH = "gfx1151"  # the broken copies render for one architecture (both paths); the real recipes for all


@pytest.fixture(scope="module")
def real():
    return lint_workspace(REPO)


def test_every_real_recipe_passes_for_every_architecture_on_both_pytorch_paths(real):
    assert real.archs == ArchitectureTable.load(REPO / "variants").names()
    assert real.recipes == len(list((REPO / "recipes").glob("*/recipe.yaml"))) and real.outputs > 100
    assert not real.problems, "\n".join(p.line() for p in real.problems)


def workspace_with(root: Path, folders: dict[str, str]) -> Path:
    """A workspace of the real variants/ and patches/ and copies of some real recipe folders, their
    recipe.yaml replaced by the given text."""
    (root / "recipes").mkdir(parents=True)
    for name in ("variants", "patches"):
        (root / name).symlink_to(REPO / name)
    for folder, text in folders.items():
        shutil.copytree(REPO / "recipes" / folder, root / "recipes" / folder)
        (root / "recipes" / folder / "recipe.yaml").write_text(text)
    return root


def real_text(folder: str) -> str:
    return (REPO / "recipes" / folder / "recipe.yaml").read_text()


def edit(text: str, pattern: str, replacement: str) -> str:
    """One regex edit (multiline) that must apply: a recipe that no longer matches fails the test loudly."""
    changed, count = re.subn(pattern, replacement, text, flags=re.M)
    assert count, f"the edit {pattern!r} no longer applies to the recipe: update this test"
    return changed


CK = "recipes/composable-kernel/recipe.yaml"
# (rule, recipe folder, regex, replacement, where the problem is reported)
BREAKS = [
    ("stdlib", "composable-kernel", r"^[ \t]*- \$\{\{ stdlib\(['\"]c['\"]\) \}\}\n", "", CK),
    # written, but in a branch this variant does not take: only the rendered recipe tells
    ("stdlib", "composable-kernel", r"^([ \t]*)- (\$\{\{ stdlib\(['\"]c['\"]\) \}\})$",
     r'\1- if: gpu_arch == "none"\n\1  then: \2', CK),
    ("source-hash", "vllm", r"^    sha256: \$\{\{ vllm_sdist_sha256 \}\}\n", "", "recipes/vllm/recipe.yaml"),
    ("source-hash", "composable-kernel", r"^  rev: \$\{\{ ck_commit \}\}$", "  rev: develop", f"{CK} composable-kernel"),
    ("license", "composable-kernel", r"^  license: MIT\n", "", f"{CK} composable-kernel"),
    ("license-file", "composable-kernel", r"^  license_file:.*\n(?:    - .*\n)*", "", f"{CK} composable-kernel"),
    ("about", "composable-kernel", r"^  summary: .*\n", "", f"{CK} composable-kernel"),
    ("tests", "composable-kernel", r"^tests:\n(?:(?: .*)?\n)*", "", f"{CK} composable-kernel"),
    ("build-number", "composable-kernel", r"^  number: 0\n", "", CK),
    ("build-in-host", "composable-kernel", r"^  build:\n(?=    - \$\{\{ compiler)", "  build:\n    - python\n",
     f"{CK} composable-kernel"),
    ("pin-subpackage", "composable-kernel", r'\$\{\{ pin_subpackage\(name, upper_bound="x.x.x"\) \}\}',
     "composable-kernel", f"{CK} composable-kernel"),
    ("pin-subpackage", "pytorch-prebuilt", r'pin_subpackage\("pytorch", exact=True\)', 'pin_compatible("pytorch")',
     "recipes/pytorch-prebuilt/recipe.yaml torchvision"),
    ("noarch", "rocm-stack-check", r"^  run:\n    - python >=3\.10\n", "  run:\n    - python\n",
     "recipes/rocm-stack-check/recipe.yaml rocm-stack-check"),
    ("noarch", "rocm-stack-check", r"^  noarch: python\n", "  noarch: python\n  skip:\n    - not linux\n",
     "recipes/rocm-stack-check/recipe.yaml rocm-stack-check"),
    ("renders", "composable-kernel", r"^  license: MIT$", "  license: MIT-ish", ARCH),
    # a misspelt conda-forge name (conda-forge's is matplotlib-base), even in run_constraints: the guard does nothing
    ("conda-forge-name", "rocm-stack-check", r"^    - matplotlib-base ", "    - matplotlib_base ",
     "recipes/rocm-stack-check/recipe.yaml rocm-stack-check"),
    # the entry aiter's test once had: a folder, which rattler-build never matches
    ("package-contents", "aiter", r"aiter_meta/csrc/\*\*", "aiter_meta/csrc", "recipes/aiter/recipe.yaml aiter"),
]


@pytest.fixture(scope="module")
def unbroken(tmp_path_factory):
    """The real folders the cases break, linted as they are: each case's problem must be absent here."""
    folders = {folder: real_text(folder) for _, folder, *_ in BREAKS}
    return lint_workspace(workspace_with(tmp_path_factory.mktemp("unbroken"), folders), [ARCH]).problems


def test_every_rule_is_broken_by_some_case():
    assert {rule for rule, *_ in BREAKS} == set(RULES)


@pytest.mark.parametrize("rule, folder, pattern, replacement, where", BREAKS,
                         ids=[f"{b[0]}-{b[1]}-{i}" for i, b in enumerate(BREAKS)])
def test_a_broken_copy_fails_with_the_rules_name(tmp_path, unbroken, rule, folder, pattern, replacement, where):
    broken = edit(real_text(folder), pattern, replacement)
    problems = lint_workspace(workspace_with(tmp_path, {folder: broken}), [ARCH]).problems
    found = [p for p in problems if p.rule == rule and p.where.startswith(where)]
    assert found, "\n".join(p.line() for p in problems)
    assert all(p.fix.strip() for p in found)
    assert not [p for p in unbroken if p.rule == rule and p.where.startswith(where)], "the real recipe already fails"


# -- a toy recipe ------------------------------------------------------------------------------------------
TOY = """\
schema_version: 1
package:
  name: toy
  version: "1.0"
source:
  url: https://example.com/toy-1.0.tar.gz
  sha256: 5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03
build:
  number: 0
  script: mkdir -p $PREFIX/share/toy && touch $PREFIX/share/toy/x
requirements:
  build:
    - ${{ compiler("c") }}
    - ${{ stdlib("c") }}
  host:
    - python
  run:
    - python
    - __glibc >=2.28
tests:
  - package_contents:
      files:
        - share/toy/x
about:
  license: MIT
  license_file: LICENSE
  summary: A toy
"""
# the same toy, wrong in every way a rule names
BAD_TOY = """\
schema_version: 1
package:
  name: toy
  version: "1.0"
source:
  - url: https://example.com/toy-1.0.tar.gz
  - git: https://example.com/toy.git
    tag: v1.0
build:
  noarch: python
  skip:
    - not linux
  script: mkdir -p $PREFIX/share/toy && touch $PREFIX/share/toy/x
requirements:
  build:
    - ${{ compiler("c") }}
    - pip
  host:
    - python
  run:
    - python
    - toy
    - numpyy
"""


def toy_workspace(root: Path, recipe: str, c_stdlib_version: str) -> Path:
    (root / "recipes" / "toy").mkdir(parents=True)
    (root / "recipes" / "toy" / "recipe.yaml").write_text(recipe)
    shutil.copytree(REPO / "variants", root / "variants")
    shared = root / "variants" / "shared.yaml"
    text = re.sub(r"^c_stdlib(_version)?:.*\n(?:  - .*\n)*", "", shared.read_text(), flags=re.M)
    shared.write_text(text + f"\nc_stdlib: [sysroot]\nc_stdlib_version: ['{c_stdlib_version}']\n")
    return root


def test_a_toy_recipe_that_follows_every_rule_passes(tmp_path):
    result = lint_workspace(toy_workspace(tmp_path, TOY, "2.28"), [ARCH])
    assert not result.problems, "\n".join(p.line() for p in result.problems)
    assert result.outputs == 2  # one per PyTorch path


def test_a_glibc_bound_above_c_stdlib_version_is_no_problem(tmp_path):
    """A repackaged manylinux_2_34 wheel rightly requires __glibc >=2.34; the compiled packages keep the 2.28
    sysroot (conda-smithy's lint_stdlib compares no such bounds)."""
    toy = TOY.replace("__glibc >=2.28", "__glibc >=2.34")
    result = lint_workspace(toy_workspace(tmp_path, toy, "2.28"), [ARCH])
    assert not result.problems, "\n".join(p.line() for p in result.problems)


def test_a_toy_recipe_wrong_in_every_way_gets_one_line_per_problem(tmp_path):
    lines = [p.line() for p in lint_workspace(toy_workspace(tmp_path, BAD_TOY, "2.28"), [ARCH]).problems]
    rules = {line.split(":", 1)[0] for line in lines}
    # no tests at all (the `tests` rule), so no package_contents entry to be wrong: BREAKS and the build below cover it
    assert rules == set(RULES) - {"renders", "package-contents"}, "\n".join(lines)
    assert any(line.startswith("source-hash: recipes/toy/recipe.yaml: source https://example.com/toy-1.0.tar.gz "
                               "has no sha256") for line in lines)
    assert any(line.startswith("source-hash: recipes/toy/recipe.yaml: git source https://example.com/toy.git has "
                               "no rev") for line in lines)
    assert any(line.startswith("build-in-host: recipes/toy/recipe.yaml toy: pip is in requirements.build") for line in lines)
    assert any(line.startswith("pin-subpackage: recipes/toy/recipe.yaml toy: run names toy") for line in lines)
    assert ("conda-forge-name: recipes/toy/recipe.yaml toy: run names numpyy, which variants/conda-forge-names.txt "
            "does not list: check that conda-forge has it (https://github.com/conda-forge/feedstock-outputs/blob/main/"
            "outputs/n/u/m/numpyy.json), then add it to variants/conda-forge-names.txt") in "\n".join(lines)


def test_the_command_prints_each_problem_and_exits_1_and_0_when_clean(tmp_path, capsys):
    bad = toy_workspace(tmp_path / "bad", BAD_TOY, "2.28")
    assert cli.main(["lint", "--workspace", str(bad), "--arch", ARCH]) == 1
    out, err = capsys.readouterr()
    assert "tests: recipes/toy/recipe.yaml toy: no tests" in out
    assert re.search(r"error: \d+ lint problem\(s\) \(.*tests.*\) in 1 recipes, 2 rendered outputs", err)
    good = toy_workspace(tmp_path / "good", TOY, "2.28")
    assert cli.main(["lint", "--workspace", str(good), "--arch", ARCH]) == 0
    assert f"pass all {len(RULES)} rules" in capsys.readouterr().out
    assert cli.main(["lint", "--workspace", str(good), "--arch", "gfx9999"]) == 2
    assert "error: --arch gfx9999 is not in variants/architectures.yaml: pass one of" in capsys.readouterr().err


# -- variants/conda-forge-names.txt ------------------------------------------------------------------------
def names_file(root: Path, text: str) -> None:
    (root / "variants" / "conda-forge-names.txt").write_text(text)


def test_a_name_conda_forge_lacks_is_only_a_never_installed_run_constraint(tmp_path):
    toy = TOY.replace("    - __glibc >=2.28\n", "    - __glibc >=2.28\n    - vllm-rocm\n  run_constraints:\n"
                      "    - flash-attn-rocm <0.0a0\n")
    workspace = toy_workspace(tmp_path, toy, "2.28")
    names_file(workspace, "# header\npython  # the toy's\nflash-attn-rocm <0.0a0\nvllm-rocm <0.0a0\nnumpy >=2\n")
    lines = [p.line() for p in lint_workspace(workspace, [ARCH]).problems]
    assert lines == [
        "conda-forge-name: recipes/toy/recipe.yaml toy: run names vllm-rocm as `vllm-rocm`, but conda-forge has no "
        "vllm-rocm: variants/conda-forge-names.txt allows it only as the run constraint `vllm-rocm <0.0a0`; package "
        "it here or drop it",
        "conda-forge-name: variants/conda-forge-names.txt line 5: 'numpy >=2' is neither NAME nor `NAME <0.0a0`: "
        "write one per line",
    ], "\n".join(lines)


def test_a_listed_name_no_recipe_requires_is_stale_once_every_architecture_is_linted(tmp_path):
    workspace = toy_workspace(tmp_path, TOY, "2.28")
    names_file(workspace, "python\nnumpy\n")
    assert not lint_workspace(workspace, [ARCH]).problems  # another architecture might require numpy
    lines = [p.line() for p in lint_workspace(workspace).problems]
    assert lines == ["conda-forge-name: variants/conda-forge-names.txt numpy: no recipe requires it any more (every "
                     "architecture, both PyTorch paths; or it is now one of our own outputs): delete the line"], lines


# -- package_contents as rattler-build matches it ----------------------------------------------------------
CONTENTS_TOY = """\
package:
  name: contents-toy
  version: "1.0"
build:
  noarch: generic
  script:
    - mkdir -p $PREFIX/lib/python3.12/site-packages/foo_meta/csrc/include
    - echo '#pragma once' > $PREFIX/lib/python3.12/site-packages/foo_meta/csrc/include/x.h
tests:
  - package_contents:
      site_packages:
        - {entry}
"""


def test_a_package_contents_folder_entry_fails_the_build_and_the_lint_says_what_passes(tmp_path):
    """The rule, proven on a real build: the entry lint refuses fails rattler-build's test; the one it suggests passes."""
    from rattler_build import Stage0Recipe, ToolConfiguration

    def build(entry: str) -> str:
        folder = tmp_path / entry.replace("/", "_").replace("*", "x")
        folder.mkdir()
        (folder / "recipe.yaml").write_text(CONTENTS_TOY.format(entry=entry))
        try:
            Stage0Recipe.from_file(folder / "recipe.yaml").run_build(
                output_dir=tmp_path / "out", tool_config=ToolConfiguration(test_strategy="native"))
        except Exception as exc:  # py-rattler-build's error types differ by step; the message tells which
            return "\n".join([str(exc)] + [str(line) for line in getattr(exc, "log", None) or []])
        return ""

    def lint(entry: str) -> list:
        return package_contents_problems([{"package_contents": {"site_packages": [entry]}}], "toy")

    [problem] = lint("foo_meta/csrc")
    assert "No match for site_packages glob" in build("foo_meta/csrc")
    suggested = re.search(r"write '([^']+)'", problem.fix).group(1)
    assert suggested == "foo_meta/csrc/**" and not lint(suggested)
    assert build(suggested) == ""
    assert not lint("foo_meta/csrc/include/x.h") and build("foo_meta/csrc/include/x.h") == ""
