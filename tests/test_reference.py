"""The reference is the code's: docs/reference.md's generated blocks (every argument of every command, and
orchestrate.toml's keys) are what orchestrate/reference.py makes from the parsers and the keys' declaration,
every flag the docs show is one its command takes, and every environment variable the code reads for a user
is documented (and every one documented is read)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from orchestrate import reference
from orchestrate.architectures import ArchitectureTable
from orchestrate.cli import make_parser
from orchestrate.options import VARIANT_EXAMPLE, Options, parse_variant_overrides

REPO = Path(__file__).resolve().parent.parent
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
PARSERS = {"orchestrate": make_parser, "rocm-stack-check": reference._rocm_stack_check_parser}


@pytest.mark.parametrize("name", reference.BLOCKS)
def test_each_generated_block_is_what_the_code_says(name):
    text = reference.PAGE.read_text()
    assert reference.block(text, name) == reference.BLOCKS[name](), (
        f"docs/reference.md's {name} block differs from the code: run `python -m orchestrate.reference`")


def test_the_generator_fills_an_empty_block_and_leaves_the_rest():
    start, end = reference.markers("orchestrate-toml")
    page = f"before\n{start}\n{end}\nafter {{ width=1 }}\n"
    text = reference.rewritten(page.replace(end, end + "\n" + "\n".join(
        "\n".join(reference.markers(n)) for n in reference.BLOCKS if n != "orchestrate-toml")))
    assert text.startswith("before\n") and "after { width=1 }" in text
    assert "| `max_jobs` |" in reference.block(text, "orchestrate-toml")
    assert "### `orchestrate build-all`" in reference.block(text, "orchestrate-arguments")


def _flags(parser) -> set[str]:
    flags = {"--help", "-h"}
    for action in parser._actions:
        flags.update(action.option_strings)
    return flags


def command_flags() -> dict[str, set[str]]:
    """'orchestrate pins' -> its flags, for every command of both tools (and each tool itself)."""
    known = {}
    for prog, make in PARSERS.items():
        parser = make()
        known[prog] = _flags(parser)
        for line, _, sub in reference.commands(parser, prog):
            known[line] = _flags(sub)
    return known


COMMAND = re.compile(r"(?<![\w/.-])(orchestrate|rocm-stack-check)(?![\w.-])((?: [a-z][a-z-]*)*)(.*)")
FLAG = re.compile(r"(?<![\w-])(--?[a-zA-Z][\w-]*)")


def shown_commands(text: str):
    """(command line, the flags written after it) for every command in a code span or a code block line."""
    code = re.findall(r"```[a-z]*\n(.*?)```", text, re.S)
    spans = re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", text, flags=re.S))
    for piece in [line for block in code for line in block.splitlines()] + spans:
        for part in re.split(r"&&|\|\||;|\|(?!\|)| #", piece):
            found = COMMAND.search(part)
            if found:
                yield found[1] + found[2], FLAG.findall(found[3])


def _command(known: dict, line: str) -> str:
    """The longest known command `line` starts with (`orchestrate pypi add NAME` -> `orchestrate pypi add`)."""
    words = line.split()
    while " ".join(words) not in known:
        words.pop()
    return " ".join(words)


def test_every_flag_the_docs_show_is_one_its_command_takes():
    known, wrong = command_flags(), []
    for page in PAGES:
        for line, flags in shown_commands(page.read_text()):
            command = _command(known, line)
            wrong += [f"{page.relative_to(REPO)}: `{command} {flag}`" for flag in flags if flag not in known[command]]
    assert not wrong, "documented flags the commands do not take:\n" + "\n".join(wrong)


def test_every_command_a_message_suggests_takes_the_flags_it_names():
    """The code's own hints (run `orchestrate pins --lock`, a fix naming a command): `detect` once suggested
    `detect --arch`, which it refused."""
    known, wrong, seen = command_flags(), [], 0
    files = [*(REPO / "orchestrate").rglob("*.py"), *(REPO / "recipes/rocm-stack-check/src").rglob("*.py")]
    for path in files:
        for span in re.findall(r"`([^`\n]*(?:orchestrate|rocm-stack-check) [^`\n]*)`", path.read_text()):
            for line, flags in shown_commands(f"`{span}`"):
                seen += 1
                command = _command(known, line)
                wrong += [f"{path.relative_to(REPO)}: `{span}`" for flag in flags if flag not in known[command]]
    assert seen > 50 and not wrong, wrong


def test_every_flag_the_workflow_and_the_pixi_tasks_pass_or_name_is_real():
    """CI's `run:` lines, and each pixi task's command with the flags its description offers (`pixi run doctor
    --arch A`)."""
    known, wrong = command_flags(), []
    lines = [(path, line) for path in [*(REPO / ".github/workflows").glob("*.yml"), REPO / "pixi.toml"]
             for line in path.read_text().splitlines()]
    for path, line in lines:
        found = COMMAND.search(line.split("run:", 1)[-1].split('cmd = "', 1)[-1])
        if found and ("run:" in line or 'cmd = "orchestrate' in line):
            command = _command(known, found[1] + found[2])
            wrong += [f"{path.name}: `{command} {flag}`" for flag in FLAG.findall(found[3]) if flag.startswith("--")
                      and flag not in known[command]]
    assert not wrong, wrong


def test_every_flag_a_row_of_the_commands_table_names_is_real():
    """docs/reference.md's hand-written Commands table: each row's flags belong to a command its first cell names."""
    known = command_flags()
    table = reference.PAGE.read_text().split("## Commands")[1].split("\n## ")[0]
    wrong = []
    for row in [r for r in table.splitlines() if r.startswith("| `orchestrate")]:
        first, rest = row[2:].split(" | ", 1)
        commands = {_command(known, line) for line, _ in shown_commands(first)}
        takes = set().union(*(known[c] for c in commands))
        wrong += [f"{sorted(commands)}: {flag}" for flag in FLAG.findall(re.sub(r"\[[^]]*\]\([^)]*\)", "", rest))
                  if flag.startswith("--") and flag not in takes]
    assert not wrong, wrong


def test_every_command_has_a_row_in_the_commands_table():
    table = reference.PAGE.read_text().split("## Commands")[1].split("\n## ")[0]
    known = command_flags()
    described = {_command(known, line) for row in table.splitlines() if row.startswith("| `orchestrate")
                 for line, _ in shown_commands(row.split(" | ")[0])}
    described |= {f"orchestrate {name}" for name in re.findall(r" / `([a-z-]+)` \|", table)}  # `list` / `status`
    commands = {line for line, _, sub in reference.commands(make_parser(), "orchestrate") if not sub._subparsers}
    assert commands - described == set()


def test_the_help_examples_variant_works_for_every_architecture(workspace):
    """`--variant` help and errors show an override every architecture in the table takes."""
    from orchestrate.recipes import variant_choice

    table = ArchitectureTable.load(REPO / "variants")
    options = Options(workspace=REPO, channel=REPO / "channel", variant_overrides=parse_variant_overrides([VARIANT_EXAMPLE]))
    for arch in table.architectures.values():
        variant_choice(options, table, arch)  # raises for an override the architecture does not take


def test_a_command_given_no_subcommand_says_which_there_are(orchestrate, capsys):
    with pytest.raises(SystemExit) as stopped:
        make_parser().parse_args(["pypi"])
    assert stopped.value.code == 2
    assert capsys.readouterr().err == "error: `orchestrate pypi` needs a command: add (see `orchestrate pypi --help`)\n"


def test_a_flag_is_written_whole(capsys):
    """No abbreviations: `--arch-n` is refused, not taken for --arch-neutral."""
    with pytest.raises(SystemExit) as stopped:
        make_parser().parse_args(["build-all", "--arch-n"])
    assert stopped.value.code == 2 and "unrecognized arguments: --arch-n" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["list", "status", "clean"])
def test_commands_that_read_no_architecture_take_no_arch(command, capsys):
    with pytest.raises(SystemExit) as stopped:
        make_parser().parse_args([command, "--arch", "gfx1151"])
    assert stopped.value.code == 2 and "unrecognized arguments: --arch gfx1151" in capsys.readouterr().err


def _env_table() -> dict[str, str]:
    table = reference.PAGE.read_text().split("## Environment variables")[1].split("\n## ")[0]
    rows = {}
    for row in table.splitlines()[2:]:
        cells = row.split(" | ")
        for name in re.findall(r"`([A-Z][A-Z0-9_]+)`", cells[0]):
            rows[name] = cells[1]
    return rows


# Read by the code, but not for a user to set: the test harness's crash points, and what rattler's and git's own
# conventions already say (the cache folders rattler-build uses, git's prompts, PYTHONPATH passed on).
NOT_FOR_USERS = {"ORCHESTRATE_CRASH_AT", "XDG_CACHE_HOME", "RATTLER_CACHE_DIR", "PYTHONPATH", "AWS_DEFAULT_REGION",
                 "GIT_TERMINAL_PROMPT", "GIT_ASKPASS", "COLUMNS"}
CONSTANT = re.compile(r"^([A-Z][A-Z0-9_]*)\s*=\s*\"([A-Z][A-Z0-9_]+)\"", re.M)
PAIR = re.compile(r"^([A-Z][A-Z0-9_]*, [A-Z][A-Z0-9_]*)\s*=\s*(\"[A-Z][A-Z0-9_]+\", \"[A-Z][A-Z0-9_]+\")", re.M)
READ = re.compile(r"environ(?:\.get)?[\[(]\s*([A-Z][A-Z0-9_]*|\"[A-Z][A-Z0-9_]+\")|\*\*os\.environ, ([A-Z][A-Z0-9_]*|\"[A-Z_]+\")")


def variables_read() -> set[str]:
    """Every environment variable the orchestrator and rocm-stack-check read, by name or by a named constant."""
    files = [*(REPO / "orchestrate").rglob("*.py"), *(REPO / "recipes/rocm-stack-check/src").rglob("*.py")]
    sources = "\n".join(f.read_text() for f in files)
    constants = dict(CONSTANT.findall(sources))
    for names, values in PAIR.findall(sources):  # GPU_OVERRIDE_ENV, ARCH_OVERRIDE_ENV = "...", "..."
        constants.update(zip(re.findall(r"\w+", names), re.findall(r"\w+", values)))
    found = set()
    for text in (f.read_text() for f in files):
        for match in READ.finditer(text):
            name = (match[1] or match[2]).strip('"')
            found.add(constants.get(name, name))
    return found


def test_every_environment_variable_read_is_documented_and_every_documented_one_is_read():
    documented, read = set(_env_table()), variables_read() - NOT_FOR_USERS
    set_for_scripts = {"MAX_JOBS", "COMPILER_LAUNCHER", "HTTPS_PROXY"}  # set by us, or read by the tools we run
    assert read - documented == set(), "read but not in docs/reference.md's Environment variables"
    assert {"ORCHESTRATE_ARCH", "ROCM_STACK_ARCH_TABLE", "CONDA_OVERRIDE_AMDGPU_ARCH", "AWS_REGION"} <= read  # it finds them
    # the package servers' keys are read by name from credentials.py's table of them
    assert documented - read - set_for_scripts <= {"PREFIX_API_KEY", "QUETZ_API_KEY", "ANACONDA_API_KEY", "ARTIFACTORY_TOKEN"}


# A wrong value of each documented variable a command reads: one line naming the variable, exit 2, before any lookup.
WRONG_VARIABLES = [("ORCHESTRATE_ARCH", "gfx1115", ["plan"], "$ORCHESTRATE_ARCH: unknown architecture 'gfx1115'"),
                   ("ORCHESTRATE_PYPI_URL", "pypi.org", ["pins"], "$ORCHESTRATE_PYPI_URL pypi.org is not an http(s) URL"),
                   ("ORCHESTRATE_AMD_INDEX", "repo.amd.com", ["pins"], "$ORCHESTRATE_AMD_INDEX repo.amd.com is not an "),
                   ("ORCHESTRATE_RAW_BASE", "raw.host", ["pins", "--bump", "--git-base", "/nowhere"],
                    "$ORCHESTRATE_RAW_BASE raw.host is not an http(s) URL"),
                   ("AWS_ENDPOINT_URL", "minio:9000", ["verify", "--from", "s3://team/stack"],
                    "S3 endpoint 'minio:9000' from $AWS_ENDPOINT_URL is not an http(s) URL")]


@pytest.mark.parametrize("name, value, command, said", WRONG_VARIABLES, ids=[w[0] for w in WRONG_VARIABLES])
def test_a_documented_variable_with_a_wrong_value_is_one_line_naming_it(name, value, command, said, monkeypatch,
                                                                       capsys):
    from orchestrate.cli import main

    assert name in _env_table()
    monkeypatch.chdir(REPO)
    monkeypatch.setenv(name, value)
    for other in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(other, "test")
    assert main(command) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and said in err, err


def test_orchestrate_arch_is_documented_for_exactly_the_commands_that_read_it():
    """Each --arch whose help names $ORCHESTRATE_ARCH reads it through options.arch_from; the docs list those."""
    readers = {line.removeprefix("orchestrate ") for line, _, sub in reference.commands(make_parser(), "orchestrate")
               for action in sub._actions if "--arch" in action.option_strings and "$ORCHESTRATE_ARCH" in action.help}
    documented = set(re.findall(r"`([a-z-]+)`", _env_table()["ORCHESTRATE_ARCH"]))
    assert documented == readers


def github_slug(heading: str) -> str:
    """The id GitHub gives a heading: markup dropped, lowercased, punctuation but - and _ dropped, each space a
    hyphen (runs of hyphens stay, unlike MkDocs' slug)."""
    text = re.sub(r"`([^`]*)`", r"\1", heading)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[^\w\- ]", "", re.sub(r"<[^>]+>", "", text).strip().lower())
    return text.replace(" ", "-")


def test_every_anchor_resolves_on_github_as_on_the_site():
    """README and docs are read on GitHub too: an #anchor must be a heading's id under GitHub's rule as well
    (test_docs.py checks the site's)."""
    from test_docs import CODE_SPAN, HEADING, LINK, prose_lines

    def ids(page: Path) -> set[str]:
        seen: dict[str, int] = {}
        for _, line in prose_lines(page.read_text()):
            if HEADING.match(line):
                slug = github_slug(HEADING.match(line).group(2))
                seen[slug if slug not in seen else f"{slug}-{seen[slug]}"] = seen.get(slug, 0) + 1
        return set(seen)

    broken = []
    for page in PAGES:
        for number, line in prose_lines(page.read_text()):
            for link in LINK.finditer(CODE_SPAN.sub("code", line)):
                file_part, _, anchor = link.group(1).partition("#")
                target = (page.parent / file_part) if file_part else page
                if anchor and "://" not in file_part and target.suffix == ".md" and anchor not in ids(target):
                    broken.append(f"{page.relative_to(REPO)}:{number}: {link.group(1)}")
    assert github_slug("Channel names (`source_channels`, `--source-channel`)") == "channel-names-source_channels---source-channel"
    assert not broken, broken


def test_no_page_carries_markup_github_shows_as_text():
    """An attribute list after an image or link (`{ width="300" }`) is the site's; GitHub prints it."""
    shown = [f"{page.relative_to(REPO)}: {m[0]}" for page in PAGES for m in re.finditer(r"\)\{[^}\n]*\}", page.read_text())]
    assert not shown, shown
