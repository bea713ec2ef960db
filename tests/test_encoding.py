"""twin.exchange.encoding: the classic and per-piece message encodings.

The byte layouts checked here are the documented contract (seeds, Figure 4, and the module
docstring): classic = payload, then an 8-byte publish word (seq u32, length u16, function u16,
little-endian) at the slot start written last; per-piece = 16-byte pieces of a u32 sequence
number and 12 payload bytes. The tests decode with int.from_bytes, not with the module's structs.
"""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from twin.exchange import CLASSIC, PER_PIECE, get_encoding

WORD = 8          # classic publish word
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

def test_classic_writes_data_first_and_the_publish_word_last():
    payload = bytes(range(64))
    writes = CLASSIC.writes(7, payload, function=3)
    assert len(writes) == 2
    (o_data, data), (o_word, word) = writes
    assert (o_data, data) == (WORD, payload)
    assert o_word == 0 and len(word) == WORD
    assert (u32(word, 0), u16(word, 4), u16(word, 6)) == (7, 64, 3)


def test_per_piece_every_piece_carries_the_sequence_number():
    payload = bytes(range(1, 65))                  # 64 bytes -> ceil(64 / 12) = 6 pieces
    writes = PER_PIECE.writes(0xDEADBEEF, payload)
    assert len(writes) == 1                        # one burst, no separate publish word
    off, burst = writes[0]
    assert off == 0 and len(burst) == 6 * PIECE
    for i in range(6):
        assert u32(burst, i * PIECE) == 0xDEADBEEF
        assert burst[i * PIECE + 4:(i + 1) * PIECE] == (payload[i * DATA:(i + 1) * DATA] + bytes(DATA))[:DATA]
    # the last piece holds bytes 60..63 and eight zero bytes of padding
    assert burst[5 * PIECE + 4:] == payload[60:] + bytes(8)


@pytest.mark.parametrize("n, classic, per_piece", [(1, 9, 16), (12, 20, 16), (13, 21, 32), (64, 72, 96),
                                                   (1792, 1800, 150 * 16)])
def test_slot_bytes(n, classic, per_piece):
    assert CLASSIC.slot_bytes(n) == classic
    assert PER_PIECE.slot_bytes(n) == per_piece


@settings(max_examples=60, deadline=None)
@given(n=st.integers(min_value=1, max_value=4096))
def test_slot_bytes_property(n):
    assert CLASSIC.slot_bytes(n) == WORD + n
    pieces = -(-n // DATA)
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
    assert not CLASSIC.ready(buf, base, seq, n)
    apply(buf, base, [(o_data, data)])
    assert not CLASSIC.ready(buf, base, seq, n)    # all data landed, no publish word yet
    apply(buf, base, [(o_word, word)])
    assert CLASSIC.ready(buf, base, seq, n)
    assert CLASSIC.payload(buf, base, n) == payload
    # a stale publish word (the slot's previous message) is not this message
    assert not CLASSIC.ready(buf, base, seq + 1 if seq < 2**32 - 1 else seq - 1, n)


@settings(max_examples=60, deadline=None)
@given(payload=payloads, seq=st.integers(min_value=17, max_value=2**32 - 1), data=st.data())
def test_per_piece_one_stale_piece_means_not_ready(payload, seq, data):
    n = len(payload)
    buf = bytearray(PER_PIECE.slot_bytes(n))
    # the slot holds the previous message that used it (seq - 16) ...
    apply(buf, 0, PER_PIECE.writes(seq - 16, bytes(reversed(payload))))
    assert not PER_PIECE.ready(buf, 0, seq, n)
    # ... the new message lands ...
    apply(buf, 0, PER_PIECE.writes(seq, payload))
    assert PER_PIECE.ready(buf, 0, seq, n)
    assert PER_PIECE.payload(buf, 0, n) == payload
    # ... but any one piece still carrying the old sequence number makes it incomplete.
    i = data.draw(st.integers(min_value=0, max_value=PER_PIECE.pieces(n) - 1))
    buf[i * PIECE:i * PIECE + 4] = (seq - 16).to_bytes(4, "little")
    assert not PER_PIECE.ready(buf, 0, seq, n)


def test_readiness_looks_only_at_its_own_slot():
    for enc in (CLASSIC, PER_PIECE):
        slot = enc.slot_bytes(64)
        buf = bytearray(2 * slot)
        apply(buf, slot, enc.writes(5, bytes(64)))
        assert enc.ready(buf, slot, 5, 64)
        assert not enc.ready(buf, 0, 5, 64)


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
    assert enc.ready(buf, base, seq, n)
    assert enc.payload(buf, base, n) == payload
    # nothing outside the slot was touched
    assert buf[:base] == b"\xA5" * base
    assert buf[base + slot:] == b"\xA5" * (len(buf) - base - slot)
    if name == "classic":
        assert (u32(buf, base), u16(buf, base + 4), u16(buf, base + 6)) == (seq, n, fid)


@pytest.mark.parametrize("seq", [0, -1, 2**32, 2**40])
@pytest.mark.parametrize("enc", [CLASSIC, PER_PIECE], ids=["classic", "per_piece"])
def test_bad_sequence_numbers_raise(enc, seq):
    with pytest.raises(ValueError):
        enc.writes(seq, b"abc")


def test_sequence_number_limits_are_accepted():
    for enc in (CLASSIC, PER_PIECE):
        enc.writes(1, b"x")
        enc.writes(2**32 - 1, b"x")


def test_classic_payload_must_fit_the_length_field():
    CLASSIC.writes(1, bytes(2**16 - 1))
    with pytest.raises(ValueError):
        CLASSIC.writes(1, bytes(2**16))


def test_get_encoding():
    assert get_encoding("classic") is CLASSIC
    assert get_encoding("per_piece") is PER_PIECE
    assert not CLASSIC.per_piece and PER_PIECE.per_piece
    with pytest.raises(ValueError):
        get_encoding("per-piece")
