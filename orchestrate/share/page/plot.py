"""A benchmark series' history (one tested package on one GPU) as an inline SVG line plot: speed-up over math,
one line per backend, dtype and pass, one point per build. Drawn by hand (no matplotlib on a build machine that
lacks it); lines differ by dash and marker as well as colour, so a black-and-white print still tells them apart."""
from __future__ import annotations

import math
from html import escape

from ..untrusted import MAX_BENCH_RESULTS

WIDTH, PLOT_HEIGHT = 480, 170
LEFT, RIGHT, TOP = 44, 12, 12
INSET = 24  # the first and last run stand this far inside the axis, so their labels fit
AXIS_LABELS, LEGEND_ROW = 40, 18  # room below the plot for the x labels, then two legend entries a row
COLOURS = ("#3f51b5", "#e91e63", "#009688", "#ff9800", "#795548", "#607d8b")  # Material indigo, pink, teal, ...
DASHES = {"forward": "", "backward": "6 4"}
# The plot and the table beside it show a series' latest builds, at most this many, and at most as many lines
# (backend, dtype, pass) as one document may hold results: a line per key and a cell per key and build would
# otherwise grow with builds times keys, quadratic in what a channel holds (channel-page.json has every build).
MAX_BUILDS_SHOWN = 50


def shown_history(history: list[dict]) -> list[dict]:
    return history[-MAX_BUILDS_SHOWN:]


def series_of(history: list[dict]) -> dict[tuple, list]:
    """(backend, dtype, pass) -> its speed-up in each document (None where that document lacks it), for the first
    MAX_BENCH_RESULTS keys. One pass over the results (dicts, not list searches): linear in their number, however
    many a document holds."""
    series: dict[tuple, list] = {}
    for index, point in enumerate(history):
        seen: set[tuple] = set()  # the first result of a key in a document counts, as in the table
        for result in point["results"]:
            key = (result["backend"], result["dtype"], result["pass"])
            if key in seen or (key not in series and len(series) >= MAX_BENCH_RESULTS):
                continue
            seen.add(key)
            value = result.get("speedup")
            series.setdefault(key, [None] * len(history))[index] = value if isinstance(value, (int, float)) else None
    return series


def _axis(largest: float) -> tuple[float, float]:
    """(top, step) of the y axis: at most five round steps (1, 2, 2.5 or 5 times a power of ten) up past `largest`."""
    magnitude = 10 ** math.floor(math.log10(max(largest, 1e-9) / 4))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if largest / (m * magnitude) <= 5) if largest > 0 else 1
    return step * max(1, math.ceil(largest / step)), step


def _marker(x: float, y: float, dtype: str, colour: str) -> str:
    if dtype == "bf16":
        return f'<rect x="{x - 3.5:.1f}" y="{y - 3.5:.1f}" width="7" height="7" fill="{colour}"/>'
    return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" fill="{colour}"/>'


def label_of(key: tuple) -> str:
    backend, dtype, pass_ = key
    return f"{backend} {dtype} {pass_}"


def history_svg(label: str, history: list[dict], element_id: str) -> str:
    """The plot of what `label` names, with a <title> and a <desc> that say in words what it shows."""
    series = series_of(history)
    values = [v for vs in series.values() for v in vs if v is not None]
    top, step = _axis(max(values) if values else 1.0)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, PLOT_HEIGHT
    height = TOP + plot_h + AXIS_LABELS + LEGEND_ROW * ((len(series) + 1) // 2)
    count = len(history)

    def x_at(i: int) -> float:
        return LEFT + (plot_w / 2 if count == 1 else INSET + (plot_w - 2 * INSET) * i / (count - 1))

    def y_at(v: float) -> float:
        return TOP + plot_h * (1 - v / top)

    words = "; ".join(
        f"{label_of(key)}: " + ", ".join("no result" if v is None else f"{v:g}x" for v in vs)
        for key, vs in series.items())
    parts = [f'<svg class="plot" viewBox="0 0 {WIDTH} {height}" role="img" '
             f'aria-labelledby="{element_id}-title {element_id}-desc" xmlns="http://www.w3.org/2000/svg">',
             f'<title id="{element_id}-title">{escape(label)}: speed-up over math over {count} build(s)</title>',
             f'<desc id="{element_id}-desc">{escape(words)}. The table below holds the same numbers.</desc>',
             '<g font-size="13" fill="#555" font-family="inherit">']
    for tick in range(round(top / step) + 1):
        value = step * tick
        y = y_at(value)
        parts.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e0e0e0"/>')
        parts.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{value:g}x</text>')
    for i, point in enumerate(history):
        created = str(point.get("created") or "")[:10]
        parts.append(f'<text x="{x_at(i):.1f}" y="{TOP + plot_h + 16}" text-anchor="middle">'
                     f'#{i + 1} {escape(created[5:])}</text>')
    parts.append("</g>")
    for index, (key, vs) in enumerate(series.items()):
        colour = COLOURS[index // 2 % len(COLOURS)] if len(series) > 2 else COLOURS[index]
        points = [(x_at(i), y_at(v)) for i, v in enumerate(vs) if v is not None]
        dash = DASHES.get(key[2], "2 3")
        if len(points) > 1:
            path = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
            parts.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"'
                         + (f' stroke-dasharray="{dash}"' if dash else "") + "/>")
        parts += [_marker(x, y, key[1], colour) for x, y in points]
        column, row = index % 2, index // 2
        lx, ly = LEFT + column * (plot_w / 2), TOP + plot_h + AXIS_LABELS + row * LEGEND_ROW
        parts.append(f'<line x1="{lx:.1f}" x2="{lx + 26:.1f}" y1="{ly - 4}" y2="{ly - 4}" stroke="{colour}" '
                     f'stroke-width="2"' + (f' stroke-dasharray="{dash}"' if dash else "") + "/>")
        parts.append(_marker(lx + 13, ly - 4, key[1], colour))
        parts.append(f'<text x="{lx + 32:.1f}" y="{ly}" font-size="13" fill="#333">{escape(label_of(key))}</text>')
    parts.append("</svg>")
    return "".join(parts)
