"""The classic and per-piece encodings of a message in a queue slot.

Classic: the payload is written first, then one 8-byte publish word (sequence u32, length u16,
function id u16, little-endian) at the slot's start, last. A reader that sees the sequence word
knows the payload has landed (posted writes keep their order on one path). A classic reply adds
a release fence between its data and its ready word.

Per-piece: every 16-byte piece is a u32 sequence number followed by 12 payload bytes, written
as one burst. A reader trusts each piece whose sequence number matches; the message is complete
when all pieces match. No separate publish word, no fence; the cost is 4 bytes in every 16.

The layout here is the minimum the timing model needs; the byte specification of the memory
contract (slot header fields, generated C/Verilog definitions) supersedes it.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

PUBLISH_WORD = struct.Struct("<IHH")  # seq, length, function id
PIECE_BYTES = 16
PIECE_SEQ = struct.Struct("<I")
PIECE_DATA = PIECE_BYTES - PIECE_SEQ.size  # 12


@dataclass(frozen=True)
class Encoding:
    """One message encoding. ``name`` is ``"classic"`` or ``"per_piece"``."""

    name: str

    @property
    def per_piece(self) -> bool:
        """True for the per-piece encoding."""
        return self.name == "per_piece"

    def pieces(self, nbytes: int) -> int:
        """16-byte pieces for a per-piece payload of ``nbytes`` (at least one)."""
        return max(1, -(-nbytes // PIECE_DATA))

    def slot_bytes(self, nbytes: int) -> int:
        """Bytes a slot needs for a payload of ``nbytes``."""
        if self.per_piece:
            return self.pieces(nbytes) * PIECE_BYTES
        return PUBLISH_WORD.size + nbytes

    def writes(self, seq: int, payload: bytes, function: int = 0) -> list[tuple[int, bytes]]:
        """The posted writes that publish ``payload`` as message ``seq``, in issue order,
        as ``(offset in slot, bytes)``. Classic: data, then the publish word last."""
        if not 0 < seq < 2**32:
            raise ValueError(f"sequence number must be in 1..2**32-1, got {seq}")
        if self.per_piece:
            s = PIECE_SEQ.pack(seq)
            out = bytearray()
            for i in range(self.pieces(len(payload))):
                chunk = payload[i * PIECE_DATA:(i + 1) * PIECE_DATA]
                out += s + chunk + bytes(PIECE_DATA - len(chunk))
            return [(0, bytes(out))]
        if len(payload) >= 2**16:
            raise ValueError(f"classic payload must be < 65536 bytes, got {len(payload)}")
        return [(PUBLISH_WORD.size, bytes(payload)), (0, PUBLISH_WORD.pack(seq, len(payload), function))]

    def ready(self, buf: bytearray, base: int, seq: int, nbytes: int) -> bool:
        """True when message ``seq`` of ``nbytes`` is complete in ``buf`` at slot offset ``base``."""
        if self.per_piece:
            for i in range(self.pieces(nbytes)):
                if PIECE_SEQ.unpack_from(buf, base + i * PIECE_BYTES)[0] != seq:
                    return False
            return True
        return PUBLISH_WORD.unpack_from(buf, base)[0] == seq

    def payload(self, buf: bytearray, base: int, nbytes: int) -> bytes:
        """The payload of the message in the slot at ``base``."""
        if self.per_piece:
            out = bytearray()
            for i in range(self.pieces(nbytes)):
                o = base + i * PIECE_BYTES + PIECE_SEQ.size
                out += buf[o:o + PIECE_DATA]
            return bytes(out[:nbytes])
        o = base + PUBLISH_WORD.size
        return bytes(buf[o:o + nbytes])


CLASSIC = Encoding("classic")
PER_PIECE = Encoding("per_piece")


def get_encoding(name: str) -> Encoding:
    """``"classic"`` or ``"per_piece"``; raises ValueError otherwise."""
    if name == "classic":
        return CLASSIC
    if name == "per_piece":
        return PER_PIECE
    raise ValueError(f"unknown encoding {name!r} (use 'classic' or 'per_piece')")
