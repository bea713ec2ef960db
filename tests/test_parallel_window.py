"""Streaming and parallel window decoders against the batch decoder (issue 27, item 2).

Expected values come from first principles: whole-shot matching of the same shots (the registry's
``matching`` decoder, PyMatching on the circuit's detector error model) and its 99 % binomial
interval (scipy's ``binomtest``, :func:`twin.studies.decode.interval`). A window that decodes each
round once (streaming, commit C, buffer B) and A/B windows in time (Skoric et al., Nat. Commun. 14,
7040 (2023)) with B = d stay inside it; with no overlap (B = 0) both are outside it. In space, the
merged patch of two d = 5 patches decoded in two pieces and a seam stays inside the merged batch
decode's interval; two pieces with no seam are outside it.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from twin.calibration.params import load_params
from twin.devices.generator import TrafficParams
from twin.qec.decoders import direct_corrections, make_decoder
from twin.qec.loop import run_decode
from twin.qec.merge_patch import merged_memory_circuit, rectangle_memory_circuit
from twin.qec.parallel_window import ParallelWindowDecoder, ab_layout, parallel_requests
from twin.qec.window import SlidingWindowDecoder, WindowSpec, window_decoder
from twin.qec.window_boundary import Boundary
from twin.qec.workload import Workload, logical_errors, sample, sample_circuit
from twin.studies.decode import interval

ROOT = Path(__file__).resolve().parent.parent
PARAMS = load_params(ROOT / "calibrations/fitted/card_path.yaml")


def _batch_errors(w: Workload) -> int:
    """Whole-shot matching through the decoder registry, on stim's events."""
    return int(logical_errors(direct_corrections(make_decoder("matching", w.circuit), w.detectors), w).sum())


def _errors(dec, w: Workload) -> int:
    return int(logical_errors(dec.decode_batch(w.detectors), w).sum())


def test_ab_layout_and_request_order():
    cores, seams = ab_layout(31, 5, 5)
    assert cores == [(0, 5), (10, 15), (20, 25), (30, 31)] and seams == [(5, 10), (15, 20), (25, 30)]
    assert ab_layout(12, 6, 0) == ([(0, 6), (6, 12)], [])
    assert ab_layout(8, 5, 5) == ([(0, 5)], [(5, 8)])  # a seam may end the axis
    win, ready = parallel_requests(31, 5, 5)
    # A0 A1 B0 A2 B1 A3 B2: an A window carries its core and B rounds either side, a B window its seam
    assert win == [(0, 10, 5), (5, 20, 15), (5, 10, 10), (15, 30, 25), (15, 20, 20), (25, 31, 31), (25, 30, 30)]
    assert ready == [9, 19, 19, 29, 29, 30, 30]  # a seam waits for its later neighbour
    with pytest.raises(ValueError):
        ab_layout(10, 0, 2)
    with pytest.raises(ValueError):
        WindowSpec("parallel", 3, -1)


def test_one_window_is_whole_shot_matching():
    w = sample("surface", 3, 6, 5e-3, 2000, seed=3)
    whole = np.unpackbits(direct_corrections(make_decoder("matching", w.circuit), w.detectors), axis=1,
                          bitorder="little", count=1).astype(bool)
    one = ParallelWindowDecoder(w.circuit, 7, 3)  # 7 detector rounds: one core, no seam
    assert len(one.order) == 1 and not one.links
    assert np.array_equal(one.decode_batch(w.detectors), whole)
    assert np.array_equal(window_decoder(w.circuit, WindowSpec("streaming", 7, 0)).decode_batch(w.detectors), whole)


def test_boundaries_are_explicit_and_a_windows_independent():
    w = sample("surface", 3, 12, 8e-3, 400, seed=4)
    dec = ParallelWindowDecoder(w.circuit, 3, 3)
    r = dec.rounds_of
    # 13 detector rounds: cores [0, 3) [6, 9) [12, 13), seams [3, 6) [9, 12); each A window tells its seams
    assert [(link.sender, link.receiver) for link in dec.links] == [("A0", "B0"), ("A1", "B0"), ("A1", "B1"),
                                                                      ("A2", "B1")]
    for link in dec.links:  # a seam's detectors next to the sender's core, one bit each
        j = int(link.receiver[1:])
        lo, hi = dec.seams[j]
        assert len(link.detectors) and ((r[link.detectors] >= lo) & (r[link.detectors] < hi)).all()
        assert link.nbytes == -(-len(link.detectors) // 8)
    receivers = {link.receiver for link in dec.links}
    assert all(name.startswith("B") for name in receivers)  # no A window waits for another
    a = [k for k, (kind, _) in enumerate(dec.order) if kind == "A"]
    b = [k for k, (kind, _) in enumerate(dec.order) if kind == "B"]
    sent_any = 0
    for shot in w.detectors:
        inbox: dict = {}
        obs = np.zeros(dec.n_observables, bool)
        msgs = []
        for k in reversed(a):  # A windows in any order
            msgs += dec._decode_window(k, shot, inbox, obs)
        for k in b:
            dec._decode_window(k, shot, inbox, obs)
        assert np.array_equal(obs, dec.decode_shot(shot))
        for m in msgs:  # the bytes a link would carry give the same message back
            data = m.pack()
            assert len(data) == m.link.nbytes
            assert np.array_equal(Boundary.unpack(m.link, data).bits, m.bits)
            sent_any += int(m.bits.any())
    assert sent_any > 0  # the boundaries carried flips
    stream, masks = dec.stream(), dec.window_masks()
    for shot in w.detectors[:100]:  # each request carries only its window's rounds
        for mask in masks:
            out = stream.step(shot & mask)
        assert np.array_equal(out, dec.decode_shot(shot))


def _against_batch(d: int, rounds: int, p: float, shots: int, seed: int) -> dict:
    """Streaming (C = d, B = d) and A/B (C = d, B = d) inside the batch decoder's 99 % interval;
    both with B = 0 above it. Returns the logical error rates."""
    w = sample("surface", d, rounds, p, shots, seed=seed)
    whole = _batch_errors(w)
    lo, hi = interval(whole, shots, "wilson", 0.99)
    out = {"batch": whole / shots}
    for name, dec in (("streaming", SlidingWindowDecoder(w.circuit, 2 * d, d)),
                      ("parallel", ParallelWindowDecoder(w.circuit, d, d))):
        out[name] = _errors(dec, w) / shots
        assert lo <= out[name] <= hi, (name, out, lo, hi)
    for name, dec in (("streaming_B0", SlidingWindowDecoder(w.circuit, d, d)),
                      ("parallel_B0", ParallelWindowDecoder(w.circuit, d, 0))):
        out[name] = _errors(dec, w) / shots
        assert out[name] > hi, (name, out, lo, hi)
    return out


def test_windows_inside_the_batch_interval_d5():
    _against_batch(5, 30, 6e-3, 2000, seed=1)


def test_windows_inside_the_batch_interval_d7():
    _against_batch(7, 30, 7e-3, 1500, seed=2)


def _merged(shots: int, seed: int) -> dict:
    c = merged_memory_circuit(5, 5, 6e-3)
    w = sample_circuit(c, shots, seed=seed)
    whole = _batch_errors(w)
    lo, hi = interval(whole, shots, "wilson", 0.99)
    split = _errors(ParallelWindowDecoder(c, 4, 4, axis=0), w)  # two pieces of 4 columns, a seam of 4
    bare = _errors(ParallelWindowDecoder(c, 6, 0, axis=0), w)  # two halves, no seam
    assert lo <= split / shots <= hi, (split, whole)
    assert bare / shots > hi, (bare, whole)
    return {"batch": whole / shots, "spatial": split / shots, "spatial_B0": bare / shots}


def test_merged_patch_is_two_d5_patches_and_a_seam():
    c = merged_memory_circuit(5, 3, 1e-3)
    assert len(c.shortest_graphlike_error()) == 5  # the merged patch keeps distance d
    assert c.num_qubits == 2 * (5 * 11) - 1  # 55 data qubits and 54 checks
    sq = rectangle_memory_circuit(5, 5, 3, 1e-3)
    assert sq.num_detectors == 12 * 1 + 24 * 2 + 12  # Z checks first, all after, Z from the readout


def test_spatially_parallel_merge_inside_the_batch_interval():
    _merged(3000, seed=3)


def test_parallel_windows_through_the_loop():
    w = sample("surface", 3, 8, 5e-3, 120, seed=2, per="window", window=WindowSpec("parallel", 3, 2))
    assert w.requests_per_shot == 4  # A0 A1 B0 B1 (the last seam ends the shot)
    T = 1_000_000
    r = run_decode(PARAMS, "epyc7282", w, make_decoder("matching", w.circuit),
                   traffic=TrafficParams(mode="open_loop", period_ps=T), seed=1)
    assert r.result.mismatches == 0 and r.identical
    direct = ParallelWindowDecoder(w.circuit, 3, 2).decode_batch(w.detectors)
    assert np.array_equal(np.unpackbits(r.final_corrections, axis=1, bitorder="little", count=1).astype(bool), direct)
    assert np.array_equal(np.diff(r.result.t_send), np.diff(w.ready_rounds()) * T)


@pytest.mark.slow
def test_windows_inside_the_batch_interval_many_shots():
    """The acceptance above on 20,000 (d = 5) and 10,000 (d = 7) shots."""
    _against_batch(5, 30, 6e-3, 20_000, seed=11)
    _against_batch(7, 30, 7e-3, 10_000, seed=12)


@pytest.mark.slow
def test_spatially_parallel_merge_many_shots():
    _merged(30_000, seed=13)


def test_the_scenario_key_runs_the_parallel_windows_and_names_them(tmp_path):
    """``decode.window: {kind: parallel, commit, buffer}`` through ``twin decode``'s study: the windowed
    LER is the parallel decoder's, held against whole-shot matching; the sinter row names the window."""
    import yaml

    from twin.qec.load import load_decode
    from twin.qec.sinter_stats import task_stats
    from twin.studies.decode import run_decode_study
    doc = yaml.safe_load((ROOT / "scenarios" / "decode_parallel_window.yaml").read_text())
    doc["calibration"] = str(ROOT / "calibrations/fitted/card_path.yaml")
    doc["hosting"] = str(ROOT / "calibrations/hosting.yaml")
    doc["decode"].update(distance=3, rounds=12, p=8e-3, shots=200)
    doc["decode"]["placements"] = doc["decode"]["placements"][:1]
    f = tmp_path / "par.yaml"
    f.write_text(yaml.safe_dump(doc))
    study = run_decode_study(load_decode(f))
    w = study.runs[0].workload
    assert study.document["workload"]["window"] == {"kind": "parallel", "rounds": 15, "commit": 5, "buffer": 5,
                                                    "windows_per_shot": 3}  # A0 A1 B0
    k = int(logical_errors(ParallelWindowDecoder(w.circuit, 5, 5).decode_batch(w.detectors), w).sum())
    assert study.document["windowed_vs_whole_shot"]["windowed"]["logical_errors"] == k
    assert task_stats(study)[0].json_metadata["window"] == {"kind": "parallel", "commit": 5, "buffer": 5, "rounds": 15}


@pytest.mark.parametrize("window, key", [({"kind": "parallel", "rounds": 6, "commit": 3}, "decode.window.rounds"),
                                         ({"commit": 3}, "decode.window.buffer"),
                                         ({"kind": "parallel", "commit": 31, "buffer": 2}, "decode.window.commit"),
                                         ({"commit": 3, "buffer": 30}, "decode.window.buffer")])
def test_a_bad_window_is_refused_in_one_line(window, key, tmp_path):
    import yaml

    from twin.config import ConfigError
    from twin.qec.load import load_decode
    doc = yaml.safe_load((ROOT / "scenarios" / "decode_parallel_window.yaml").read_text())
    doc["calibration"] = str(ROOT / "calibrations/fitted/card_path.yaml")
    doc["hosting"] = str(ROOT / "calibrations/hosting.yaml")
    doc["decode"]["window"] = window
    f = tmp_path / "bad.yaml"
    f.write_text(yaml.safe_dump(doc))
    with pytest.raises(ConfigError) as e:
        load_decode(f)
    msg = str(e.value)
    assert len(msg.splitlines()) == 1 and str(f) in msg and key in msg, msg
