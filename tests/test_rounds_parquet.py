"""`twin run --format parquet`: rounds.parquet holds exactly rounds.csv's rows (the same run, the same
seed), and a mesh refuses it in one line."""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from twin.commands import main

MESH = Path(__file__).parents[1] / "scenarios" / "mesh_fanout_by_function.yaml"
ARGS = ["run", "--rounds", "300", "--verify-rounds", "30", "--quiet", "--no-plot"]


def test_parquet_holds_the_csv_rows(tmp_path, capsys):
    assert main([*ARGS, "--out", str(tmp_path / "c")]) == 0
    assert main([*ARGS, "--out", str(tmp_path / "p"), "--format", "parquet"]) == 0
    assert not (tmp_path / "p" / "rounds.csv").exists()
    assert (tmp_path / "c" / "results.json").read_bytes() == (tmp_path / "p" / "results.json").read_bytes()
    with (tmp_path / "c" / "rounds.csv").open() as f:
        rows = list(csv.reader(f))
    table = pq.read_table(tmp_path / "p" / "rounds.parquet")
    assert table.column_names == rows[0]
    assert table.num_rows == len(rows) - 1 == 300 * 5
    assert [str(x) for x in table.column("consumer").to_pylist()] == [r[0] for r in rows[1:]]
    ints = np.array([r[1:] for r in rows[1:]], dtype=np.int64)
    for j, name in enumerate(table.column_names[1:]):
        assert table.column(name).type == "int64"
        assert np.array_equal(table.column(name).to_numpy(), ints[:, j]), name


def test_mesh_refuses_parquet(tmp_path, capsys):
    assert main(["run", str(MESH), "--format", "parquet", "--out", str(tmp_path),
                 "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--format parquet" in err[0] and "mesh" in err[0]
    assert not any(tmp_path.iterdir())
