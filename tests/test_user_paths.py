"""What a new user meets, reading README.md and docs/getting-started.md in order (issue 32).

Every code block of those two pages is run here, or the part that cannot run here is stubbed and said so
where it is: pixi is not installable here, so `pixi run X` runs the command of task X in pixi.toml; a build
runs on the test graph (tests/workspace), since the real recipes need conda-forge and hours; S3 is stood in
for by a folder channel (S3 itself: tests/test_share_s3.py); a solve that would need conda-forge solves only
what our channel holds, with py-rattler, as pixi would. Then the numbers those pages state, against `plan`,
and each command that said something other than what it did.
"""
from __future__ import annotations

import io
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest

from orchestrate import cli
from stack import REPO, make_workspace, solve

PAGES = ("README.md", "docs/getting-started.md")
PIXI_TASKS = tomllib.loads((REPO / "pixi.toml").read_text())["tasks"]
ANSI = re.compile(r"\x1b\[[0-9;]*m")
HASH = re.compile(r"h[0-9a-f]{7}_\d+\b")  # the input hash in a build string; the docs write `h…`


@dataclass
class Result:
    code: int
    out: str
    err: str


def orchestrate(*args, cwd: Path, env: dict[str, str] | None = None) -> Result:
    """`orchestrate ARGS` in-process, as a user runs it in `cwd`: output piped (plain), ORCHESTRATE_ARCH unset."""
    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(cwd)
        patch.delenv("ORCHESTRATE_ARCH", raising=False)
        patch.delenv("COLUMNS", raising=False)
        for key, value in (env or {}).items():
            patch.setenv(key, value)
        with redirect_stdout(out), redirect_stderr(err):
            try:
                code = cli.main([str(a) for a in args])
            except SystemExit as exit_:  # argparse's usage errors
                code = exit_.code
    return Result(code, out.getvalue(), err.getvalue())


def code_blocks(page: str) -> list[tuple[str, str]]:
    """(language, text) of every fenced code block of a page."""
    text = (REPO / page).read_text()
    return [(m[1], m[2]) for m in re.finditer(r"^```(\w*)\n(.*?)^```", text, re.S | re.M)]


def block(page: str, first_words: str) -> str:
    return next(text for _, text in code_blocks(page) if text.startswith(first_words))


def commands(text: str) -> list[str]:
    """The command lines of a shell block, comments dropped."""
    return [line.split("  #")[0].strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]


def pixi_task(line: str) -> list[str]:
    """`pixi run TASK ARGS` as pixi runs it: the task's command from pixi.toml, then ARGS."""
    words = shlex.split(line)
    assert words[:2] == ["pixi", "run"], line
    task = PIXI_TASKS[words[2]]
    return shlex.split(task["cmd"] if isinstance(task, dict) else task) + words[3:]


def orchestrate_args(words: list[str]) -> list[str]:
    assert words[0] == "orchestrate", words
    return words[1:]


def rows_of(text: str) -> list[str]:
    """A plan as rows: each unindented line with the indented lines under it, spaces collapsed, hashes as `h…`."""
    rows: list[list[str]] = []
    for line in text.splitlines():
        if line.startswith(" ") and rows:
            rows[-1].append(line)
        else:
            rows.append([line])
    return [" ".join(" ".join(r).split()).replace("h…", "HASH") for r in
            ([HASH.sub("h…", line) for line in row] for row in rows)]


# Which test runs each code block of the two pages (by the block's first line). A block added to a page
# without a test here fails test_every_code_block_is_run_by_a_test.
COVERED = {
    "pip install -e '.[test,docs]' && orchestrate plan --arch gfx1151": "test_readme_first_commands",
    "pixi run doctor": "test_quickstart_one_machine_runs_as_written",
    "[workspace]": "test_the_install_manifests_put_our_channel_first_and_solve_to_our_builds",
    "orchestrate publish --to s3://bucket/rocm-stack": "test_quickstart_team_runs_as_written",
    "orchestrate doctor": "test_doctor_prints_what_getting_started_shows",
    "ok    gpu       gfx1151": "test_doctor_prints_what_getting_started_shows",
    "orchestrate fetch --arch gfx1151": "test_fetch_as_getting_started_shows_it_asks_no_channel_unless_told",
    "composable-kernel                  1.3.0": "test_the_plan_getting_started_shows_is_what_plan_prints_at_80_columns",
    "FROM ghcr.io/prefix-dev/pixi": "test_the_container_recipe_is_what_consumer_manifest_writes",
}


def test_every_code_block_is_run_by_a_test():
    missing = [(page, text.splitlines()[0]) for page in PAGES for _, text in code_blocks(page)
               if not any(text.startswith(first) for first in COVERED)]
    assert missing == [], "code blocks no test runs: add each to COVERED with the test that runs it"
    assert all(name in globals() for name in COVERED.values())


@pytest.fixture(scope="module")
def machine(tmp_path_factory) -> Path:
    """A build machine's checkout: the test graph workspace."""
    return make_workspace(tmp_path_factory.mktemp("machine"))


@pytest.fixture(scope="module")
def quickstart(machine) -> dict[str, Result]:
    """README's "Quickstart: one machine", each `pixi run` line as its task's command, on the test graph for gfx1151
    (ORCHESTRATE_ARCH stands for the GPU this machine lacks)."""
    results = {}
    for line in commands(block("README.md", "pixi run doctor")):
        words = pixi_task(line)
        if words[0] == "orchestrate":
            no_tests = ["--no-tests"] if words[1] == "build-all" else []  # the test graph's tests: other test files
            results[line.split()[2]] = orchestrate(*orchestrate_args(words), *no_tests, cwd=machine,
                                                   env={"ORCHESTRATE_ARCH": "gfx1151"})
        else:
            results[line.split()[2]] = words
    return results


def test_readme_first_commands():
    """`pip install -e` and the suite itself are what CI runs (.ci/run); the plan is run here."""
    first = commands(block("README.md", "pip install -e"))[0]
    plan = orchestrate(*orchestrate_args(shlex.split(first.split(" && ")[1])), cwd=REPO)
    assert plan.code == 0, plan.err
    assert plan.out.startswith("Plan for gfx1151 (AMD Ryzen AI Max 300 (Strix Halo, Radeon 8060S))")
    assert re.search(r"^\d+ package\(s\) to build, expected \d+h\d\dm", plan.out, re.M)


def test_quickstart_one_machine_runs_as_written(quickstart, machine):
    assert quickstart["doctor"].code == 0 and quickstart["doctor"].out.splitlines()[-1].endswith(": ready")
    assert quickstart["fetch"].code == 0, quickstart["fetch"].err
    assert quickstart["build-all"].code == 0, quickstart["build-all"].err
    assert quickstart["build-all"].out.splitlines()[-1] == "10 built"
    # `pixi run check` is `pixi exec -c ./channel -c conda-forge -s … -- rocm-stack-check check`.
    # Stubbed: pixi exec's environment (no pixi, no conda-forge here) is the check tool from this repository, and its
    # solve is py-rattler's over ./channel alone; no GPU here, so the check fails as it says it does (exit 3).
    check = quickstart["check"]
    assert check[:2] == ["pixi", "exec"] and "./channel" in check
    assert solve(machine / "channel", ["rocm-stack-check"], "11.5.1")
    from rocm_stack_check import exit_codes
    from rocm_stack_check.cli import main as check_main

    tool = check[check.index("--") + 1:]
    assert tool[0] == "rocm-stack-check"
    with redirect_stdout(io.StringIO()) as out:
        assert check_main(tool[1:]) == exit_codes.NO_GPU
    assert "no GPU" in out.getvalue()


def test_the_install_manifests_put_our_channel_first_and_solve_to_our_builds(quickstart, machine):
    """pixi install cannot run here: each manifest is read as pixi reads it, and the packages it names that the test
    graph has (`vllm`, `pytorch`) are solved from our channel for a gfx1151 (conda-forge's accelerate is not here)."""
    for page in PAGES:
        manifest = tomllib.loads(block(page, "[workspace]"))
        channels = manifest["workspace"]["channels"]
        assert channels[1] == "conda-forge" and channels[0] != "conda-forge"  # ours first: one torch, ours
        assert manifest["dependencies"]["rocm-stack"] == "*"
    records = {r.name.normalized: str(r.build) for r in solve(machine / "channel", ["vllm", "pytorch"], "11.5.1")}
    assert records["vllm"].startswith("gfx1151_") and records["pytorch"].startswith("gfx1151_")


def test_quickstart_team_runs_as_written(quickstart, machine, tmp_path):
    """README's "Quickstart: a team", with a folder channel standing in for s3://bucket/rocm-stack."""
    team = (tmp_path / "team").as_uri()
    lines = [line.replace("s3://bucket/rocm-stack", team) for line in commands(block("README.md", "orchestrate publish"))]
    published = orchestrate(*orchestrate_args(shlex.split(lines[0])), cwd=machine)
    assert published.code == 0, published.err
    other = make_workspace(tmp_path / "other-machine")
    cached = orchestrate(*orchestrate_args(shlex.split(lines[1])), "--no-tests", cwd=other,
                         env={"ORCHESTRATE_ARCH": "gfx1151"})
    assert cached.code == 0, cached.err
    assert "10 from cache" in cached.out and "built " not in cached.out
    teammate = tmp_path / "teammate-project"
    teammate.mkdir()
    manifest = orchestrate(*orchestrate_args(shlex.split(lines[2])), cwd=teammate)
    assert manifest.code == 0, manifest.err
    assert tomllib.loads((teammate / "pixi.toml").read_text())["workspace"]["channels"][0] == team
    # `pixi install`: stubbed by py-rattler's solve of what the team channel holds (rocm-stack-check is the check)
    assert lines[3] == "pixi install && pixi run rocm-stack-check check"
    assert solve(tmp_path / "team", ["rocm-stack-check", "vllm"], "11.5.1")


def test_doctor_prints_what_getting_started_shows(machine):
    """The doctor block: run on a machine without a GPU, named by --arch as the block says; the example output is
    an illustration from a Strix Halo, so its checks are compared, not its values (gtt needs an APU to read,
    channel a source channel: the test graph has none)."""
    words = shlex.split(commands(block("docs/getting-started.md", "orchestrate doctor"))[0])
    result = orchestrate(*orchestrate_args(words), "--arch", "gfx1151", cwd=machine)
    assert result.code == 0, result.out + result.err
    def checks(text: str) -> list[str]:  # a check's line, wrapped at 80 columns under its detail
        return [line for line in text.splitlines() if not line.startswith(" ")][:-1]

    printed = {line.split()[1] for line in checks(result.out)}
    assert all(line.split()[0] in ("ok", "warn", "fail") for line in checks(result.out))
    shown = {line.split()[1] for line in checks(block("docs/getting-started.md", "ok    gpu"))}
    assert shown - {"gtt", "channel"} <= printed


def test_fetch_as_getting_started_shows_it_asks_no_channel_unless_told(machine):
    """Quickstart step 2 solves nothing (issue 32: it solved against conda-forge first, unsaid); --solve does."""
    words = shlex.split(commands(block("docs/getting-started.md", "orchestrate fetch"))[0])
    unreachable = {"ORCHESTRATE_ARCH": ""}
    toml = machine / "orchestrate.toml"
    saved = toml.read_text()
    toml.write_text('source_channels = ["http://127.0.0.1:9/conda-forge"]\n')
    fresh = ["--channel", machine.parent / "fresh-channel", "-q"]  # nothing built yet: every requirement to solve
    try:
        fetched = orchestrate(*orchestrate_args(words), *fresh, cwd=machine, env=unreachable)
        solved = orchestrate(*orchestrate_args(words), "--solve", *fresh, cwd=machine, env=unreachable)
    finally:
        toml.write_text(saved)
    assert fetched.code == 0, fetched.err
    assert re.search(r"^local\s+aotriton\s+path src$", fetched.out, re.M)
    assert solved.code == 2 and solved.err.count("\n") == 1
    assert "http://127.0.0.1:9/conda-forge cannot be reached" in solved.err


def test_the_plan_getting_started_shows_is_what_plan_prints_at_80_columns():
    shown = block("docs/getting-started.md", "composable-kernel ")
    printed = orchestrate("plan", "--arch", "gfx1151", cwd=REPO, env={"COLUMNS": "80"}).out
    missing = [row for row in rows_of(shown) if row != "…" and row not in rows_of(printed)]
    assert missing == []


@pytest.mark.parametrize("columns", ["80", None, "120"])
def test_plan_fits_the_width_with_full_names_and_its_hints_on_their_own_lines(columns):
    """At 80 columns, piped (rich's width for a file: 80 unless $COLUMNS says), and at 120: no line is wider, every
    package name is whole, each command a hint gives is a line of its own."""
    from rich.console import Console

    env = {"COLUMNS": columns} if columns else {}
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("COLUMNS", raising=False)
        for key, value in env.items():
            patch.setenv(key, value)
        width = Console(file=io.StringIO()).width
    result = orchestrate("plan", "--arch", "gfx1151", cwd=REPO, env=env)
    assert result.code == 0
    lines = result.out.splitlines()
    assert width == int(columns or 80) and max(map(len, lines)) <= width
    names = {line.split()[0] for line in lines if line and not line.startswith(" ")}
    assert {"rocm-sdk-device-gfx1151", "rocm-sdk-licenses", "model-hosting-container-standards", "pytorch-base",
            "flash-attn"} <= names
    assert "  orchestrate build composable-kernel" in lines
    assert "  orchestrate build flash-attn --variant flash_attn_backend=ck" in lines
    assert "  orchestrate pins --lock" in lines


@pytest.mark.parametrize("columns", ["80", None])
def test_every_command_s_output_fits_the_width_with_names_and_builds_whole(quickstart, machine, tmp_path, columns):
    """Not only the real plan: the test graph's, whose reasons go beside each row, a dry run, list, status, verify and
    doctor, at 80 columns and piped. No line is wider, and every package's name and build string is printed whole."""
    from orchestrate.channel import Channel

    fresh = ["--channel", tmp_path / "fresh"]  # nothing built there: every row will build
    commands = [["plan", "--arch", "gfx1151"], ["plan", "--arch", "gfx1151", *fresh],
                ["build-all", "--dry-run", "--arch", "gfx1151", *fresh], ["list"], ["status"], ["verify"],
                ["doctor", "--arch", "gfx1151"]]
    entries = Channel(machine / "channel").entries_present()
    assert len(entries) == 10
    for command in commands:
        result = orchestrate(*command, cwd=machine, env={"COLUMNS": columns} if columns else {})
        assert result.code == 0, result.err
        assert max(map(len, (result.out + result.err).splitlines())) <= 80, command
        words = set(result.out.replace(";", " ").split())
        if command[0] in ("plan", "build-all", "list", "status"):
            assert {e.name for e in entries} | {e.build for e in entries} <= words, command


@pytest.mark.parametrize("columns", ["0", "20"])
def test_plan_at_a_width_too_narrow_for_any_table_still_prints_every_row(columns):
    """$COLUMNS=0 (some CI runners set it) made rich print nothing and textwrap raise: laid out at 40 columns instead."""
    result = orchestrate("plan", "--arch", "gfx1151", cwd=REPO, env={"COLUMNS": columns})
    assert result.code == 0 and result.err == ""
    names = {line.split()[0] for line in result.out.splitlines() if line and not line.startswith(" ")}
    assert {"rocm-sdk-device-gfx1151", "model-hosting-container-standards", "flash-attn"} <= names
    assert re.search(r"^\d+ package\(s\) to build", result.out, re.M)


def test_plan_on_a_terminal_fits_80_columns():
    """On a terminal (rich's TTY_COMPATIBLE forces one): styled, and no line past 80 columns."""
    result = orchestrate("plan", "--arch", "gfx1151", cwd=REPO, env={"COLUMNS": "80", "TTY_COMPATIBLE": "1",
                                                                     "FORCE_COLOR": "1"})
    assert result.code == 0
    assert "\x1b[" in result.out  # a terminal's output, not the plain one
    assert max(len(ANSI.sub("", line)) for line in result.out.splitlines()) <= 80


def test_the_numbers_the_pages_state_are_plans():
    sys.path.insert(0, str(REPO / "tests" / "benchmarks"))
    try:
        import plan_numbers
    finally:
        sys.path.remove(str(REPO / "tests" / "benchmarks"))
    written, computed = plan_numbers.docs_as_written(), plan_numbers.doc_blocks()
    assert set(written) == set(computed), "each block is on one of " + ", ".join(plan_numbers.DOC_PAGES)
    assert written == computed, "the pages' numbers differ from plan: run `python tests/benchmarks/plan_numbers.py --docs`"


def test_the_container_recipe_is_what_consumer_manifest_writes(tmp_path):
    """docker and pixi cannot run here: the manifest its comment names is written, and the RUN line's override is
    the one that manifest gives (the solve it stands for: tests/test_orchestrate_build.py)."""
    dockerfile = block("docs/getting-started.md", "FROM ")
    command = next(line for line in dockerfile.splitlines() if "written by:" in line).split("written by: ")[1]
    result = orchestrate(*orchestrate_args(shlex.split(command)), cwd=tmp_path)
    assert result.code == 0, result.err
    run_line = next(line for line in dockerfile.splitlines() if line.startswith("RUN "))
    assert f"#   {run_line[len('RUN '):]}" in (tmp_path / "pixi.toml").read_text()
    assert 'CMD ["pixi", "run", "rocm-stack-check", "check"]' in dockerfile
    assert "rocm-stack-check" in tomllib.loads((tmp_path / "pixi.toml").read_text())["dependencies"]


# -- each finding of issue 32, as the user sees it ------------------------------------------------------------------

@pytest.mark.parametrize("dry", [[], ["--dry-run"]], ids=["build", "dry run"])
@pytest.mark.parametrize("kind", ["unmounted", "not a channel", "no answer"])
def test_a_missing_cache_channel_stops_before_anything_is_built(machine, tmp_path, kind, dry):
    """Every form, named as the cache channel it is: a dry run too, which would show every package as built here."""
    import socket

    where = tmp_path / "mnt" / "team" / "rocm-stack"
    if kind == "not a channel":
        where.mkdir(parents=True)
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}/rocm-stack" if kind == "no answer" else where.as_uri()
    local = tmp_path / "local"
    result = orchestrate("build-all", "--arch", "gfx1151", "--channel", local, "--cache-channel", url, *dry, cwd=machine)
    assert result.code == 2 and result.err.count("\n") == 1
    assert result.err.startswith(f"error: cache channel {url}") and "drop that --cache-channel" in result.err
    assert {"unmounted": "mount it", "not a channel": "is not a channel", "no answer": "cannot reach"}[kind] in result.err
    assert not local.exists() and "built" not in result.out


def test_consumer_manifest_never_replaces_a_pixi_toml_it_did_not_write(tmp_path):
    project = tmp_path / "checkout"
    project.mkdir()
    shutil.copy(REPO / "pixi.toml", project / "pixi.toml")  # the repository's own manifest, in a copy
    before = (project / "pixi.toml").read_bytes()
    for extra in ([], ["--force"]):
        result = orchestrate("consumer-manifest", "--channel", "http://lab:8765", *extra, cwd=project)
        assert result.code == 2 and result.err.count("\n") == 1
        assert "was not written by `orchestrate consumer-manifest`" in result.err and "--force" not in result.err
        assert (project / "pixi.toml").read_bytes() == before
    ours = tmp_path / "teammate"
    ours.mkdir()
    assert orchestrate("consumer-manifest", "--channel", "http://lab:8765", cwd=ours).code == 0
    again = orchestrate("consumer-manifest", "--channel", "http://lab:8765", cwd=ours)
    assert again.code == 2 and "--force" in again.err
    replaced = orchestrate("consumer-manifest", "--channel", "http://other:8765", "--force", cwd=ours)
    assert replaced.code == 0 and "http://other:8765" in (ours / "pixi.toml").read_text()
    ignored = orchestrate("consumer-manifest", "--channel", "http://lab:8765", "--print", "--output", "x.toml", cwd=ours)
    assert ignored.code == 2 and "not allowed with argument --print" in ignored.err and not (ours / "x.toml").exists()


def test_publish_checks_the_architecture_and_its_target(quickstart, machine, tmp_path):
    typo = orchestrate("publish", "--to", (tmp_path / "team").as_uri(), "--arch", "gfx1115", cwd=machine)
    assert typo.code == 2 and typo.err.count("\n") == 1
    assert "unknown architecture 'gfx1115' (did you mean gfx1151?)" in typo.err
    assert not (tmp_path / "team").exists()
    http = orchestrate("publish", "--to", "http://buildbox:8765/", cwd=machine)
    assert http.code == 2 and "read-only over HTTP" in http.err
    assert "http://" not in http.err.split("read-only over HTTP")[1]  # not offered as a target


def test_detect_detects_and_says_when_orchestrate_arch_overrides(monkeypatch, tmp_path):
    monkeypatch.setattr(cli, "detect_gpu_arch", lambda: "gfx1100")
    found = orchestrate("detect", cwd=tmp_path, env={"ORCHESTRATE_ARCH": "gfx942"})
    assert found.code == 0 and found.out == "gfx1100\n"
    assert "ORCHESTRATE_ARCH=gfx942 is set: the other commands build for gfx942" in found.err
    monkeypatch.setattr(cli, "detect_gpu_arch", lambda: None)
    none = orchestrate("detect", cwd=tmp_path)
    assert none.code == 2 and none.err.startswith("error: no AMD GPU found")
    assert "give the other commands --arch A" in none.err  # not `detect --arch`, which it refuses
    assert orchestrate("detect", "--arch", "gfx1151", cwd=tmp_path).code == 2


def test_arch_neutral_dry_run_is_titled_for_every_architecture(machine):
    result = orchestrate("build-all", "--arch-neutral", "--dry-run", cwd=machine)
    assert result.code == 0, result.err
    title = result.out.splitlines()[0]
    assert title.startswith("Plan for the packages all 10 architectures share") and "MI100" not in title


def test_verify_of_another_channel_gives_fixes_for_that_channel(quickstart, machine, tmp_path):
    other = tmp_path / "copy"
    shutil.copytree(machine / "channel", other)
    next(other.glob("*/vllm-*.conda")).unlink()
    # wide: a fix naming a long temporary folder would be folded mid-path at 80 columns
    result = orchestrate("verify", "--channel", other, cwd=machine, env={"COLUMNS": "1000"})
    assert result.code == 1
    problems = [" ".join(entry.split()) for entry in re.split(r"\n(?! )", result.out)]  # each wrapped under its first line
    line = next(line for line in problems if "vllm-" in line)
    assert f"`orchestrate build-all --arch gfx1151 --channel {other}`" in line


def test_serve_gives_teammates_an_address_they_can_reach(quickstart, machine):
    def first_lines(*args) -> str:
        process = subprocess.Popen([sys.executable, "-m", "orchestrate", "serve", "--port", "0", *args], cwd=machine,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                   env={**__import__("os").environ, "PYTHONPATH": f"{REPO}:{REPO}/recipes/rocm-stack-check/src"})
        try:
            return "".join(process.stdout.readline() for _ in range(3))
        finally:
            process.terminate()
            process.wait(10)

    loopback = first_lines()
    assert "teammates:" not in loopback and "on this machine: orchestrate consumer-manifest --channel http://127.0.0.1:" \
        in loopback
    network = first_lines("--host", "0.0.0.0")
    assert "teammates: orchestrate consumer-manifest --channel http://" in network and "127.0.0.1" not in network
    assert "0.0.0.0" not in network.split("teammates:")[1]


def test_smaller_defects(tmp_path):
    grammar = orchestrate("pins", "--write", cwd=REPO)
    assert grammar.code == 2 and "--write works with --bump only" in grammar.err
    build_all = PIXI_TASKS["build-all"]["description"]
    assert build_all.startswith("Build rocm-stack and what it needs")  # as the docs say, not "every package"
    versions = (REPO / "docs" / "versions.md").read_text()
    assert "build-all --dry-run` with the channels" not in versions  # a dry run solves nothing
    assert "`orchestrate fetch --all-archs --solve`" in versions


def test_pins_reads_a_follower_pin_as_pins_bump_does(monkeypatch):
    """flydsl is pinned by aiter's setup.py: `pins` said `newer available 0.5.0` where `pins --bump` says it moves
    only with aiter; both now read it so."""
    from orchestrate import pins
    from orchestrate.upstreams import Upstreams

    upstreams = Upstreams.load(REPO / "variants")
    followers = pins.followers(upstreams)
    assert followers["flydsl"] == ("aiter", "aiter's setup.py")
    assert followers["aotriton"] == ("pytorch", "pytorch-rocm's cmake/External/aotriton.cmake")
    assert "vllm" not in followers and "pytorch" not in followers  # released on their own
    monkeypatch.setattr(pins, "component_row", lambda c, p, lookups: {
        "component": c.name, "state": pins.NEWER, "newest": "0.5.0", "notes": [], "errors": []})
    monkeypatch.setattr(pins, "coupling_row", lambda *args: {"state": "ok"})
    report = pins.make_report(upstreams, SimpleNamespace(arch="gfx1151"), {}, "", "")
    flydsl = next(r for r in report["components"] if r["component"] == "flydsl")
    assert flydsl["state"] == "moves with aiter" and "aiter's setup.py pins it" in flydsl["notes"][0]
    assert next(r for r in report["components"] if r["component"] == "vllm")["state"] == pins.NEWER


def test_the_documented_exit_codes_are_the_ones_given():
    """A stop before anything is done is 2 (UserError), work that ran and failed is 1: `page --to` a folder it cannot
    write and `pins --lock` without AMD's index stop (tests/test_prebuilt_lock.py runs the latter), so 2."""
    from orchestrate.errors import BuildFailed, UserError

    assert (UserError.exit_code, BuildFailed.exit_code) == (2, 1)
    failing = (REPO / "docs" / "when-something-fails.md").read_text()
    assert "**2** stopped before doing anything" in failing and "**1** the work ran and something in it failed" in failing
    assert "The index unreachable: one line, nothing written, exit 2" in failing
    versions = " ".join((REPO / "docs" / "versions.md").read_text().split())
    assert "The index unreachable is one line, nothing written, exit 2." in versions  # it was listed under exit 1
    assert "exits 2 with one line, writing nothing, when the page cannot be written" in \
        " ".join((REPO / "docs" / "sharing.md").read_text().split())
