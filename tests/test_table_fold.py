"""The text table's folding measures each column once: a table of several columns is as wide as
their one-column tables together, checked against rich's own measure of the whole table, and the
folds are those of measuring every candidate table (the way before)."""
from __future__ import annotations

import io

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from twin.output.table import Grid, Num, _natural_width

TEXT = st.text(alphabet="0123456789.,-+% abcxyzµ漢[]:_", min_size=0, max_size=14)
CELL = st.one_of(TEXT, st.none(),
                 st.builds(Num, st.floats(-1e6, 1e6, allow_nan=False), st.sampled_from((".3f", ".0f"))))


@st.composite
def grids(draw):
    ncols, keys = draw(st.integers(1, 14)), draw(st.integers(1, 2))
    g = Grid(draw(TEXT), [draw(TEXT) or "c" for _ in range(ncols)], keys=min(keys, ncols))
    for _ in range(draw(st.integers(0, 6))):
        g.add_row(*(draw(CELL) for _ in range(ncols)))
    return g


def _console(width: int) -> Console:
    return Console(file=io.StringIO(), width=width)


def _folded_by_measuring_each(grid: Grid, width: int, console: Console) -> list[list[str]]:
    """The folds as found by measuring every candidate table whole (the reference)."""
    groups: list[list[int]] = []
    cur = list(range(grid.keys))
    for i in range(grid.keys, len(grid.columns)):
        if len(cur) > grid.keys and _natural_width(grid._rich(cur + [i]), console) > width:
            groups.append(cur)
            cur = list(range(grid.keys))
        cur.append(i)
    groups.append(cur)
    return [[grid.columns[i] for i in g] for g in groups]


@settings(max_examples=300, deadline=None)
@given(grids(), st.integers(20, 220), st.data())
def test_a_table_is_as_wide_as_its_columns_alone(grid, width, data):
    console = _console(width)
    single = grid._widths(console)
    cols = data.draw(st.lists(st.integers(0, len(grid.columns) - 1), min_size=1, max_size=8, unique=True))
    assert sum(single[i] for i in cols) == _natural_width(grid._rich(cols), console)


@settings(max_examples=300, deadline=None)
@given(grids(), st.integers(20, 220))
def test_folds_are_those_of_measuring_every_table(grid, width):
    console = _console(width)
    got = [[str(c.header) for c in tb.columns] for tb in grid.folded(width, console)]
    assert got == _folded_by_measuring_each(grid, width, console)
