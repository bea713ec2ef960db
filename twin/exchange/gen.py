"""Generate the C header, the Python definitions and the Verilog include from the one byte
specification (``twin/exchange/contract.yaml``).

``twin gen`` (:mod:`twin.commands.gen`) writes the three files (:func:`generate`, :data:`OUTPUTS`);
``--check`` writes nothing and exits 1 when any of them differs (:func:`stale`).
"""
from __future__ import annotations

import hashlib
import textwrap
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from twin.bundled import bundled_path
from twin.config import Located, load_model
from twin.config.strict import Strict

ROOT = Path(__file__).resolve().parent.parent.parent
SPEC = ROOT / "twin" / "exchange" / "contract.yaml"
OUTPUTS = {
    "c": ROOT / "twin" / "runtime" / "c" / "qrt_contract.h",
    "python": ROOT / "twin" / "exchange" / "contract.py",
    "verilog": bundled_path("rtl/qrt_contract.vh"),
}
SIZES = {"u8": 1, "u16": 2, "u32": 4, "u64": 8}
C_TYPES = {"u8": "uint8_t", "u16": "uint16_t", "u32": "uint32_t", "u64": "uint64_t"}


_S = Strict


class Field_(_S):
    """One field of a record: name, unsigned type, element count, doc."""

    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    type: Literal["u8", "u16", "u32", "u64"]
    count: int = Field(1, ge=1)
    doc: str = ""

    @property
    def size(self) -> int:
        """Bytes the field occupies."""
        return SIZES[self.type] * self.count


class Record(_S):
    """A fixed-size record (the header, a piece); its fields must be aligned and fill ``bytes``."""

    doc: str = ""
    bytes: int = Field(gt=0)
    fields: list[Field_] = Field(min_length=1)

    @model_validator(mode="after")
    def _fits(self):
        off = 0
        for i, f in enumerate(self.fields):
            if off % SIZES[f.type]:
                raise Located(("fields", i, "name"), f.name, f"offset {off} is not aligned to its {f.type}")
            off += f.size
        if off != self.bytes:
            raise Located(("bytes",), self.bytes, f"fields add up to {off} bytes")
        return self

    def offsets(self) -> list[tuple[Field_, int]]:
        """Each field with its byte offset in the record."""
        out, off = [], 0
        for f in self.fields:
            out.append((f, off))
            off += f.size
        return out


class Named(_S):
    """A named constant: an encoding, function id, status code (``value``) or flag (``bit``)."""

    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    value: int | None = Field(None, ge=0)
    bit: int | None = Field(None, ge=0, le=31)
    doc: str = ""


class Queue(_S):
    """Queue geometry: default slot size, smallest slot, most slots."""

    doc: str = ""
    slot_bytes: int = Field(gt=0)
    min_slot_bytes: int = Field(gt=0)
    max_slots: int = Field(gt=0)


class Syndrome(_S):
    """How a decoder's request carries a syndrome and its reply a correction.

    bit_order: ``lsb_first`` (item ``i`` is bit ``i % 8`` of byte ``i // 8``; the only order the
    runtime, the decoders and the RTL implement); bits_per_byte: 8; padding: ``zero_ignored``
    (padding bits and bytes are written as zero and ignored when read); short_status: the name of
    the status a request shorter than its syndrome gets (one of the spec's ``status`` names)."""

    doc: str = ""
    bit_order: Literal["lsb_first"]
    bits_per_byte: Literal[8]
    padding: Literal["zero_ignored"]
    short_status: str


class Contract(_S):
    """The byte specification (see ``contract.yaml``)."""

    name: str
    version: int = Field(ge=1)
    byte_order: Literal["little"]
    queue: Queue
    header: Record
    piece: Record
    encodings: list[Named]
    functions: list[Named]
    syndrome: Syndrome
    flags: list[Named]
    status: list[Named]

    @model_validator(mode="after")
    def _shape(self):
        if self.piece.bytes != self.header.bytes:
            raise Located(("piece", "bytes"), self.piece.bytes, "a piece must be as long as the header")
        if self.piece.fields[0].name != "seq" or self.header.fields[0].name != "seq":
            raise Located(("piece", "fields", 0, "name"), self.piece.fields[0].name, "the first field must be seq")
        if self.queue.slot_bytes % self.piece.bytes or self.queue.min_slot_bytes % self.piece.bytes:
            raise Located(("queue", "slot_bytes"), self.queue.slot_bytes, "must be a multiple of the piece size")
        for group in ("encodings", "functions", "status"):
            seen: dict[object, int] = {}
            for i, it in enumerate(getattr(self, group)):
                if it.value is None:
                    raise Located((group, i, "value"), None, "a value is required")
                if group == "functions" and it.value >= 2**16:
                    raise Located((group, i, "value"), it.value, "a function id is a u16 (0..65535)")
                for key in ("name", "value"):
                    v = getattr(it, key)
                    if v in seen:
                        raise Located((group, i, key), v, f"already used by {group}[{seen[v]}]")
                    seen[v] = i
        if self.syndrome.short_status not in {s.name for s in self.status}:
            raise Located(("syndrome", "short_status"), self.syndrome.short_status,
                          "not a status name (" + ", ".join(s.name for s in self.status) + ")")
        if "*/" in self.syndrome.doc:
            raise Located(("syndrome", "doc"), "*/", "would end the generated C comment")
        return self

    def status_value(self, name: str) -> int:
        """The value of the status called ``name``; KeyError if none."""
        return next(s.value for s in self.status if s.name == name)


def load_contract(path: Path = SPEC) -> Contract:
    """Load and check the specification; raises :class:`twin.config.ConfigError`."""
    return load_model(path, Contract)


def _banner(spec_text: str, comment: str) -> str:
    digest = hashlib.sha256(spec_text.encode()).hexdigest()[:16]
    return (f"{comment} Generated by `twin gen` from twin/exchange/contract.yaml (sha256 {digest}).\n"
            f"{comment} Do not edit: edit the specification and run `twin gen`.\n")


def _constants(c: Contract) -> list[tuple[str, list[tuple[str, int]]]]:
    """The named values every language gets: (GROUP, [(NAME, value)]) for encodings, functions
    and status codes."""
    return [(group, [(it.name.upper(), it.value) for it in items])
            for group, items in (("ENCODING", c.encodings), ("FUNCTION", c.functions), ("STATUS", c.status))]


def _wrap(doc: str, prefix: str) -> list[str]:
    """``doc`` as comment lines of at most 100 characters, each starting with ``prefix``; a line
    never breaks inside ``i % 8`` or ``i // 8``."""
    keep = {" % ": "\xa0%\xa0", " // ": "\xa0//\xa0"}
    text = " ".join(doc.split())
    for a, b in keep.items():
        text = text.replace(a, b)
    lines = textwrap.wrap(text, 100 - len(prefix))
    for a, b in keep.items():
        lines = [x.replace(b, a) for x in lines]
    return [prefix + x for x in lines]


def gen_c(c: Contract, spec_text: str) -> str:
    """The C header: constants, the two records as packed-by-construction structs, size checks."""
    P = c.name.upper()
    L = ["/* qrt_contract.h: the exchange layer's byte layout.",
         *("   " + x.strip() for x in _banner(spec_text, "").splitlines()), "*/",
         f"#ifndef {P}_CONTRACT_H", f"#define {P}_CONTRACT_H", "", "#include <stdint.h>", "#include <stddef.h>", "",
         "#if defined(__cplusplus)", f"#define {P}_STATIC_ASSERT(c, m) static_assert(c, m)", "#else",
         f"#define {P}_STATIC_ASSERT(c, m) _Static_assert(c, m)", "#endif", "",
         f"#define {P}_CONTRACT_VERSION {c.version}u",
         f"#define {P}_SLOT_BYTES_DEFAULT {c.queue.slot_bytes}u",
         f"#define {P}_MIN_SLOT_BYTES {c.queue.min_slot_bytes}u",
         f"#define {P}_MAX_SLOTS {c.queue.max_slots}u", ""]
    for rec_name, rec in (("header", c.header), ("piece", c.piece)):
        R = rec_name.upper()
        L.append(f"#define {P}_{R}_BYTES {rec.bytes}u")
        for f, off in rec.offsets():
            L.append(f"#define {P}_{R}_{f.name.upper()}_OFFSET {off}u")
            L.append(f"#define {P}_{R}_{f.name.upper()}_BYTES {f.size}u")
        L.append("")
    for group, items in _constants(c):
        L += [f"#define {P}_{group}_{name} {value}u" for name, value in items]
        L.append("")
    for it in c.flags:
        L.append(f"#define {P}_FLAG_{it.name.upper()} (1u << {it.bit})")
    L.append("")
    L += ["/* syndrome:", *_wrap(c.syndrome.doc, "   "), "*/",
          f"#define {P}_SYNDROME_BIT_ORDER_LSB_FIRST 1u",
          f"#define {P}_SYNDROME_BITS_PER_BYTE {c.syndrome.bits_per_byte}u",
          f"#define {P}_SYNDROME_PAD_VALUE 0u  /* padding is written as zero and ignored when read */",
          f"#define {P}_SYNDROME_SHORT_STATUS {P}_STATUS_{c.syndrome.short_status.upper()}",
          "/* bytes holding n detectors (a request's syndrome) or n observables (a reply's correction) */",
          f"#define {P}_SYNDROME_BYTES(n) (((n) + 7u) / 8u)",
          "/* byte and bit of detector (or observable) i */",
          f"#define {P}_SYNDROME_BYTE(i) ((i) / 8u)",
          f"#define {P}_SYNDROME_BIT(i) ((i) % 8u)",
          "/* detector i of the syndrome at p (a const uint8_t *): 0 or 1 */",
          f"#define {P}_SYNDROME_GET(p, i) "
          f"((unsigned)((((const uint8_t *)(p))[{P}_SYNDROME_BYTE(i)] >> {P}_SYNDROME_BIT(i)) & 1u))",
          "/* set detector i of the syndrome at p (a uint8_t *, zeroed first: padding stays zero) */",
          f"#define {P}_SYNDROME_SET(p, i) "
          f"(((uint8_t *)(p))[{P}_SYNDROME_BYTE(i)] |= (uint8_t)(1u << {P}_SYNDROME_BIT(i)))",
          ""]
    for rec_name, rec in (("header", c.header), ("piece", c.piece)):
        L.append(f"/* {rec.doc.strip()} */" if len(rec.doc) < 90 else f"/* {rec_name}: see contract.yaml */")
        L.append(f"typedef struct {c.name}_{rec_name} {{")
        for f in rec.fields:
            arr = f"[{f.count}]" if f.count > 1 else ""
            L.append(f"    {C_TYPES[f.type]} {f.name}{arr};  /* {f.doc} */")
        L.append(f"}} {c.name}_{rec_name};")
        L.append(f"{P}_STATIC_ASSERT(sizeof({c.name}_{rec_name}) == {rec.bytes}, \"{rec_name} size\");")
        for f, off in rec.offsets():
            L.append(f"{P}_STATIC_ASSERT(offsetof({c.name}_{rec_name}, {f.name}) == {off}, "
                     f"\"{rec_name}.{f.name} offset\");")
        L.append("")
    L += [f"#endif /* {P}_CONTRACT_H */", ""]
    return "\n".join(L)


def gen_python(c: Contract, spec_text: str) -> str:
    """The Python module: constants and numpy structured dtypes."""
    np_types = {"u8": "u1", "u16": "<u2", "u32": "<u4", "u64": "<u8"}
    L = ['"""The exchange layer\'s byte layout (numpy structured dtypes and constants)."""',
         *("# " + x.lstrip("# ") for x in _banner(spec_text, "#").strip().splitlines()),
         "import numpy as np", "", f"VERSION = {c.version}", f"SLOT_BYTES_DEFAULT = {c.queue.slot_bytes}",
         f"MIN_SLOT_BYTES = {c.queue.min_slot_bytes}", f"MAX_SLOTS = {c.queue.max_slots}", ""]
    for rec_name, rec in (("header", c.header), ("piece", c.piece)):
        R = rec_name.upper()
        names = [f.name for f in rec.fields]
        fmts = [(np_types[f.type], (f.count,)) if f.count > 1 else np_types[f.type] for f in rec.fields]
        offs = [off for _, off in rec.offsets()]
        L.append(f"{R}_BYTES = {rec.bytes}")
        L.append(f"{R}_FIELDS = {{" + ", ".join(f"{f.name!r}: ({off}, {f.size})" for f, off in rec.offsets())
                 + "}  # name: (offset, bytes)")
        L.append(f"{R}_DTYPE = np.dtype({{'names': {names!r}, 'formats': {fmts!r}, 'offsets': {offs!r}, "
                 f"'itemsize': {rec.bytes}}})")
        L.append("")
    for group, items in (("ENCODINGS", c.encodings), ("FUNCTIONS", c.functions), ("STATUS", c.status)):
        L.append(f"{group} = {{" + ", ".join(f"{it.name!r}: {it.value}" for it in items) + "}")
    L.append("FLAGS = {" + ", ".join(f"{it.name!r}: 1 << {it.bit}" for it in c.flags) + "}")
    L.append("")
    L += [f"FUNCTION_{it.name.upper()} = {it.value}" for it in c.functions]
    L.append("")
    L += ["# syndrome:", *_wrap(c.syndrome.doc, "# "),
          f"SYNDROME_BIT_ORDER = {c.syndrome.bit_order!r}",
          "SYNDROME_NUMPY_BITORDER = 'little'  # the bitorder argument of np.packbits / np.unpackbits",
          f"SYNDROME_BITS_PER_BYTE = {c.syndrome.bits_per_byte}",
          "SYNDROME_PAD_VALUE = 0  # padding is written as zero and ignored when read",
          f"SYNDROME_SHORT_STATUS = {c.status_value(c.syndrome.short_status)}  # {c.syndrome.short_status}",
          "", "",
          "def syndrome_bytes(n: int) -> int:",
          '    """Bytes holding ``n`` detectors (a request\'s syndrome) or ``n`` observables (a reply)."""',
          "    return (n + 7) // 8",
          "", "",
          "def syndrome_position(i: int) -> tuple[int, int]:",
          '    """(byte, bit) of detector (or observable) ``i``: ``(i // 8, i % 8)``."""',
          "    return i // 8, i % 8",
          ""]
    return "\n".join(L)


def gen_verilog(c: Contract, spec_text: str) -> str:
    """The Verilog include: byte offsets, widths and bit ranges in a little-endian record word."""
    P = c.name.upper()
    L = [*("// " + x.lstrip("/ ") for x in _banner(spec_text, "//").strip().splitlines()),
         f"`ifndef {P}_CONTRACT_VH", f"`define {P}_CONTRACT_VH", "",
         f"`define {P}_CONTRACT_VERSION {c.version}", f"`define {P}_SLOT_BYTES_DEFAULT {c.queue.slot_bytes}",
         f"`define {P}_MAX_SLOTS {c.queue.max_slots}", ""]
    for rec_name, rec in (("header", c.header), ("piece", c.piece)):
        R = rec_name.upper()
        L.append(f"`define {P}_{R}_BYTES {rec.bytes}")
        L.append(f"`define {P}_{R}_BITS {rec.bytes * 8}")
        for f, off in rec.offsets():
            N = f.name.upper()
            L.append(f"`define {P}_{R}_{N}_OFFSET {off}")
            L.append(f"`define {P}_{R}_{N}_LSB {off * 8}")
            L.append(f"`define {P}_{R}_{N}_MSB {off * 8 + f.size * 8 - 1}")
        L.append("")
    for group, items in _constants(c):
        L += [f"`define {P}_{group}_{name} {value}" for name, value in items]
    for it in c.flags:
        L.append(f"`define {P}_FLAG_{it.name.upper()}_BIT {it.bit}")
    L += ["", "// syndrome:", *_wrap(c.syndrome.doc, "//   "),
          f"`define {P}_SYNDROME_BIT_ORDER_LSB_FIRST 1",
          f"`define {P}_SYNDROME_BITS_PER_BYTE {c.syndrome.bits_per_byte}",
          f"`define {P}_SYNDROME_SHORT_STATUS `{P}_STATUS_{c.syndrome.short_status.upper()}",
          "// bytes holding n detectors (or n observables)",
          f"`define {P}_SYNDROME_BYTES(n) (((n) + 7) / 8)",
          "// detector (or observable) i in a payload vector whose byte b is bits [8*b+7:8*b]",
          f"`define {P}_SYNDROME_PAYLOAD_BIT(i) (8 * ((i) / 8) + (i) % 8)"]
    L += ["", f"`endif // {P}_CONTRACT_VH", ""]
    return "\n".join(L)


def generate(spec: Path = SPEC) -> dict[str, str]:
    """The three generated files' text, keyed ``"c"``, ``"python"``, ``"verilog"``."""
    text = spec.read_text()
    c = load_contract(spec)
    return {"c": gen_c(c, text), "python": gen_python(c, text), "verilog": gen_verilog(c, text)}


def stale(spec: Path = SPEC, outputs: dict[str, Path] | None = None) -> list[Path]:
    """Generated files that differ from what ``spec`` generates (missing files count);
    ``outputs`` defaults to :data:`OUTPUTS`."""
    outputs = OUTPUTS if outputs is None else outputs
    out = generate(spec)
    return [p for k, p in outputs.items() if not p.exists() or p.read_text() != out[k]]


def rel(p: Path) -> str:
    """``p`` relative to the project's root where it lies inside it, else whole."""
    try:
        return str(p.relative_to(ROOT))
    except ValueError:
        return str(p)
