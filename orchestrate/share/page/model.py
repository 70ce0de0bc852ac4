"""What a channel holds, per architecture, as the plain data both the page and channel-page.json show.

Everything is read through Store.read / Store.list, so a folder and an S3 bucket give the same page. A
file that does not parse is named under "problems" and otherwise left out: the page still shows the rest.
"""
from __future__ import annotations

import datetime
import re

from ...architectures import ArchitectureTable, override_hint
from ..bench import channel_documents
from ..consumer import channel_for_pixi, render_manifest
from ..lookup import read_index, read_lookup

SCHEMA = "rocm-stack/channel-page/1"
BENCH_SCHEMA = "rocm-stack-check/bench/1"
CHECK_SCHEMA = "rocm-stack-check/check/1"
# A latest result this much below the previous one on the same architecture is marked a regression: the quick
# benchmark's run-to-run spread on one machine stays well under it (tests/benchmarks/results/h100-quick-bench.md).
REGRESSION_TOLERANCE = 0.10
NOARCH = "noarch"
# Shown where the page does not know the channel's address (a local channel nobody serves yet).
PLACEHOLDER_URL = "https://your-server/rocm-stack"
STACK_PACKAGE = "rocm-stack"
# What "the stack's versions" means at a glance: the packages a teammate asks about first.
HEADLINE_PACKAGES = (STACK_PACKAGE, "rocm-sdk", "pytorch", "flash-attn", "vllm")
AMDGPU_ARCH_CONSTRAINT = re.compile(r"^__amdgpu_arch\s*==?\s*([0-9][0-9.]*)")

SCHEMA_NOTES = {
    "architectures[]": "one per GPU architecture the channel holds packages or results for",
    "architectures[].stack": "newest version of rocm-stack, rocm-sdk (the ROCm release), pytorch, flash-attn and "
                               "vllm, where the channel has them",
    "architectures[].packages[]": "every package build for that architecture, by name, newest first: name, "
                                  "version, build, file, built_at (UTC, ISO 8601, null if unknown), host and "
                                  "source (which build made it), input_hash",
    "architectures[].check": "latest check result: which attention backends worked (works true/false, null: not "
                             "run), from which document; null: not measured",
    "architectures[].bench": "quick benchmark: latest (results[]: backend, dtype, pass, speedup over math, "
                             "tflops, ms at the judged shape), history[] oldest first (one per document), "
                             "regressions[] (latest below previous by more than tolerance); null: not measured",
    "noarch[]": "packages every architecture shares, same fields as packages[]",
    "install": "channel (as pixi wants it), channel_add, pixi_toml (the consumer-manifest for this channel), "
               "placeholder (true: the page does not know the channel's URL); per architecture: pixi_add, override",
    "problems[]": "files the page could not read, one line each",
}


def iso(seconds: float | None) -> str | None:
    if not seconds:
        return None
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def read_packages(store, problems: list[str]) -> dict[str, dict]:
    """subdir/filename -> its repodata record, over every subdir's repodata.json."""
    records, damaged = read_index(store)
    problems += [f"{path} does not parse: run `orchestrate publish` (or build-all) again" for path in damaged]
    return {file: record for file, record in records.items() if isinstance(record, dict)}


def arch_of(record: dict, entry: dict | None, table: ArchitectureTable) -> str:
    """The architecture a package is built for: the build's lookup entry says it; else its
    `__amdgpu_arch` constraint; else an architecture name in its build string; else none (noarch)."""
    if entry and entry.get("arch"):
        return entry["arch"]
    for depend in record.get("depends") or []:
        found = AMDGPU_ARCH_CONSTRAINT.match(str(depend))
        if found and table.by_isa(found.group(1)):
            return table.by_isa(found.group(1)).name
    words = set(re.split(r"[_.-]", str(record.get("build", ""))))
    return next((name for name in table.names() if name in words), NOARCH)


def package_rows(records: dict[str, dict], lookup_entries: dict[str, dict],
                 table: ArchitectureTable) -> dict[str, list]:
    """Architecture (or "noarch") -> every package build the channel holds for it: by name, newest first."""
    grouped: dict[str, dict[str, list]] = {}
    for file, record in records.items():
        entry = lookup_entries.get(file)
        arch = arch_of(record, entry, table)
        built = (entry or {}).get("built_at") or (record.get("timestamp") or 0) / 1000
        row = {"name": str(record.get("name", "?")), "version": str(record.get("version", "?")),
               "build": str(record.get("build", "?")), "file": file, "built_at": iso(built),
               "host": str((entry or {}).get("host") or ""), "source": str((entry or {}).get("source") or ""),
               "input_hash": str((entry or {}).get("input_hash") or "")}
        grouped.setdefault(arch, {}).setdefault(row["name"], []).append((built or 0, row))
    return {arch: [row for name in sorted(by_name)
                   for _, row in sorted(by_name[name], key=lambda pair: (pair[0], pair[1]["file"]), reverse=True)]
            for arch, by_name in grouped.items()}


def read_documents(store, problems: list[str]) -> dict[str, list[dict]]:
    """Architecture -> its bench and check documents (bench/<arch>/<file>.json), oldest first."""
    found: dict[str, list[dict]] = {}
    for relpath, arch, document in channel_documents(store):
        if document is None or document.get("schema") not in (BENCH_SCHEMA, CHECK_SCHEMA):
            problems.append(f"{relpath} is not a rocm-stack-check document: `orchestrate verify` names the fix")
            continue
        document["_file"] = relpath
        found.setdefault(arch, []).append(document)
    for documents in found.values():
        documents.sort(key=lambda d: (str(d.get("created") or ""), d["_file"]))
    return found


def _device(document: dict) -> str:
    platform = document.get("platform") or {}
    return str(platform.get("device_name") or platform.get("arch") or "")


def _measured(document: dict) -> bool:
    return bool((document.get("platform") or {}).get("device_present"))


def _shape_of(row: dict) -> str:
    return ",".join(str(row.get(k)) for k in ("batch", "heads", "seq_len", "head_dim"))


def bench_results(document: dict) -> list[dict]:
    """Speed-up over math and TFLOP/s of each fused backend, dtype and pass at the judged shape."""
    speedup = document.get("speedup") or {}
    shape = str(speedup.get("shape") or "")
    rows = {(r.get("backend"), r.get("dtype")): r for r in document.get("rows") or []
            if isinstance(r, dict) and _shape_of(r) == shape}
    results = []
    for result in speedup.get("results") or []:
        measured = (rows.get((result.get("backend"), result.get("dtype"))) or {}).get(result.get("pass")) or {}
        ok = measured.get("status") == "ok"
        results.append({"backend": str(result.get("backend")), "dtype": str(result.get("dtype")),
                        "pass": str(result.get("pass")), "speedup": result.get("speedup"),
                        "tflops": measured.get("tflops") if ok else None, "ms": measured.get("ms") if ok else None,
                        "note": str(result.get("note") or measured.get("note") or "")})
    return results


def check_result(document: dict) -> dict:
    """Which attention backends worked in one document: a check's runs, or a benchmark's measurements."""
    backends = []
    if document.get("schema") == CHECK_SCHEMA:
        sdpa = document.get("sdpa") or {}
        runs = document.get("flash_runs") or []
        backends.append({"name": "flash", "works": all(r.get("passed") for r in runs) if runs else None,
                         "note": "; ".join(r.get("error", "") for r in runs if r.get("error"))})
        if "can_use_efficient_attention" in sdpa:
            backends.append({"name": "efficient", "works": bool(sdpa["can_use_efficient_attention"]),
                             "note": "; ".join(sdpa.get("can_use_efficient_attention_reasons") or [])})
        flash_attn = document.get("flash_attn") or {}
        if flash_attn.get("installed"):
            runs = flash_attn.get("runs") or []
            backends.append({"name": "flash_attn", "works": all(r.get("passed") for r in runs) if runs else None,
                             "note": str(flash_attn.get("error") or "")})
    else:
        for backend in document.get("backends") or []:
            name = backend.get("name")
            passes = [row.get(p) or {} for row in document.get("rows") or [] if row.get("backend") == name
                      for p in ("forward", "backward")]
            failed = [p for p in passes if p.get("status") not in ("ok", "skipped")]
            ran = [p for p in passes if p.get("status") == "ok"]
            backends.append({"name": str(name), "works": False if failed else (True if ran else None),
                             "note": str(failed[0].get("note") or failed[0].get("status")) if failed else ""})
    return {"file": document["_file"], "created": document.get("created"), "device": _device(document),
            "backends": backends}


def regressions(previous: list[dict], latest: list[dict]) -> list[dict]:
    """Each result where the latest run is slower than the previous one by more than the tolerance."""
    before = {(r["backend"], r["dtype"], r["pass"]): r for r in previous}
    found = []
    for result in latest:
        old = before.get((result["backend"], result["dtype"], result["pass"]))
        for metric in ("speedup", "tflops"):
            new_value, old_value = result.get(metric), (old or {}).get(metric)
            if isinstance(new_value, (int, float)) and isinstance(old_value, (int, float)) and old_value > 0 \
                    and new_value < old_value * (1 - REGRESSION_TOLERANCE):
                found.append({"backend": result["backend"], "dtype": result["dtype"], "pass": result["pass"],
                              "metric": metric, "previous": old_value, "latest": new_value,
                              "change": round(new_value / old_value - 1, 4)})
    return found


def _history_point(document: dict) -> dict:
    return {"file": document["_file"], "created": document.get("created"), "package": document.get("package"),
            "build": document.get("build"), "device": _device(document),
            "shape": (document.get("speedup") or {}).get("shape"), "results": bench_results(document)}


def bench_section(documents: list[dict]) -> dict | None:
    history = [_history_point(d) for d in documents
               if d.get("schema") == BENCH_SCHEMA and _measured(d) and d.get("speedup")]
    if not history:
        return None
    return {"latest": history[-1], "history": history,
            "regressions": regressions(history[-2]["results"], history[-1]["results"]) if len(history) > 1 else []}


def architecture_section(name: str, table: ArchitectureTable, packages: list[dict], documents: list[dict],
                         channel: str) -> dict:
    arch = table.architectures.get(name)
    measured = [d for d in documents if _measured(d)]
    newest = {}
    for package in packages:  # newest first, so the first of each name is its newest
        newest.setdefault(package["name"], package["version"])
    return {"name": name, "gpus": arch.product if arch else "", "isa": arch.isa if arch else "",
            "in_table": arch is not None, "stack": {n: newest[n] for n in HEADLINE_PACKAGES if n in newest},
            "packages": packages,
            "check": check_result(measured[-1]) if measured else None,
            "bench": bench_section(documents),
            "install": {"pixi_add": f'pixi add "{STACK_PACKAGE} * *{name}*"',
                        "override": override_hint(arch.isa) if arch else ""}}


def channel_data(store, table: ArchitectureTable, *, channel_url: str | None, generated: str, config: dict) -> dict:
    problems: list[str] = []
    records = read_packages(store, problems)
    lookup = read_lookup(store)
    problems += [f"{path} does not parse: `orchestrate verify` names the fix" for path in lookup.damaged]
    rows = package_rows(records, lookup.entries, table)
    documents = read_documents(store, problems)
    pixi_channel = channel_url or PLACEHOLDER_URL
    pixi_toml = render_manifest(pixi_channel, None, config)
    channel = channel_for_pixi(pixi_channel)
    known = table.names()
    names = sorted((set(rows) - {NOARCH}) | set(documents),
                   key=lambda n: (n not in known, known.index(n) if n in known else 0, n))
    return {
        "schema": SCHEMA,
        "schema_notes": SCHEMA_NOTES,
        "generated": generated,
        "channel_url": channel_url,
        "regression_tolerance": REGRESSION_TOLERANCE,
        "install": {"channel": channel, "channel_add": f"pixi workspace channel add {channel}",
                    "pixi_toml": pixi_toml, "placeholder": channel_url is None},
        "architectures": [architecture_section(n, table, rows.get(n, []), documents.get(n, []), channel)
                          for n in names],
        "noarch": rows.get(NOARCH, []),
        "problems": problems,
    }
