"""The channel page as one self-contained HTML file: inline CSS in the docs site's colours (Material for
MkDocs, indigo), no script, no font or image from anywhere, every link relative; wide tables and code
scroll inside their own box so a phone never scrolls the page sideways. Every value from the channel
goes through escape()."""
from __future__ import annotations

import re
import urllib.parse
from html import escape

from .model import REGRESSION_THRESHOLD
from .plot import history_svg, series_of, shown_history

CSS = """
:root{--primary:#4051b5;--text:rgba(0,0,0,.87);--muted:rgba(0,0,0,.6);--line:rgba(0,0,0,.12);--code:#f5f5f5;
--ok:#00897b;--bad:#d32f2f;--warn:#ff9100;--note:#448aff}
*{box-sizing:border-box}
html{-webkit-text-size-adjust:100%}
body{margin:0;color:var(--text);font:16px/1.6 -apple-system,BlinkMacSystemFont,Roboto,"Segoe UI","Helvetica Neue",
Arial,sans-serif;background:#fff}
header.bar{background:var(--primary);color:#fff;box-shadow:0 0 .2rem rgba(0,0,0,.1),0 .2rem .4rem rgba(0,0,0,.2)}
header.bar .wrap{padding-top:.6rem;padding-bottom:.6rem;font-size:1.1rem}
.wrap{max-width:61rem;margin:0 auto;padding:0 1rem}
main{padding-bottom:2rem}
h1{font-weight:300;font-size:2rem;line-height:1.3;margin:1.2rem 0 .6rem;color:var(--muted)}
h2{font-weight:300;font-size:1.5rem;line-height:1.4;margin:2rem 0 .8rem}
h3{font-weight:400;font-size:1.15rem;margin:1.4rem 0 .6rem}
h4{font-weight:700;font-size:.95rem;margin:1.2rem 0 .4rem}
p,li{overflow-wrap:anywhere}
td{overflow-wrap:break-word}
a{color:var(--primary)}
code,pre{font-family:"Roboto Mono",SFMono-Regular,Consolas,Menlo,monospace;font-size:.85em;background:var(--code);
border-radius:.1rem}
code{padding:0 .3em}
pre{padding:.8em 1em;overflow-x:auto;line-height:1.4}
pre code{padding:0;background:none;font-size:1em}
.scroll{overflow-x:auto;margin:0 0 1rem}
table{border-collapse:collapse;font-size:.85rem;min-width:100%}
th,td{padding:.45em .9em;text-align:left;vertical-align:top;border-top:1px solid var(--line)}
th{font-weight:700;border-top:none;border-bottom:2px solid var(--line)}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
td code{overflow-wrap:normal;white-space:nowrap}
nav.archs a{display:inline-block;margin:0 .8em .3em 0}
.admonition{border-left:.25rem solid var(--note);background:rgba(68,138,255,.08);padding:.6rem 1rem;margin:1rem 0;
border-radius:.1rem}
.admonition.warning{border-color:var(--warn);background:rgba(255,145,0,.1)}
.admonition p{margin:.2rem 0}
.ok{color:var(--ok);font-weight:700}
.bad,.regression{color:var(--bad);font-weight:700}
.muted{color:var(--muted)}
.nowrap{white-space:nowrap}
.plot{display:block;width:100%;max-width:560px;height:auto;margin:.5rem 0 1rem}
p.caption{margin:0 0 .2rem;font-size:.85rem}
@media (max-width:40em){th,td{padding:.4em .45em}}
footer{border-top:1px solid var(--line);padding:1rem 0;font-size:.8rem;color:var(--muted)}
@media print{
header.bar{background:none;color:#000;box-shadow:none;border-bottom:2px solid #000}
nav.archs{display:none}
body{font-size:10.5pt}
a{color:#000}
.scroll{overflow:visible}
pre{white-space:pre-wrap;overflow-wrap:anywhere;border:1px solid #ccc;background:none}
table{font-size:9pt;width:100%}
td,td code{white-space:normal;overflow-wrap:anywhere}
section.arch{break-before:page}
tr,svg,.admonition{break-inside:avoid}
}
"""


def anchor(name: str) -> str:
    return "arch-" + re.sub(r"[^A-Za-z0-9_-]", "-", name)


def _table(headers: list[str], rows: list[list[str]], numeric: set[int] = frozenset(), caption: str = "") -> str:
    """A table in its own scrolling box; cells are HTML already escaped by the caller."""
    head = "".join(f'<th{" class=num" if i in numeric else ""} scope="col">{h}</th>' for i, h in enumerate(headers))
    body = "".join("<tr>" + "".join(f'<td{" class=num" if i in numeric else ""}>{c}</td>' for i, c in enumerate(row))
                   + "</tr>" for row in rows)
    # the caption outside the scrolling box, where a phone shows all of it
    cap = f'<p class="muted caption">{caption}</p>' if caption else ""
    return f'{cap}<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def _link(relpath: str) -> str:
    """A relative link to a file of the channel, so it works wherever the channel is served."""
    return f'<a href="{escape(urllib.parse.quote(relpath))}">{escape(relpath)}</a>'


def _num(value, digits: int = 1, suffix: str = "") -> str:
    return f"{value:.{digits}f}{suffix}" if isinstance(value, (int, float)) else "—"


def _when(stamp: str | None) -> str:
    return escape(stamp.replace("T", " ")[:16] + " UTC") if stamp else "unknown"


def _speedup_span(results: list[dict]) -> str:
    """flash 8.9–22.0x: each backend's range over dtypes and passes."""
    spans = {}
    for result in results:
        if isinstance(result.get("speedup"), (int, float)):
            spans.setdefault(result["backend"], []).append(result["speedup"])
    return ", ".join(f"{escape(b)} {min(v):.1f}–{max(v):.1f}x" if min(v) != max(v) else f"{escape(b)} {v[0]:.1f}x"
                     for b, v in spans.items()) or "no speed-up measured"


def _works(checks: list[dict]) -> str:
    """The backends that worked, and those that failed, in the latest test of each package."""
    if not checks:
        return '<span class="muted">not measured</span>'
    works, fails = [], []
    for check in checks:
        for backend in check["backends"]:
            found = works if backend["works"] is True else fails if backend["works"] is False else None
            if found is not None and backend["name"] not in found:
                found.append(backend["name"])
    shown = []
    if works:
        shown.append('<span class="ok">works:</span> ' + ", ".join(escape(n) for n in works))
    if fails:
        shown.append('<span class="bad">fails:</span> ' + ", ".join(escape(n) for n in fails))
    return "; ".join(shown) or '<span class="muted">nothing ran</span>'


def _regression_lines(regressions: list[dict]) -> list[str]:
    """One line per backend, dtype and pass: each metric's previous → latest value."""
    grouped: dict[tuple, list[str]] = {}
    for r in regressions:
        unit, metric = ("x", "speed-up") if r["metric"] == "speedup" else ("", "TFLOP/s")
        grouped.setdefault((r["backend"], r["dtype"], r["pass"]), []).append(
            f'{metric} {r["previous"]:.2f}{unit} → {r["latest"]:.2f}{unit} ({r["change"] * 100:+.0f}%)')
    return [f"{escape(' '.join(key))}: {escape(', '.join(words))}" for key, words in grouped.items()]


def _test_of(series: dict) -> str:
    return f"{escape(series['package'])}'s test on {escape(series['device'] or 'an unnamed GPU')}"


def _latest_words(bench: dict | None) -> str:
    if not bench:
        return '<span class="muted">not measured</span>'
    slower = [s for s in bench["series"] if s["regressions"]]
    if slower:
        return "; ".join(f'<span class="regression">regression</span> in {_test_of(s)} '
                         f'({len(_regression_lines(s["regressions"]))} result(s) slower)' for s in slower)
    if all(s["previous"] is None for s in bench["series"]):
        return "first measurement"
    return f'<span class="ok">no regression</span> (within {REGRESSION_THRESHOLD:.0%})'


def summary(data: dict) -> str:
    rows = []
    for arch in data["architectures"]:
        bench = arch["bench"]
        rows.append([f'<a href="#{anchor(arch["name"])}">{escape(arch["name"])}</a>',
                     escape(arch["gpus"]) or '<span class="muted">not in the architecture table</span>',
                     "<br>".join(f'<span class="nowrap">{escape(n)} {escape(v)}</span>'
                                 for n, v in arch["stack"].items()) or "—",
                     _works(arch["checks"]),
                     (_speedup_span(bench["series"][0]["latest"]["results"])
                      + f' <span class="muted">({_test_of(bench["series"][0])})</span>') if bench
                     else '<span class="muted">not measured</span>',
                     _latest_words(bench)])
    return _table(["Architecture", "GPUs", "Stack", "Attention backends (latest tests)",
                   "Speed-up over math (latest build)", "Since the previous build"], rows)


def install(data: dict) -> str:
    info = data["install"]
    parts = ['<h2 id="install">Install from this channel</h2>']
    if info["placeholder"]:
        parts.append('<div class="admonition"><p>This page does not know the address the channel is served at: '
                     f'replace <code>{escape(info["channel"])}</code> below with the URL you opened this page from '
                     '(without <code>index.html</code>).</p></div>')
    parts.append("<p>A <code>pixi.toml</code> that installs the stack for whichever of these GPUs the machine has "
                 "(the solver detects it as <code>__amdgpu_arch</code>); <code>orchestrate consumer-manifest "
                 "--channel URL</code> writes the same file:</p>")
    parts.append(f'<pre><code>{escape(info["pixi_toml"])}</code></pre>')
    lines = [info["channel_add"]]
    for arch in data["architectures"]:
        lines += ["", f"# {arch['name']}" + (f" ({arch['gpus']})" if arch["gpus"] else ""), arch["install"]["pixi_add"]]
        if arch["install"]["override"]:
            lines.append(f"{arch['install']['override']} pixi install  # in a container build or CI job")
    parts.append("<p>Or add the channel and the stack to an existing pixi workspace. In a container build or CI job "
                 "there is no GPU to detect: the override before <code>pixi install</code> solves for that GPU.</p>")
    parts.append(f'<pre><code>{escape(chr(10).join(lines))}</code></pre>')
    return "".join(parts)


def packages_table(packages: list[dict]) -> str:
    rows = [[escape(p["name"]), escape(p["version"]), f'<code>{escape(p["build"])}</code>', _when(p["built_at"]),
             escape(p["host"] or "—") + (f' <span class="muted">(from {escape(p["source"])})</span>'
                                         if p["source"] not in ("", "built") else ""),
             f'<code>{escape(p["input_hash"][:12])}</code>' if p["input_hash"] else "—"] for p in packages]
    return _table(["Package", "Version", "Build", "Built", "Built on", "Input hash"], rows)


def check_block(checks: list[dict]) -> str:
    if not checks:
        return ('<div class="admonition"><p><strong>Not measured:</strong> no GPU of this architecture ran the '
                "recipes' tests for the packages this channel holds.</p></div>")
    parts = []
    for check in checks:
        items = "".join(
            f'<li><strong>{escape(b["name"])}</strong>: '
            + ('<span class="ok">works</span>' if b["works"] else '<span class="bad">fails</span>'
               if b["works"] is False else '<span class="muted">not run</span>')
            + (f' <span class="muted">({escape(b["note"])})</span>' if b["note"] else "") + "</li>"
            for b in check["backends"])
        parts.append(f'<p>{escape(check["package"])}\'s test on {escape(check["device"] or "an unnamed GPU")}, '
                     f'{_when(check["created"])} ({_link(check["file"])}):</p><ul>{items}</ul>')
    return "".join(parts)


def series_block(arch: str, series: dict, element_id: str) -> str:
    """One tested package on one GPU: its latest build's result, what regressed since its previous build, and
    its history."""
    latest, history = series["latest"], series["history"]
    parts = [f"<h4>{_test_of(series)}</h4>"]
    if series["regressions"]:
        items = "".join(f"<li>{line}</li>" for line in _regression_lines(series["regressions"]))
        parts.append(f'<div class="admonition warning"><p><strong class="regression">Regression</strong>: the latest '
                     f"build is more than {REGRESSION_THRESHOLD:.0%} slower than the previous build of "
                     f"{escape(series['package'])} ({_link(series['previous'])}):</p><ul>{items}</ul></div>")
    parts.append(f'<p>Latest: {_when(latest["created"])}, shape <code>{escape(str(latest["shape"]))}</code> (batch, '
                 f'heads, sequence, head dim), from the test of <code>{escape(str(latest["package"]))}</code> '
                 f'({_link(latest["file"])}).</p>')
    rows = [[escape(r["backend"]), escape(r["dtype"]), escape(r["pass"]), _num(r["speedup"], 2, "x"),
             _num(r["tflops"], 1), _num(r["ms"], 3)] for r in latest["results"]]
    parts.append(_table(["Backend", "dtype", "Pass", "Speed-up", "TFLOP/s", "ms"], rows, {3, 4, 5},
                        caption="Speed-up over the math backend, throughput and time of one pass at that shape"))
    shown = shown_history(history)
    builds = (f"the latest {len(shown)} of the {len(history)} builds" if len(shown) < len(history)
              else f"the {len(history)} build(s)")
    parts.append(f"<p>Over {builds} of {escape(series['package'])} this channel holds:</p>")
    parts.append(history_svg(f"{arch}, {series['package']}'s test on {series['device'] or 'an unnamed GPU'}",
                             shown, element_id))
    keys = list(series_of(shown))
    rows = []
    first = len(history) - len(shown)
    for i, point in enumerate(shown, start=first):
        by_key = {}
        for r in point["results"]:
            by_key.setdefault((r["backend"], r["dtype"], r["pass"]), r)
        rows.append([f"#{i + 1}", _when(point["created"])]
                    + [_num((by_key.get(k) or {}).get("speedup"), 2, "x") for k in keys]
                    + [escape(str(point["package"] or point["build"] or "—"))])
    # the numbers before the long package name, so a phone shows them without scrolling the table
    parts.append(_table(["Build", "When"] + [escape(" ".join(k)) for k in keys] + ["Tested package"], rows,
                        set(range(2, 2 + len(keys))), caption="Speed-up over math per build, oldest first"))
    return "".join(parts)


def bench_block(arch: dict) -> str:
    bench = arch["bench"]
    if not bench:
        return ('<div class="admonition"><p><strong>Not measured:</strong> no quick benchmark of this architecture '
                "is in the channel (its packages were built where no GPU ran the tests).</p></div>")
    return "".join(series_block(arch["name"], series, f"{anchor(arch['name'])}-plot-{i}")
                   for i, series in enumerate(bench["series"]))


def architecture(arch: dict) -> str:
    title = escape(arch["name"]) + (f" — {escape(arch['gpus'])}" if arch["gpus"] else "")
    parts = [f'<section class="arch" id="{anchor(arch["name"])}"><h2>{title}</h2>']
    if not arch["in_table"]:
        parts.append("<p class=muted>Not in this orchestrator's architecture table.</p>")
    parts.append("<h3>Latest check</h3>" + check_block(arch["checks"]))
    parts.append("<h3>Quick benchmark: Flash Attention against math</h3>" + bench_block(arch))
    parts.append("<h3>Packages</h3>")
    parts.append(packages_table(arch["packages"]) if arch["packages"] else "<p class=muted>No packages.</p>")
    return "".join(parts) + "</section>"


def page_html(data: dict) -> str:
    names = [a["name"] for a in data["architectures"]]
    channel = data["install"]["channel"]
    nav = "".join(f'<a href="#{anchor(n)}">{escape(n)}</a>' for n in names)
    body = [f'<h1>ROCm ML stack channel</h1><p>Channel <code>{escape(channel)}</code> serves '
            f'{len(names)} GPU architecture(s): {escape(", ".join(names)) or "none yet"}. '
            'The same data for scripts: <a href="channel-page.json">channel-page.json</a>.</p>',
            f'<nav class="archs" aria-label="Architectures">{nav}<a href="#install">Install</a></nav>',
            '<h2 id="summary">At a glance</h2>', summary(data), install(data)]
    body += [architecture(a) for a in data["architectures"]]
    if data["noarch"]:
        body.append('<section id="shared"><h2>Packages every architecture shares (noarch)</h2>'
                    + packages_table(data["noarch"]) + "</section>")
    if data["problems"]:
        body.append('<h2 id="problems">Files this page could not read</h2><ul>'
                    + "".join(f"<li>{escape(p)}</li>" for p in data["problems"]) + "</ul>")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>rocm-stack channel: {escape(', '.join(names))}</title><style>{CSS}</style></head><body>"
            '<header class="bar"><div class="wrap"><strong>rocm-stack</strong> channel</div></header>'
            f'<main class="wrap">{"".join(body)}</main>'
            f'<footer><div class="wrap">Generated {_when(data["generated"])} by <code>orchestrate page</code> from '
            "what the channel holds (repodata.json, orchestrate-manifest.d/, bench/). Regression: a package's latest "
            f"build more than {REGRESSION_THRESHOLD:.0%} slower than its previous build, tested on the same GPU."
            "</div></footer>"
            "</body></html>\n")
