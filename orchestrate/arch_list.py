"""Several GPU architectures at once (`--arch gfx942,gfx950`, orchestrate.toml's `arch = [...]`,
$ORCHESTRATE_ARCH): the list as written, checked, and one set of options per architecture in it."""
from __future__ import annotations

import argparse
import dataclasses

from .errors import UserError


def arch_list(text: str) -> str:
    """An architecture, or several separated by commas for a machine or fleet with several GPUs
    (gfx942,gfx950); each is checked against variants/architectures.yaml where it is used."""
    names = arch_names(text)
    if not names or any(not name for name in names):
        raise argparse.ArgumentTypeError(f"{text!r} is not an architecture list: pass e.g. gfx1151, or gfx942,gfx950 "
                                         "for several GPUs")
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise argparse.ArgumentTypeError(f"{text!r} names {', '.join(twice)} twice: pass each architecture once")
    return text


def arch_names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",")] if text.strip() else []


def first_arch_list(sources: list[tuple[str | None, str]]) -> list[str]:
    """The architectures of the first source that gives any ((text, where it is written) pairs, --arch first),
    checked: one written wrong (in orchestrate.toml, $ORCHESTRATE_ARCH) is named where it is written."""
    text, where = next(((value, where) for value, where in sources if value), ("", ""))
    try:
        arch_list(text) if text else None
    except argparse.ArgumentTypeError as exc:
        raise UserError(f"{where or '--arch'}: {exc}") from None
    return arch_names(text)


def per_arch(options) -> list:
    """One Options per architecture given, each for that one alone (`plan`, `build-all`, `build` and `fetch` run
    once per architecture of `--arch gfx942,gfx950`); [options] itself where one or none (detection) is given."""
    if len(options.archs) <= 1:
        return [options]
    return [dataclasses.replace(options, arch=name, archs=[name]) for name in options.archs]
