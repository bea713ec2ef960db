"""Lookup-table decoders: exact maximum likelihood, checked against brute-force enumeration."""
import itertools

import numpy as np
import pytest

from twin.qec.codes import memory_circuit
from twin.qec.lookup import MAX_DETECTORS, LookupTable, for_circuit, from_dem


def _mechanisms(dem):
    out = []
    for inst in dem.flattened():
        if inst.type != "error":
            continue
        det = obs = 0
        for t in inst.targets_copy():
            if t.is_relative_detector_id():
                det ^= 1 << t.val
            elif t.is_logical_observable_id():
                obs ^= 1 << t.val
        out.append((inst.args_copy()[0], det, obs))
    return out


@pytest.mark.parametrize("code,d,r", [("rep", 3, 1), ("rep", 3, 2)])
def test_table_is_maximum_likelihood_by_enumeration(code, d, r):
    c = memory_circuit(code, d, r, 0.02)
    dem = c.detector_error_model(decompose_errors=False)
    mech = _mechanisms(dem)
    assert len(mech) <= 16
    D, K = dem.num_detectors, dem.num_observables
    joint = np.zeros((1 << D, 1 << K))
    for chosen in itertools.product((0, 1), repeat=len(mech)):
        pr, det, obs = 1.0, 0, 0
        for on, (p, dm, om) in zip(chosen, mech):
            pr *= p if on else 1 - p
            if on:
                det ^= dm
                obs ^= om
        joint[det, obs] += pr
    t = from_dem(dem, code)
    for s in range(1 << D):
        if joint[s].max() > 0:
            assert joint[s, t.table[s]] == pytest.approx(joint[s].max(), rel=1e-9), s


def test_single_errors_are_corrected():
    c = memory_circuit("rep", 3, 1, 1e-3, noise="code_capacity")
    dem = c.detector_error_model(decompose_errors=False)
    t = from_dem(dem, "rep3")
    for p, det, obs in _mechanisms(dem):
        assert t.table[det] == obs


def test_decode_matches_ground_truth_better_than_no_decoding():
    c = memory_circuit("rep", 3, 3, 1e-3)
    t = for_circuit(c, "rep3")
    det, obs = c.compile_detector_sampler(seed=7).sample(20_000, separate_observables=True)
    pred = t.decode(det)
    assert pred.shape == obs.shape
    assert (pred != obs).any(axis=1).sum() < obs.any(axis=1).sum() / 10


def test_pack_bit_order_and_errors():
    assert list(LookupTable.pack(np.array([[1, 0, 0], [0, 0, 1], [1, 1, 1]], bool))) == [1, 4, 7]
    t = for_circuit(memory_circuit("rep", 3, 1, 1e-3), "rep3")
    with pytest.raises(ValueError, match="decodes 4 detectors"):
        t.decode(np.zeros((2, 5), bool))
    lines = t.readmemh().splitlines()
    assert len(lines) == 16 and all(len(x) == 1 for x in lines)


def test_too_many_detectors_refused():
    c = memory_circuit("surface", 5, 5, 1e-3)
    assert c.num_detectors > MAX_DETECTORS
    with pytest.raises(ValueError, match="at most"):
        for_circuit(c, "surface5")


def test_bad_code_arguments():
    with pytest.raises(ValueError, match="code 'toric'"):
        memory_circuit("toric", 3, 1, 1e-3)
    with pytest.raises(ValueError, match="distance 5"):
        memory_circuit("steane", 5, 2, 1e-3)
    with pytest.raises(ValueError, match="p 0.7"):
        memory_circuit("rep", 3, 1, 0.7)


def test_decoder_functions_serve_the_standard_tables():
    from twin.qec.lookup import standard_table
    from twin.runtime.functions import lookup
    for fname, tname in (("decode_rep3", "rep3"), ("decode_steane7", "steane7")):
        t = standard_table(tname)
        f = lookup(fname)
        for s in range(1 << t.n_detectors):
            pad = bytes([s | (0xF0 if t.n_detectors == 4 else 0xC0)]) + b"\x55" * 7  # padding ignored
            assert f.python(pad) == bytes([int(t.table[s])])
        with pytest.raises(ValueError, match="payload of 0 bytes"):
            f.python(b"")


def test_decoder_min_payload_is_the_syndrome_of_its_table():
    """The registered syndrome sizes agree with the tables and matching graph they decode."""
    from twin.exchange import contract as C
    from twin.qec.codes import memory_circuit
    from twin.qec.lookup import standard_table
    from twin.runtime.functions import lookup
    for fname, tname in (("decode_rep3", "rep3"), ("decode_steane7", "steane7")):
        assert lookup(fname).min_payload == C.syndrome_bytes(standard_table(tname).n_detectors)
    surface = memory_circuit("surface", 5, 5, 1e-3)
    assert lookup("decode_surface5").min_payload == C.syndrome_bytes(surface.num_detectors)
    assert lookup("echo").min_payload == 0


def test_short_payload_is_answered_function_failed_and_checked_as_right():
    """A request too short for the decoder's syndrome: the consumer answers status function_failed
    (as the runtime library does when a function returns < 0) and the card accepts exactly that."""

    from pathlib import Path

    from twin.calibration.params import load_params
    from twin.devices.generator import TrafficParams
    from twin.engine.event import run_event
    from twin.exchange.contract import STATUS
    from twin.runtime.functions import lookup
    from twin.scenario.compile import flow_spec
    params = load_params(Path(__file__).resolve().parent.parent / "calibrations" / "fitted" / "card_path.yaml")
    tr = TrafficParams(mode="closed_loop", rounds=50, frame_bytes=8)
    spec = flow_spec(params, "epyc7282", tr, 3, function=lookup("decode_surface5").id)
    res = run_event(spec, keep_replies=True)
    assert res.mismatches == 0 and all(r == b"" for r in res.stats["replies"])
    assert STATUS["function_failed"] == 3
