"""What a channel holds, per architecture, as the plain data both the page and channel-page.json show.

Everything is read through Store.read / Store.list, so a folder and an S3 bucket give the same page. A
bench file that does not parse, or whose values have shapes the page cannot read (create-only files from other
machines, perhaps another rocm-stack-check version), is named under "problems" and otherwise left out: the
page still shows the rest.
"""
from __future__ import annotations

import datetime
import re

from ...architectures import ArchitectureTable, override_hint
from rocm_stack_check import REGRESSION_THRESHOLD

from ..bench import channel_documents, stem
from ..consumer import channel_for_pixi, render_manifest
from ..lookup import read_index, read_lookup
from ..untrusted import MAX_BENCH_RESULTS, NOARCH, Refused, iso_time, number, page_problem, why_of

SCHEMA = "rocm-stack/channel-page/2"  # 2: checks[] and bench.series[] per tested package
BENCH_SCHEMA = "rocm-stack-check/bench/1"
CHECK_SCHEMA = "rocm-stack-check/check/1"
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
    "architectures[].checks[]": "the latest check of each tested package (pytorch's test first) on each GPU: "
                                "package, device, file, created, backends[] (name, works true/false, null: not "
                                "run, note); []: not measured",
    "architectures[].bench": "quick benchmark, series[] per tested package and GPU (pytorch's first): package, "
                             "device, latest (results[]: backend, dtype, pass, speedup over math, tflops, ms at the "
                             "judged shape), previous (the file of that package's previous build), history[] oldest "
                             "first (one per build), regressions[]; and regressions[] of every series (latest more "
                             "than regression_threshold slower than the previous build's, by speedup or tflops); "
                             "null: not measured",
    "noarch[]": "packages every architecture shares, same fields as packages[]",
    "install": "channel (as pixi wants it), channel_add, pixi_toml (the consumer-manifest for this channel), "
               "placeholder (true: the page does not know the channel's URL); per architecture: pixi_add, override",
    "problems[]": "files the page could not read, one line each",
    "regression_threshold": "rocm_stack_check.REGRESSION_THRESHOLD, the fraction slower that is a regression",
}


def iso(seconds: float | None) -> str | None:
    if not seconds:
        return None
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def read_packages(store, problems: list[str]) -> dict[str, dict]:
    """subdir/filename -> its repodata record, over every subdir's repodata.json."""
    refused: list[tuple[str, str]] = []
    records, _ = read_index(store, refused)
    problems += [page_problem(path, f"{why}: run `orchestrate publish` (or build-all) again") for path, why in refused]
    return records


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


class Unreadable(ValueError):
    """A document with the right schema whose values have shapes the page cannot read."""


def _kind(value) -> str:
    return {str: "a string", int: "a number", float: "a number", bool: "true/false", list: "a list",
            dict: "an object", type(None): "null"}.get(type(value), type(value).__name__)


def _object(value, where: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise Unreadable(f"{where} is {_kind(value)}, not an object")
    return value


def _objects(value, where: str) -> list[dict]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise Unreadable(f"{where} is {_kind(value)}, not a list")
    if len(value) > MAX_BENCH_RESULTS:  # the page's cost stays linear and small: a quick benchmark has a few dozen
        raise Unreadable(f"{where} holds {len(value)} items, over the {MAX_BENCH_RESULTS} a document may hold")
    for item in value:
        if not isinstance(item, dict):
            raise Unreadable(f"an item of {where} is {_kind(item)}, not an object")
    return value


def tested_name(package_file: str) -> str:
    """The package a document measured, without version and build: pytorch-2.11.0-<build>.conda -> pytorch (conda
    file names are <name>-<version>-<build>, and neither version nor build holds a dash)."""
    return stem(package_file).rsplit("-", 2)[0]


def read_document(relpath: str, document: dict) -> dict:
    """What the page shows of one document; raises Unreadable (or the TypeError, ValueError, ... that reading
    a value of the wrong kind gives) when it cannot read it. The one definition of "the page can read it",
    which `verify` and `publish` ask too (unreadable())."""
    if document.get("schema") not in (BENCH_SCHEMA, CHECK_SCHEMA):
        raise Unreadable(f"schema {str(document.get('schema'))[:60]!r} is neither {BENCH_SCHEMA} nor {CHECK_SCHEMA}")
    for key in ("package", "subdir", "build", "created"):
        if not isinstance(document.get(key), (str, type(None))):
            raise Unreadable(f"{key} is {_kind(document[key])}, not a string")
    iso_time(document.get("created"), "created")
    if not document.get("package") or not document.get("subdir"):
        raise Unreadable("it names no package (publish and build-all add package and subdir)")
    platform = _object(document.get("platform"), "platform")
    device = str(platform.get("device_name") or platform.get("arch") or "")
    seen = {"file": relpath, "created": document.get("created"), "package": document["package"],
            "subdir": document["subdir"], "build": document.get("build"), "name": tested_name(document["package"]),
            "device": device, "measured": bool(platform.get("device_present"))}
    seen["check"] = {"file": relpath, "created": seen["created"], "device": device, "package": seen["name"],
                     "backends": check_backends(document)}
    speedup = _object(document.get("speedup"), "speedup")
    seen["point"] = None
    if document["schema"] == BENCH_SCHEMA and speedup:
        seen["point"] = {"file": relpath, "created": seen["created"], "package": seen["package"],
                         "build": seen["build"], "device": device, "shape": speedup.get("shape"),
                         "results": bench_results(document)}
    return seen


def _read(relpath: str, document) -> tuple[dict | None, str | None]:
    """(what the page shows of it, None) or (None, why the page cannot read it)."""
    if not isinstance(document, dict):
        return None, "it is not a JSON object"
    try:
        return read_document(relpath, document), None
    except (Unreadable, Refused, AttributeError, TypeError, ValueError, KeyError) as exc:
        return None, str(exc) if isinstance(exc, (Unreadable, Refused)) else f"{type(exc).__name__}: {exc}"


def unreadable(document) -> str | None:
    """Why the page cannot read a bench file's document (None: it can)."""
    return _read("", document)[1]


def read_documents(store, table: ArchitectureTable, listed: dict, problems: list[str]) -> dict[str, list[dict]]:
    """Architecture -> what the page shows of each bench and check document (bench/<arch>/<file>.json) whose
    package the channel still lists, oldest first. A replaced package's result stays in the channel (create-only,
    nothing is deleted from a shared channel) but is no build the channel holds, so it is left out."""
    found: dict[str, list[dict]] = {}
    known = table.names()
    for relpath, arch, document, refused in channel_documents(store, known):
        seen, why = (None, refused) if refused else _read(relpath, document)
        if seen is None:
            problems.append(page_problem(relpath, f"{relpath} is not a rocm-stack-check document this page can read "
                                                  f"({why_of(why, relpath)[:160]}): `orchestrate verify` names the fix",
                                         hide=arch not in known))
        elif f"{seen['subdir']}/{seen['package']}" in listed:
            found.setdefault(arch, []).append(seen)
    for documents in found.values():
        documents.sort(key=lambda d: (str(d["created"] or ""), d["file"]))
    return found


def _shape_of(row: dict) -> str:
    return ",".join(str(row.get(k)) for k in ("batch", "heads", "seq_len", "head_dim"))


def bench_results(document: dict) -> list[dict]:
    """Speed-up over math and TFLOP/s of each fused backend, dtype and pass at the judged shape."""
    speedup = _object(document.get("speedup"), "speedup")
    shape = str(speedup.get("shape") or "")
    rows = {(r.get("backend"), r.get("dtype")): r for r in _objects(document.get("rows"), "rows")
            if _shape_of(r) == shape}
    results = []
    for result in _objects(speedup.get("results"), "speedup.results"):
        row = rows.get((result.get("backend"), result.get("dtype"))) or {}
        measured = _object(row.get(result.get("pass")), f"rows[].{result.get('pass')}")
        ok = measured.get("status") == "ok"
        results.append({"backend": str(result.get("backend")), "dtype": str(result.get("dtype")),
                        "pass": str(result.get("pass")), "speedup": _number(result.get("speedup"), "speedup"),
                        "tflops": _number(measured.get("tflops"), "tflops") if ok else None,
                        "ms": _number(measured.get("ms"), "ms") if ok else None,
                        "note": str(result.get("note") or measured.get("note") or "")})
    return results


def _number(value, what: str):
    """A measured value: None when it is none; a number out of range (1e308, a huge integer) is refused."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    return number(value, what)


def _texts(values) -> str:
    return "; ".join(str(v) for v in values if v)


def check_backends(document: dict) -> list[dict]:
    """Which attention backends worked in one document: a check's runs, or a benchmark's measurements."""
    backends = []
    if document.get("schema") == CHECK_SCHEMA:
        sdpa = _object(document.get("sdpa"), "sdpa")
        runs = _objects(document.get("flash_runs"), "flash_runs")
        backends.append({"name": "flash", "works": all(r.get("passed") for r in runs) if runs else None,
                         "note": _texts(r.get("error") for r in runs)})
        if "can_use_efficient_attention" in sdpa:
            reasons = sdpa.get("can_use_efficient_attention_reasons") or []
            backends.append({"name": "efficient", "works": bool(sdpa["can_use_efficient_attention"]),
                             "note": _texts(reasons if isinstance(reasons, list) else [reasons])})
        flash_attn = _object(document.get("flash_attn"), "flash_attn")
        if flash_attn.get("installed"):
            runs = _objects(flash_attn.get("runs"), "flash_attn.runs")
            backends.append({"name": "flash_attn", "works": all(r.get("passed") for r in runs) if runs else None,
                             "note": str(flash_attn.get("error") or "")})
    else:
        rows_of: dict[str, list[dict]] = {}  # by backend: one pass over the rows, not one per backend
        for row in _objects(document.get("rows"), "rows"):
            rows_of.setdefault(str(row.get("backend")), []).append(row)
        for backend in _objects(document.get("backends"), "backends"):
            name = backend.get("name")
            passes = [_object(row.get(p), f"rows[].{p}") for row in rows_of.get(str(name), [])
                      if row.get("backend") == name for p in ("forward", "backward")]
            failed = [p for p in passes if p.get("status") not in ("ok", "skipped")]
            ran = [p for p in passes if p.get("status") == "ok"]
            backends.append({"name": str(name), "works": False if failed else (True if ran else None),
                             "note": str(failed[0].get("note") or failed[0].get("status")) if failed else ""})
    return backends


def regressions(previous: list[dict], latest: list[dict]) -> list[dict]:
    """Each result where the latest run is more than REGRESSION_THRESHOLD slower than the previous one: its
    speed-up or TFLOP/s times (1 + threshold) still below the previous value, as `bench --compare` judges time."""
    before = {(r["backend"], r["dtype"], r["pass"]): r for r in previous}
    found = []
    for result in latest:
        old = before.get((result["backend"], result["dtype"], result["pass"]))
        for metric in ("speedup", "tflops"):
            new_value, old_value = result.get(metric), (old or {}).get(metric)
            if isinstance(new_value, (int, float)) and isinstance(old_value, (int, float)) and old_value > 0 \
                    and new_value * (1 + REGRESSION_THRESHOLD) < old_value:
                found.append({"backend": result["backend"], "dtype": result["dtype"], "pass": result["pass"],
                              "metric": metric, "previous": old_value, "latest": new_value,
                              "change": round(new_value / old_value - 1, 4)})
    return found


def _series_order(key: tuple[str, str]) -> tuple:
    """pytorch's test first (the headline: the stack's own measurement), then flash-attn's, then the rest."""
    name, device = key
    return (HEADLINE_PACKAGES.index(name) if name in HEADLINE_PACKAGES else len(HEADLINE_PACKAGES), name, device)


def series_of(documents: list[dict]) -> dict[tuple[str, str], list[dict]]:
    """(tested package name, device) -> its documents, oldest first. Each series compares like with like: one
    build's pytorch test with the previous build's pytorch test on the same GPU, never with the flash-attn test
    of the same build (noise between two tests of one run), nor with another GPU of the same architecture."""
    series: dict[tuple[str, str], list[dict]] = {}
    for document in documents:
        series.setdefault((document["name"], document["device"]), []).append(document)
    return {key: series[key] for key in sorted(series, key=_series_order)}


def bench_section(documents: list[dict]) -> dict | None:
    """Per series: the latest build's benchmark, the history, and what regressed since the previous build of
    that package; and every series' regressions together, each naming its package and GPU."""
    found = []
    for (name, device), measured in series_of([d for d in documents if d["measured"] and d["point"]]).items():
        latest = measured[-1]
        previous = next((d for d in reversed(measured[:-1]) if d["package"] != latest["package"]), None)
        slower = regressions(previous["point"]["results"], latest["point"]["results"]) if previous else []
        found.append({"package": name, "device": device, "latest": latest["point"],
                      "previous": previous["point"]["file"] if previous else None,
                      "history": [d["point"] for d in measured],
                      "regressions": [{"package": name, "device": device, **r} for r in slower]})
    if not found:
        return None
    return {"series": found, "regressions": [r for s in found for r in s["regressions"]]}


def latest_checks(documents: list[dict]) -> list[dict]:
    """The latest check of each tested package on each GPU, headline first."""
    return [measured[-1]["check"] for measured in series_of([d for d in documents if d["measured"]]).values()]


def architecture_section(name: str, table: ArchitectureTable, packages: list[dict], documents: list[dict],
                         channel: str) -> dict:
    arch = table.architectures.get(name)
    newest = {}
    for package in packages:  # newest first, so the first of each name is its newest
        newest.setdefault(package["name"], package["version"])
    return {"name": name, "gpus": arch.product if arch else "", "isa": arch.isa if arch else "",
            "in_table": arch is not None, "stack": {n: newest[n] for n in HEADLINE_PACKAGES if n in newest},
            "packages": packages,
            "checks": latest_checks(documents),
            "bench": bench_section(documents),
            "install": {"pixi_add": f'pixi add "{STACK_PACKAGE} * *{name}*"',
                        "override": override_hint(arch.isa) if arch else ""}}


def channel_data(store, table: ArchitectureTable, *, channel_url: str | None, generated: str, config: dict) -> dict:
    problems: list[str] = []
    records = read_packages(store, problems)
    lookup = read_lookup(store, table.names())
    problems += [page_problem(path, f"{why}: `orchestrate verify` names the fix") for path, why in lookup.refused]
    rows = package_rows(records, lookup.entries, table)
    documents = read_documents(store, table, records, problems)
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
        "regression_threshold": REGRESSION_THRESHOLD,
        "install": {"channel": channel, "channel_add": f"pixi workspace channel add {channel}",
                    "pixi_toml": pixi_toml, "placeholder": channel_url is None},
        "architectures": [architecture_section(n, table, rows.get(n, []), documents.get(n, []), channel)
                          for n in names],
        "noarch": rows.get(NOARCH, []),
        "problems": problems,
    }
