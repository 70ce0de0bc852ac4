"""Placeholder for bump-prove's report of a bump (issue 24); their module replaces this one."""
from __future__ import annotations


def markdown(rows: list[dict], proofs: list, *, generated: str, written: bool) -> str:
    lines = [f"# Pins checked against upstream ({generated})", ""]
    lines += [f"- {r['name']}: {r['decision']} {r['pinned']}" + (f" → {r['to']}" if r["to"] else "") + f" ({r['reason']})"
              for r in rows]
    return "\n".join(lines) + "\n"


def checked_against_upstream(rows: list[dict], date: str) -> str:
    return "\n".join([f"Checked against upstream on {date}:", ""] +
                     [f"- {r['name']} {r['pinned']}: {r['decision']}" for r in rows]) + "\n"
