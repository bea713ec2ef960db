"""The one byte specification and what is generated from it."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import yaml

from twin.config import ConfigError
from twin.exchange import contract as C
from twin.exchange import gen
from twin.exchange.encoding import CLASSIC, PER_PIECE

ROOT = Path(__file__).resolve().parents[1]


def test_generated_files_are_up_to_date():
    assert gen.stale() == [], "run `twin gen` and commit the generated files"


@pytest.mark.parametrize("mutate", [
    lambda d: d["status"].append({"name": "timed_out", "value": 4}),
    lambda d: d["syndrome"].update(doc=d["syndrome"]["doc"] + " Revised."),
    lambda d: d["functions"].append({"name": "decode_color3", "value": 20}),
])
def test_editing_the_spec_without_regenerating_is_caught(tmp_path, mutate):
    doc = yaml.safe_load(gen.SPEC.read_text())
    mutate(doc)
    spec = tmp_path / "contract.yaml"
    spec.write_text(yaml.safe_dump(doc, sort_keys=False))
    assert sorted(gen.stale(spec)) == sorted(gen.OUTPUTS.values())


def test_check_mode_exit_codes(tmp_path, monkeypatch, capsys):
    from twin.commands import main
    assert main(["gen", "--check"]) == 0
    outputs = {k: tmp_path / p.name for k, p in gen.OUTPUTS.items()}
    for k, p in gen.OUTPUTS.items():
        shutil.copy(p, outputs[k])
    vh = outputs["verilog"]
    vh.write_text(vh.read_text().replace("`define QRT_HEADER_BYTES 16", "`define QRT_HEADER_BYTES 17"))
    monkeypatch.setattr(gen, "OUTPUTS", outputs)
    assert main(["gen", "--check"]) == 1
    assert "qrt_contract.vh" in capsys.readouterr().out
    assert gen.stale(gen.SPEC, outputs) == [outputs["verilog"]]


@pytest.mark.parametrize("mutate, key", [
    (lambda d: d["header"].update(bytes=20), "header.bytes"),
    (lambda d: d["header"]["fields"].insert(1, {"name": "odd", "type": "u8"}), "header.fields[2].name"),
    (lambda d: d["queue"].update(slot_bytes=4001), "queue.slot_bytes"),
    (lambda d: d["syndrome"].update(bit_order="msb_first"), "syndrome.bit_order"),
    (lambda d: d["syndrome"].update(padding="ones"), "syndrome.padding"),
    (lambda d: d["syndrome"].update(short_status="late"), "syndrome.short_status"),
    (lambda d: d.pop("syndrome"), "syndrome"),
    (lambda d: d["functions"][2].update(value=16), "functions[2].value"),
    (lambda d: d["functions"][1].update(value=70000), "functions[1].value"),
])
def test_a_bad_spec_is_one_clear_error(tmp_path, mutate, key):
    doc = yaml.safe_load(gen.SPEC.read_text())
    mutate(doc)
    spec = tmp_path / "contract.yaml"
    spec.write_text(yaml.safe_dump(doc, sort_keys=False))
    with pytest.raises(ConfigError) as e:
        gen.load_contract(spec)
    assert e.value.key == key


def test_python_dtypes_match_the_encoding():
    assert C.HEADER_DTYPE.itemsize == C.HEADER_BYTES == 16
    assert C.PIECE_DTYPE.itemsize == C.PIECE_BYTES == 16
    buf = bytearray(CLASSIC.slot_bytes(5))
    for off, data in CLASSIC.writes(42, b"hello", function=7, flags=C.FLAGS["last"]):
        buf[off:off + len(data)] = data
    h = np.frombuffer(bytes(buf[:16]), dtype=C.HEADER_DTYPE)[0]
    assert (h["seq"], h["function"], h["length"], h["flags"]) == (42, 7, 5, 1)
    (off, burst), = PER_PIECE.writes(42, b"x" * 30, function=2)
    pieces = np.frombuffer(burst, dtype=C.PIECE_DTYPE)
    assert len(pieces) == 1 + 3 and (pieces["seq"] == 42).all()
    assert bytes(pieces[1]["data"]) == b"x" * 12


@pytest.mark.skipif(shutil.which("gcc") is None, reason="no gcc on PATH")
def test_c_header_compiles_and_agrees_with_python(tmp_path):
    src = tmp_path / "t.c"
    src.write_text('''#include "qrt_contract.h"
#include <stdio.h>
int main(void) {
  printf("%zu %zu %u %u %u\\n", sizeof(qrt_header), sizeof(qrt_piece), QRT_HEADER_LENGTH_OFFSET,
         QRT_PIECE_DATA_BYTES, QRT_ENCODING_PER_PIECE);
  return 0;
}
''')
    exe = tmp_path / "t"
    subprocess.run(["gcc", "-std=c11", "-Wall", "-Werror", "-I", str(ROOT / "twin/runtime/c"), str(src), "-o",
                    str(exe)], check=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split()
    assert out == ["16", "16", str(C.HEADER_FIELDS["length"][0]), str(C.PIECE_FIELDS["data"][1]),
                   str(C.ENCODINGS["per_piece"])]


def test_verilog_include_bit_ranges():
    text = (ROOT / "rtl" / "qrt_contract.vh").read_text()
    defs = dict(line.split()[1:3] for line in text.splitlines()
                if line.startswith("`define") and len(line.split()) >= 3)
    for name, (off, size) in C.HEADER_FIELDS.items():
        N = name.upper()
        assert int(defs[f"QRT_HEADER_{N}_LSB"]) == 8 * off
        assert int(defs[f"QRT_HEADER_{N}_MSB"]) == 8 * (off + size) - 1
    for name, value in C.FUNCTIONS.items():
        assert int(defs[f"QRT_FUNCTION_{name.upper()}"]) == value
    assert defs["QRT_SYNDROME_BIT_ORDER_LSB_FIRST"] == "1"
    assert defs["QRT_SYNDROME_SHORT_STATUS"] == "`QRT_STATUS_FUNCTION_FAILED"
    # the payload-bit macro, evaluated as Verilog would (integer / and %): byte i // 8 is bits [8b+7:8b]
    macro = next(x for x in text.splitlines() if x.startswith("`define QRT_SYNDROME_PAYLOAD_BIT(i) "))
    expr = macro.split(" ", 2)[2].replace("/", "//")
    for i in range(40):
        byte, bit = C.syndrome_position(i)
        assert eval(expr, {"i": i}) == 8 * byte + bit == i


# --- the syndrome section: what twin.qec packs and decodes follows the spec -----------------------

def test_spec_syndrome_section_and_decoder_ids():
    from twin.runtime.functions import REGISTRY
    c = gen.load_contract()
    assert (c.syndrome.bit_order, c.syndrome.bits_per_byte, c.syndrome.padding) == ("lsb_first", 8, "zero_ignored")
    assert C.SYNDROME_BIT_ORDER == "lsb_first" and C.SYNDROME_NUMPY_BITORDER == "little"
    assert C.SYNDROME_SHORT_STATUS == C.STATUS["function_failed"]
    assert (C.FUNCTION_DECODE_REP3, C.FUNCTION_DECODE_STEANE7, C.FUNCTION_DECODE_SURFACE5) == (16, 17, 18)
    for name, fid in C.FUNCTIONS.items():
        assert REGISTRY[fid].name == name  # the runtime serves each spec function under the spec's id
    assert [C.syndrome_bytes(n) for n in (0, 1, 8, 9, 120)] == [0, 1, 1, 2, 15]
    assert C.syndrome_position(9) == (1, 1) and C.syndrome_position(7) == (0, 7)


def _workload(det: np.ndarray, obs: np.ndarray, frame_bytes: int):
    from twin.qec.workload import Workload
    return Workload("spec", None, det, obs, frame_bytes)


def test_qec_packing_follows_the_spec_bit_order():
    """Each detector alone lands on the spec's (byte, bit); everything else in the frame is zero
    padding. Replies: observable k in bit k % 8 of byte k // 8."""
    D, K, frame = 21, 10, 16
    w = _workload(np.eye(D, dtype=bool), np.eye(K, dtype=bool)[np.arange(D) % K], frame)
    frames = w.frames()
    assert frames.shape == (D, frame)
    for i in range(D):
        byte, bit = C.syndrome_position(i)
        want = np.full(frame, C.SYNDROME_PAD_VALUE, np.uint8)
        want[byte] = 1 << bit
        assert (frames[i] == want).all(), f"detector {i}"
    assert frames[9][1] == 0b10 and not frames[9][[0, *range(2, frame)]].any()  # detector 9 -> byte 1, bit 1
    truth = w.truth_bytes()
    assert truth.shape == (D, C.syndrome_bytes(K)) == (D, w.reply_bytes)
    for i in range(D):
        byte, bit = C.syndrome_position(i % K)
        assert int.from_bytes(truth[i].tobytes(), "little") == 1 << (8 * byte + bit)


def test_decode_payload_reads_the_spec_layout_and_ignores_padding():
    """A table that answers the syndrome's own index: the reply is the syndrome as decode_payload
    read it, so it must equal the spec's packing with padding dropped."""
    from twin.qec.lookup import LookupTable, decode_payload
    D = 11
    table = LookupTable("identity", D, D, np.arange(1 << D, dtype=np.uint32))
    rng = np.random.default_rng(7)
    for det in rng.random((50, D)) < 0.4:
        (frame,) = _workload(det[None, :], np.zeros((1, 1), bool), 16).frames()
        want = frame[:C.syndrome_bytes(D)].tobytes()
        noisy = bytearray(frame.tobytes())
        noisy[1] |= 0xFF << (D % 8) & 0xFF  # the bits at and above D in the last syndrome byte
        noisy[2:] = bytes([0xA5]) * (len(noisy) - 2)  # the bytes after the syndrome
        for payload in (frame.tobytes(), bytes(noisy)):
            got = decode_payload(table, payload)
            assert got == want
            for i in range(D):
                byte, bit = C.syndrome_position(i)
                assert (got[byte] >> bit) & 1 == det[i]
    with pytest.raises(ValueError, match="syndrome needs 2"):
        decode_payload(table, b"\x00")


@pytest.mark.skipif(shutil.which("gcc") is None, reason="no gcc on PATH")
def test_c_syndrome_macros_agree_with_numpy_packing(tmp_path):
    rng = np.random.default_rng(3)
    det = rng.random(37) < 0.5
    packed = np.packbits(det, bitorder=C.SYNDROME_NUMPY_BITORDER)
    src = tmp_path / "s.c"
    src.write_text(f'''#include "qrt_contract.h"
#include <stdio.h>
#include <string.h>
int main(void) {{
  static const uint8_t in[] = {{{", ".join(str(int(b)) for b in packed)}}};
  static const int det[] = {{{", ".join(str(int(x)) for x in det)}}};
  uint8_t out[QRT_SYNDROME_BYTES(37u)];
  memset(out, QRT_SYNDROME_PAD_VALUE, sizeof out);
  for (unsigned i = 0; i < 37u; ++i) {{
    if (QRT_SYNDROME_GET(in, i) != (unsigned)det[i]) return 10;
    if (det[i]) QRT_SYNDROME_SET(out, i);
  }}
  printf("%u %u %u %u %u %d\\n", (unsigned)sizeof out, QRT_SYNDROME_BYTE(9u), QRT_SYNDROME_BIT(9u),
         QRT_FUNCTION_DECODE_REP3, QRT_SYNDROME_SHORT_STATUS, memcmp(in, out, sizeof out));
  return 0;
}}
''')
    exe = tmp_path / "s"
    subprocess.run(["gcc", "-std=c11", "-Wall", "-Werror", "-I", str(ROOT / "twin/runtime/c"), str(src), "-o",
                    str(exe)], check=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split()
    assert out == [str(len(packed)), "1", "1", str(C.FUNCTION_DECODE_REP3), str(C.STATUS["function_failed"]), "0"]


def test_gen_refuses_outside_a_source_checkout(tmp_path, monkeypatch, capsys):
    """An installed wheel: the package's parent is site-packages (no pyproject.toml, no setup.py).
    ``twin gen`` must not rewrite files there; ``--check`` still reads."""
    from twin import bundled
    from twin.commands import main
    from twin.engine import gen_core
    site = tmp_path / "site-packages"
    site.mkdir()
    monkeypatch.setattr(bundled, "CHECKOUT", site)
    written = {}
    for g in (gen, gen_core):
        outputs = {k: tmp_path / f"{g.__name__}.{p.name}" for k, p in g.OUTPUTS.items()}
        for k, p in g.OUTPUTS.items():
            outputs[k].write_text("old")
        written.update(outputs)
        monkeypatch.setattr(g, "OUTPUTS", outputs)
    assert main(["gen"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "source checkout" in err and "clone" in err
    assert all(p.read_text() == "old" for p in written.values())
    assert main(["gen", "--check"]) == 1  # reads only: runs anywhere, and finds the "old" files stale


def test_gen_writes_in_a_source_checkout(tmp_path, monkeypatch, capsys):
    from twin import bundled
    from twin.commands import main
    from twin.engine import gen_core
    assert bundled.in_checkout()
    for g in (gen, gen_core):
        outputs = {k: tmp_path / f"{g.__name__}.{p.name}" for k, p in g.OUTPUTS.items()}
        monkeypatch.setattr(g, "OUTPUTS", outputs)
    assert main(["gen"]) == 0
    assert main(["gen", "--check"]) == 0
