"""Plain, readable output: rich tables and a spinner on a terminal, plain lines otherwise."""
from __future__ import annotations

import sys
import textwrap
import time
from contextlib import contextmanager
from dataclasses import dataclass

from rich.console import Console
from rich.text import Text

from .web import redact_urls


def terminal_text(text: str) -> str:
    """What a line shows: control characters as escapes, URLs without their userinfo or /t/<token>/ (web.py)."""
    return redact_urls(text)

GIB = 2**30


def format_duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    hours, minutes = divmod(seconds // 60, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m"


def format_bytes(count: int) -> str:
    return f"{count / GIB:.1f} GiB" if count >= GIB / 10 else f"{count / 2**20:.0f} MiB"


# The narrowest width text is laid out for: rich prints nothing at all at $COLUMNS=0 (some CI runners set it), and a
# terminal narrower than this fits no table; it wraps the lines instead.
MIN_WIDTH = 40


class Reporter:
    def __init__(self, quiet: bool = False):
        self.console = Console(highlight=False, soft_wrap=True)
        self.err = Console(stderr=True, highlight=False, soft_wrap=True)
        for console in (self.console, self.err):
            console.width = max(console.width, MIN_WIDTH)
        self.quiet = quiet
        self.fancy = self.console.is_terminal and not quiet

    # Every line goes through terminal_text(): text a server, a channel or an upstream wrote (an HTTP status line, a file
    # name, a library's error) never reaches the terminal with its control characters acting (issue 37, a19), and a
    # URL's credentials never reach it at all (a18).
    def line(self, text: str) -> None:
        self.console.print(terminal_text(text), markup=False)

    def info(self, text: str) -> None:
        if not self.quiet:
            self.console.print(terminal_text(text), markup=False)

    def error(self, text: str) -> None:
        self.err.print(terminal_text(text), markup=False, style="bold red" if self.err.is_terminal else None)

    @contextmanager
    def building(self, label: str, progress: "Progress | None" = None, verb: str = "building"):
        """Yields a function that reports the current build step. The live line (a terminal) shows the
        step, elapsed and expected time and the ETA; off a terminal, one line when the build starts."""
        if self.fancy:
            line = _LiveLine(f"{verb} {label}", progress)
            with self.console.status(line):
                yield line.set_step
        else:
            self.info(f"{verb} {label}" + (f" ({progress.describe(0.0)})" if progress else ""))
            yield lambda step: None

    def table(self, title: str, columns: list[str], rows: list[list[str]], droppable: list[str] | None = None) -> None:
        """A table that fits the console, on a terminal as when piped (fitted_table): its first column whole, its
        last one wrapped, and the columns between leaving a row that is too wide, from the right unless
        `droppable` names them."""
        self.fitted_table(title, columns, rows, droppable=columns[-2:0:-1] if droppable is None else droppable,
                          detail=columns[-1])

    def paragraph(self, text: str, indent: str = "") -> None:
        """Text wrapped at words to the console's width: a terminal's, else rich's for a file ($COLUMNS or 80)."""
        for line in self.wrapped(text, indent):
            self.console.print(line, markup=False)

    def item(self, text: str, hanging: int = 4) -> None:
        """One entry of a list (a check, a problem) wrapped at words to the console's width, its later lines
        indented under it."""
        for line in self.wrapped(text, " " * hanging, first=""):
            self.console.print(line, markup=False)

    def wrapped(self, text: str, indent: str = "", first: str | None = None) -> list[str]:
        return textwrap.wrap(terminal_text(text), self.console.width, initial_indent=indent if first is None else first,
                             subsequent_indent=indent, break_on_hyphens=False) or [""]

    def fitted_table(self, title: str, columns: list[str], rows: list[list[str]], droppable: list[str],
                     detail: str) -> None:
        """A table no wider than the console, whose first column (a name) is never cut. While a row is too wide,
        the `droppable` columns leave it, in order, their values moving to the row's `detail` text (the column
        name `#` is dropped outright); the `detail` column wraps at words beside the others, or goes on its own
        indented lines under its row when it would be narrower than a readable minimum."""
        width, gap, readable = self.console.width, 2, 40
        title, rows = terminal_text(title), [[terminal_text(cell) for cell in row] for row in rows]
        widths = [max([len(c)] + [len(r[i]) for r in rows]) for i, c in enumerate(columns)]
        at = columns.index(detail)

        def span(indexes: list[int]) -> int:
            return sum(widths[i] for i in indexes) + gap * (len(indexes) - 1)

        def text(row: list[str], dropped: list[int]) -> str:
            return "; ".join([f"{columns[i]} {row[i]}" for i in dropped if columns[i] != "#" and row[i] not in ("", "-")]
                             + ([row[at]] if row[at] else []))

        def room(dropped: list[int]) -> int:
            """What the detail needs beside the row: its longest text up to a readable width, and never less than
            its longest word (a build string), which is never cut."""
            texts = [text(row, dropped) for row in rows]
            longest_word = max((len(word) for t in texts for word in t.split()), default=0)
            return gap + max(min(max(map(len, texts), default=0), readable), longest_word)

        def drop_until(beside: bool) -> tuple[list[int], list[int]]:
            shown, dropped = [i for i in range(len(columns)) if i != at], []
            for name in droppable:
                if span(shown) + (room(dropped) if beside else 0) <= width:
                    break
                shown.remove(columns.index(name))
                dropped.append(columns.index(name))
            return shown, dropped

        shown, dropped = drop_until(beside=True)
        beside = span(shown) + room(dropped) <= width
        if not beside:  # the detail goes under each row: the row itself keeps what fits
            shown, dropped = drop_until(beside=False)
        for line in self.wrapped(title):
            self.console.print(line, markup=False, style="bold" if self.fancy else None)
        header = "  ".join(columns[i].ljust(widths[i]) for i in shown)
        self.console.print(f"{header}  {detail}" if beside else header.rstrip(), markup=False)
        start = span(shown) + gap
        for row in rows:
            said = text(row, dropped)
            main = "  ".join(row[i].ljust(widths[i]) for i in shown)
            if beside:
                lines = self.wrapped(said, " " * start, first=main + "  ") if said else [main]
            else:
                lines = [main.rstrip()] + (self.wrapped(said, " " * 4) if said else [])
            for line in lines:
                self.console.print(line.rstrip(), markup=False)
        sys.stdout.flush()


@dataclass
class Progress:
    """Where a build stands in its plan: for the live line and its ETA."""

    position: str = ""  # "3/10"
    expected_s: float | None = None  # this build
    remaining_s: float = 0.0  # the builds after it (known estimates)
    unknown_after: int = 0  # builds after it with no estimate

    def describe(self, elapsed_s: float) -> str:
        parts = [self.position] if self.position else []
        parts.append(f"{format_duration(elapsed_s)} of ~{format_duration(self.expected_s)}")
        left = max((self.expected_s or 0) - elapsed_s, 0) + self.remaining_s
        if self.expected_s is None and not self.remaining_s:
            parts.append("ETA ?")
        else:
            eta = time.strftime("%H:%M", time.localtime(time.time() + left))
            parts.append(f"ETA {eta}{'+?' if self.unknown_after or self.expected_s is None else ''}")
        return ", ".join(parts)


class _LiveLine:
    """Rendered again at every refresh of rich's status line, so elapsed time and ETA keep moving."""

    def __init__(self, label: str, progress: Progress | None):
        self.label, self.progress, self.step = label, progress, ""
        self.started = time.monotonic()

    def set_step(self, step: str) -> None:
        self.step = step

    def __rich__(self) -> Text:
        step = f" [{self.step}]" if self.step else ""
        elapsed = time.monotonic() - self.started
        progress = self.progress.describe(elapsed) if self.progress else f"{int(elapsed)}s"
        return Text(f"{self.label}{step}: {progress}")
