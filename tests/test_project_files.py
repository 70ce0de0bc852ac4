"""The user-facing entry points: pixi.toml, README's commands and CI agree with each other and with the code."""
from __future__ import annotations

import json
import re
import shlex
import tomllib
from pathlib import Path

import jsonschema
import pytest

from orchestrate.cli import make_parser

REPO = Path(__file__).resolve().parent.parent
SCHEMA = REPO.parent / "shared" / "schemas" / "pixi-manifest-0.77.schema.json"
PIXI = tomllib.loads((REPO / "pixi.toml").read_text())
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())


@pytest.mark.skipif(not SCHEMA.exists(), reason="pixi schema not beside this checkout")
def test_pixi_manifest_validates_against_the_schema():
    jsonschema.validate(PIXI, json.loads(SCHEMA.read_text()))


def test_pixi_has_the_promised_tasks():
    assert {"build-all", "build", "plan", "test", "check", "bench", "serve", "publish"} <= set(PIXI["tasks"])


def _subcommands() -> set[str]:
    parser = make_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return set(sub.choices)


def test_every_pixi_task_calls_a_command_that_exists():
    scripts = set(PYPROJECT["project"]["scripts"])
    for name, task in PIXI["tasks"].items():
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


def test_readme_support_table_is_the_architecture_table():
    from orchestrate.architectures import ArchitectureTable, support_table_markdown

    readme = (REPO / "README.md").read_text()
    section = readme.split("<!-- support-table:start -->\n")[1].split("\n<!-- support-table:end -->")[0]
    assert section == support_table_markdown(ArchitectureTable.load(REPO / "variants"))
