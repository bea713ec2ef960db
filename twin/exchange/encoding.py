"""The classic and per-piece encodings of a message in a queue slot, on the generated layout
(:mod:`twin.exchange.contract`, from ``contract.yaml``).

Classic: the slot starts with a 16-byte header (sequence u32, function u16, length u16, flags u32,
reserved u32, little-endian) followed by the payload. The producer writes header fields and payload
first, as one posted write from byte 4, and the 4-byte sequence word last. A reader that sees the
expected sequence number knows the rest has landed (posted writes keep their order on one path). A
classic reply adds a release fence between its data and its sequence ("ready") word.

Per-piece: the slot is a run of 16-byte pieces, each a u32 sequence number and 12 bytes; piece 0
carries the header fields, pieces 1.. carry the payload. Written as one burst; the message is
complete when every piece it needs holds the expected sequence number. No publish word, no fence;
the cost is 4 bytes in every 16 and one extra piece.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from twin.exchange import contract as C

SEQ = struct.Struct("<I")
FIELDS = struct.Struct("<HHII")  # function, length, flags, reserved: header bytes 4..15
HEADER = struct.Struct("<IHHII")
PIECE_BYTES = C.PIECE_BYTES
PIECE_DATA = C.PIECE_FIELDS["data"][1]  # 12
HEADER_BYTES = C.HEADER_BYTES
MAX_LENGTH = 2 ** (8 * C.HEADER_FIELDS["length"][1]) - 1
assert HEADER.size == HEADER_BYTES and SEQ.size + FIELDS.size == HEADER_BYTES == PIECE_BYTES


def slot_offset(seq: int, slots: int, slot_bytes: int) -> int:
    """Byte offset in its queue of the slot that message ``seq`` uses: slot (seq - 1) % slots
    (contract.yaml, queue; sequence numbers start at 1)."""
    return ((seq - 1) % slots) * slot_bytes


@dataclass(frozen=True)
class Header:
    """The header fields of a message."""

    seq: int
    function: int
    length: int
    flags: int


@dataclass(frozen=True)
class Encoding:
    """One message encoding. ``name`` is ``"classic"`` or ``"per_piece"``; ``value`` its code in
    the contract."""

    name: str
    value: int

    @property
    def per_piece(self) -> bool:
        """True for the per-piece encoding."""
        return self.name == "per_piece"

    def pieces(self, nbytes: int) -> int:
        """16-byte pieces of a per-piece message with ``nbytes`` of payload (header piece included)."""
        return 1 + -(-nbytes // PIECE_DATA)

    def slot_bytes(self, nbytes: int) -> int:
        """Bytes a message with ``nbytes`` of payload occupies in its slot."""
        if self.per_piece:
            return self.pieces(nbytes) * PIECE_BYTES
        return HEADER_BYTES + nbytes

    def writes(self, seq: int, payload: bytes, function: int = 0, flags: int = 0) -> list[tuple[int, bytes]]:
        """The posted writes that publish ``payload`` as message ``seq``, in issue order, as
        ``(offset in slot, bytes)``. Classic: header fields and payload, then the sequence word.
        Raises ValueError for a sequence number outside 1..2**32-1 or a payload over 65,535 bytes."""
        if not 0 < seq < 2**32:
            raise ValueError(f"sequence number must be in 1..2**32-1, got {seq}")
        if len(payload) > MAX_LENGTH:
            raise ValueError(f"payload must be at most {MAX_LENGTH} bytes, got {len(payload)}")
        fields = FIELDS.pack(function, len(payload), flags, 0)
        if self.per_piece:
            s = SEQ.pack(seq)
            out = bytearray(s + fields)
            for i in range(0, len(payload), PIECE_DATA):
                chunk = payload[i:i + PIECE_DATA]
                out += s + chunk + bytes(PIECE_DATA - len(chunk))
            return [(0, bytes(out))]
        return [(SEQ.size, fields + bytes(payload)), (0, SEQ.pack(seq))]

    def ready(self, buf: bytearray, base: int, seq: int, limit: int | None = None) -> bool:
        """True when message ``seq`` is complete in the slot at ``base``. Per-piece: piece 0 and
        every payload piece its length needs carry ``seq``; a length that would run past ``limit``
        bytes (the slot size) is a torn header and never ready."""
        if SEQ.unpack_from(buf, base)[0] != seq:
            return False
        if not self.per_piece:
            return True
        n = FIELDS.unpack_from(buf, base + SEQ.size)[1]
        k = self.pieces(n)
        if limit is not None and k * PIECE_BYTES > limit:
            return False
        unpack = SEQ.unpack_from
        for i in range(1, k):
            if unpack(buf, base + i * PIECE_BYTES)[0] != seq:
                return False
        return True

    def header(self, buf: bytearray, base: int) -> Header:
        """The header fields of the slot at ``base`` (classic header, or per-piece piece 0)."""
        seq, function, length, flags, _ = HEADER.unpack_from(buf, base)
        return Header(seq, function, length, flags)

    def payload(self, buf: bytearray, base: int) -> bytes:
        """The payload of the message in the slot at ``base`` (its length from the header)."""
        n = FIELDS.unpack_from(buf, base + SEQ.size)[1]
        if self.per_piece:
            out = bytearray()
            for i in range(1, self.pieces(n)):
                o = base + i * PIECE_BYTES + SEQ.size
                out += buf[o:o + PIECE_DATA]
            return bytes(out[:n])
        o = base + HEADER_BYTES
        return bytes(buf[o:o + n])


CLASSIC = Encoding("classic", C.ENCODINGS["classic"])
PER_PIECE = Encoding("per_piece", C.ENCODINGS["per_piece"])


def get_encoding(name: str) -> Encoding:
    """``"classic"`` or ``"per_piece"``; raises ValueError otherwise."""
    if name == "classic":
        return CLASSIC
    if name == "per_piece":
        return PER_PIECE
    raise ValueError(f"unknown encoding {name!r} (use 'classic' or 'per_piece')")
