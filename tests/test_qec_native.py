"""Lookup decoders compiled for the C runtime (model code) answer as the Python tables do."""
from __future__ import annotations

import ctypes
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

numba = pytest.importorskip("numba", reason="numba not installed (pip install -e '.[numba]')")

from twin.calibration.params import load_params  # noqa: E402
from twin.devices.generator import TrafficParams  # noqa: E402
from twin.engine.event import run_event  # noqa: E402
from twin.qec.lookup import decode_payload, standard_table  # noqa: E402
from twin.qec.native import table_native  # noqa: E402
from twin.scenario.compile import flow_spec  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
KERNEL = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.POINTER(ctypes.c_uint8), ctypes.c_uint32,
                          ctypes.POINTER(ctypes.c_uint8), ctypes.c_uint32)


@pytest.mark.parametrize("name", ["rep3", "steane7"])
def test_native_table_equals_python_on_every_syndrome_with_padding(name):
    t = standard_table(name)
    fn = KERNEL(table_native(name))
    rng = np.random.default_rng(1)
    for s in range(1 << t.n_detectors):
        payload = bytearray(rng.integers(0, 256, 16, dtype=np.uint8).tobytes())  # padding bits random
        nb = (t.n_detectors + 7) // 8
        v = (int.from_bytes(payload[:nb], "little") & ~((1 << t.n_detectors) - 1)) | s
        payload[:nb] = v.to_bytes(nb, "little")
        inp = (ctypes.c_uint8 * 16).from_buffer(payload)
        out = (ctypes.c_uint8 * 8)()
        k = fn(inp, 16, out, 8)
        assert bytes(out[:k]) == decode_payload(t, bytes(payload))
    out = (ctypes.c_uint8 * 8)()
    assert fn((ctypes.c_uint8 * 1)(), 0, out, 8) == -1  # shorter than the syndrome


def test_model_code_serves_decode_steane7_from_the_c_runtime():
    params = load_params(ROOT / "calibrations/fitted/card_path.yaml")
    tr = TrafficParams(rounds=3000, frame_bytes=64)
    spec = flow_spec(params, "epyc7282", tr, seed=4, function=17, model="code")
    res = run_event(spec)
    sim = run_event(replace(spec, model="sim"))
    assert res.mismatches == 0  # every reply checked against the Python table
    assert res.stats["reply_digest"] == sim.stats["reply_digest"]
    assert np.array_equal(res.t_have, sim.t_have)
