"""docs/reference.md's generated blocks, read from the code: every command's arguments from its parser
(`orchestrate`'s make_parser, `rocm-stack-check`'s build_parser) and orchestrate.toml's keys from their one
declaration (options.CONFIG_KEYS). tests/test_reference.py fails when a block differs from what the code
says; `python -m orchestrate.reference` rewrites the blocks."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable, Iterator

from .cli import make_parser
from .options import CONFIG_KEYS, S3_OPTION_KEYS, S3_OPTIONS, ConfigKey

PAGE = Path(__file__).resolve().parent.parent / "docs" / "reference.md"


def _cell(text: str) -> str:
    """Text for a table cell: one line, `|` escaped, and `<workspace>` shown (not taken for HTML) outside code."""
    parts = " ".join(str(text).split()).replace("|", "\\|").split("`")
    return "`".join(part if i % 2 else part.replace("<", "&lt;") for i, part in enumerate(parts))


def _invocation(action: argparse.Action) -> str:
    """How the argument is written: `--jobs N, -j N`, `PKG …`, `--[no-]s3-path-style`."""
    if isinstance(action, argparse.BooleanOptionalAction):
        return ", ".join(o.replace("--", "--[no-]", 1) for o in action.option_strings if not o.startswith("--no-"))
    name = action.metavar or ("{" + ",".join(map(str, action.choices)) + "}" if action.choices else None)
    name = name or (action.dest.upper() if action.option_strings else action.dest)
    value = {0: "", None: name, "?": f"[{name}]", "*": f"[{name} …]", "+": f"{name} …"}.get(action.nargs, name)
    if not action.option_strings:
        return value
    return ", ".join(f"{option} {value}".strip() for option in action.option_strings)


def _help(action: argparse.Action, prog: str) -> str:
    text = action.help or ""
    if "%(" in text:
        text = text % {**vars(action), "prog": prog}
    return text + (" (required)" if action.required and action.option_strings else "")


def commands(parser: argparse.ArgumentParser, prog: str) -> Iterator[tuple[str, str, argparse.ArgumentParser]]:
    """(command line, its one-line help, its parser) for every command and subcommand, in the parser's order."""
    for group in parser._subparsers._group_actions if parser._subparsers else []:
        helps = {choice.dest: choice.help for choice in group._choices_actions}
        for name, sub in group.choices.items():
            yield f"{prog} {name}", helps.get(name) or "", sub
            yield from commands(sub, f"{prog} {name}")


def arguments(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The arguments a user writes: not -h, not the subcommand itself."""
    return [a for a in parser._actions if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))
            and a.help != argparse.SUPPRESS]


def arguments_markdown(parser: argparse.ArgumentParser, prog: str) -> str:
    """The tool's own arguments and its epilog (exit codes), then one table per command: each argument as it
    is written, and its help."""
    own = [_table(_rows(parser, prog)) if _rows(parser, prog) else "", _cell(parser.epilog or "")]
    parts = ["\n\n".join(filter(None, own))] if any(own) else []
    for line, help_text, sub in commands(parser, prog):
        subcommands = [f"`{name}`" for name, _, _ in commands(sub, line)]
        table = (_table(_rows(sub, line)) if _rows(sub, line) else
                 f"Commands: {', '.join(subcommands)}." if subcommands else "No arguments.")
        parts.append("\n".join([f"### `{line}`", "", _cell(help_text), "", table]))
    return "\n\n".join(parts)


def _table(rows: list[str]) -> str:
    return "\n".join(["| argument | what |", "|---|---|", *rows])


def _rows(parser: argparse.ArgumentParser, prog: str) -> list[str]:
    return [f"| `{_cell(_invocation(a))}` | {_cell(_help(a, prog))} |" for a in arguments(parser)]


def _key_row(key: ConfigKey, name: str) -> str:
    flags = ", ".join(f"`{flag}`" for flag in key.flag.split(", ")) if key.flag else "—"
    return f"| `{name}` | {_cell(key.doc)} | {_cell(key.default) or '—'} | {flags} |"


def config_markdown() -> str:
    """orchestrate.toml's keys, from options.CONFIG_KEYS and S3_OPTION_KEYS."""
    rows = [_key_row(key, key.name) for key in CONFIG_KEYS]
    rows += [_key_row(key, f"[{S3_OPTIONS}.<bucket>] {key.name}") for key in S3_OPTION_KEYS]
    return "\n".join(["| key | what | default | flag |", "|---|---|---|---|", *rows])


def _rocm_stack_check_parser() -> argparse.ArgumentParser:
    from rocm_stack_check.cli import build_parser  # its own package, installed beside this one

    return build_parser()


BLOCKS: dict[str, Callable[[], str]] = {
    "orchestrate-arguments": lambda: arguments_markdown(make_parser(), "orchestrate"),
    "rocm-stack-check-arguments": lambda: arguments_markdown(_rocm_stack_check_parser(), "rocm-stack-check"),
    "orchestrate-toml": config_markdown,
}


def markers(name: str) -> tuple[str, str]:
    return f"<!-- generated:{name}:start -->", f"<!-- generated:{name}:end -->"


def _span(text: str, name: str) -> tuple[int, int] | None:
    start, end = markers(name)
    first = text.find(start)
    last = text.find(end, first + 1)
    return (first + len(start), last) if first >= 0 and last >= 0 else None


def block(text: str, name: str) -> str | None:
    """What `text` holds between the block's markers; None where it has no such block."""
    span = _span(text, name)
    return text[span[0]:span[1]].strip("\n") if span else None


def rewritten(text: str) -> str:
    """`text` with every generated block as the code says it."""
    for name, make in BLOCKS.items():
        span = _span(text, name)
        if span is None:
            raise SystemExit(f"{PAGE} has no {' ... '.join(markers(name))} block: add the two markers")
        text = f"{text[:span[0]]}\n{make()}\n{text[span[1]:]}"
    return text


if __name__ == "__main__":
    PAGE.write_text(rewritten(PAGE.read_text()))
    print(f"wrote the generated blocks of {PAGE}", file=sys.stderr)
