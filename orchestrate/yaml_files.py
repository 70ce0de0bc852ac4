"""Reading our own YAML files (the declarations in variants/, the lock, shared.yaml): the mapping one holds, or
one line naming the file and line that is wrong and how to fix it."""
from __future__ import annotations

from pathlib import Path

import yaml

from .errors import UserError

# libyaml's loader where PyYAML has it (PyPI's wheels do): the same safe subset of YAML, parsed about ten times
# faster than the pure-Python one. A plan parses every recipe and the table, once per architecture.
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def parse(text: str):
    """yaml.safe_load, with libyaml where there is one."""
    return yaml.load(text, Loader=_SAFE_LOADER)


def read_mapping(path: Path) -> dict:
    """A YAML file of ours that holds a mapping (the declarations, the lock, shared.yaml), or one line saying
    what is wrong with it."""
    try:
        data = parse(path.read_text()) or {}
    except OSError as exc:
        raise UserError(f"{path} cannot be read ({exc.strerror or exc.__class__.__name__}): fix or restore it") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise UserError(f"{path}:{mark.line + 1 if mark else '?'}: not valid YAML: fix the syntax")
    if not isinstance(data, dict):
        raise UserError(f"{path}: must be a YAML mapping: fix the file")
    return data
