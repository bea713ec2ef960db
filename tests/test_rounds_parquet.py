"""The per-round files (twin/output/rows.py): Parquet by default, CSV with ``--format csv``, the same
columns and rows either way (the same run, the same seed) for a loop, a mesh and twin decode's
requests; results.json does not depend on the format."""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from twin.commands import main
from twin.output.files import RunFolder
from twin.output.rows import Block, file_name, write_rows

SCENARIOS = Path(__file__).parents[1] / "scenarios"
MESH = SCENARIOS / "mesh_fanout_by_function.yaml"
ARGS = ["run", "--rounds", "300", "--verify-rounds", "30", "--quiet", "--no-plot"]


def same_rows(parquet: Path, text: Path, labels: int) -> int:
    """Assert the Parquet file holds exactly the CSV file's rows (``labels`` leading string columns,
    the rest int64); returns the rows."""
    with text.open(newline="") as f:
        rows = list(csv.reader(f))
    table = pq.read_table(parquet)
    assert table.column_names == rows[0]
    assert table.num_rows == len(rows) - 1
    for j, name in enumerate(table.column_names):
        col = table.column(name)
        if j < labels:
            assert [str(x) for x in col.to_pylist()] == [r[j] for r in rows[1:]], name
        else:
            assert col.type == "int64", name
            assert np.array_equal(col.to_numpy(), np.array([r[j] for r in rows[1:]], dtype=np.int64)), name
    return table.num_rows


def test_loop_parquet_by_default_holds_the_csv_rows(tmp_path):
    assert main([*ARGS, "--out", str(tmp_path / "p")]) == 0
    assert main([*ARGS, "--out", str(tmp_path / "c"), "--format", "csv"]) == 0
    assert sorted(p.name for p in (tmp_path / "p").iterdir()) == ["manifest.json", "results.json", "rounds.parquet"]
    assert not (tmp_path / "c" / "rounds.parquet").exists()
    assert (tmp_path / "c" / "results.json").read_bytes() == (tmp_path / "p" / "results.json").read_bytes()
    assert same_rows(tmp_path / "p" / "rounds.parquet", tmp_path / "c" / "rounds.csv", 1) == 300 * 5


def test_mesh_writes_parquet_too(tmp_path):
    args = ["run", str(MESH), "--rounds", "200", "--quiet", "--no-plot"]
    assert main([*args, "--out", str(tmp_path / "p")]) == 0
    assert main([*args, "--out", str(tmp_path / "c"), "--format", "csv"]) == 0
    assert (tmp_path / "c" / "results.json").read_bytes() == (tmp_path / "p" / "results.json").read_bytes()
    flows = len(pq.read_table(tmp_path / "p" / "rounds.parquet").column("flow").unique())
    assert flows >= 2
    assert same_rows(tmp_path / "p" / "rounds.parquet", tmp_path / "c" / "rounds.csv", 0) == 200 * flows


def test_decode_requests_parquet_by_default(tmp_path):
    from twin.commands import build_parser
    from twin.qec.load import load_decode
    from twin.reports.decode import decode_files, write_decode_outputs
    from twin.studies.decode import run_decode_study
    assert build_parser().parse_args(["decode"]).rounds_format == "parquet"
    assert "requests.parquet" in decode_files() and "requests.csv" in decode_files("csv")
    study = run_decode_study(load_decode(SCENARIOS / "decode_rep3.yaml"), shots=200, verify_rounds=50)
    for fmt in ("parquet", "csv"):  # one study, both files
        with RunFolder(tmp_path / fmt) as folder:
            write_decode_outputs(study, folder, fmt)
            folder.commit()
    assert not (tmp_path / "parquet" / "requests.csv").exists() and (tmp_path / "parquet" / "stats.csv").is_file()
    for name in ("results.json", "stats.csv", "queue_depth.csv"):  # sinter's stats.csv in either case
        assert (tmp_path / "csv" / name).read_bytes() == (tmp_path / "parquet" / name).read_bytes(), name
    rows = same_rows(tmp_path / "parquet" / "requests.parquet", tmp_path / "csv" / "requests.csv", 2)
    assert rows == 200 * len(study.document["placements"])


def test_labels_that_need_quotes_are_quoted_and_read_back(tmp_path):
    blocks = [Block(("plain",), (np.array([1, 2]), np.array([-1, 2**62]))),
              Block(('a, "b"',), (np.array([3]), np.array([4])))]
    with RunFolder(tmp_path / "o") as folder:
        write_rows(folder, "rounds", "csv", ("node",), ("round", "t_ps"), blocks)
        write_rows(folder, "rounds", "parquet", ("node",), ("round", "t_ps"), blocks)
        folder.commit()
    with (tmp_path / "o" / "rounds.csv").open(newline="") as f:
        assert list(csv.reader(f)) == [["node", "round", "t_ps"], ["plain", "1", "-1"], ["plain", "2", str(2**62)],
                                       ['a, "b"', "3", "4"]]
    assert same_rows(tmp_path / "o" / "rounds.parquet", tmp_path / "o" / "rounds.csv", 1) == 3


def test_a_block_that_does_not_fit_is_refused(tmp_path):
    with RunFolder(tmp_path / "o") as folder, pytest.raises(ValueError, match="differ in length"):
        write_rows(folder, "rounds", "csv", ("node",), ("a", "b"), [Block(("x",), (np.arange(2), np.arange(3)))])
    with pytest.raises(ValueError, match="format"):
        file_name("rounds", "xlsx")
