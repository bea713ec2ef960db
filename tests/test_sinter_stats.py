"""stats.csv as sinter expects it (issue 31): the metadata defines the task and nothing of its outcome,
so two seeds of one task share a strong id and ``sinter combine`` adds them into one row; the keys do
not depend on the control side; ``seconds`` is the decoding's; ``sinter plot`` reads the file."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from twin.output.files import RunFolder
from twin.qec.load import load_decode
from twin.qec.sinter_stats import task_stats
from twin.reports.decode import write_decode_outputs
from twin.studies.decode import run_decode_study

ROOT = Path(__file__).resolve().parents[1]
sinter = pytest.importorskip("sinter")


def _sinter_cli() -> str:
    here = Path(sys.executable).parent / "sinter"
    return str(here) if here.exists() else shutil.which("sinter")


def _stats(tmp_path: Path, name: str, seed: int, shots: int) -> Path:
    study = run_decode_study(load_decode(ROOT / "scenarios" / f"{name}.yaml"), shots=shots, seed=seed)
    with RunFolder(tmp_path / f"{name}-{seed}") as folder:
        write_decode_outputs(study, folder, plots=False)
        folder.commit()
    return tmp_path / f"{name}-{seed}" / "stats.csv"


def test_two_seeds_combine_into_one_row_per_task_and_plot(tmp_path):
    a, b = _stats(tmp_path, "decode_user_circuit", 1, 200), _stats(tmp_path, "decode_user_circuit", 2, 300)
    ra, rb = sinter.read_stats_from_csv_files(a), sinter.read_stats_from_csv_files(b)
    assert len(ra) == len(rb) == 2
    assert [r.strong_id for r in ra] == [r.strong_id for r in rb]  # the outcome is not in the id
    run = subprocess.run([_sinter_cli(), "combine", str(a), str(b)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    (tmp_path / "combined.csv").write_text(run.stdout)
    combined = sinter.read_stats_from_csv_files(tmp_path / "combined.csv")
    assert len(combined) == 2  # one row per task, not four
    by_id = {r.strong_id: r for r in combined}
    for x, y in zip(ra, rb):
        c = by_id[x.strong_id]
        assert (c.shots, c.errors) == (500, x.errors + y.errors)
        assert c.custom_counts["requests"] == x.custom_counts["requests"] + y.custom_counts["requests"]
    png = tmp_path / "ler.png"
    run = subprocess.run([_sinter_cli(), "plot", "--in", str(tmp_path / "combined.csv"), "--out", str(png),
                          "--x_func", "m.workers", "--group_func", "m.mode"], capture_output=True, text=True,
                         env={"MPLBACKEND": "Agg", "PATH": str(Path(sys.executable).parent)})
    assert run.returncode == 0, run.stderr
    assert png.stat().st_size > 1000


def test_metadata_defines_the_task_alone_whatever_the_control_side():
    card = run_decode_study(load_decode(ROOT / "scenarios" / "decode_user_circuit.yaml"), shots=100)
    aurora = run_decode_study(load_decode(ROOT / "scenarios" / "decode_stream_1us.yaml"), shots=20)
    keys = {frozenset(t.json_metadata) for study in (card, aurora) for t in task_stats(study)}
    assert len(keys) == 1  # the same keys on the card and with control: aurora
    meta = next(iter(keys))
    assert not {k for k in meta if k.endswith("_ns") and k != "deadline_ns"}  # no latency: an outcome
    for study in (card, aurora):
        for t, run in zip(task_stats(study), study.runs):
            assert t.seconds == run.decode_wall_s > 0  # the decoding's wall clock, not simulated compute
