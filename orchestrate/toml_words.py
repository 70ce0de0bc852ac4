"""How a mistake in orchestrate.toml is said: the value as the file writes it, what kind of value it is, and the
nearest key a misspelt one stands for."""
from __future__ import annotations

import difflib
import json


def unknown_key(said: str, name: str, known: list[str]) -> str:
    """`said`, and the nearest known key (`max-jobs` is max_jobs), else every known key."""
    spelt = {k.replace("-", "_").lower(): k for k in known}
    written = name.replace("-", "_").lower()
    near = written if written in spelt else next(iter(difflib.get_close_matches(written, list(spelt), n=1)), None)
    if near:
        return f"{said}: did you mean {spelt[near]!r}?"
    return f"{said}: the keys are {', '.join(known)} (docs/reference.md, orchestrate.toml)"


def toml_value(value) -> str:
    """A value as orchestrate.toml writes it."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (str, int, float, list)):
        return json.dumps(value, ensure_ascii=False, default=str)
    return str(value)


def kind_of(value) -> str:
    kinds = [(bool, "true or false"), (int, "a whole number"), (float, "a number"), (str, "text"), (list, "a list"),
             (dict, "a table")]
    if isinstance(value, list) and any(not isinstance(item, str) for item in value):
        return f"a list holding {kind_of(next(item for item in value if not isinstance(item, str)))}"
    return next((name for kind, name in kinds if isinstance(value, kind)), "a date")
