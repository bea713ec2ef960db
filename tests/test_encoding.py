"""twin.exchange.encoding: the classic and per-piece message encodings.

The byte layouts checked here are the contract (twin/exchange/contract.yaml; seeds, Figure 4):
classic = a 16-byte header (seq u32, function u16, length u16, flags u32, reserved u32,
little-endian) then the payload, with header fields and payload written first and the 4-byte
sequence word last; per-piece = 16-byte pieces of a u32 sequence number and 12 bytes, piece 0
holding the header fields. The tests decode with int.from_bytes, not with the module's structs.
"""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from twin.exchange import CLASSIC, PER_PIECE, get_encoding

HDR = 16          # classic header; the sequence word is its first 4 bytes
SEQ = 4
PIECE = 16        # per-piece: 4-byte sequence + 12 data bytes
DATA = 12


def u32(b: bytes, off: int) -> int:
    return int.from_bytes(b[off:off + 4], "little")


def u16(b: bytes, off: int) -> int:
    return int.from_bytes(b[off:off + 2], "little")


def apply(buf: bytearray, base: int, writes) -> None:
    for off, data in writes:
        buf[base + off:base + off + len(data)] = data


payloads = st.binary(min_size=1, max_size=1024)
seqs = st.integers(min_value=1, max_value=2**32 - 1)


# ---------------------------------------------------------------------------------------------
# layouts
# ---------------------------------------------------------------------------------------------

def test_classic_writes_data_first_and_the_sequence_word_last():
    payload = bytes(range(64))
    writes = CLASSIC.writes(7, payload, function=3, flags=1)
    assert len(writes) == 2
    (o_data, data), (o_word, word) = writes
    assert o_data == SEQ and len(data) == HDR - SEQ + 64
    # function, length, flags, reserved
    assert (u16(data, 0), u16(data, 2), u32(data, 4), u32(data, 8)) == (3, 64, 1, 0)
    assert data[HDR - SEQ:] == payload
    assert o_word == 0 and len(word) == SEQ and u32(word, 0) == 7


def test_per_piece_every_piece_carries_the_sequence_number():
    payload = bytes(range(1, 65))                  # 64 bytes -> header piece + ceil(64 / 12) = 6 pieces
    writes = PER_PIECE.writes(0xDEADBEEF, payload, function=9)
    assert len(writes) == 1                        # one burst, no separate publish word
    off, burst = writes[0]
    assert off == 0 and len(burst) == 7 * PIECE
    for i in range(7):
        assert u32(burst, i * PIECE) == 0xDEADBEEF
    assert (u16(burst, 4), u16(burst, 6), u32(burst, 8)) == (9, 64, 0)   # piece 0: function, length, flags
    for i in range(6):
        p = (i + 1) * PIECE
        assert burst[p + 4:p + PIECE] == (payload[i * DATA:(i + 1) * DATA] + bytes(DATA))[:DATA]
    # the last piece holds bytes 60..63 and eight zero bytes of padding
    assert burst[6 * PIECE + 4:] == payload[60:] + bytes(8)


@pytest.mark.parametrize("n, classic, per_piece", [(1, 17, 32), (12, 28, 32), (13, 29, 48), (64, 80, 112),
                                                   (1792, 1808, 151 * 16)])
def test_slot_bytes(n, classic, per_piece):
    assert CLASSIC.slot_bytes(n) == classic
    assert PER_PIECE.slot_bytes(n) == per_piece


@settings(max_examples=60, deadline=None)
@given(n=st.integers(min_value=1, max_value=4096))
def test_slot_bytes_property(n):
    assert CLASSIC.slot_bytes(n) == HDR + n
    pieces = 1 + -(-n // DATA)
    assert PER_PIECE.pieces(n) == pieces
    assert PER_PIECE.slot_bytes(n) == PIECE * pieces
    # the writes fill exactly the slot
    assert sum(len(d) for _, d in PER_PIECE.writes(1, bytes(n))) == PER_PIECE.slot_bytes(n)
    assert sum(len(d) for _, d in CLASSIC.writes(1, bytes(n))) == CLASSIC.slot_bytes(n)


# ---------------------------------------------------------------------------------------------
# readiness
# ---------------------------------------------------------------------------------------------

@settings(max_examples=60, deadline=None)
@given(payload=payloads, seq=seqs, base_slot=st.integers(min_value=0, max_value=3))
def test_classic_not_ready_until_the_publish_word_lands(payload, seq, base_slot):
    n = len(payload)
    slot = CLASSIC.slot_bytes(n)
    buf = bytearray(4 * slot)
    base = base_slot * slot
    (o_data, data), (o_word, word) = CLASSIC.writes(seq, payload)
    assert not CLASSIC.ready(buf, base, seq)
    apply(buf, base, [(o_data, data)])
    assert not CLASSIC.ready(buf, base, seq)       # all data landed, no sequence word yet
    apply(buf, base, [(o_word, word)])
    assert CLASSIC.ready(buf, base, seq)
    assert CLASSIC.payload(buf, base) == payload
    # a stale sequence word (the slot's previous message) is not this message
    assert not CLASSIC.ready(buf, base, seq + 1 if seq < 2**32 - 1 else seq - 1)


@settings(max_examples=60, deadline=None)
@given(payload=payloads, seq=st.integers(min_value=17, max_value=2**32 - 1), data=st.data())
def test_per_piece_one_stale_piece_means_not_ready(payload, seq, data):
    n = len(payload)
    buf = bytearray(PER_PIECE.slot_bytes(n))
    # the slot holds the previous message that used it (seq - 16) ...
    apply(buf, 0, PER_PIECE.writes(seq - 16, bytes(reversed(payload))))
    assert not PER_PIECE.ready(buf, 0, seq)
    # ... the new message lands ...
    apply(buf, 0, PER_PIECE.writes(seq, payload))
    assert PER_PIECE.ready(buf, 0, seq)
    assert PER_PIECE.payload(buf, 0) == payload
    # ... but any one piece still carrying the old sequence number makes it incomplete.
    i = data.draw(st.integers(min_value=0, max_value=PER_PIECE.pieces(n) - 1))
    buf[i * PIECE:i * PIECE + 4] = (seq - 16).to_bytes(4, "little")
    assert not PER_PIECE.ready(buf, 0, seq)


def test_per_piece_torn_length_is_never_ready():
    buf = bytearray(PER_PIECE.slot_bytes(64))
    apply(buf, 0, PER_PIECE.writes(3, bytes(64)))
    assert PER_PIECE.ready(buf, 0, 3, limit=len(buf))
    buf[6:8] = (4000).to_bytes(2, "little")        # piece 0's length now runs past the slot
    assert not PER_PIECE.ready(buf, 0, 3, limit=len(buf))


def test_readiness_looks_only_at_its_own_slot():
    for enc in (CLASSIC, PER_PIECE):
        slot = enc.slot_bytes(64)
        buf = bytearray(2 * slot)
        apply(buf, slot, enc.writes(5, bytes(64)))
        assert enc.ready(buf, slot, 5)
        assert not enc.ready(buf, 0, 5)


# ---------------------------------------------------------------------------------------------
# round trip and errors
# ---------------------------------------------------------------------------------------------

@settings(max_examples=60, deadline=None)
@given(payload=payloads, seq=seqs, fid=st.integers(min_value=0, max_value=2**16 - 1),
       name=st.sampled_from(["classic", "per_piece"]), base_slot=st.integers(min_value=0, max_value=2))
def test_round_trip(payload, seq, fid, name, base_slot):
    enc = get_encoding(name)
    n = len(payload)
    slot = enc.slot_bytes(n)
    buf = bytearray(b"\xA5" * (3 * slot))          # dirty memory around and under the slot
    base = base_slot * slot
    apply(buf, base, enc.writes(seq, payload, function=fid))
    assert enc.ready(buf, base, seq)
    assert enc.payload(buf, base) == payload
    h = enc.header(buf, base)
    assert (h.seq, h.function, h.length, h.flags) == (seq, fid, n, 0)
    # nothing outside the slot was touched
    assert buf[:base] == b"\xA5" * base
    assert buf[base + slot:] == b"\xA5" * (len(buf) - base - slot)
    assert (u32(buf, base), u16(buf, base + 4), u16(buf, base + 6)) == (seq, fid, n)


@pytest.mark.parametrize("seq", [0, -1, 2**32, 2**40])
@pytest.mark.parametrize("enc", [CLASSIC, PER_PIECE], ids=["classic", "per_piece"])
def test_bad_sequence_numbers_raise(enc, seq):
    with pytest.raises(ValueError):
        enc.writes(seq, b"abc")


def test_sequence_number_limits_are_accepted():
    for enc in (CLASSIC, PER_PIECE):
        enc.writes(1, b"x")
        enc.writes(2**32 - 1, b"x")


@pytest.mark.parametrize("enc", [CLASSIC, PER_PIECE], ids=["classic", "per_piece"])
def test_payload_must_fit_the_length_field(enc):
    enc.writes(1, bytes(2**16 - 1))
    with pytest.raises(ValueError):
        enc.writes(1, bytes(2**16))


def test_get_encoding():
    assert get_encoding("classic") is CLASSIC
    assert get_encoding("per_piece") is PER_PIECE
    assert not CLASSIC.per_piece and PER_PIECE.per_piece
    with pytest.raises(ValueError):
        get_encoding("per-piece")
