"""LoopDecoder's round-trip records (issue 31): with_loop_latency reads the decoder's own run's
records, never an earlier run's left in the folder; the docs/qec.md example runs from a folder that
is not a clone."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sinter = pytest.importorskip("sinter")
ROOT = Path(__file__).resolve().parents[1]


def _decode(loop, dem, circuit, shots: int, seed: int) -> None:
    det, _ = circuit.compile_detector_sampler(seed=seed).sample(shots, separate_observables=True, bit_packed=True)
    loop.compile_decoder_for_dem(dem=dem).decode_shots_bit_packed(bit_packed_detection_event_data=det)


def test_an_earlier_runs_records_are_not_mixed_in(tmp_path):
    from twin.qec.codes import memory_circuit
    from twin.qec.sinter_loop import LoopDecoder, recorded_rtt_ps, with_loop_latency
    c = memory_circuit("rep", 3, 2, 0.03)
    dem = c.detector_error_model(decompose_errors=True)
    cal = "calibrations/fitted/card_path.yaml"
    before = LoopDecoder("matching", ROOT / cal, "epyc7282", record_dir=tmp_path / "rec")
    _decode(before, dem, c, 120, 1)
    loop = LoopDecoder("matching", ROOT / cal, "epyc7282", record_dir=tmp_path / "rec")
    assert loop.run != before.run
    _decode(loop, dem, c, 50, 2)
    assert len(recorded_rtt_ps(tmp_path / "rec", dem, loop.run)) == 50
    with pytest.raises(ValueError, match="records of 2 LoopDecoder runs"):
        recorded_rtt_ps(tmp_path / "rec", dem)  # a folder of two runs: refused, not pooled
    task = sinter.Task(circuit=c, decoder="loop", detector_error_model=dem, json_metadata={"p": 0.03})
    stats = [sinter.TaskStats(strong_id=task.strong_id(), decoder="loop", json_metadata={"p": 0.03}, shots=50,
                              errors=1, discards=0, seconds=0.1)]
    got = with_loop_latency(stats, [task], loop)[0].json_metadata
    rtt = np.concatenate(loop.rtt_ps[next(iter(loop.rtt_ps))])
    assert got["loop_requests"] == 50
    assert got["loop_rtt_p50_ns"] == float(np.percentile(rtt, 50, method="inverted_cdf")) / 1000


def _doc_example() -> str:
    text = (ROOT / "docs" / "qec.md").read_text()
    block = next(b for b in re.findall(r"```python\n(.*?)```", text, re.S) if "LoopDecoder(" in b)
    return block.replace("max_shots=10_000", "max_shots=200").replace("num_workers=2", "num_workers=1")


def test_the_docs_loop_decoder_example_runs_outside_a_clone(tmp_path):
    """Run from an empty folder: the calibration's relative path is the bundled file's."""
    code = _doc_example() + "\nprint(sorted(s.json_metadata['loop_requests'] for s in stats))\n"
    run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip().splitlines()[-1] == "[200, 200]"
    assert not (tmp_path / "calibrations").exists()
