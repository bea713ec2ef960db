"""The device runtime library (twin/runtime/c/qrt.h) through its ctypes binding.

The producer side is Python: requests are written with twin.exchange.encoding (the Python side of
the contract), and the C consumer's replies are decoded both with encoding.py and with plain
int.from_bytes at the contract's offsets (classic: header {seq u32 @0, function u16 @4, length
u16 @6, flags u32 @8, reserved u32 @12}, payload @16; per-piece: 16-byte pieces {seq u32, 12
bytes}, piece 0 = header fields). Capacities follow from the layout: a classic slot of S bytes
holds S - 16 payload bytes, a per-piece slot (S / 16 - 1) * 12.
"""
from __future__ import annotations

import ctypes
import shutil
import subprocess
from collections import deque
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from twin.exchange import CLASSIC, PER_PIECE
from twin.exchange import contract as C
from twin.runtime import native
from twin.runtime.native import QRT_FN, Msg, NativeDeviceQueue, NativeEndpoint, NativeQueue, NativeSignal, QrtError

C_DIR = Path(native.__file__).resolve().parent / "c"
ENC = {"classic": CLASSIC, "per_piece": PER_PIECE}
OK, UNKNOWN, BAD_LENGTH, FAILED = 0, 1, 2, 3   # contract.yaml status values
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def u32(b, off: int) -> int:
    return int.from_bytes(bytes(b[off:off + 4]), "little")


def u16(b, off: int) -> int:
    return int.from_bytes(bytes(b[off:off + 2]), "little")


def cap_of(slot_bytes: int, enc: str) -> int:
    return slot_bytes - 16 if enc == "classic" else (slot_bytes // 16 - 1) * 12


def apply(buf: bytearray, base: int, writes) -> None:
    for off, data in writes:
        buf[base + off:base + off + len(data)] = data


def post(buf: bytearray, enc: str, slot_bytes: int, slot: int, seq: int, payload: bytes,
         function: int = 0, flags: int = 0) -> None:
    apply(buf, slot * slot_bytes, ENC[enc].writes(seq, payload, function=function, flags=flags))


def reply_ready(buf: bytearray, enc: str, slot_bytes: int, slot: int, seq: int) -> bool:
    return ENC[enc].ready(buf, slot * slot_bytes, seq, limit=slot_bytes)


def decode_reply(buf: bytearray, enc: str, slot_bytes: int, slot: int):
    """(seq, function, length, status, payload) decoded at the contract's offsets, independently
    of encoding.py; cross-checked against encoding.py."""
    base = slot * slot_bytes
    seq, function, length, status = u32(buf, base), u16(buf, base + 4), u16(buf, base + 6), u32(buf, base + 8)
    assert u32(buf, base + 12) == 0                                   # reserved
    if enc == "classic":
        payload = bytes(buf[base + 16:base + 16 + length])
    else:
        payload = b"".join(bytes(buf[base + 16 * i + 4:base + 16 * i + 16]) for i in range(1, 1 + -(-length // 12)))
        payload = payload[:length]
        for i in range(1, 1 + -(-length // 12)):
            assert u32(buf, base + 16 * i) == seq                     # every piece carries seq
    h = ENC[enc].header(buf, base)
    assert (h.seq, h.function, h.length, h.flags) == (seq, function, length, status)
    assert ENC[enc].payload(buf, base) == payload
    return seq, function, length, status, payload


# ---------------------------------------------------------------------------------------------
# the library itself
# ---------------------------------------------------------------------------------------------

def test_library_is_built_from_these_sources_and_this_contract():
    lib = native.library()
    assert lib.qrt_build_id().decode() == native.source_build_id()
    assert lib.qrt_version() & 0xFFFF == C.VERSION
    assert lib.qrt_sizeof(native.SIZEOF_MSG) == 32 == ctypes.sizeof(Msg)
    assert lib.qrt_sizeof(native.SIZEOF_SIGNAL) == 4
    assert lib.qrt_sizeof(99) == 0


def test_private_build_of_the_current_sources(tmp_path, monkeypatch):
    """Without an up-to-date installed extension, native.py compiles the sources into a cache."""
    if native._compiler() is None:
        pytest.skip("no C compiler on PATH")
    monkeypatch.setenv("TWIN_CACHE_DIR", str(tmp_path))
    bid = native.source_build_id()
    path = native._build_private(bid)
    assert path == tmp_path / f"qrt-{bid}.so"
    lib = ctypes.CDLL(str(path))
    lib.qrt_build_id.restype = ctypes.c_char_p
    assert lib.qrt_build_id().decode() == bid
    assert native._build_private(bid) == path                # cached: built once per build id


@pytest.mark.parametrize("slot_bytes", [32, 48, 64, 256, 4096])
@pytest.mark.parametrize("enc", ["classic", "per_piece"])
def test_capacity_follows_from_the_layout(slot_bytes, enc):
    assert native.library().qrt_capacity(slot_bytes, C.ENCODINGS[enc]) == cap_of(slot_bytes, enc)


def test_capacity_is_capped_by_the_16_bit_length_field():
    assert native.library().qrt_capacity(1 << 20, 0) == 65535
    assert native.library().qrt_capacity(1 << 20, 1) == 65535


@pytest.mark.parametrize("slot_bytes, slots, enc, code", [
    (48, 2, 0, 0),
    (40, 2, 0, -2),                # not a multiple of 16
    (16, 2, 0, -2),                # below the contract's min_slot_bytes (32)
    (0, 2, 0, -2),
    (64, 0, 0, -3),
    (64, C.MAX_SLOTS, 1, 0),
    (64, C.MAX_SLOTS + 1, 0, -3),
    (64, 2, 2, -4),                # no encoding 2
])
def test_queue_geometry_is_validated(slot_bytes, slots, enc, code):
    lib = native.library()
    mem = (ctypes.c_uint64 * 2)()                            # qrt_queue_init does not touch the memory
    q = native.Queue()
    assert lib.qrt_queue_init(ctypes.byref(q), mem, slot_bytes, slots, enc) == code
    if code == 0:
        assert (q.slot_bytes, q.slots, q.encoding, q.next_seq, q.next_slot) == (slot_bytes, slots, enc, 1, 0)


def test_misaligned_queue_memory_is_refused():
    buf = bytearray(8 * 64 + 4)
    with pytest.raises(QrtError) as e:
        NativeQueue(memoryview(buf)[1:], 64, 8)
    assert e.value.code == -5


def test_request_and_reply_queues_need_the_same_slot_count():
    lib = native.library()
    a, b = (ctypes.c_uint64 * 64)(), (ctypes.c_uint64 * 64)()
    req, rep = native.Queue(), native.Queue()
    assert lib.qrt_queue_init(ctypes.byref(req), a, 64, 4, 0) == 0
    assert lib.qrt_queue_init(ctypes.byref(rep), b, 64, 2, 0) == 0
    ep = (ctypes.c_uint64 * 128)()
    assert lib.qrt_endpoint_init(ep, ctypes.byref(req), ctypes.byref(rep), None) == -3
    assert lib.qrt_endpoint_init(ep, ctypes.byref(req), ctypes.byref(req), None) == 0
    pp = native.Queue()
    assert lib.qrt_queue_init(ctypes.byref(pp), b, 64, 4, 1) == 0
    assert lib.qrt_endpoint_init(ep, ctypes.byref(req), ctypes.byref(pp), None) == -9   # per-piece needs a stage


def test_buffers_too_small_or_read_only_are_refused():
    with pytest.raises(ValueError, match="needs 256"):
        NativeEndpoint(bytearray(255), bytearray(256), 64, 4)
    with pytest.raises(TypeError, match="writable"):
        NativeEndpoint(bytes(256), bytearray(256), 64, 4)


# ---------------------------------------------------------------------------------------------
# requests become visible only when complete
# ---------------------------------------------------------------------------------------------

def test_classic_request_is_seen_only_after_its_sequence_word():
    sb, slots = 64, 2
    req, rep = bytearray(sb * slots), bytearray(sb * slots)
    ep = NativeEndpoint(req, rep, sb, slots, "classic")
    payload = bytes(range(40))
    (o_data, data), (o_seq, word) = CLASSIC.writes(1, payload, function=0, flags=C.FLAGS["last"])
    assert ep.next() is None
    req[o_data:o_data + len(data)] = data                    # header fields + payload landed
    assert ep.next() is None
    req[o_seq:o_seq + len(word)] = word                      # the sequence word, last
    m = ep.next()
    assert m is not None
    assert (m.seq, m.slot, m.function, m.length, m.flags) == (1, 0, 0, 40, C.FLAGS["last"])
    assert ep.read(m) == payload
    assert ep.read(m, 7) == payload[:7]
    assert ep.cursor() == (2, 1)
    assert ep.next() is None                                 # message 2 has not landed


def test_classic_stale_sequence_word_is_not_ready():
    sb, slots = 64, 1
    req, rep = bytearray(sb), bytearray(sb)
    ep = NativeEndpoint(req, rep, sb, slots, "classic", first_seq=5)
    post(req, "classic", sb, 0, 4, b"old")                    # the previous message in this slot
    assert ep.next() is None
    post(req, "classic", sb, 0, 5, b"new")
    assert ep.read(ep.next()) == b"new"


@given(payload=st.binary(min_size=0, max_size=72), order=st.randoms(use_true_random=False))
@FAST
def test_per_piece_request_is_seen_only_when_every_piece_has_landed(payload, order):
    sb, seq = 128, 9                                         # 7 pieces: 1 header + up to 6 x 12 bytes
    req, rep = bytearray(sb), bytearray(sb)
    ep = NativeEndpoint(req, rep, sb, 1, "per_piece", first_seq=seq)
    [(off, burst)] = PER_PIECE.writes(seq, payload, function=0)
    pieces = [burst[i:i + 16] for i in range(0, len(burst), 16)]
    idx = list(range(len(pieces)))
    order.shuffle(idx)
    for n, i in enumerate(idx):
        assert ep.next() is None, f"ready after {n} of {len(pieces)} pieces"
        req[16 * i:16 * i + 16] = pieces[i]
    m = ep.next()
    assert m is not None and m.length == len(payload) and ep.read(m) == payload


def test_per_piece_stale_piece_is_not_ready():
    sb = 96
    req, rep = bytearray(sb), bytearray(sb)
    ep = NativeEndpoint(req, rep, sb, 1, "per_piece", first_seq=3)
    payload = bytes(range(30))                               # pieces 0..3
    post(req, "per_piece", sb, 0, 3, payload)
    req[2 * 16:2 * 16 + 4] = (2).to_bytes(4, "little")       # piece 2 still holds the old message's seq
    assert ep.next() is None
    req[2 * 16:2 * 16 + 4] = (3).to_bytes(4, "little")
    assert ep.read(ep.next()) == payload


def test_per_piece_torn_header_is_not_ready():
    sb = 64                                                  # 4 pieces: room for 36 payload bytes
    req, rep = bytearray(sb), bytearray(sb)
    ep = NativeEndpoint(req, rep, sb, 1, "per_piece")
    for i in range(4):
        req[16 * i:16 * i + 4] = (1).to_bytes(4, "little")   # every piece says seq 1 ...
    req[6:8] = (37).to_bytes(2, "little")                    # ... but the length needs a 5th piece
    assert ep.next() is None
    assert not PER_PIECE.ready(req, 0, 1, limit=sb)          # encoding.py agrees
    req[6:8] = (36).to_bytes(2, "little")
    assert ep.next() is not None


# ---------------------------------------------------------------------------------------------
# echo, replies, dispatch
# ---------------------------------------------------------------------------------------------

@given(enc=st.sampled_from(["classic", "per_piece"]), slot_bytes=st.sampled_from([32, 48, 64, 160]),
       data=st.data(), flags=st.integers(0, 2**32 - 1), seq=st.integers(1, 2**32 - 1))
@FAST
def test_echo_round_trip(enc, slot_bytes, data, flags, seq):
    payload = data.draw(st.binary(max_size=cap_of(slot_bytes, enc)))
    req, rep = bytearray(slot_bytes), bytearray(slot_bytes)
    ep = NativeEndpoint(req, rep, slot_bytes, 1, enc, first_seq=seq)
    assert not ep.dispatch_one()
    post(req, enc, slot_bytes, 0, seq, payload, function=0, flags=flags)
    assert ep.dispatch_one()
    assert reply_ready(rep, enc, slot_bytes, 0, seq)
    assert decode_reply(rep, enc, slot_bytes, 0) == (seq, 0, len(payload), OK, payload)
    assert not ep.dispatch_one()                             # served once


@pytest.mark.parametrize("req_enc, rep_enc", [("classic", "per_piece"), ("per_piece", "classic")])
def test_mixed_encodings(req_enc, rep_enc):
    sb, slots = 64, 2
    req, rep = bytearray(sb * slots), bytearray(sb * slots)
    ep = NativeEndpoint(req, rep, sb, slots, req_enc, reply_encoding=rep_enc)
    rev = QRT_FN(lambda i, n, o, cap: _py_reverse(i, n, o, cap))
    ep.register(1, rev)
    for k, (fn, payload) in enumerate([(0, b"abc" * 10), (1, bytes(range(33))), (0, b"")], start=1):
        post(req, req_enc, sb, (k - 1) % slots, k, payload, function=fn)
        assert ep.dispatch_one()
        want = payload if fn == 0 else payload[::-1]
        assert decode_reply(rep, rep_enc, sb, (k - 1) % slots) == (k, fn, len(want), OK, want)


def _py_reverse(i, n, o, cap):
    if n > cap:
        return -1
    data = ctypes.string_at(i, n)
    ctypes.memmove(o, data[::-1], n)
    return n


@pytest.mark.parametrize("enc", ["classic", "per_piece"])
def test_reply_is_invisible_until_complete(enc):
    sb, slots = 64, 1
    req, rep = bytearray(sb), bytearray(sb)
    post(rep, enc, sb, 0, 1, b"previous reply")              # the producer has consumed reply 1
    before = bytes(rep)
    ep = NativeEndpoint(req, rep, sb, slots, enc, first_seq=2)
    post(req, enc, sb, 0, 2, b"request", function=7)
    m = ep.next()
    ep.append(m, b"hello, ")
    ep.append(m, b"world")
    assert m.reply_len == 12
    assert u32(rep, 0) == 1 and not reply_ready(rep, enc, sb, 0, 2)
    if enc == "per_piece":
        assert bytes(rep) == before                          # staged: the reply slot is untouched
    ep.complete(m, 0)
    assert reply_ready(rep, enc, sb, 0, 2)
    assert decode_reply(rep, enc, sb, 0) == (2, 7, 12, OK, b"hello, world")
    with pytest.raises(QrtError) as e:
        ep.complete(m, 0)
    assert e.value.code == -8
    with pytest.raises(QrtError) as e:
        ep.append(m, b"x")
    assert e.value.code == -8


@pytest.mark.parametrize("enc", ["classic", "per_piece"])
def test_append_past_the_reply_slot_is_refused_and_appends_nothing(enc):
    sb = 64
    req, rep = bytearray(sb), bytearray(sb)
    ep = NativeEndpoint(req, rep, sb, 1, enc)
    post(req, enc, sb, 0, 1, b"")
    m = ep.next()
    ep.append(m, bytes(cap_of(sb, enc) - 1))
    with pytest.raises(QrtError) as e:
        ep.append(m, b"ab")
    assert e.value.code == -6 and m.reply_len == cap_of(sb, enc) - 1
    ep.append(m, b"z")
    ep.complete(m, 0)
    assert decode_reply(rep, enc, sb, 0)[4] == bytes(cap_of(sb, enc) - 1) + b"z"


@pytest.mark.parametrize("enc", ["classic", "per_piece"])
def test_unknown_function_gets_an_empty_reply_with_its_status(enc):
    sb = 64
    req, rep = bytearray(sb * 2), bytearray(sb * 2)
    ep = NativeEndpoint(req, rep, sb, 2, enc)
    post(req, enc, sb, 0, 1, b"payload", function=5)          # nothing registered at 5
    post(req, enc, sb, 1, 2, b"payload", function=4000)       # beyond the dispatch table
    assert ep.dispatch_one() and ep.dispatch_one()
    assert decode_reply(rep, enc, sb, 0) == (1, 5, 0, UNKNOWN, b"")
    assert decode_reply(rep, enc, sb, 1) == (2, 4000, 0, UNKNOWN, b"")


def test_function_ids_that_cannot_be_registered():
    ep = NativeEndpoint(bytearray(64), bytearray(64), 64, 1)
    for fid in (0, native.MAX_FUNCTIONS):
        with pytest.raises(QrtError) as e:
            ep.register(fid, QRT_FN(lambda i, n, o, c: 0))
        assert e.value.code == -7


def test_python_callback_failure_and_overlong_replies():
    sb = 64
    req, rep = bytearray(sb * 4), bytearray(sb * 4)
    ep = NativeEndpoint(req, rep, sb, 4, "classic")
    ep.register(1, QRT_FN(lambda i, n, o, cap: -1))
    ep.register(2, QRT_FN(lambda i, n, o, cap: cap + 1))
    ep.register(3, QRT_FN(lambda i, n, o, cap: (ctypes.memmove(o, b"OK", 2), 2)[1]))
    for k, fn in enumerate([1, 2, 3], start=1):
        post(req, "classic", sb, k - 1, k, b"x", function=fn)
    assert ep.dispatch_one() and ep.dispatch_one() and ep.dispatch_one()
    assert decode_reply(rep, "classic", sb, 0) == (1, 1, 0, FAILED, b"")
    assert decode_reply(rep, "classic", sb, 1) == (2, 2, 0, BAD_LENGTH, b"")
    assert decode_reply(rep, "classic", sb, 2) == (3, 3, 2, OK, b"OK")
    ep.register(3, None)                                     # removed: unknown again
    post(req, "classic", sb, 3, 4, b"x", function=3)
    assert ep.dispatch_one()
    assert decode_reply(rep, "classic", sb, 3) == (4, 3, 0, UNKNOWN, b"")


def test_classic_request_longer_than_its_slot_gets_bad_length():
    sb = 64
    req, rep = bytearray(sb), bytearray(sb)
    ep = NativeEndpoint(req, rep, sb, 1, "classic")
    req[4:8] = (0).to_bytes(2, "little") + (49).to_bytes(2, "little")   # 49 > 64 - 16
    req[0:4] = (1).to_bytes(4, "little")
    assert ep.dispatch_one()
    assert decode_reply(rep, "classic", sb, 0) == (1, 0, 0, BAD_LENGTH, b"")


def test_echo_longer_than_the_reply_slot_gets_bad_length():
    req, rep = bytearray(128), bytearray(32)
    ep = NativeEndpoint(req, rep, 128, 1, "classic", reply_slot_bytes=32)
    post(req, "classic", 128, 0, 1, bytes(17))               # reply slot holds 16
    assert ep.dispatch_one()
    assert decode_reply(rep, "classic", 32, 0) == (1, 0, 0, BAD_LENGTH, b"")


TEST_FUNCTIONS_C = r"""
#include <stdint.h>
int32_t t_reverse(const uint8_t *in, uint32_t n, uint8_t *out, uint32_t cap)
{
    uint32_t i;
    if (n > cap) return -1;
    for (i = 0; i < n; ++i) out[i] = in[n - 1 - i];
    return (int32_t)n;
}
/* Reply: the sum of the request bytes, u32 little-endian. */
int32_t t_sum32(const uint8_t *in, uint32_t n, uint8_t *out, uint32_t cap)
{
    uint32_t s = 0, i;
    if (cap < 4) return -1;
    for (i = 0; i < n; ++i) s += in[i];
    for (i = 0; i < 4; ++i) out[i] = (uint8_t)(s >> (8 * i));
    return 4;
}
int32_t t_fail(const uint8_t *in, uint32_t n, uint8_t *out, uint32_t cap)
{
    (void)in; (void)n; (void)out; (void)cap;
    return -5;
}
"""


@pytest.fixture(scope="module")
def c_functions(tmp_path_factory):
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        pytest.skip("no C compiler (gcc/cc) on PATH to build the test functions")
    d = tmp_path_factory.mktemp("qrt_fns")
    (d / "fns.c").write_text(TEST_FUNCTIONS_C)
    subprocess.run([gcc, "-std=c11", "-O2", "-fPIC", "-shared", "-Wall", "-Werror", str(d / "fns.c"),
                    "-o", str(d / "fns.so")], check=True, capture_output=True)
    return ctypes.CDLL(str(d / "fns.so"))


@pytest.mark.parametrize("enc", ["classic", "per_piece"])
def test_dispatch_to_registered_c_functions(c_functions, enc):
    sb, slots = 96, 4
    req, rep = bytearray(sb * slots), bytearray(sb * slots)
    ep = NativeEndpoint(req, rep, sb, slots, enc)
    addr = {name: ctypes.cast(getattr(c_functions, name), ctypes.c_void_p).value
            for name in ("t_reverse", "t_sum32", "t_fail")}
    ep.register(1, addr["t_reverse"])
    ep.register(2, addr["t_sum32"])
    ep.register(63, addr["t_fail"])
    payload = bytes((7 * i + 3) % 256 for i in range(cap_of(sb, enc)))
    cases = [(1, payload, payload[::-1], OK), (2, payload, sum(payload).to_bytes(4, "little"), OK),
             (63, b"abc", b"", FAILED), (0, payload, payload, OK)]
    for k, (fn, body, want, status) in enumerate(cases, start=1):
        post(req, enc, sb, (k - 1) % slots, k, body, function=fn)
        assert ep.dispatch_one()
        assert decode_reply(rep, enc, sb, (k - 1) % slots) == (k, fn, len(want), status, want)


# ---------------------------------------------------------------------------------------------
# slots, wrap-around, out-of-order completion
# ---------------------------------------------------------------------------------------------

@given(enc=st.sampled_from(["classic", "per_piece"]), slots=st.integers(1, 4), n=st.integers(1, 40),
       data=st.data())
@FAST
def test_slots_wrap_around_with_messages_in_flight(enc, slots, n, data):
    """The producer keeps up to `slots` requests outstanding and posts message k only after reply
    k - slots was consumed; the consumer claims what has landed and completes in any order."""
    sb = 64
    req, rep = bytearray(sb * slots), bytearray(sb * slots)
    ep = NativeEndpoint(req, rep, sb, slots, enc)
    payloads = {k: data.draw(st.binary(max_size=cap_of(sb, enc))) for k in range(1, n + 1)}
    posted, consumed, next_claim, claimed = 0, 0, 1, []
    while consumed < n:
        while posted < n and posted - consumed < slots:
            posted += 1
            post(req, enc, sb, (posted - 1) % slots, posted, payloads[posted], function=posted % 3)
        while (m := ep.next()) is not None:
            assert (m.seq, m.slot, m.length) == (next_claim, (next_claim - 1) % slots, len(payloads[next_claim]))
            next_claim += 1
            claimed.append(m)
        order = data.draw(st.permutations(range(len(claimed))))
        for i in order:
            m = claimed[i]
            ep.append(m, ep.read(m)[::-1])
            ep.complete(m, 0)
        claimed = []
        while consumed < posted and reply_ready(rep, enc, sb, consumed % slots, consumed + 1):
            consumed += 1
            p = payloads[consumed]
            assert decode_reply(rep, enc, sb, (consumed - 1) % slots) == (consumed, consumed % 3, len(p), OK, p[::-1])
    assert ep.next() is None


@pytest.mark.parametrize("slots", [1, 2, 3, 4])
@pytest.mark.parametrize("enc", ["classic", "per_piece"])
def test_lockstep_many_messages(enc, slots):
    sb = 48
    req, rep = bytearray(sb * slots), bytearray(sb * slots)
    ep = NativeEndpoint(req, rep, sb, slots, enc)
    for k in range(1, 301):
        payload = bytes((k + i) % 256 for i in range(k % (cap_of(sb, enc) + 1)))
        post(req, enc, sb, (k - 1) % slots, k, payload)
        assert ep.dispatch_one()
        assert not ep.dispatch_one()
        assert decode_reply(rep, enc, sb, (k - 1) % slots) == (k, 0, len(payload), OK, payload)


@pytest.mark.parametrize("enc", ["classic", "per_piece"])
def test_sequence_numbers_wrap_past_2_32_and_slots_stay_in_order(enc):
    """After seq 0xFFFFFFFF comes 1 (0 means empty); the slot follows the message's ordinal."""
    sb, slots = 64, 3
    req, rep = bytearray(sb * slots), bytearray(sb * slots)
    ep = NativeEndpoint(req, rep, sb, slots, enc, first_seq=0xFFFFFFFE)
    for ordinal, seq in enumerate([0xFFFFFFFE, 0xFFFFFFFF, 1, 2, 3]):
        slot = ordinal % slots
        assert ep.cursor() == (seq, slot)
        post(req, enc, sb, slot, seq, seq.to_bytes(4, "little"))
        assert ep.dispatch_one()
        assert decode_reply(rep, enc, sb, slot) == (seq, 0, 4, OK, seq.to_bytes(4, "little"))


# ---------------------------------------------------------------------------------------------
# the C producer (qrt_post / qrt_peek) agrees with encoding.py
# ---------------------------------------------------------------------------------------------

@given(enc=st.sampled_from(["classic", "per_piece"]), data=st.data(), function=st.integers(0, 0xFFFF),
       flags=st.integers(0, 2**32 - 1), seq=st.integers(1, 2**32 - 1))
@FAST
def test_c_producer_writes_the_bytes_encoding_py_writes(enc, data, function, flags, seq):
    sb = 80
    payload = data.draw(st.binary(max_size=cap_of(sb, enc)))
    ours, theirs = bytearray(sb), bytearray(sb)
    q = NativeQueue(ours, sb, 1, enc, first_seq=seq)
    assert q.peek(0, seq) is None
    m = q.post(payload, function=function, flags=flags)
    post(theirs, enc, sb, 0, seq, payload, function=function, flags=flags)
    used = ENC[enc].slot_bytes(len(payload))
    assert bytes(ours[:used]) == bytes(theirs[:used])
    got = q.peek(0, seq)
    assert got is not None and (got.seq, got.function, got.length, got.flags) == (seq, function, len(payload), flags)
    assert q.read(got) == payload and (m.seq, m.slot) == (seq, 0)
    assert q.next_seq == (seq % 0xFFFFFFFF) + 1


def test_c_producer_refuses_a_payload_longer_than_the_slot():
    q = NativeQueue(bytearray(64), 64, 1, "classic")
    with pytest.raises(QrtError) as e:
        q.post(bytes(49))
    assert e.value.code == -6 and q.next_seq == 1


# ---------------------------------------------------------------------------------------------
# signals and the device queue
# ---------------------------------------------------------------------------------------------

def test_signal_raise_and_wait():
    s = NativeSignal()
    assert s.load() == 0 and s.wait_nb(0) and not s.wait_nb(1)
    assert s.raise_() == 1 and s.raise_(5) == 6
    assert s.wait_nb(6) and s.wait_nb(1) and not s.wait_nb(7)


def test_signal_wait_is_wrap_aware():
    s = NativeSignal(0xFFFFFFFE)
    assert not s.wait_nb(0xFFFFFFFF)
    assert s.raise_(3) == 1                                  # 0xFFFFFFFE + 3 wraps to 1
    assert s.wait_nb(0xFFFFFFFF) and s.wait_nb(1) and not s.wait_nb(2)


@pytest.mark.parametrize("capacity", [0, 3, 6, 2**31 + 1, 2**32 - 1])
def test_device_queue_capacity_must_be_a_power_of_two(capacity):
    lib = native.library()
    dq, items = (ctypes.c_uint64 * 64)(), (Msg * 1)()        # qrt_dq_init does not touch the items
    assert lib.qrt_dq_init(dq, items, capacity) == -1
    with pytest.raises(QrtError):
        NativeDeviceQueue(capacity)


@pytest.mark.parametrize("capacity", [1, 2, 2**31])
def test_device_queue_accepts_powers_of_two(capacity):
    dq, items = (ctypes.c_uint64 * 64)(), (Msg * 1)()
    assert native.library().qrt_dq_init(dq, items, capacity) == 0


def _msg(seq: int) -> Msg:
    m = Msg()
    m.seq, m.slot, m.function, m.length, m.flags, m.reply_len, m.status, m.state = (
        seq, seq % 7, seq % 5, 3 * seq, 0xA5A5A5A5 ^ seq, 0, 0, 1)
    return m


def test_device_queue_order_full_and_empty():
    q = NativeDeviceQueue(4)
    assert q.pop() is None and len(q) == 0
    assert all(q.push(_msg(k)) for k in range(1, 5))
    assert not q.push(_msg(5)) and len(q) == 4               # full
    got = [q.pop() for _ in range(4)]
    assert [bytes(g) for g in got] == [bytes(_msg(k)) for k in range(1, 5)]
    assert q.pop() is None


@given(capacity=st.sampled_from([1, 2, 4, 8]), ops=st.lists(st.booleans(), max_size=200))
@FAST
def test_device_queue_behaves_like_a_bounded_fifo(capacity, ops):
    q, model, k = NativeDeviceQueue(capacity), deque(), 0
    for push in ops:
        if push:
            k += 1
            assert q.push(_msg(k)) == (len(model) < capacity)
            if len(model) < capacity:
                model.append(k)
        else:
            m = q.pop()
            assert (m.seq if m is not None else None) == (model.popleft() if model else None)
        assert len(q) == len(model)


# ---------------------------------------------------------------------------------------------
# concurrency (native threads), standalone and CUDA compilation
# ---------------------------------------------------------------------------------------------

STRESS_C = r"""
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "qrt.h"

/* A producer thread and a consumer served either inline (qrt_dispatch_one) or by a control thread
   that claims requests and hands them through a qrt_dq to a resident worker thread. Idle threads
   yield: the test machine may have fewer cores than spinning threads. */
enum { SB = 64, MAXS = 4 };
typedef struct {
    uint8_t req_mem[SB * MAXS] __attribute__((aligned(16)));
    uint8_t rep_mem[SB * MAXS] __attribute__((aligned(16)));
    uint8_t stage[2 * 64 * MAXS] __attribute__((aligned(16)));
    qrt_endpoint ep;
    qrt_signal stop;
    qrt_dq dq;
    qrt_msg items[2];
    int err;
} ctx_t;

static int32_t xor_fn(const uint8_t *in, uint32_t n, uint8_t *out, uint32_t cap)
{
    uint32_t i;
    if (n > cap) return -1;
    for (i = 0; i < n; ++i) out[i] = in[i] ^ 0x5A;
    return (int32_t)n;
}

static void *inline_consumer(void *arg)
{
    ctx_t *c = (ctx_t *)arg;
    while (!qrt_signal_wait_nb(&c->stop, 1)) {
        int r = qrt_dispatch_one(&c->ep);
        if (r < 0) { c->err = 10; break; }
        if (r == 0) sched_yield();
    }
    return NULL;
}

static void *control(void *arg)
{
    ctx_t *c = (ctx_t *)arg;
    qrt_msg m;
    while (!qrt_signal_wait_nb(&c->stop, 1)) {
        if (qrt_next(&c->ep, &m) != 1) { sched_yield(); continue; }
        while (qrt_dq_push(&c->dq, &m) == 0) {
            if (qrt_signal_wait_nb(&c->stop, 1)) return NULL;
            sched_yield();
        }
    }
    return NULL;
}

static void *worker(void *arg)
{
    ctx_t *c = (ctx_t *)arg;
    qrt_msg m;
    uint8_t buf[64];
    while (!qrt_signal_wait_nb(&c->stop, 1)) {
        if (qrt_dq_pop(&c->dq, &m) != 1) { sched_yield(); continue; }
        uint32_t n = qrt_read(&c->ep, &m, buf, sizeof buf);
        if (n != m.length || m.function != 1) { c->err = 20; return NULL; }
        xor_fn(buf, n, buf, n);
        if (qrt_append(&c->ep, &m, buf, n) != 0 || qrt_complete(&c->ep, &m, 0) != 0) { c->err = 21; return NULL; }
    }
    return NULL;
}

static int run(uint32_t enc, uint32_t slots, int mode, long count)
{
    static ctx_t c;
    qrt_queue rq, pq, prod, back;
    pthread_t t1, t2;
    uint8_t sent[MAXS][64], out[64];
    uint32_t lens[MAXS];
    long posted = 0, consumed = 0;
    memset(&c, 0, sizeof c);
    if (qrt_queue_init(&rq, c.req_mem, SB, slots, enc) || qrt_queue_init(&pq, c.rep_mem, SB, slots, enc) ||
        qrt_endpoint_init(&c.ep, &rq, &pq, c.stage) || qrt_register(&c.ep, 1, xor_fn) ||
        qrt_dq_init(&c.dq, c.items, 2))
        return 1;
    prod = rq; back = pq;                        /* the producer's own views of the same memory */
    qrt_signal_init(&c.stop, 0);
    if (mode == 0) pthread_create(&t1, NULL, inline_consumer, &c);
    else { pthread_create(&t1, NULL, control, &c); pthread_create(&t2, NULL, worker, &c); }
    uint32_t cap = qrt_capacity(SB, enc);
    while (consumed < count && !c.err) {
        while (posted < count && posted - consumed < (long)slots) {
            qrt_msg m;
            uint32_t s = (uint32_t)(posted % slots), n = (uint32_t)((posted * 7) % (cap + 1)), i;
            for (i = 0; i < n; ++i) sent[s][i] = (uint8_t)(posted * 31 + i);
            lens[s] = n;
            if (qrt_post(&prod, &m, 1, 0, sent[s], n) != 0 || m.slot != s) { c.err = 30; break; }
            ++posted;
        }
        qrt_msg r;
        uint32_t s = (uint32_t)(consumed % slots), seq = (uint32_t)(consumed + 1), i;
        if (qrt_peek(&back, s, seq, &r) != 1) { sched_yield(); continue; }
        if (r.flags != 0 || r.function != 1 || r.length != lens[s] ||
            qrt_queue_read(&back, &r, out, sizeof out) != lens[s]) { c.err = 31; break; }
        for (i = 0; i < lens[s]; ++i)
            if (out[i] != (sent[s][i] ^ 0x5A)) { c.err = 32; break; }
        ++consumed;
    }
    qrt_signal_raise(&c.stop, 1);
    pthread_join(t1, NULL);
    if (mode) pthread_join(t2, NULL);
    if (c.err) fprintf(stderr, "enc %u slots %u mode %d: error %d after %ld replies\n", enc, slots, mode, c.err,
    consumed);
    return c.err;
}

int main(int argc, char **argv)
{
    long count = argc > 1 ? atol(argv[1]) : 20000;
    int rc = 0;
    for (uint32_t enc = 0; enc < 2; ++enc)
        for (uint32_t slots = 1; slots <= MAXS; ++slots)
            for (int mode = 0; mode < 2; ++mode)
                rc |= run(enc, slots, mode, count);
    if (!rc) printf("ok\n");
    return rc;
}
"""


def _gcc() -> str:
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc is not on PATH")
    return gcc


@pytest.mark.parametrize("sanitize", [False, True], ids=["plain", "tsan"])
def test_producer_and_consumer_threads_in_c(tmp_path, sanitize):
    """Native threads share the queues; every reply is checked. Under ThreadSanitizer a missing
    acquire/release between a payload and its sequence word is reported as a data race."""
    gcc = _gcc()
    src = tmp_path / "stress.c"
    src.write_text(STRESS_C)
    exe = tmp_path / "stress"
    flags = ["-fsanitize=thread", "-O1", "-g"] if sanitize else ["-O2"]
    res = subprocess.run([gcc, "-std=c11", "-Wall", "-Wextra", *flags, "-pthread", "-I", str(C_DIR), str(src),
                          "-o", str(exe)], capture_output=True, text=True)
    if res.returncode != 0 and sanitize:
        pytest.skip(f"ThreadSanitizer unavailable: {res.stderr.strip()[:200]}")
    assert res.returncode == 0, res.stderr
    run = subprocess.run([str(exe), "2000" if sanitize else "20000"], capture_output=True, text=True, timeout=120,
                         env={"TSAN_OPTIONS": "halt_on_error=1 exitcode=66"})
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stdout + run.stderr


def test_library_compiles_freestanding_with_warnings_as_errors(tmp_path):
    gcc = _gcc()
    res = subprocess.run([gcc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-Wpedantic", "-ffreestanding", "-c",
                          str(C_DIR / "qrt_lib.c"), "-o", str(tmp_path / "qrt_lib.o")], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr


def test_header_compiles_as_cxx(tmp_path):
    gxx = shutil.which("g++")
    if gxx is None:
        pytest.skip("g++ is not on PATH")
    src = tmp_path / "use.cpp"
    src.write_text('#include "qrt.h"\nint main() { qrt_signal s; qrt_signal_init(&s, 0); '
                   'return (int)qrt_signal_raise(&s, 1) - 1; }\n')
    res = subprocess.run([gxx, "-std=c++17", "-Wall", "-Wextra", "-Werror", "-I", str(C_DIR), str(src), "-o",
                          str(tmp_path / "use")], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert subprocess.run([str(tmp_path / "use")]).returncode == 0


def _nvcc() -> str:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc is not on PATH (CUDA toolkit not installed); the CUDA translation units were not compiled")
    return nvcc


def test_persistent_echo_kernel_compiles_with_nvcc(tmp_path):
    nvcc = _nvcc()
    res = subprocess.run([nvcc, "-arch=sm_90", "-O2", "-c", str(C_DIR / "qrt_echo_kernel.cu"), "-o",
                          str(tmp_path / "k.o")], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr


def test_echo_host_program_builds_with_nvcc(tmp_path):
    nvcc = _nvcc()
    res = subprocess.run([nvcc, "-arch=sm_90", "-O2", str(C_DIR / "qrt_echo_host.cu"), "-o",
                          str(tmp_path / "qrt_echo_host")], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
