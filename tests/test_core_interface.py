"""The compiled core's one interface table (twin/engine/core_interface.yaml) and what is generated
from it: the C header core.c includes and the Python tables compiled.py, native.py and direct.py
index with."""
from __future__ import annotations

import shutil
import subprocess

import pytest
import yaml

from twin.config import ConfigError
from twin.engine import core_interface as CI
from twin.engine import gen_core, native


def test_generated_files_are_up_to_date():
    assert gen_core.stale() == [], "run `twin gen` and commit the generated files"


@pytest.mark.parametrize("mutate", [
    lambda d: d["tables"][2]["names"].insert(3, "wire_kind"),
    lambda d: d["tables"][5]["names"].reverse(),
    lambda d: d["constants"][0]["values"].update(stall=4),
])
def test_editing_the_table_without_regenerating_is_caught(tmp_path, mutate):
    doc = yaml.safe_load(gen_core.SPEC.read_text())
    mutate(doc)
    spec = tmp_path / "core_interface.yaml"
    spec.write_text(yaml.safe_dump(doc, sort_keys=False))
    assert sorted(gen_core.stale(spec)) == sorted(gen_core.OUTPUTS.values())


def test_check_mode_sees_a_stale_core_header(tmp_path, monkeypatch, capsys):
    from twin.commands import main
    outputs = {k: tmp_path / p.name for k, p in gen_core.OUTPUTS.items()}
    for k, p in gen_core.OUTPUTS.items():
        shutil.copy(p, outputs[k])
    h = outputs["c"]
    h.write_text(h.read_text().replace("FP_N, FP_SLOTS,", "FP_SLOTS, FP_N,"))
    monkeypatch.setattr(gen_core, "OUTPUTS", outputs)
    assert main(["gen", "--check"]) == 1
    assert "core_interface.h" in capsys.readouterr().out
    assert gen_core.stale(gen_core.SPEC, outputs) == [h]


def _table(doc: dict, name: str) -> tuple[int, dict]:
    return next((i, t) for i, t in enumerate(doc["tables"]) if t["name"] == name)


@pytest.mark.parametrize("mutate", [
    lambda d: _table(d, "direct_params")[1]["names"].append("slots") or
    f"tables[{_table(d, 'direct_params')[0]}].names[{len(_table(d, 'direct_params')[1]['names']) - 1}]",
    lambda d: _table(d, "direct_state")[1]["names"].append("Heap") or
    f"tables[{_table(d, 'direct_state')[0]}].names[{len(_table(d, 'direct_state')[1]['names']) - 1}]",
    lambda d: _table(d, "flow_outs")[1]["names"].append("count") or
    f"tables[{_table(d, 'flow_outs')[0]}].names[{len(_table(d, 'flow_outs')[1]['names']) - 1}]",
    lambda d: _table(d, "world_stats")[1].update(prefix="FS") or  # FS is flow_stats', later in the file
    f"tables[{max(_table(d, 'world_stats')[0], _table(d, 'flow_stats')[0])}].prefix",
    lambda d: d["tables"][0].update(prefix="p") or "tables[0].prefix",
    lambda d: d["constants"][1].update(extra=1) or "constants[1].extra",
])
def test_a_bad_table_names_its_key(tmp_path, mutate):
    doc = yaml.safe_load(gen_core.SPEC.read_text())
    key = mutate(doc)
    spec = tmp_path / "core_interface.yaml"
    spec.write_text(yaml.safe_dump(doc, sort_keys=False))
    with pytest.raises(ConfigError) as e:
        gen_core.load_interface(spec)
    assert key in str(e.value)


def test_the_c_enums_are_the_python_indices(tmp_path):
    """A C program built on the generated header prints every enum constant; each equals the
    Python table's index of its name (and each COUNT the table's length), each constant its value."""
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler")
    ci = gen_core.load_interface()
    want = {}
    for t in ci.tables:
        names = getattr(CI, t.name.upper())
        want.update({f"{t.prefix}_{n.upper()}": names.index(n) for n in names})
        want[f"{t.prefix}_COUNT"] = len(names)
    for c in ci.constants:
        want.update({f"{c.prefix}_{k.upper()}": getattr(CI, f"{c.prefix}_{k.upper()}") for k in c.values})
    src = tmp_path / "enums.c"
    src.write_text('#include <stdio.h>\n#include "core_interface.h"\nint main(void) {\n'
                   + "".join(f'    printf("{k} %d\\n", (int){k});\n' for k in want) + "    return 0;\n}\n")
    exe = tmp_path / "enums"
    subprocess.run([cc, "-std=c11", "-I", str(gen_core.OUTPUTS["c"].parent), str(src), "-o", str(exe)], check=True)
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    got = {k: int(v) for k, v in (line.split() for line in out.splitlines())}
    assert got == want


def test_the_build_id_covers_the_generated_header(tmp_path, monkeypatch):
    """A private build is cached by the build id: editing the header alone must change it."""
    c, h = tmp_path / "core.c", tmp_path / "core_interface.h"
    shutil.copy(native.SOURCES[0], c)
    shutil.copy(native.SOURCES[1], h)
    monkeypatch.setattr(native, "SOURCES", (c, h))
    before = native.build_id()
    h.write_text(h.read_text().replace("FO_OK, FO_COUNT", "FO_OK, FO_EXTRA, FO_COUNT"))
    assert native.build_id() != before
    h.unlink()
    assert native.build_id() is None
