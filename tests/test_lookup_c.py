"""The lookup decoders' C (twin/runtime/c/qrt_functions.c on the generated qrt_lookup.h) against their
Python twins, every syndrome, with padding: the compiled core, the runtime library and the cuda
kernel serve them with this C."""
from __future__ import annotations

import ctypes

import numpy as np
import pytest

import twin.qec  # noqa: F401  (registers the decoders)
from twin.qec.gen_lookup import stale
from twin.qec.lookup import decode_payload, standard_table
from twin.runtime.functions import lookup

FN = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_char_p, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_uint32)


def c_call(symbol: str, payload: bytes, cap: int = 64):
    from twin.runtime.native import c_function_address
    f = FN(c_function_address(symbol))
    out = ctypes.create_string_buffer(cap)
    n = f(payload, len(payload), ctypes.addressof(out), cap)
    return n, out.raw[:max(n, 0)]


@pytest.mark.parametrize("name,fid", [("rep3", 16), ("steane7", 17)])
def test_the_c_lookup_equals_the_python_table_on_every_syndrome(name, fid):
    t = standard_table(name)
    fn = lookup(fid)
    assert fn.c_symbol == f"qrt_fn_decode_{name}"
    rng = np.random.default_rng(1)
    nb = -(-t.n_detectors // 8)
    for s in range(1 << t.n_detectors):
        for pad in (0, 1, 15):
            raw = s | (int(rng.integers(0, 256)) << t.n_detectors if nb * 8 > t.n_detectors else 0)
            payload = (raw & ((1 << (8 * nb)) - 1)).to_bytes(nb, "little") + bytes(rng.integers(0, 256, pad).tolist())
            n, got = c_call(fn.c_symbol, payload)
            assert n == 1 and got == decode_payload(t, payload) == fn.python(payload), (s, pad)
    n, _ = c_call(fn.c_symbol, b"")
    assert n == -1  # the Python twin raises ValueError on a payload shorter than the syndrome
    with pytest.raises(ValueError):
        decode_payload(t, b"")


def test_the_generated_tables_are_fresh():
    assert stale() == []
