"""The weekly pins workflow: it runs the bump the docs describe, checks out the upstreams at the new pins for
the contract tests, opens one pull request only when something moved, and turns each exit code of the bump
into what the docs promise. Its shell steps run here against a stand-in `orchestrate`, a local git
repository and a tarball on 127.0.0.1."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml

from share_helpers import REPO
from source_helpers import GIT_ENV, CountingServer, make_git_repo, make_tarball
from test_share_workflow import actionlint

WORKFLOW = REPO / ".github" / "workflows" / "update-pins.yml"
DOCS = REPO / "docs" / "versions.md"
BUMP = "orchestrate pins --bump --write --prove --report"


def load() -> dict:
    return yaml.load(WORKFLOW.read_text(), Loader=yaml.BaseLoader)  # BaseLoader: `on` stays a string key


def steps() -> list[dict]:
    return load()["jobs"]["bump"]["steps"]


def step(key: str) -> dict:
    return next(s for s in steps() if s.get("id") == key or s.get("name") == key)


def run_step(script: str, cwd, temp, env: dict) -> tuple[subprocess.CompletedProcess, dict[str, str]]:
    """The step's script as the runner runs it (`bash -e`, RUNNER_TEMP outside the repository), with
    GITHUB_OUTPUT read back."""
    output = temp / "github-output"
    output.write_text("")
    result = subprocess.run(["bash", "-e", "-c", script], cwd=cwd, capture_output=True, text=True, timeout=60,
                            env={**GIT_ENV, "RUNNER_TEMP": str(temp), "GITHUB_OUTPUT": str(output), **env})
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines() if "=" in line)
    return result, outputs


def test_runs_weekly_and_on_demand_the_bump_the_docs_describe_then_one_pull_request():
    workflow = load()
    assert re.fullmatch(r"[\d*/,-]+( [\d*/,-]+){4}", workflow["on"]["schedule"][0]["cron"])
    assert "workflow_dispatch" in workflow["on"]
    bump = step("bump")
    assert f'{BUMP} "$REPORT" --docs' in bump["run"]
    assert f"`{BUMP} pins-report.md --docs`" in DOCS.read_text()  # the command the docs tell a maintainer
    contract = step("contract")
    assert "tests/test_upstream_contract.py" in contract["run"] and contract["env"]["ROCM_STACK_SOURCES"]
    assert contract["env"]["ROCM_STACK_SOURCES"] == step("checkouts")["env"]["SOURCES"]
    pull = next(s for s in steps() if "create-pull-request" in s.get("uses", ""))
    assert re.fullmatch(r"peter-evans/create-pull-request@[0-9a-f]{40}", pull["uses"])  # pinned by commit
    assert pull["with"]["branch"] == "update-pins"  # one branch: one pull request, updated each week
    assert pull["with"]["body-path"] == bump["env"]["REPORT"]
    assert pull["if"] == step("checkouts")["if"] == contract["if"] == "steps.bump.outputs.changed == 'true'"
    order = [s.get("id") or s.get("uses", "").split("@")[0] for s in steps()]
    assert order.index("bump") < order.index("checkouts") < order.index("contract") < order.index(
        "peter-evans/create-pull-request")



def test_every_action_of_the_job_is_pinned_by_commit_with_its_release_in_a_comment():
    """The job can push and open pull requests (contents/pull-requests: write): a moved tag must not change
    the code it runs, so each action is named by a full commit SHA, and the release it is stays readable."""
    uses = [s["uses"] for s in steps() if "uses" in s]
    assert len(uses) >= 3
    for action in uses:
        assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", action), f"{action} is not pinned by a full commit SHA"
        line = next(line for line in WORKFLOW.read_text().splitlines() if action in line)
        assert re.search(r"#\s*v\d+(\.\d+)*\s*$", line), f"{line.strip()}: name the release tag in a comment"

@pytest.fixture
def repo(tmp_path):
    """A repository with a pin file and docs/versions.md, and a stand-in `orchestrate` that exits $BUMP_EXIT
    after writing the report and the docs' dated list, and moves the pin when $BUMP_MOVES is set."""
    make_git_repo(tmp_path / "repo", {"shared.yaml": "torch: 2.14\n", "versions.md": "checked on 2026-11-23\n"})
    (tmp_path / "repo/docs").mkdir()
    subprocess.run(["git", "mv", "versions.md", "docs/versions.md"], cwd=tmp_path / "repo", check=True, env=GIT_ENV)
    subprocess.run(["git", "commit", "-qm", "docs"], cwd=tmp_path / "repo", check=True, env=GIT_ENV)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stub = bin_dir / "orchestrate"
    stub.write_text('#!/bin/bash\nwhile [ "$1" != --report ]; do shift; done\necho "# report" > "$2"\n'
                    'echo "checked on 2026-11-30" > docs/versions.md\n'
                    '[ -n "$BUMP_MOVES" ] && echo "torch: 2.15" > shared.yaml\nexit "$BUMP_EXIT"\n')
    stub.chmod(0o755)
    return tmp_path / "repo", f"{bin_dir}:{os.environ['PATH']}"


@pytest.mark.parametrize("code,moves,step_fails,opens,run_fails", [
    ("0", "", False, "false", False),     # nothing moved (only the docs' date did): no pull request, green
    ("0", "1", False, "true", False),     # moved and proven
    ("3", "1", False, "true", True),      # partial: the pull request with what was decided, then red
    ("3", "", False, "false", True),      # partial and nothing moved: still red, never silently green
    ("1", "1", False, "true", True),      # a proof failed: a draft pull request, red
    ("2", "", True, None, True),          # usage error: stops at once
])
def test_each_exit_code_of_the_bump_does_what_the_docs_say(repo, code, moves, step_fails, opens, run_fails):
    folder, path = repo
    bump = step("bump")
    result, outputs = run_step(bump["run"], folder, folder.parent, {"PATH": path, "BUMP_EXIT": code, "BUMP_MOVES": moves,
                                                     "REPORT": str(folder.parent / "pins-report.md")})
    assert (result.returncode != 0) == step_fails, result.stdout + result.stderr
    assert outputs["code"] == code
    assert outputs.get("changed") == opens
    last = steps()[-1]
    assert "if" in last and "!cancelled()" in last["if"]  # runs after a failed step too
    final, _ = run_step(last["run"], folder, folder.parent,
                        {"PATH": path, "BUMP_CODE": code, "CONTRACT_CODE": "0" if opens == "true" else ""})
    job_failed = result.returncode != 0 or final.returncode != 0
    assert job_failed == run_fails, final.stdout
    if run_fails:
        assert "::error::" in result.stdout + final.stdout  # the run says why it is red


def test_failed_contract_tests_fail_the_run(repo):
    folder, path = repo
    final, _ = run_step(steps()[-1]["run"], folder, folder.parent, {"PATH": path, "BUMP_CODE": "0", "CONTRACT_CODE": "1"})
    assert final.returncode == 1 and "contract tests failed" in final.stdout


def test_checkouts_are_made_at_the_pins_where_the_contract_tests_read_them(tmp_path):
    """The checkout step's loop, fed the lines `python -m orchestrate.bump.prove checkouts` prints: a git
    source at its commit, a tarball checked against its sha256 and unpacked, a wrong sha256 left out with
    a warning (its tests skip, the report says so)."""
    upstream = tmp_path / "upstream"
    upstream.mkdir()
    sha256 = make_tarball(upstream, "vllm-1.0.tar.gz", {"PKG-INFO": "Version: 1.0\n"})
    commit = make_git_repo(tmp_path / "aiter-repo", {"setup.py": "FLYDSL_VERSION\n"})
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    with CountingServer(upstream) as server:
        lines = [f"aiter\tgit\t{(tmp_path / 'aiter-repo').as_uri()}\t{commit}",
                 f"vllm\turl\t{server.url}/vllm-1.0.tar.gz\t{sha256}",
                 f"torchvision-rocm\turl\t{server.url}/vllm-1.0.tar.gz\t{'0' * 64}"]
        # the stand-in for `python -m orchestrate.bump.prove checkouts` (tested below on the real recipes)
        (bin_dir / "python").write_text("#!/bin/bash\nprintf '%s\\n' " + " ".join(f"'{l}'" for l in lines) + "\n")
        (bin_dir / "python").chmod(0o755)
        report = tmp_path / "pins-report.md"
        report.write_text("# report\n")
        checkouts = step("checkouts")
        result, _ = run_step(checkouts["run"], tmp_path, tmp_path, {"PATH": f"{bin_dir}:{os.environ['PATH']}",
                                                          "SOURCES": str(tmp_path / "sources"), "REPORT": str(report)})
    assert result.returncode == 0, result.stderr
    head = subprocess.run(["git", "-C", str(tmp_path / "sources/aiter"), "rev-parse", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    assert head == commit
    assert (tmp_path / "sources/vllm/PKG-INFO").read_text() == "Version: 1.0\n"
    assert not (tmp_path / "sources/torchvision-rocm").exists()
    assert "::warning::no checkout of torchvision-rocm" in result.stdout
    assert "could not be made (their contract tests skip): torchvision-rocm" in report.read_text()


def test_the_checkout_list_names_each_recipe_the_contract_tests_read_at_its_pin():
    result = subprocess.run([sys.executable, "-m", "orchestrate.bump.prove", "checkouts", str(REPO)],
                            capture_output=True, text=True, timeout=60,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])})
    assert result.returncode == 0, result.stderr
    rows = [line.split("\t") for line in result.stdout.splitlines()]
    assert rows and all(len(row) == 4 for row in rows)
    by_recipe = {recipe: (kind, location, pin) for recipe, kind, location, pin in rows}
    for recipe, (kind, location, pin) in by_recipe.items():
        assert (REPO / "recipes" / recipe).is_dir()
        assert re.fullmatch(r"[0-9a-f]{40}" if kind == "git" else r"[0-9a-f]{64}", pin), (recipe, pin)
        assert location.startswith("https://")
    assert "aiter" in by_recipe and by_recipe["aiter"][0] == "git"
    assert by_recipe["aiter"][2] in (REPO / "recipes/aiter/recipe.yaml").read_text()
    assert by_recipe["vllm"][1].endswith(".tar.gz")  # the sdist, unpacked where the import contract reads it
    assert "rocm-sdk" not in by_recipe  # AMD's wheels are no checkout: its contract tests read TheRock


def test_passes_actionlint():
    actionlint(WORKFLOW)


def test_a_failed_proof_of_a_partial_result_names_both(repo):
    """`pins --bump` exits 1 when a proof failed even if the result is also partial; the report says both."""
    folder, path = repo
    report = folder.parent / "pins-report.md"
    for partial in (True, False):
        report.write_text("# Pins\n\n" + ("**Partial result:** 1 pin could not be decided (below).\n\n" if partial else "")
                          + "**Do not merge:** 1 proof failed (below).\n")
        final, _ = run_step(steps()[-1]["run"], folder, folder.parent, {"PATH": path, "BUMP_CODE": "1", "CONTRACT_CODE": "0"})
        assert final.returncode == 1 and "a proof of the new set failed" in final.stdout
        assert ("partial result too" in final.stdout) == partial, final.stdout
