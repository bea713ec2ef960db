"""The union-find decoder: its C (qrt_fn_decode_uf_surface3 on the generated qrt_uf_graph.h) gives the
Python reference's corrections byte for byte on many shots, the header is up to date, and the registry
decoder ``union_find`` decodes what PyMatching decodes on the same circuit (weight-one errors)."""
from __future__ import annotations

import ctypes

import numpy as np
import pytest

import twin.qec  # noqa: F401  (registers the decoders)
from twin.exchange import contract as C
from twin.qec.codes import memory_circuit
from twin.qec.gen_uf import stale
from twin.qec.union_find import decode_payload, for_circuit, standard_graph
from twin.runtime.functions import lookup

FN = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_char_p, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_uint32)


def _c():
    from twin.runtime.native import c_function_address
    f = FN(c_function_address(lookup(C.FUNCTION_DECODE_UF_SURFACE3).c_symbol))
    out = ctypes.create_string_buffer(16)

    def call(payload: bytes, cap: int = 16):
        n = f(payload, len(payload), ctypes.addressof(out), cap)
        return n, out.raw[:max(n, 0)]
    return call


def test_the_generated_graph_is_fresh():
    assert stale() == []


def test_the_c_union_find_equals_the_python_reference_on_many_shots():
    """Sampled shots at three noise levels, random dense syndromes, and padding bits and bytes: the C
    and the Python give the same reply bytes, and the registered function's Python is the reference."""
    g, call, fn = standard_graph("surface3"), _c(), lookup("decode_uf_surface3")
    assert fn.id == 19 and fn.c_symbol == "qrt_fn_decode_uf_surface3" and fn.min_payload == 3
    rng = np.random.default_rng(7)
    rows = [memory_circuit("surface", 3, 3, p).compile_detector_sampler(seed=s).sample(1500, bit_packed=True)
            for s, p in enumerate((1e-3, 5e-3, 2e-2))]
    rows.append(np.packbits(rng.random((1500, 24)) < 0.3, axis=1, bitorder="little"))
    flips = 0
    for row in np.concatenate(rows):
        payload = row.tobytes() + bytes(rng.integers(0, 256, int(rng.integers(0, 4))).tolist())
        n, got = call(payload)
        want = decode_payload(g, payload)
        assert n == 1 and got == want == fn.python(payload), row
        flips += got[0]
    assert 0 < flips < 6000  # both corrections occur


def test_the_c_refuses_a_short_payload_as_the_python_does():
    n, _ = _c()(b"\x00\x00")
    assert n == -1
    with pytest.raises(ValueError):
        decode_payload(standard_graph("surface3"), b"\x00\x00")


def test_a_single_error_is_corrected_as_matching_corrects_it():
    """Every single error mechanism of the model: the union-find correction is PyMatching's (at d = 3
    both correct every weight-one error)."""
    pymatching = pytest.importorskip("pymatching")
    from twin.qec.decoders.registry import build
    c = memory_circuit("surface", 3, 3, 1e-3)
    dem = c.detector_error_model(decompose_errors=True)
    m = pymatching.Matching.from_detector_error_model(dem)
    uf = build("union_find", c, name="uf")
    shots = []
    for inst in dem.flattened():
        if inst.type != "error":
            continue
        ev = np.zeros(c.num_detectors, bool)
        for t in inst.targets_copy():
            if t.is_relative_detector_id():
                ev[t.val] ^= True
        shots.append(ev)
    ev = np.array(shots)
    packed = np.packbits(ev, axis=1, bitorder="little")
    assert np.array_equal(uf.decode_shots_bit_packed(packed),
                          m.decode_batch(packed, bit_packed_shots=True, bit_packed_predictions=True))


def test_the_graph_merges_parallel_errors_and_keeps_the_boundary_last():
    g = for_circuit(memory_circuit("surface", 3, 3, 1e-3))
    pairs = list(zip(g.u.tolist(), g.v.tolist()))
    assert pairs == sorted(set(pairs)) and all(a < b <= g.n_detectors for a, b in pairs)
    assert (g.length >= 1).all() and g.adj_start[-1] == 2 * g.n_edges
    assert any(b == g.n_detectors for _, b in pairs)  # boundary edges


@pytest.mark.parametrize("backend", ["shm", "cuda"])
def test_the_live_consumers_serve_the_union_find_decoder_as_the_reference(backend):
    """The shm consumer's and the cuda kernel's dispatch tables hold decode_uf_surface3 (19): every
    reply to 600 sampled syndromes is the Python reference's (the cuda case skips without a GPU)."""
    from hw_bridge.endpoint import BridgeSettings
    from twin.exchange.encoding import get_encoding
    if backend == "cuda":
        from hw_bridge.cuda import CudaEndpoint, gpu_available
        ok, why = gpu_available()
        if not ok:
            pytest.skip(f"no GPU for the cuda backend: {why}")
        ep = CudaEndpoint(BridgeSettings("cuda", timeout_ns=2_000_000_000))
    else:
        from hw_bridge.shm import ShmEndpoint
        ep = ShmEndpoint(BridgeSettings("shm", timeout_ns=2_000_000_000))
    enc, g = get_encoding("classic"), standard_graph("surface3")
    det = memory_circuit("surface", 3, 3, 2e-2).compile_detector_sampler(seed=5).sample(600, bit_packed=True)
    slot = -(-enc.slot_bytes(64) // 16) * 16
    with ep:
        ep.open(slot, 8, "classic")
        for seq, row in enumerate(det, start=1):
            payload = row.tobytes() + bytes(61)
            image = bytearray(enc.slot_bytes(len(payload)))
            for off, d in enc.writes(seq, payload, function=C.FUNCTION_DECODE_UF_SURFACE3):
                image[off:off + len(d)] = d
            buf = bytearray(ep.exchange(seq, bytes(image)).data)
            h = enc.header(buf, 0)
            assert (h.seq, h.function, h.flags) == (seq, 19, 0)
            assert enc.payload(buf, 0) == decode_payload(g, payload)
