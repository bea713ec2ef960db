"""The one way a command prints a table: :class:`Grid` (a title, columns, rows of cells) shown
as text that never cuts a number, or as CSV or JSON (``twin run --table csv|json``, ``twin decode``).

Text (``--table text``, the default): a rich table as wide as the console. When its columns do not
fit, they are folded onto further tables (the key columns, e.g. ``consumer``, repeated in each, the
title marked ``(continued)``) instead of cut: no cell is wrapped or shortened to ``…`` at any width
(``COLUMNS=80``, or piped: :func:`make_console`). A table whose key columns and one more column are
wider than the console is printed whole all the same (the terminal wraps the line; nothing is cut).

CSV and JSON (:data:`FORMATS`): the tables go to standard output and every other line a command
prints (progress, notes, ``wrote ...``) to standard error, so ``twin run --table csv > t.csv`` is the
tables alone. CSV: per table a ``# title`` line, the header, the rows, a blank line. JSON: one
object per line (JSON Lines) ``{"title", "columns", "rows"}``, each row a list in column order.
A number is written whole there (the value, e.g. ``2.9604``, not the text ``2.960``; a ``-`` cell
is empty in CSV and ``null`` in JSON).
"""
from __future__ import annotations

import csv
import json
import math
import os
import sys
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Union

if TYPE_CHECKING:
    from rich.console import Console

FORMATS = ("text", "csv", "json")
PIPE_WIDTH = 120  # columns of text when standard output is not a terminal and COLUMNS is not set


@dataclass(frozen=True)
class Num:
    """A number in a table: ``value`` as ``format(value, spec) + suffix`` in text (a value that
    rounds to zero is never shown ``-0.000``), the value itself in CSV and JSON."""
    value: float | int
    spec: str = ".3f"
    suffix: str = ""

    def text(self) -> str:
        return fmt(self.value, self.spec) + self.suffix


Cell = Union[str, Num, None]  # None: no value (``-``)


def fmt(value: float | int, spec: str) -> str:
    """``format(value, spec)`` without a negative zero: ``-0.0004`` with ``.3f`` is ``0.000``
    (``+0.000`` with ``+.3f``), as is ``-0.0``. NaN reads ``nan``."""
    text = format(value, spec)
    if isinstance(value, float) and not math.isnan(value) and text.startswith("-") and _zero(text):
        text = format(0.0, spec)
    return text


def _zero(text: str) -> bool:
    """Whether ``text`` (a formatted number) shows zero: no digit but 0 before any exponent."""
    mantissa = text.lower().split("e")[0]
    return not any(c in "123456789" for c in mantissa)


def interval_digits(value: float, low: float, high: float, digits: int = 2) -> int:
    """The digits after the point (scientific notation) that show ``value`` inside ``[low, high]``:
    ``digits``, more (up to 5) where fewer would round ``value`` onto a bound it is not equal to, or
    outside (``9.99e-01 [1.0e+00, 1.0e+00]`` is what unequal digits make of 0.999 in [0.997, 1])."""
    for d in range(digits, 6):
        v, lo, hi = (float(format(x, f".{d}e")) for x in (value, low, high))
        if lo <= v <= hi and (v != lo or value == low) and (v != hi or value == high):
            return d
    return 5


def interval(value: float, low: float, high: float, digits: int = 2) -> str:
    """``value [low, high]`` in scientific notation, all three with the same digits
    (:func:`interval_digits`), e.g. ``9.99e-01 [9.97e-01, 1.00e+00]``."""
    d = interval_digits(value, low, high, digits)
    v, lo, hi = (fmt(x, f".{d}e") for x in (value, low, high))
    return f"{v} [{lo}, {hi}]"


class Grid:
    """A table to print: ``title``, ``columns`` (their headers; the first ``keys`` are the key
    columns, left-aligned and repeated when the text folds; the others right-aligned), rows added
    with :meth:`add_row` (cells: str, :class:`Num`, or None for ``-``)."""

    def __init__(self, title: str, columns: list[str] | tuple[str, ...], keys: int = 1):
        self.title, self.columns, self.keys = title, list(columns), keys
        self.rows: list[list[Cell]] = []

    def add_row(self, *cells: Cell) -> None:
        if len(cells) != len(self.columns):
            raise ValueError(f"table {self.title!r}: {len(cells)} cells for {len(self.columns)} columns")
        self.rows.append(list(cells))

    def print(self, console: Console) -> None:
        """Show the table on ``console`` in its table format (:func:`table_format`)."""
        how = table_format(console)
        if how == "csv":
            write_csv(self, sys.stdout)
        elif how == "json":
            sys.stdout.write(json.dumps(self.document(), ensure_ascii=False) + "\n")
        else:
            for part in self.renderables(console):
                console.print(part, width=max(console.width, _natural_width(part, console)))

    def renderables(self, console: Console) -> list:
        """The text form as rich renderables: per fold its title (wrapped at spaces) and its table."""
        from rich.text import Text
        out: list = []
        for k, tb in enumerate(self.folded(console.width, console)):
            out += [Text(self.title if k == 0 else self.title.split(":")[0] + " (continued)", style="italic"), tb]
        return out

    def document(self) -> dict:
        """The JSON form: ``{"title", "columns", "rows"}`` (values whole; None for ``-``)."""
        return {"title": self.title, "columns": self.columns,
                "rows": [[c.value if isinstance(c, Num) else c for c in r] for r in self.rows]}

    def folded(self, width: int, console: Console) -> list:
        """The rich tables that show this one in ``width`` columns: the key columns with as many
        of the others as fit, then the key columns with the next ones, ... (module docstring). A
        table of these columns is as wide as its columns' one-column tables together
        (:meth:`_widths`), so each column is measured once."""
        single = self._widths(console)
        groups: list[list[int]] = []
        cur = list(range(self.keys))
        for i in range(self.keys, len(self.columns)):
            if len(cur) > self.keys and sum(single[j] for j in cur + [i]) > width:
                groups.append(cur)
                cur = list(range(self.keys))
            cur.append(i)
        groups.append(cur)
        return [self._rich(g) for g in groups]

    def _widths(self, console: Console) -> list[int]:
        """Each column's natural width as a table of that column alone (:func:`_natural_width`).
        With this box (an edge of one character each side, one between columns) and padding (one
        space right of each cell but the last column's, collapsed), a table of several columns is
        the sum of theirs: each adds its cells' width and two characters
        (tests/test_table_fold.py holds it to rich's own measure)."""
        return [_natural_width(self._rich([i]), console) for i in range(len(self.columns))]

    def _rich(self, cols: list[int]):
        """The rich table of columns ``cols`` (its title printed above it, :meth:`print`)."""
        from rich import box
        from rich.table import Table
        tb = Table(box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1), collapse_padding=True)
        for i in cols:
            tb.add_column(self.columns[i], justify="left" if i < self.keys else "right", no_wrap=True)
        for r in self.rows:
            tb.add_row(*(_text(r[i]) for i in cols))
        return tb


def _text(cell: Cell) -> str:
    return "-" if cell is None else cell.text() if isinstance(cell, Num) else str(cell)


def _natural_width(tb, console: Console) -> int:
    """The width ``tb`` (a table, or a title: its console's width at most) takes unconstrained."""
    from rich.measure import Measurement
    from rich.table import Table
    if not isinstance(tb, Table):
        return min(console.width, Measurement.get(console, console.options, tb).maximum)
    return tb.__rich_measure__(console, console.options.update_width(10_000)).maximum


def write_csv(grid: Grid, out: IO[str]) -> None:
    """``grid`` as CSV on ``out``: ``# title``, the header, the rows (values whole), a blank line."""
    out.write(f"# {grid.title}\n")
    w = csv.writer(out, lineterminator="\n")
    w.writerow(grid.columns)
    w.writerows([("" if c is None else repr(c.value) if isinstance(c.value, float) else c.value)
                 if isinstance(c, Num) else ("" if c is None else c) for c in r] for r in grid.rows)
    out.write("\n")


def table_format(console) -> str:
    """The table format a console was made for (:func:`make_console`): ``text``, ``csv`` or ``json``."""
    return getattr(console, "table_format", "text")


def make_console(table: str = "text") -> Console:
    """The console a command prints on. ``table`` ``text``: standard output, the terminal's width
    (piped: ``COLUMNS`` when set, else :data:`PIPE_WIDTH`); ``csv``/``json``: standard error, the
    tables themselves going to standard output (:meth:`Grid.print`)."""
    from rich.console import Console
    stream = sys.stdout if table == "text" else sys.stderr
    width = None if stream.isatty() else _columns() or PIPE_WIDTH
    console = Console(stderr=table != "text", width=width)  # the stream looked up at each print (captured)
    console.table_format = table  # type: ignore[attr-defined]
    return console


def _columns() -> int | None:
    """``COLUMNS`` from the environment, when it is a positive integer."""
    try:
        n = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        return None
    return n if n > 0 else None


__all__ = ["FORMATS", "Grid", "Num", "fmt", "interval", "interval_digits", "make_console", "table_format", "write_csv"]
