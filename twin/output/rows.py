"""Per-round (and per-request) files: one writer for ``twin run``'s loops and meshes and ``twin
decode``'s requests, as Parquet (the default) or CSV (on request).

A file is a table of label columns (strings: the consumer node, the flow, the placement) and
integer columns (int64: rounds, picosecond instants), given as :class:`Block` s (one per consumer,
flow or placement) so nothing is stacked into one large copy.

- ``parquet`` (pyarrow): label columns dictionary-encoded strings, integer columns int64 with
  ``DELTA_BINARY_PACKED`` encoding (timestamps grow steadily) and zstd level 1; one row group per
  block or more (pyarrow's default row-group size). 3e6 rows of a loop's 15 columns take about
  60 MB and a second to write (benchmarks/first_result.py). Read with ``pyarrow.parquet.read_table``
  or ``pandas.read_parquet``.
- ``csv``: a header line of the column names, then one line per row, ``label,...,int,...`` (plain
  decimal integers; labels unquoted, or all quoted when one holds a comma, a quote or a line break),
  written by pyarrow's CSV writer (C++: about five times Python's ``str.join`` over rows).

Both go through :meth:`twin.output.files.RunFolder.write` (staged, fsynced, renamed into place).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

FORMATS = ("parquet", "csv")
"""The per-round file's formats; the first is the default (``--format``)."""


def file_name(stem: str, fmt: str) -> str:
    """The file a table ``stem`` is written to in format ``fmt`` (``rounds`` -> ``rounds.parquet``).
    Raises ValueError for a format not in :data:`FORMATS`."""
    if fmt not in FORMATS:
        raise ValueError(f"format {fmt!r}: one of {', '.join(FORMATS)}")
    return f"{stem}.{fmt}"


@dataclass(frozen=True)
class Block:
    """Consecutive rows of a table: ``labels`` one value per label column, each a string (the same on
    every row of the block) or a sequence of strings (one per row); ``columns`` one integer array
    per integer column, all of one length (the block's rows), converted to int64."""

    labels: tuple[str | Sequence[str], ...]
    columns: tuple[np.ndarray, ...]

    def rows(self) -> int:
        """The block's number of rows."""
        return len(self.columns[0]) if self.columns else 0


def _arrow_table(block: Block, schema):
    import pyarrow as pa

    n = block.rows()
    labels = []
    for value in block.labels:
        if isinstance(value, str):  # one value for the whole block: indices all 0
            labels.append(pa.DictionaryArray.from_arrays(np.zeros(n, np.int32), pa.array([value], pa.string())))
        else:
            labels.append(pa.array(list(value) if not isinstance(value, np.ndarray) else value.astype(str),
                                   pa.string()).dictionary_encode())
    ints = [pa.array(np.ascontiguousarray(c, dtype=np.int64)) for c in block.columns]
    return pa.Table.from_arrays([*labels, *ints], schema=schema)


def _schema(label_names: Sequence[str], int_names: Sequence[str]):
    import pyarrow as pa
    return pa.schema([*((n, pa.dictionary(pa.int32(), pa.string())) for n in label_names),
                      *((n, pa.int64()) for n in int_names)])


def _check(block: Block, label_names: Sequence[str], int_names: Sequence[str]) -> None:
    if len(block.labels) != len(label_names) or len(block.columns) != len(int_names):
        raise ValueError(f"a block of {len(block.labels)} labels and {len(block.columns)} integer columns for a table "
                         f"of {len(label_names)} and {len(int_names)}")
    n = block.rows()
    if any(len(c) != n for c in block.columns) or any(not isinstance(v, str) and len(v) != n for v in block.labels):
        raise ValueError("a block's columns differ in length")


def _plain(value: str | Sequence[str]) -> bool:
    """Whether a label (or every label of a sequence) needs no CSV quotes."""
    values = (value,) if isinstance(value, str) else set(np.asarray(value, dtype=str).tolist())
    return not any(c in v for v in values for c in ',"\r\n')


class RowStream:
    """One table written block by block into an open binary file ``f`` as the blocks come (a run
    that streams its rounds writes each batch as it is computed: memory independent of the rows),
    in format ``fmt`` (see the module docstring; Parquet: one row group or more per block), columns
    ``label_names`` then ``int_names``. ``quoted``: a CSV's labels all quoted (some label holds a
    comma, a quote or a line break: :func:`plain_labels`), else none. :meth:`add` a block,
    :meth:`close` when done. Raises ValueError for a block that does not fit the columns."""

    def __init__(self, f, fmt: str, label_names: Sequence[str], int_names: Sequence[str], quoted: bool = False):
        file_name("rows", fmt)  # the format's check
        self.f, self.fmt = f, fmt
        self.label_names, self.int_names = tuple(label_names), tuple(int_names)
        self.schema = _schema(label_names, int_names)
        self._parquet = None
        if fmt == "parquet":
            import pyarrow.parquet as pq
            self._parquet = pq.ParquetWriter(f, self.schema, compression="zstd", compression_level=1,
                                             use_dictionary=list(label_names),
                                             column_encoding={c: "DELTA_BINARY_PACKED" for c in int_names})
        else:
            import pyarrow.csv as pc
            f.write((",".join([*label_names, *int_names]) + "\n").encode())
            self._csv = pc.WriteOptions(include_header=False, quoting_style="needed" if quoted else "none")

    def add(self, block: Block) -> None:
        """Write ``block``'s rows after the rows so far."""
        _check(block, self.label_names, self.int_names)
        if self._parquet is not None:
            self._parquet.write_table(_arrow_table(block, self.schema))
        elif block.rows():
            import pyarrow.csv as pc
            pc.write_csv(_arrow_table(block, self.schema), self.f, self._csv)

    def close(self) -> None:
        """Finish the file (Parquet's footer); the caller closes ``f``."""
        if self._parquet is not None:
            self._parquet.close()
            self._parquet = None


def plain_labels(labels: Iterable[str | Sequence[str]]) -> bool:
    """Whether every label value needs no CSV quotes (RFC 4180: plain labels go unquoted, as the
    rows always were; any label needing quotes, and every label is quoted)."""
    return all(_plain(v) for v in labels)


def write_rows(folder, stem: str, fmt: str, label_names: Sequence[str], int_names: Sequence[str],
               blocks: Iterable[Block]) -> Path:
    """Stage the table ``stem`` (``rounds``, ``requests``) in ``folder`` (a
    :class:`twin.output.files.RunFolder`) as ``stem.parquet`` or ``stem.csv`` (``fmt``, see the
    module docstring): columns ``label_names`` then ``int_names``, rows block after block
    (:class:`RowStream`). Returns the staged file's path. Raises ValueError for a block that does
    not fit the columns, and :class:`twin.output.files.OutputError` when the file cannot be written."""
    from twin.output.files import binary

    name = file_name(stem, fmt)
    blocks = list(blocks)
    for b in blocks:
        _check(b, label_names, int_names)
    quoted = not plain_labels(v for b in blocks for v in b.labels)

    def write(f) -> None:
        rows = RowStream(f, fmt, label_names, int_names, quoted)
        for b in blocks:
            rows.add(b)
        rows.close()

    return folder.write(name, binary(write))


__all__ = ["Block", "FORMATS", "RowStream", "file_name", "plain_labels", "write_rows"]
