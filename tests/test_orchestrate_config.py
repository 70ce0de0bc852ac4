"""orchestrate.toml is checked when it is read: every key declared once (orchestrate/options.py CONFIG_KEYS),
each value checked by its flag's checker, an unknown key refused with the nearest known one. A mistake is one
line naming the file, the key and what to write, exit 2, no traceback, and nothing runs."""
from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from orchestrate.cli import make_parser
from orchestrate.errors import UserError
from orchestrate.options import CONFIG_KEYS, S3_OPTION_KEYS, load_config, options_from_args

# what the file says -> fragments of the one line the user sees
MISTAKES = {
    "kebab-case key": ("max-jobs = 4", ["unknown key 'max-jobs'", "did you mean 'max_jobs'?"]),
    "misspelt key": ('sorce_cache = "/srv/sources"', ["unknown key 'sorce_cache'", "did you mean 'source_cache'?"]),
    "key like nothing known": ("colour = 1", ["unknown key 'colour'", "the keys are channel, arch"]),
    "launcher the flag refuses": ('compiler_launcher = "distcc"',
                                  ['compiler_launcher = "distcc" is not a compiler launcher', "ccache or sccache"]),
    "channel given a number": ("channel = 5", ['channel = 5 is a whole number: write a folder, e.g. channel = "channel"']),
    "jobs given text": ('max_jobs = "four"', ['max_jobs = "four" is text', "max_jobs = 4"]),
    "jobs given true": ("max_jobs = true", ["max_jobs = true is true or false", "max_jobs = 4"]),
    "a list of numbers": ("cache_channels = [1, 2]", ["cache_channels = [1, 2] is a list holding a whole number",
                                                        'cache_channels = ["s3://team/rocm-stack"]']),
    "cache channel written wrong": ('cache_channels = "cache:8000/stack"',
                                    ['cache_channels = "cache:8000/stack" is neither a folder nor a URL']),
    "cache channel no client reads": ('cache_channels = ["ftp://host/stack"]', ["ftp:// is not taken here"]),
    "channel left empty": ('channel = ""', ['channel = "" is neither a folder nor a URL']),
    "jobs given a fraction": ("max_jobs = 4.5", ["max_jobs = 4.5 is a number: write a whole number of 1 or more"]),
    "not UTF-8": ('channel = "\udcff"', ["is not valid TOML"]),
    "channel that is a file": ('channel = "a-file"', ['channel = "a-file" is a file, not a folder']),
    "s3 options without a bucket": ('[s3-options]\nendpoint-url = "http://minio:9000"',
                                    ["[s3-options] holds one table per bucket", "[s3-options.<bucket>]"]),
    "s3 option in snake_case": ('[s3-options.team]\nendpoint_url = "http://minio:9000"',
                                ["[s3-options.team] endpoint_url is no S3 option", "did you mean 'endpoint-url'?"]),
    "s3 endpoint without scheme": ('[s3-options.team]\nendpoint-url = "minio:9000"',
                                   ['endpoint-url = "minio:9000" is not a URL', "http://minio:9000"]),
    "s3 path style as text": ('[s3-options.team]\nforce-path-style = "yes"', ["force-path-style = \"yes\" is text"]),
    "source channel left empty": ('source_channels = [""]', ['source_channels = [""] is not a channel']),
    "source channel written wrong": ('source_channels = "s3:team/mirror"', ['source_channels = "s3:team/mirror" is not a '
                                                                           'channel', 'source_channels = ["conda-forge"]']),
    "source channel no client reads": ('source_channels = ["ftp://mirror/conda-forge"]', ["ftp:// is not taken here"]),
}


@pytest.mark.parametrize("name", MISTAKES)
def test_a_mistake_in_orchestrate_toml_is_one_line_naming_file_key_and_form(orchestrate, workspace, channel, name):
    line, fragments = MISTAKES[name]
    (workspace / "a-file").write_text("not a folder")
    offline = "" if line.startswith("source_channels") else "source_channels = []\n"  # the test graph needs none
    (workspace / "orchestrate.toml").write_bytes(f"{offline}{line}\n".encode(errors="surrogateescape"))
    result = orchestrate("build-all", "--arch", "gfx1151")
    assert result.code == 2
    lines = [l for l in result.err.splitlines() if l.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error: {workspace / 'orchestrate.toml'}"), result.err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    assert "Traceback" not in result.out + result.err
    assert not channel.path.exists()  # nothing was built


# Every command that reads orchestrate.toml reads it checked: the sharing commands and the page too.
READERS = [["plan"], ["fetch"], ["doctor"], ["page"], ["serve", "--port", "0"], ["publish", "--to", "file:///nowhere"],
           ["verify", "--from", "s3://team/stack"], ["consumer-manifest", "--channel", "https://host/stack", "--print"]]


@pytest.mark.parametrize("arguments", READERS, ids=lambda a: a[0])
def test_every_reader_of_orchestrate_toml_refuses_an_unknown_key(orchestrate, workspace, arguments):
    (workspace / "orchestrate.toml").write_text("source_channels = []\nmax-jobs = 4\n")
    result = orchestrate(*arguments)
    assert result.code == 2, result.err
    assert result.err.strip() == (f"error: {workspace / 'orchestrate.toml'}: unknown key 'max-jobs': "
                                  "did you mean 'max_jobs'?")


def _options(workspace, *arguments):
    args = make_parser().parse_args(["plan", "--workspace", str(workspace), *arguments])
    return options_from_args(args)


def test_a_string_where_a_list_belongs_is_a_list_of_one(workspace):
    """cibuildwheel's rule: a string is a valid way to write a one-element list, never read a character at a time."""
    (workspace / "orchestrate.toml").write_text('source_channels = "conda-forge"\n'
                                                'cache_channels = "file:///mnt/team/rocm-stack"\n')
    options = _options(workspace)
    assert options.source_channels == ["conda-forge"]
    assert options.cache_channels == ["file:///mnt/team/rocm-stack"]


def test_each_key_reaches_the_options_and_a_flag_wins(workspace):
    (workspace / "orchestrate.toml").write_text(
        'channel = "ch"\narch = "gfx908"\nmax_jobs = 3\ncompiler_launcher = "sccache"\nsource_cache = "src"\n'
        'package_format = "tar-bz2"\ncompression_threads = 2\nsource_channels = ["./mirror"]\n'
        'cache_channels = ["../team-cache", "s3://team/stack"]\n'
        '[s3-options.team]\nendpoint-url = "http://minio:9000"\nregion = "eu"\nforce-path-style = true\n')
    options = _options(workspace)
    assert (options.channel, options.arch, options.max_jobs, options.compiler_launcher) == \
        (workspace / "ch", "gfx908", 3, "sccache")
    assert (options.source_cache, options.package_format, options.compression_threads) == \
        (workspace / "src", "tar-bz2", 2)
    # a folder in the file is relative to the workspace, wherever orchestrate runs
    assert options.source_channels == [str(workspace / "mirror")]
    assert options.cache_channels == [str(workspace.parent / "team-cache"), "s3://team/stack"]
    options = _options(workspace, "--arch", "gfx1151", "--no-source-channels")
    assert options.arch == "gfx1151" and options.source_channels == []


def test_every_key_names_its_flag_and_every_flag_named_is_real():
    """The declaration says which flag sets the same thing; that flag exists on a command that reads the key."""
    parser = make_parser()
    flags = {option for sub in parser._subparsers._group_actions[0].choices.values() for action in sub._actions
             for option in action.option_strings}
    for key in (*CONFIG_KEYS, *S3_OPTION_KEYS):
        for flag in filter(None, key.flag.replace("--[no-]", "--").split(", ")):
            assert flag in flags, f"{key.name} names {flag}, which no command takes"


def test_the_flag_refuses_what_the_key_refuses(orchestrate):
    """One checker for the flag and the key: --compiler-launcher distcc is refused as compiler_launcher is."""
    with pytest.raises(SystemExit) as stopped:
        make_parser().parse_args(["build-all", "--compiler-launcher", "distcc"])
    assert stopped.value.code == 2
    with pytest.raises(argparse.ArgumentTypeError, match="'distcc' is not a compiler launcher"):
        next(k for k in CONFIG_KEYS if k.name == "compiler_launcher").check("distcc")


def test_the_architecture_comes_from_the_flag_then_the_file_then_orchestrate_arch(workspace, monkeypatch):
    """options.arch_from, the one reader of ORCHESTRATE_ARCH for plan, build, fetch, doctor and pins."""
    monkeypatch.setenv("ORCHESTRATE_ARCH", "gfx942")
    assert _options(workspace).arch == "gfx942"
    (workspace / "orchestrate.toml").write_text('arch = "gfx908"\n')
    assert _options(workspace).arch == "gfx908"
    assert _options(workspace, "--arch", "gfx1151").arch == "gfx1151"
    # and the manual says it in that order (it once put $ORCHESTRATE_ARCH before the file)
    manual = (Path(__file__).resolve().parent.parent / "docs" / "orchestrator.md").read_text()
    bullet = next(line for line in manual.splitlines() if line.startswith("- **Architecture:**"))
    assert bullet.index("`--arch`") < bullet.index("`orchestrate.toml`") < bullet.index("`$ORCHESTRATE_ARCH`"), bullet


def documented_settings() -> list[tuple[str, str]]:
    """(page, `key = value`) for every setting the docs show for orchestrate.toml: a code span or a commented
    code line that says `key = value`, on a line naming orchestrate.toml or the line after it."""
    from test_reference import PAGES, REPO

    found = []
    for page in PAGES:
        lines = page.read_text().splitlines()
        for number, line in enumerate(lines):
            if "orchestrate.toml" not in line:
                continue
            for text in lines[number:number + 2]:
                settings = re.findall(r"`([a-z_]+ = [^`]+)`", text) + re.findall(r"^# ([a-z_]+ = .+)$", text)
                found += [(str(page.relative_to(REPO)), setting) for setting in settings]
    return found


def test_every_setting_the_docs_show_is_read_as_they_say(tmp_path):
    settings = documented_settings()
    assert len(settings) >= 2, settings  # it finds getting-started's source_cache and sharing's cache_channels
    for page, setting in settings:
        (tmp_path / "orchestrate.toml").write_text(setting + "\n")
        load_config(tmp_path)  # a UserError names the page's mistake


def _flag_actions(flag: str, commands: tuple[str, ...]) -> list[argparse.Action]:
    from orchestrate import reference

    return [action for line, _, sub in reference.commands(make_parser(), "orchestrate") for action in sub._actions
            if line.split()[-1] in commands and flag in action.option_strings]


# The commands whose flags the keys stand for (consumer-manifest's --channel is another thing: the shared channel).
KEY_READERS = {"config": ("plan", "build-all", "build", "fetch", "doctor"), "s3": ("publish", "verify", "page")}


# Texts some flag's checker refuses: for each checked key, the first its checker refuses is tried in the file.
REFUSED_TEXTS = ["", "0", "-1", "ftp://host/x", "s3:team/x", "distcc", "zip"]
WRONG_KIND = {str: "{ x = 1 }", int: '"4"', bool: '"yes"', list: "[1]"}


@pytest.mark.parametrize("key", [*CONFIG_KEYS, *S3_OPTION_KEYS], ids=lambda k: k.name)
def test_every_key_is_checked_as_its_flag_and_refuses_in_one_line(tmp_path, key):
    """Generated from the declaration, for every key: the flag it names parses with the key's own checker (one
    checker, so the two never differ), a value of another kind and a value the checker refuses each stop the
    read with one line naming the file and the key."""
    for flag in filter(None, key.flag.replace("--[no-]", "--").split(", ")):
        for action in _flag_actions(flag, KEY_READERS["s3" if key in S3_OPTION_KEYS else "config"]):
            assert action.type is key.check or action.nargs == 0, f"{flag} is not checked as {key.name} is"
    # every value but a switch and free text (an architecture is checked against the table where it is used) is
    # checked when read: an unchecked one reaches rattler or a build as written
    assert key.check or key.kind is bool or key.name in ("arch", "region"), f"{key.name} has no checker"
    s3 = key in S3_OPTION_KEYS
    where = f"{tmp_path / 'orchestrate.toml'}: " + (f"[s3-options.team] {key.name}" if s3 else key.name)
    refused = next((text for text in REFUSED_TEXTS if key.check and _refuses(key.check, text)), None)
    values = [WRONG_KIND[key.kind]] + ([] if refused is None else [f'"{refused}"'])
    for value in values:
        (tmp_path / "orchestrate.toml").write_text(("[s3-options.team]\n" if s3 else "") + f"{key.name} = {value}\n")
        with pytest.raises(UserError) as refused_line:
            load_config(tmp_path)
        assert str(refused_line.value).startswith(where) and "\n" not in str(refused_line.value)
        assert ": write " in str(refused_line.value)


def _refuses(check, text: str) -> bool:
    try:
        check(text)
    except argparse.ArgumentTypeError:
        return True
    return False


def test_an_unknown_architecture_in_the_file_or_the_variable_is_named_there(orchestrate, workspace, monkeypatch):
    (workspace / "orchestrate.toml").write_text('source_channels = []\narch = "gfx1115"\n')
    for command in (["plan"], ["doctor"], ["build-all", "--dry-run"]):
        result = orchestrate(*command)
        assert result.code == 2 and result.err.count("\n") == 1, result.err
        assert result.err.startswith(f"error: {workspace / 'orchestrate.toml'}: arch: unknown architecture 'gfx1115' "
                                     "(did you mean gfx1151?)")
    (workspace / "orchestrate.toml").write_text("source_channels = []\n")
    monkeypatch.setenv("ORCHESTRATE_ARCH", "gfx1115")
    assert orchestrate("plan").err.startswith("error: $ORCHESTRATE_ARCH: unknown architecture 'gfx1115'")
    assert orchestrate("plan", "--arch", "gfx1115").err.startswith("error: unknown architecture 'gfx1115'")


def test_a_source_channel_flag_is_refused_as_the_key_is(capsys):
    for text, said in (("s3:team/mirror", "is not a channel"), ("", "is not a channel"),
                       ("ftp://mirror/x", "ftp:// is not taken here")):
        with pytest.raises(SystemExit) as stopped:
            make_parser().parse_args(["plan", "--source-channel", text])
        err = capsys.readouterr().err
        assert stopped.value.code == 2 and err.count("\n") == 1 and said in err
