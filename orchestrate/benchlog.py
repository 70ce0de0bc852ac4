"""The quick benchmark the recipes' test sections run (`rocm-stack-check bench --quick --log-json`): its
results found in a build's log, kept beside the log as <log name>.bench.json, and each architecture's
latest shown by `orchestrate status`.

The test runs inside rattler-build's test environment, whose files are gone once the build returns; its
output is not: every line reaches the build log, so the tool prints its document as one marked line.
"""
from __future__ import annotations

import json
from pathlib import Path

# = rocm_stack_check.quick.LOG_MARKER: the tool is a package of its own, so the marker is written twice and a
# test compares the two.
MARKER = "rocm-stack-check bench json: "
SUFFIX = ".bench.json"


def collect(log_path: Path, package: str) -> Path | None:
    """Write the last benchmark document `package`'s build log holds beside it; None when it holds none (the
    build machine had no GPU, or the tests did not run)."""
    document = None
    try:
        with open(log_path, errors="replace") as log:
            for line in log:
                start = line.find(MARKER)
                if start < 0:
                    continue
                try:
                    found = json.loads(line[start + len(MARKER):])
                except ValueError:
                    continue  # a line cut short (a build stopped mid-write) is no result
                if isinstance(found, dict) and "speedup" in found:
                    document = found
    except OSError:
        return None
    if document is None:
        return None
    document["build_log"], document["package"] = log_path.name, package
    kept = log_path.with_name(log_path.stem + SUFFIX)
    kept.write_text(json.dumps(document, indent=1) + "\n")
    return kept


def architecture_of(document: dict) -> str | None:
    """The architecture a benchmark document ran on (the one it was told to expect, else the one it found)."""
    try:
        return document.get("expect_arch") or document["platform"]["arch"] or None
    except (KeyError, TypeError, AttributeError):
        return None


def latest_per_architecture(logs_dir: Path) -> dict[str, dict]:
    """Architecture -> its newest kept benchmark document (by the time the benchmark ran)."""
    latest: dict[str, dict] = {}
    for path in sorted(logs_dir.glob(f"*{SUFFIX}")) if logs_dir.is_dir() else []:
        try:
            document = json.loads(path.read_text())
            arch = architecture_of(document)
            created = document["created"]
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue  # a file someone edited or cut short: not a result
        if not arch:
            continue
        if arch not in latest or created > latest[arch]["created"]:
            latest[arch] = document
    return latest


def summary_lines(logs_dir: Path) -> list[str]:
    latest = latest_per_architecture(logs_dir)
    if not latest:
        return []
    lines = [f"Last quick benchmark per architecture (recipe tests; {logs_dir}):"]
    for arch, document in sorted(latest.items()):
        package = document.get("package", "?")
        device = document.get("platform", {}).get("device_name") or "?"
        lines.append(f"  {arch}: {document.get('summary', 'no summary')} ({package} test, {device}, "
                     f"{document['created'][:16].replace('T', ' ')})")
    return lines
