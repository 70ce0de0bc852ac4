"""The user-facing entry points: pixi.toml, README's commands and CI agree with each other and with the code."""
from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import jsonschema
import pytest

from orchestrate.cli import make_parser

REPO = Path(__file__).resolve().parent.parent
SCHEMA = REPO / "tests" / "data" / "pixi" / "schema-v0.77.0.json"  # its source and date: SOURCE.md beside it
PIXI = tomllib.loads((REPO / "pixi.toml").read_text())
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())


def test_pixi_manifest_validates_against_the_schema():
    jsonschema.validate(PIXI, json.loads(SCHEMA.read_text()))


def pixi_tasks() -> dict:
    """Every task: the workspace's and each feature's (`test` lives in the test feature)."""
    tasks = dict(PIXI["tasks"])
    for feature in PIXI.get("feature", {}).values():
        tasks.update(feature.get("tasks", {}))
    return tasks


def test_pixi_has_the_promised_tasks():
    assert {"doctor", "build-all", "build", "plan", "test", "check", "bench", "serve", "publish"} <= set(pixi_tasks())


def _subcommands() -> set[str]:
    parser = make_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return set(sub.choices)


def test_every_pixi_task_calls_a_command_that_exists():
    scripts = set(PYPROJECT["project"]["scripts"])
    for name, task in pixi_tasks().items():
        words = shlex.split(task["cmd"] if isinstance(task, dict) else task)
        if words[:2] == ["pixi", "exec"]:
            words = words[words.index("--") + 1:]
        if words[0] == "orchestrate":
            assert words[1] in _subcommands(), name
        elif words[:3] == ["python", "-m", "pytest"]:
            continue
        else:
            assert words[0] in scripts, f"task {name} calls {words[0]}, which this project does not install"
            assert words[1] in ("check", "bench")


def test_ci_runs_exactly_readmes_test_command():
    readme = (REPO / "README.md").read_text()
    blocks = re.findall(r"```(?:bash|sh)?\n(.*?)```", readme, re.S)
    first_lines = [l for l in blocks[0].splitlines() if l.strip() and not l.startswith("#")]
    assert len(first_lines) == 2, "README opens with two commands: set up + main job, and the tests"
    test_command = first_lines[1].split("#")[0].strip()
    ci = (REPO / ".ci" / "run").read_text().strip().splitlines()
    assert ci[-1].strip() == test_command


def test_pyproject_and_pixi_agree_on_dependencies():
    pip_deps = {re.split(r"[<>=\[ ]", d)[0] for d in PYPROJECT["project"]["dependencies"]}
    pip_deps |= {re.split(r"[<>=\[ ]", d)[0] for d in PYPROJECT["project"]["optional-dependencies"]["share"]}
    assert pip_deps <= set(PIXI["dependencies"]) | {"py-rattler"}


@pytest.mark.parametrize("page,block", [("README.md", "support-summary"), ("docs/index.md", "support-table")])
def test_the_support_table_is_the_architecture_table(page, block):
    """The manual has every target; README, a front page, one row per series; both generated from the table."""
    from orchestrate.architectures import ArchitectureTable, support_summary_markdown, support_table_markdown

    table = ArchitectureTable.load(REPO / "variants")
    text = (REPO / page).read_text()
    section = text.split(f"<!-- {block}:start -->\n")[1].split(f"\n<!-- {block}:end -->")[0]
    assert section == (support_summary_markdown if block == "support-summary" else support_table_markdown)(table)
    rows = {line.split(" | ")[0].strip("| ") for line in section.splitlines()[2:]}
    named = rows if block == "support-table" else set(", ".join(
        line.split(" | ")[1] for line in section.splitlines()[2:]).split(", "))
    assert named == set(table.names())


def _command_words(task) -> list[str]:
    return shlex.split(task["cmd"] if isinstance(task, dict) else task)


def test_pixi_test_environment_has_what_ci_installs():
    """`pixi run test` runs in the test environment; it must hold what .ci/run installs, or tests that CI
    runs would skip (moto's S3 server, PyTorch for the check tool, actionlint for the workflow)."""
    test_env = PIXI["environments"]["test"]
    features = test_env["features"] if isinstance(test_env, dict) else test_env
    available = set(PIXI["dependencies"]) | {"py-rattler"}
    for feature in features:
        available |= set(PIXI["feature"][feature].get("dependencies", {}))
    assert any("test" in PIXI["feature"][f].get("tasks", {}) for f in features), "`test` must run in that environment"
    extras = PYPROJECT["project"]["optional-dependencies"]
    for requirement in extras["test"] + extras["docs"]:
        assert re.split(r"[<>=\[ ]", requirement)[0] in available, requirement
    ci = (REPO / ".ci" / "run").read_text()
    if "torch==" in ci:
        assert available & {"pytorch", "pytorch-cpu"}, "CI installs PyTorch; the pixi test environment lacks it"
    if "actionlint" in ci:
        assert "actionlint" in available, "CI installs actionlint; the pixi test environment lacks it"


def test_the_users_check_fails_without_a_gpu_and_recipe_tests_do_not():
    """`pixi run check` is the user's question "does my GPU work?": no GPU must fail it (the check's default). The
    recipes' tests run on build machines without a GPU, so each says --allow-no-gpu, or expects the failure."""
    check = _command_words(pixi_tasks()["check"])
    assert check[check.index("--") + 1:] == ["rocm-stack-check", "check"]
    for recipe in sorted((REPO / "recipes").glob("*/recipe.yaml")):
        for line in recipe.read_text().splitlines():
            if re.match(r"\s*- .*rocm-stack-check check", line):  # a test script line
                assert "--allow-no-gpu" in line or "test $? -eq 3" in line, \
                    f"{recipe}: a recipe test must pass without a GPU: {line.strip()}"


def test_readmes_first_screen_sends_users_to_doctor_before_build_all():
    first_screen = (REPO / "README.md").read_text().split("\n## ")[0]
    assert "pixi run doctor" in first_screen and "orchestrate doctor" in first_screen
    assert first_screen.index("pixi run doctor") < first_screen.index("pixi run build-all")


def test_the_share_commands_do_not_import_the_command_line():
    """cli.py adds share's commands to its own; share needs nothing from cli (no import cycle)."""
    code = "import sys, orchestrate.share; print('orchestrate.cli' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert done.stdout.strip() == "False", done.stderr
    assert {"serve", "publish", "consumer-manifest", "doctor"} <= _subcommands()


def test_an_installed_orchestrate_has_every_package_of_the_source():
    """setuptools installs only the packages pyproject names: one left out is missing from a non-editable
    install (the channel page's package was, and every page write failed there)."""
    packages = {".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "orchestrate").rglob("__init__.py")}
    assert packages <= set(PYPROJECT["tool"]["setuptools"]["packages"])
