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


def test_editing_the_spec_without_regenerating_is_caught(tmp_path):
    doc = yaml.safe_load(gen.SPEC.read_text())
    doc["status"].append({"name": "timed_out", "value": 4})
    spec = tmp_path / "contract.yaml"
    spec.write_text(yaml.safe_dump(doc, sort_keys=False))
    assert sorted(gen.stale(spec)) == sorted(gen.OUTPUTS.values())


def test_check_mode_exit_codes(tmp_path, monkeypatch, capsys):
    assert gen.main(["--check"]) == 0
    outputs = {k: tmp_path / p.name for k, p in gen.OUTPUTS.items()}
    for k, p in gen.OUTPUTS.items():
        shutil.copy(p, outputs[k])
    outputs["verilog"].write_text(outputs["verilog"].read_text().replace("`define QRT_HEADER_BYTES 16", "`define QRT_HEADER_BYTES 17"))
    monkeypatch.setattr(gen, "OUTPUTS", outputs)
    assert gen.main(["--check"]) == 1
    assert "qrt_contract.vh" in capsys.readouterr().out
    assert gen.stale(gen.SPEC, outputs) == [outputs["verilog"]]


@pytest.mark.parametrize("mutate, key", [
    (lambda d: d["header"].update(bytes=20), "header.bytes"),
    (lambda d: d["header"]["fields"].insert(1, {"name": "odd", "type": "u8"}), "header.fields[2].name"),
    (lambda d: d["queue"].update(slot_bytes=4001), "queue.slot_bytes"),
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
    src.write_text(f'''#include "qrt_contract.h"
#include <stdio.h>
int main(void) {{
  printf("%zu %zu %u %u %u\\n", sizeof(qrt_header), sizeof(qrt_piece), QRT_HEADER_LENGTH_OFFSET,
         QRT_PIECE_DATA_BYTES, QRT_ENCODING_PER_PIECE);
  return 0;
}}
''')
    exe = tmp_path / "t"
    subprocess.run(["gcc", "-std=c11", "-Wall", "-Werror", "-I", str(ROOT / "twin/runtime/c"), str(src), "-o", str(exe)],
                   check=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split()
    assert out == ["16", "16", str(C.HEADER_FIELDS["length"][0]), str(C.PIECE_FIELDS["data"][1]),
                   str(C.ENCODINGS["per_piece"])]


def test_verilog_include_bit_ranges():
    text = (ROOT / "rtl" / "qrt_contract.vh").read_text()
    defs = dict(line.split()[1:3] for line in text.splitlines() if line.startswith("`define") and len(line.split()) >= 3)
    for name, (off, size) in C.HEADER_FIELDS.items():
        N = name.upper()
        assert int(defs[f"QRT_HEADER_{N}_LSB"]) == 8 * off
        assert int(defs[f"QRT_HEADER_{N}_MSB"]) == 8 * (off + size) - 1
