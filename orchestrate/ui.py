"""Plain, readable output: rich tables and a spinner on a terminal, plain lines otherwise."""
from __future__ import annotations

import sys
from contextlib import contextmanager

from rich.console import Console
from rich.table import Table


class Reporter:
    def __init__(self, quiet: bool = False):
        self.console = Console(highlight=False, soft_wrap=True)
        self.err = Console(stderr=True, highlight=False, soft_wrap=True)
        self.quiet = quiet
        self.fancy = self.console.is_terminal and not quiet

    def line(self, text: str) -> None:
        self.console.print(text, markup=False)

    def info(self, text: str) -> None:
        if not self.quiet:
            self.console.print(text, markup=False)

    def error(self, text: str) -> None:
        self.err.print(text, markup=False, style="bold red" if self.err.is_terminal else None)

    @contextmanager
    def building(self, label: str):
        """Yields a function that reports the current build step."""
        if self.fancy:
            with self.console.status(f"building {label}") as status:
                yield lambda step: status.update(f"building {label}: {step}")
        else:
            self.info(f"building {label}")
            yield lambda step: None

    def table(self, title: str, columns: list[str], rows: list[list[str]]) -> None:
        if self.fancy:
            table = Table(title=title, title_justify="left")
            for col in columns:
                table.add_column(col)
            for row in rows:
                table.add_row(*row)
            self.console.print(table)
            return
        widths = [max([len(c)] + [len(r[i]) for r in rows]) for i, c in enumerate(columns)]
        self.console.print(title, markup=False)
        self.console.print("  ".join(c.ljust(w) for c, w in zip(columns, widths)).rstrip(), markup=False)
        for row in rows:
            self.console.print("  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip(), markup=False)
        sys.stdout.flush()
