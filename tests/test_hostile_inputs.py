"""Hostile inputs on the surfaces hardened after the scenario files (issue 29): stim circuits
measured through REPEAT before stim reads them, the Q1ASM parser, live run folders read by
``twin validate`` / ``twin calibrate --from-live``, and the calibrate output path built from a run
folder. Each reproducer is small; a case that would crash or hang the interpreter on a regression
runs in a subprocess under a CPU-time and memory limit. Every refusal is one line naming the file,
the key and the value."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import numpy as np
import pytest
import yaml
from scenario_mutations import limit

from twin.config import ConfigError
from twin.qec.load import load_decode

ROOT = Path(__file__).resolve().parent.parent
BASE = {"name": "t", "calibration": str(ROOT / "calibrations/fitted/card_path.yaml"),
        "hosting": str(ROOT / "calibrations/hosting.yaml"),
        "decode": {"shots": 10, "decoder": "matching", "placements": [{"device": "epyc7282", "mode": "inline"}]}}
GOOD = "X_ERROR(0.1) 0\nM 0\nDETECTOR rec[-1]\nOBSERVABLE_INCLUDE(0) rec[-1]\n"


def one_line(msg: str, file: Path | str, key: str, value: str) -> None:
    assert "\n" not in msg and msg.startswith(f"{file}: {key}: "), msg
    assert value in msg and len(msg) < 600, msg


def circuit_refusal(tmp_path: Path, text: str, decode: dict | None = None, seconds: float = 20) -> str:
    (tmp_path / "c.stim").write_text(text)
    doc = {**BASE, "decode": {**BASE["decode"], "circuit": "c.stim", **(decode or {})}}
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(doc))
    with limit(seconds), pytest.raises(ConfigError) as e:
        load_decode(p)
    one_line(str(e.value), p, "decode.circuit", "'c.stim'")
    return e.value.problem


def in_subprocess(code: str, mem_gb: float = 2, cpu_s: int = 60) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter limited to ``mem_gb`` GiB of address space and ``cpu_s``
    s of CPU: a regression that segfaults, hangs or allocates gigabytes kills only the child."""
    pre = (f"import resource; resource.setrlimit(resource.RLIMIT_AS, ({int(mem_gb * 2**30)},) * 2); "
           f"resource.setrlimit(resource.RLIMIT_CPU, ({cpu_s}, {cpu_s}))\n")
    return subprocess.run([sys.executable, "-c", pre + textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=cpu_s * 2, cwd=ROOT)


# -- stim circuits ---------------------------------------------------------------------------------
def nested(depth: int, count: int = 2) -> str:
    return "M 0\n" + f"REPEAT {count} {{\n" * depth + "X_ERROR(0.1) 0\nM 0\nDETECTOR rec[-1]\n" + "}\n" * depth \
        + "OBSERVABLE_INCLUDE(0) rec[-1]\n"


def test_deep_repeat_nesting_is_refused_before_stim_parses_it(tmp_path):
    (tmp_path / "c.stim").write_text(nested(100_000, 1))  # stim's recursive parser would overflow the C stack
    doc = {**BASE, "decode": {**BASE["decode"], "circuit": "c.stim"}}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(doc))
    r = in_subprocess(f"""
        from twin.config import ConfigError
        from twin.qec.load import load_decode
        try:
            load_decode({str(tmp_path / 's.yaml')!r})
        except ConfigError as e:
            print(e)
        """)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "nested more than 16 deep" in r.stdout and r.stdout.count("\n") == 1, r.stdout


@pytest.mark.parametrize("text, says", [
    ("REPEAT 1000000000000 {\n TICK\n}\n" + GOOD, "instructions once its REPEAT blocks are unrolled"),
    ("REPEAT 100000 {\n REPEAT 100000 {\n TICK\n }\n}\n" + GOOD, "instructions once"),
    ("REPEAT 1000000000 {\n REPEAT 1000 {\n }\n}\n" + GOOD, "instructions once"),  # empty, yet it loops
    ("REPEAT 1000 {\n H " + " ".join(map(str, range(60000))) + "\n}\n" + GOOD, "gate targets"),
    ("REPEAT 10000000000000 {\n TICK\n}\n" + GOOD, "1 to 1,000,000,000,000"),
    ("REPEAT ٣ {\n TICK\n}\n" + GOOD, "ASCII digits"),
    ("REPEAT 0 {\n TICK\n}\n" + GOOD, "1 to 1,000,000,000,000"),
    ("REPEAT 3 {\n TICK\n" + GOOD, "never closed"),
    ("}\n" + GOOD, "closes no REPEAT"),
    ("M 0\n" + "DETECTOR rec[-1]\n" * 300_000 + "OBSERVABLE_INCLUDE(0) rec[-1]\n", "detectors read measurement 0"),
    ("M 0\nREPEAT 300000 {\n DETECTOR rec[-1]\n}\nOBSERVABLE_INCLUDE(0) rec[-1]\n", "detectors read measurement 0"),
    ("CX rec[-1] 0\n" + GOOD, "rec[-1] reaches before the first measurement (0 made before it)"),
    ("M 0 1\nREPEAT 5 {\n M 0\n CX rec[-4] 1\n}\n" + GOOD, "rec[-4] reaches before the first measurement (3 made"),
    ("X_ERROR(0.1) 0\nM 0\nDETECTOR rec[-1]\nOBSERVABLE_INCLUDE(0) rec[-1]\nOBSERVABLE_INCLUDE(1)\n",
     "observable 1 has no target"),
])
def test_a_hostile_circuit_is_refused_in_one_line(tmp_path, text, says):
    assert says in circuit_refusal(tmp_path, text)


def test_a_certain_error_is_refused_for_matching_with_the_physical_reason(tmp_path):
    text = "X_ERROR(1) 1\nX_ERROR(0.1) 0\nM 0 1\nDETECTOR rec[-2]\nDETECTOR rec[-1]\nOBSERVABLE_INCLUDE(0) rec[-2]\n"
    assert "probability 1: matching weighs an edge log((1 - p)/p)" in circuit_refusal(tmp_path, text)


def test_a_certain_error_is_fine_for_lookup(tmp_path):
    (tmp_path / "c.stim").write_text("X_ERROR(1) 1\nX_ERROR(0.1) 0\nM 0\nDETECTOR rec[-1]\n"
                                     "OBSERVABLE_INCLUDE(0) rec[-1]\n")
    doc = {**BASE, "decode": {**BASE["decode"], "circuit": "c.stim", "decoder": "lookup"}}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(doc))
    assert load_decode(tmp_path / "s.yaml").circuit.num_detectors == 1


def test_the_measure_agrees_with_stim_on_the_bundled_circuits():
    import stim

    from twin.qec.circuit_text import measure_circuit_text
    for f in sorted((ROOT / "scenarios").glob("*.stim")):
        text = f.read_text()
        c, m = stim.Circuit(text), measure_circuit_text(text)
        flat = c.flattened()
        assert (m.measurements, m.detectors, m.observables) == (c.num_measurements, c.num_detectors,
                                                                c.num_observables), f
        assert m.instructions >= len(flat) and m.targets == sum(len(op.targets_copy()) for op in flat), f
        assert m.most_read[1] <= 2 and m.depth >= 1, f


# -- Q1ASM -----------------------------------------------------------------------------------------
def test_a_line_of_64000_spaces_parses_in_linear_time():
    from twin.devices.q1asm import Q1AsmError, parse
    with limit(5):
        with pytest.raises(Q1AsmError, match="line 2: cannot read '[?] *...'"):
            parse("stop\n" + " " * 64_000 + "?" + " " * 64_000 + "x#\n")
        with pytest.raises(Q1AsmError, match="line 1: unknown instruction 'waitx'"):
            parse("waitx" + " " * 64_000 + "4" * 64_000 + "\nstop\n")
        instrs, _ = parse(" " * 64_000 + "wait" + " " * 64_000 + "4" + " " * 64_000 + "\nstop\n")
    assert [(i.op, i.args) for i in instrs] == [("wait", ("4",)), ("stop", ())]


@pytest.mark.parametrize("program, says", [
    ("move ٣,R0\nstop", "cannot read '٣'"),            # an Arabic-Indic 3
    ("move ３,R0\nstop", "cannot read '３'"),            # a full-width 3
    ("move 7_00,R0\nstop", "cannot read '7_00'"),
    ("wait ٤\nstop", "cannot read '٤'"),
    ("wait_trigger １,4\nstop", "cannot read '１'"),
    ("move 0x100000003,R0\nstop", "immediate 0x100000003 outside the 32-bit range"),
    ("move 4294967296,R0\nstop", "outside the 32-bit range"),
    ("add R0,-2147483649,R1\nstop", "outside the 32-bit range"),
    ("move " + "9" * 100 + ",R0\nstop", "cannot read"),
    ("Wait 4\nstop", "cannot read 'Wait 4'"),          # not silently skipped
    ("bad label: wait 4\nstop", "cannot read"),
])
def test_q1asm_immediates_are_ascii_and_32_bit(program, says):
    from twin.devices.q1asm import Q1AsmError, Sequencer
    with pytest.raises(Q1AsmError) as e:
        Sequencer("s", program).run()
    assert says in str(e.value) and "\n" not in str(e.value) and len(str(e.value)) < 300, str(e.value)


def test_q1asm_hex_and_binary_immediates_still_read():
    from twin.devices.q1asm import Sequencer
    s = Sequencer("s", "move 0xFFFFFFFF,R0\nmove 0b101,R1\nmove -1,R2\nstop")
    s.run()
    assert s.R[:3] == [0xFFFFFFFF, 5, 0xFFFFFFFF]


def test_a_bad_program_in_a_scenario_is_one_line_naming_the_key(tmp_path):
    from twin.scenario import load_scenario
    doc = yaml.safe_load((ROOT / "scenarios" / "qblox_cluster.yaml").read_text())
    doc["calibration"] = str(ROOT / "calibrations" / "fitted" / "card_path.yaml")
    seq = doc["qblox"]["sequencers"][0]
    seq["program"] = seq["program"].replace("move 100,R0", "move 0x100000003,R0")
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(doc))
    with pytest.raises(ConfigError) as e:
        load_scenario(p)
    one_line(str(e.value), p, "qblox.sequencers", "<program>")
    assert "immediate 0x100000003 outside the 32-bit range" in str(e.value)


# -- run folders read by twin validate / twin calibrate --from-live ---------------------------------
CAL = ROOT / "calibrations" / "fitted" / "card_path.yaml"


@pytest.fixture(scope="module")
def live_run(tmp_path_factory):
    """One synthetic live run folder (tests/test_validate.py builds it), copied per case."""
    from test_validate import synthetic_run, truth_set
    base = tmp_path_factory.mktemp("live")
    return synthetic_run(base, "run", truth_set(base), rounds=400)


def copy_run(live_run: Path, tmp_path: Path) -> Path:
    import shutil
    dst = tmp_path / "run"
    shutil.copytree(live_run, dst)
    return dst


def results_of(run: Path) -> dict:
    return json.loads((run / "results.json").read_text())


def load_refusal(run: Path, file: Path, key: str, value: str) -> str:
    from twin.fitting.live_runs import load_run
    with limit(10), pytest.raises(ConfigError) as e:
        load_run(run)
    one_line(str(e.value), file, key, value)
    return e.value.problem


def test_the_synthetic_run_loads(live_run):
    from twin.fitting.live_runs import load_run
    assert len(load_run(live_run).rtt_ps) == 400


def test_a_300_mb_results_json_is_refused_unread(live_run, tmp_path):
    run = copy_run(live_run, tmp_path)
    with (run / "results.json").open("r+b") as f:
        f.truncate(300 * 2**20)  # sparse: nothing written, nothing read
    from twin.fitting.live_runs import load_run
    with limit(5), pytest.raises(ConfigError) as e:
        load_run(run)
    assert str(e.value) == f"{run / 'results.json'}: {300 * 2**20:,} bytes: larger than 16 MiB, the most an input " \
                           "file may be"


def test_deep_json_is_refused_not_a_recursion_error(live_run, tmp_path):
    run = copy_run(live_run, tmp_path)
    doc = results_of(run)
    (run / "results.json").write_text(json.dumps(doc)[:-1] + ', "x": ' + "[" * 100_000 + "]" * 100_000 + "}")
    assert "nested more than 64 deep" in load_refusal(run, run / "results.json", "results.json", "<100001 levels>")


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_are_refused(live_run, tmp_path, constant):
    run = copy_run(live_run, tmp_path)
    text = json.dumps(results_of(run))[:-1] + f', "seconds": {constant}}}'
    (run / "results.json").write_text(text)
    assert f"{constant.lstrip('-')} is not a JSON number" in load_refusal(run, run / "results.json", "results.json",
                                                                         "<unreadable>")


@pytest.mark.parametrize("change, key, value", [
    (lambda d: d["consumers"][0].pop("node"), "consumers[0].node", "<missing>"),
    (lambda d: d["consumers"][0].pop("encoding"), "consumers[0].encoding", "<missing>"),
    (lambda d: d.update(frame_bytes="64"), "frame_bytes", "'64'"),
    (lambda d: d.update(frame_bytes=-64), "frame_bytes", "-64"),
    (lambda d: d.update(consumers={"a": 1}), "consumers", "{'a': 1}"),
    (lambda d: d.update(scenario="../../x"), "scenario", "'../../x'"),
    (lambda d: d.update(scenario="/etc/x"), "scenario", "'/etc/x'"),
])
def test_a_results_file_missing_or_bending_a_key_is_one_line(live_run, tmp_path, change, key, value):
    run = copy_run(live_run, tmp_path)
    doc = results_of(run)
    change(doc)
    (run / "results.json").write_text(json.dumps(doc))
    load_refusal(run, run / "results.json", key, value)


def write_npz_member(path: Path, name: str, header_shape: tuple, payload: bytes, dtype: str = "<i8") -> None:
    """An NPZ whose member ``name`` declares ``header_shape`` but holds only ``payload``."""
    import io

    from numpy.lib import format as npformat
    buf = io.BytesIO()
    npformat.write_array_header_1_0(buf, {"descr": dtype, "fortran_order": False, "shape": header_shape})
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(name + ".npy", buf.getvalue() + payload)


def test_an_npz_declaring_gigabytes_is_refused_before_it_allocates(live_run, tmp_path):
    run = copy_run(live_run, tmp_path)
    npz = run / "live_rounds.npz"
    write_npz_member(npz, "cpu_live.rtt_ps", (750_000_000,), b"\0" * 800)  # 5.6 GiB declared, 800 B held
    code = f"""
        from twin.fitting.live_runs import load_run
        from twin.config import ConfigError
        try:
            load_run({str(run)!r})
        except ConfigError as e:
            print(e)
        """
    r = in_subprocess(code, mem_gb=1.5)
    assert r.returncode == 0, r.stderr[-2000:]
    one_line(r.stdout.strip(), npz, "cpu_live.rtt_ps", "shape (750000000,) of int64")
    assert "declares 6,000,000,000 bytes: more than 1,024 MiB" in r.stdout


def test_an_npz_declaring_more_than_it_holds_is_refused(live_run, tmp_path):
    run = copy_run(live_run, tmp_path)
    write_npz_member(run / "live_rounds.npz", "cpu_live.rtt_ps", (1_000_000,), b"\0" * 800)
    assert "declares 8,000,000 bytes but holds" in load_refusal(run, run / "live_rounds.npz", "cpu_live.rtt_ps",
                                                                "shape (1000000,) of int64")


def test_an_npz_of_objects_is_refused(live_run, tmp_path):
    run = copy_run(live_run, tmp_path)
    write_npz_member(run / "live_rounds.npz", "cpu_live.rtt_ps", (4,), b"\0" * 64, dtype="|O")
    load_refusal(run, run / "live_rounds.npz", "cpu_live.rtt_ps", "object")


@pytest.mark.parametrize("array, value", [
    (lambda a: np.where(np.arange(len(a)) == 7, -5, a), "-5"),
    (lambda a: a.astype(np.float64), "shape (400,) of float64"),
])
def test_negative_or_float_round_trips_are_refused(live_run, tmp_path, array, value):
    run = copy_run(live_run, tmp_path)
    with np.load(run / "live_rounds.npz") as z:
        arrays = dict(z)
    arrays["cpu_live.rtt_ps"] = array(arrays["cpu_live.rtt_ps"])
    np.savez(run / "live_rounds.npz", **arrays)
    load_refusal(run, run / "live_rounds.npz", "cpu_live.rtt_ps", value)


def test_a_symlink_loop_is_a_clean_refusal(live_run, tmp_path):
    run = copy_run(live_run, tmp_path)
    (run / "results.json").unlink()
    (run / "results.json").symlink_to(run / "loop")
    (run / "loop").symlink_to(run / "results.json")
    from twin.fitting.live_runs import load_run
    with pytest.raises(ConfigError) as e:
        load_run(run)
    assert "\n" not in str(e.value) and "results.json" in str(e.value)
    doc = {**BASE, "decode": {**BASE["decode"], "circuit": "loop.stim"}}
    (tmp_path / "loop.stim").symlink_to(tmp_path / "loop2.stim")
    (tmp_path / "loop2.stim").symlink_to(tmp_path / "loop.stim")
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(doc))
    with pytest.raises(ConfigError) as e:
        load_decode(tmp_path / "s.yaml")
    one_line(str(e.value), tmp_path / "s.yaml", "decode.circuit", "'loop.stim'")


# -- the fitted file's name from a run folder never leaves its folder --------------------------------
@pytest.mark.parametrize("key, value", [("node", "../../escaped"), ("node", "/tmp/escaped"), ("node", ".."),
                                        ("scenario", "../escaped"), ("scenario", "/tmp/escaped")])
def test_calibrate_from_live_never_writes_outside_its_folder(live_run, tmp_path, monkeypatch, capsys, key, value):
    from twin.commands import main
    run = copy_run(live_run, tmp_path)
    doc = results_of(run)
    if key == "node":
        doc["consumers"][0]["node"] = value
        with np.load(run / "live_rounds.npz") as z:  # the arrays follow the node, as twin run writes them
            arrays = {k.replace("cpu_live", value): v for k, v in z.items()}
        np.savez(run / "live_rounds.npz", **arrays)
    else:
        doc["scenario"] = value
    (run / "results.json").write_text(json.dumps(doc))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    before = {p for p in tmp_path.rglob("*")} | set(Path("/tmp").glob("escaped*"))
    code = main(["calibrate", "--from-live", str(run), "--rounds", "200", "--maxiter", "1", "--popsize", "2"])
    assert code == 2
    after = {p for p in tmp_path.rglob("*")} | set(Path("/tmp").glob("escaped*"))
    assert after == before
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("twin: error: "), err
    one_line(err.removeprefix("twin: error: ").strip(), run / "results.json", key, repr(value))


def test_a_null_frame_bytes_is_refused_by_key(live_run, tmp_path):
    run = copy_run(live_run, tmp_path)
    doc = results_of(run)
    doc["frame_bytes"] = None
    (run / "results.json").write_text(json.dumps(doc))
    load_refusal(run, run / "results.json", "frame_bytes", "<missing>")
