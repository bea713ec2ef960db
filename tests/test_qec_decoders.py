"""Any circuit, any decoder (issue 13, parts 1 and 6): the decoder registry behind one interface, a
user's stim file with feedback, the bivariate bicycle codes with BP+OSD, sinter's CSV and the loop
as a sinter decoder."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import stim
import yaml

from twin.config import ConfigError

ROOT = Path(__file__).resolve().parent.parent
CAL = ROOT / "calibrations" / "fitted" / "card_path.yaml"


def scenario(tmp_path: Path, decode: dict, name: str = "dec", **top) -> Path:
    doc = {"name": name, "calibration": str(CAL), "hosting": str(ROOT / "calibrations/hosting.yaml"), "seed": 1,
           **top, "decode": {"shots": 200, "placements": [{"device": "epyc7282", "mode": "inline"}], **decode}}
    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump(doc))
    return p


# -- the registry and the one interface ------------------------------------------------------------
@pytest.mark.parametrize("name", ["lookup", "matching", "bposd", "tesseract", "relay_bp"])
def test_every_decoder_answers_the_same_through_each_entry_point(name):
    from twin.qec.codes import memory_circuit
    from twin.qec.decoders import make_decoder
    c = memory_circuit("rep", 3, 3, 0.05)
    dec = make_decoder(name, c)
    det, obs = c.compile_detector_sampler(seed=4).sample(300, separate_observables=True, bit_packed=True)
    packed = dec.decode_shots_bit_packed(det)
    assert packed.dtype == np.uint8 and packed.shape == (300, 1)
    frames = np.zeros((300, 16), np.uint8)
    frames[:, :det.shape[1]] = det
    frames[:, 1] |= 0xF0  # padding bits above D (12 detectors) and padding bytes are ignored
    frames[:, 5:] = 0xAB
    assert np.array_equal(dec.decode_frames(frames), packed)
    assert all(dec.decode_payload(frames[i].tobytes()) == packed[i].tobytes() for i in range(0, 300, 37))
    unpacked = np.unpackbits(det, axis=1, bitorder="little", count=c.num_detectors).astype(bool)
    assert np.array_equal(dec.reference(unpacked), packed)
    errors = int((np.unpackbits(packed, axis=1, bitorder="little", count=1) != obs.astype(np.uint8)).any(axis=1).sum())
    assert errors < obs.any(axis=1).sum() / 2  # the decoders decode: fewer errors than no correction at all


def test_unknown_decoder_is_refused_with_the_registered_names(tmp_path):
    from twin.qec.load import load_decode
    with pytest.raises(ConfigError) as e:
        load_decode(scenario(tmp_path, {"code": "rep", "decoder": "nosuch"}))
    msg = str(e.value)
    assert e.value.key == "decode.decoder" and "\n" not in msg
    for name in ("lookup", "matching", "function", "bposd", "tesseract", "relay_bp", "sinter:pkg.module:Class"):
        assert name in msg


def test_a_new_decoder_is_one_register_call():
    from twin.qec.codes import memory_circuit
    from twin.qec.decoders import REGISTRY, Decoder, make_decoder, register

    class Never(Decoder):
        kind = "never"

        def __init__(self, dem, name):
            self.name, self.n_detectors, self.n_observables = name, dem.num_detectors, dem.num_observables

        def decode_shots_bit_packed(self, dets):
            return np.zeros((len(dets), self.reply_bytes), np.uint8)

    register("never_test", doc="always no flip")(lambda model, name, **kw: Never(model.detector_error_model(), name))
    try:
        d = make_decoder("never_test", memory_circuit("rep", 3, 1, 0.01))
        assert d.decode_payload(b"\x0f" + bytes(15)) == b"\x00"
    finally:
        del REGISTRY["never_test"]


# -- a user's circuit ---------------------------------------------------------------------------------
def test_a_users_stim_file_with_feedback_runs_and_equals_the_decoder_run_directly():
    import pymatching

    from twin.qec.load import load_decode
    from twin.studies.decode import run_decode_study
    ld = load_decode(ROOT / "scenarios" / "decode_user_circuit.yaml")
    assert "CX rec[-2] 1 rec[-1] 3" in str(ld.circuit)  # measurement feedback
    study = run_decode_study(ld, shots=600)
    # the same shots (stim, same seed), decoded directly by PyMatching outside the twin
    c = stim.Circuit.from_file(str(ROOT / "scenarios" / "decode_user_circuit.stim"))
    det, obs = c.compile_detector_sampler(seed=ld.sc.seed).sample(600, separate_observables=True)
    m = pymatching.Matching.from_detector_error_model(c.detector_error_model(decompose_errors=True))
    direct = np.packbits(m.decode_batch(det.astype(np.uint8)).astype(bool), axis=1, bitorder="little")
    errors = int((m.decode_batch(det.astype(np.uint8)) != obs).any(axis=1).sum())
    for run, s in zip(study.runs, study.document["placements"]):
        assert np.array_equal(run.corrections, direct)
        assert s["identical_corrections"] == 600 and s["card_mismatches"] == 0
        assert s["logical_errors"]["loop"] == errors > 0
    assert study.document["workload"]["circuit"] == "decode_user_circuit.stim"


@pytest.mark.parametrize("text,why", [
    ("H 0\nM 0\n", "0 detectors and 0 observables"),
    ("H 0\nFOO 0\n", "stim cannot parse it"),
    ("H 0\nM 0\nDETECTOR rec[-1]\nOBSERVABLE_INCLUDE(0) rec[-1]\n", "no detector error model"),
])
def test_a_bad_circuit_file_is_refused_in_one_line(tmp_path, text, why):
    from twin.qec.load import load_decode
    (tmp_path / "c.stim").write_text(text)
    with pytest.raises(ConfigError) as e:
        load_decode(scenario(tmp_path, {"circuit": "c.stim", "decoder": "matching"}))
    assert e.value.key == "decode.circuit" and why in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("decode,key", [
    ({"circuit": "decode_user_circuit.stim", "p": 0.01}, "decode.p"),
    ({"circuit": "decode_user_circuit.stim", "code": "rep"}, "decode.code"),
    ({}, "decode.code"),
    ({"circuit": "nosuch.stim"}, "decode.circuit"),
    ({"code": "bb72", "noise": "circuit", "decoder": "bposd"}, "decode.noise"),
    ({"code": "bb72", "distance": 5, "decoder": "bposd"}, "decode.distance"),
    ({"code": "rep", "noise": "phenomenological"}, "decode.noise"),
    ({"code": "bb72", "decoder": "tesseract"}, "decode.cost"),  # no per-call measurement of Tesseract
])
def test_keys_that_do_not_fit_are_refused(tmp_path, decode, key):
    from twin.qec.load import load_decode
    shutil.copy(ROOT / "scenarios" / "decode_user_circuit.stim", tmp_path)
    with pytest.raises(ConfigError) as e:
        load_decode(scenario(tmp_path, {"decoder": "matching", **decode}))
    assert e.value.key == key and "\n" not in str(e.value), str(e.value)


# -- bivariate bicycle codes --------------------------------------------------------------------------
def test_bb_codes_have_the_published_parameters():
    from twin.qec.bb import BB_CODES, bb_memory_circuit, check_matrices, logical_z
    for code in BB_CODES.values():
        hx, hz = check_matrices(code)
        assert hx.shape == hz.shape == (code.n // 2, code.n)
        assert not (hx.astype(int) @ hz.T.astype(int) % 2).any()  # X and Z checks commute
        assert (hx.sum(axis=1) == 6).all() and (hz.sum(axis=1) == 6).all()  # weight-6 checks
        lz = logical_z(code)  # raises unless k is the paper's
        assert lz.shape == (code.k, code.n) and not (hx.astype(int) @ lz.T.astype(int) % 2).any()
    c = bb_memory_circuit("bb72", 2, 0.01)
    assert (c.num_detectors, c.num_observables) == (36 * 3, 12)
    assert c.detector_error_model().num_detectors == 108  # every detector deterministic


def _bposd_direct(circuit: stim.Circuit, seed: int, shots: int):
    """BP+OSD run directly on stim's shots, outside the twin (stimbposd on the circuit's model)."""
    from stimbposd import BPOSD
    det, obs = circuit.compile_detector_sampler(seed=seed).sample(shots, separate_observables=True)
    pred = BPOSD(circuit.detector_error_model()).decode_batch(det)
    return pred, int((pred != obs).any(axis=1).sum())


def test_bb72_decoded_by_bposd_through_the_loop_equals_bposd_run_directly():
    from twin.qec.load import load_decode
    from twin.studies.decode import run_decode_study
    ld = load_decode(ROOT / "scenarios" / "decode_bb72_bposd.yaml")
    study = run_decode_study(ld, shots=400)
    pred, errors = _bposd_direct(ld.circuit, ld.sc.seed, 400)
    s, run = study.document["placements"][0], study.runs[0]
    assert np.array_equal(run.corrections, np.packbits(pred, axis=1, bitorder="little"))
    assert s["logical_errors"]["loop"] == s["logical_errors"]["direct"] == errors
    assert s["identical_corrections"] == 400 and study.document["workload"]["distance"] == 6
    assert study.document["workload"]["observables"] == 12


@pytest.mark.slow
def test_gross_code_bposd_through_the_loop_equals_direct(tmp_path):
    from twin.qec.load import load_decode
    from twin.studies.decode import run_decode_study
    p = scenario(tmp_path, {"code": "bb144", "rounds": 4, "p": 0.005, "decoder": "bposd",
                            "cost": {"fixed": "500 us"}})
    ld = load_decode(p)
    study = run_decode_study(ld, shots=1000)
    pred, errors = _bposd_direct(ld.circuit, 1, 1000)
    assert np.array_equal(study.runs[0].corrections, np.packbits(pred, axis=1, bitorder="little"))
    assert study.document["placements"][0]["logical_errors"]["loop"] == errors


# -- sinter -------------------------------------------------------------------------------------------
def _sinter_cli() -> str:
    here = Path(sys.executable).parent / "sinter"
    return str(here) if here.exists() else shutil.which("sinter")


def test_sinter_plot_reads_the_stats_file(tmp_path):
    import sinter

    from twin.output.files import RunFolder
    from twin.qec.load import load_decode
    from twin.reports.decode import write_decode_outputs
    from twin.studies.decode import run_decode_study
    study = run_decode_study(load_decode(ROOT / "scenarios" / "decode_user_circuit.yaml"), shots=300)
    with RunFolder(tmp_path / "out") as folder:
        write_decode_outputs(study, folder)
        paths = folder.commit()
    stats_csv = tmp_path / "out" / "stats.csv"
    assert stats_csv in paths
    assert stats_csv.read_text().splitlines()[0] == sinter.CSV_HEADER
    rows = sinter.read_stats_from_csv_files(stats_csv)
    assert len(rows) == 2 and {r.json_metadata["mode"] for r in rows} == {"inline", "worker"}
    for r, s in zip(rows, study.document["placements"]):
        assert (r.shots, r.errors, r.decoder) == (300, s["logical_errors"]["loop"], "matching")
        assert (r.json_metadata["device"], r.json_metadata["mode"]) == (s["device"], s["mode"])
        assert r.custom_counts["identical_corrections"] == 300
    again = run_decode_study(load_decode(ROOT / "scenarios" / "decode_user_circuit.yaml"), shots=300)
    with RunFolder(tmp_path / "out2") as folder:
        write_decode_outputs(again, folder)
        folder.commit()
    again_rows = sinter.read_stats_from_csv_files(tmp_path / "out2" / "stats.csv")  # same seed: all but seconds
    def task(r):
        return r.shots, r.errors, r.discards, r.strong_id, r.decoder, r.json_metadata, r.custom_counts
    assert [task(r) for r in again_rows] == [task(r) for r in rows]
    png = tmp_path / "x.png"
    run = subprocess.run([_sinter_cli(), "plot", "--in", str(stats_csv), "--out", str(png),
                          "--x_func", "m.workers", "--group_func", "m.mode"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert png.stat().st_size > 1000


def test_a_sinter_decoder_class_named_in_the_scenario(tmp_path):
    from twin.qec.load import load_decode
    from twin.studies.decode import run_decode_study
    (tmp_path / "mysinter.py").write_text(
        "import pymatching, sinter\n"
        "class Compiled(sinter.CompiledDecoder):\n"
        "    def __init__(self, m): self.m = m\n"
        "    def decode_shots_bit_packed(self, *, bit_packed_detection_event_data):\n"
        "        return self.m.decode_batch(bit_packed_detection_event_data, bit_packed_shots=True,\n"
        "                                   bit_packed_predictions=True)\n"
        "class Dec(sinter.Decoder):\n"
        "    def compile_decoder_for_dem(self, *, dem):\n"
        "        return Compiled(pymatching.Matching.from_detector_error_model(dem))\n")
    base = {"code": "surface", "distance": 3, "rounds": 3, "p": 0.01}
    ld = load_decode(scenario(tmp_path, {**base, "decoder": "sinter:mysinter:Dec", "cost": {"fixed": "1 us"}}))
    mine = run_decode_study(ld).document["placements"][0]
    ref = run_decode_study(load_decode(scenario(tmp_path, {**base, "decoder": "matching"}, name="ref")))
    ref = ref.document["placements"][0]
    assert mine["logical_errors"] == ref["logical_errors"] and mine["identical_corrections"] == 200
    with pytest.raises(ConfigError) as e:
        load_decode(scenario(tmp_path, {**base, "decoder": "sinter:mysinter:Nope", "cost": {"fixed": "1 us"}}))
    assert e.value.key == "decode.decoder" and "Nope" in str(e.value)


def test_the_loop_as_a_sinter_decoder_equals_its_inner_decoder(tmp_path):
    import pymatching

    from twin.qec.codes import memory_circuit
    from twin.qec.sinter_loop import LoopDecoder, recorded_rtt_ps
    c = memory_circuit("rep", 3, 2, 0.03)
    dem = c.detector_error_model(decompose_errors=True)
    loop = LoopDecoder("matching", CAL, "epyc7282", record_dir=tmp_path / "rec")
    compiled = loop.compile_decoder_for_dem(dem=dem)
    det, _ = c.compile_detector_sampler(seed=2).sample(250, separate_observables=True, bit_packed=True)
    got = compiled.decode_shots_bit_packed(bit_packed_detection_event_data=det)
    ref = pymatching.Matching.from_detector_error_model(dem).decode_batch(det, bit_packed_shots=True,
                                                                          bit_packed_predictions=True)
    assert np.array_equal(got, ref)
    rtt = recorded_rtt_ps(tmp_path / "rec", dem)
    assert len(rtt) == 250 and (rtt > 1_000_000).all()  # every shot went round the loop (> 1 us)


@pytest.mark.slow
def test_sinter_collect_with_the_loop_decoder_adds_loop_latency(tmp_path):
    import sinter

    from twin.qec.codes import memory_circuit
    from twin.qec.sinter_loop import LoopDecoder, with_loop_latency
    tasks = [sinter.Task(circuit=memory_circuit("surface", 3, 3, p), json_metadata={"p": p}) for p in (0.005, 0.01)]
    loop = LoopDecoder("matching", CAL, "epyc7282", record_dir=tmp_path / "rec")
    stats = sinter.collect(num_workers=1, tasks=tasks, decoders=["loop"], custom_decoders={"loop": loop},
                           max_shots=500, max_errors=10_000)
    stats = with_loop_latency(stats, tasks, loop)
    assert len(stats) == 2
    for s in stats:
        assert s.shots == 500 and s.json_metadata["loop_requests"] == 500
        assert 1000 < s.json_metadata["loop_rtt_p50_ns"] <= s.json_metadata["loop_rtt_p99_ns"]


# -- a C function -------------------------------------------------------------------------------------
C_RULE = r"""
#include <stddef.h>
#include <stdint.h>
/* examples/rep3_rule.py in C: flip the observable when only the (2, 4) parity is odd */
int rep3_rule(const uint8_t *s, size_t n, uint8_t *reply, size_t m) {
    if (n < 1 || m != 1) return 1;
    int d0 = s[0] & 1, d1 = (s[0] >> 1) & 1, d2 = (s[0] >> 2) & 1, d3 = (s[0] >> 3) & 1;
    reply[0] = (uint8_t)((d1 ^ d3) && !(d0 ^ d2));
    return 0;
}
"""


def test_a_c_function_decodes_like_the_python_rule(tmp_path):
    from twin.qec.load import load_decode
    from twin.studies.decode import run_decode_study
    (tmp_path / "rule.c").write_text(C_RULE)
    subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-o", str(tmp_path / "librule.so"), str(tmp_path / "rule.c")],
                   check=True)
    base = {"code": "rep", "distance": 3, "p": 0.02, "decoder": "function", "cost": {"fixed": "50 ns"}}
    c_doc = run_decode_study(load_decode(scenario(tmp_path, {**base, "function": "librule.so:rep3_rule"})))
    shutil.copy(ROOT / "examples" / "rep3_rule.py", tmp_path / "pyrule_dec.py")
    py_doc = run_decode_study(load_decode(scenario(tmp_path, {**base, "function": "pyrule_dec:decode"}, name="py")))
    a, b = c_doc.document["placements"][0], py_doc.document["placements"][0]
    assert np.array_equal(c_doc.runs[0].corrections, py_doc.runs[0].corrections)
    assert a["logical_errors"] == b["logical_errors"] and a["identical_corrections"] == 200
    with pytest.raises(ConfigError) as e:
        load_decode(scenario(tmp_path, {**base, "function": "librule.so:nosuch"}))
    assert e.value.key == "decode.function" and "\n" not in str(e.value)


def test_a_circuit_files_rounds_count_toward_the_simulated_horizon(tmp_path):
    from twin.qec.load import load_decode
    shutil.copy(ROOT / "scenarios" / "decode_user_circuit.stim", tmp_path)
    decode = {"circuit": "decode_user_circuit.stim", "decoder": "matching", "shots": 1_000_000}
    traffic = {"mode": "open_loop", "period": "1 s"}
    load_decode(scenario(tmp_path, decode, traffic=traffic))  # one request per shot: 11.6 days
    with pytest.raises(ConfigError) as e:  # one per round: the file's 5 rounds make 58 days
        load_decode(scenario(tmp_path, {**decode, "per": "round"}, name="r", traffic=traffic))
    assert e.value.key == "traffic.period" and "5,000,000 requests" in str(e.value)
