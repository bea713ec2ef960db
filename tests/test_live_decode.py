"""`twin decode` with a live shm placement at the stream's pace (twin.qec.live_pace, hb_paced with a
window): the live consumer decodes the stream's real syndrome bytes with the runtime library's C
lookup decoder; its corrections are the device's own reply bytes, compared with the direct decode;
backlog and deadline misses are measured from the paced loop's instants and shown beside the same
placement simulated. A consumer that dies or hangs ends the study within its timeout, the whole
shots so far saved and the placement and request named. Timing bounds are none: the speed figures
are BENCHMARKS.md's (the machine may be loaded)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import yaml

from twin.commands import main
from twin.config import ConfigError

ROOT = Path(__file__).resolve().parent.parent
PINS = {"producer_cpu": 0, "cpu": 1} if {0, 1} <= os.sched_getaffinity(0) else {}


@pytest.fixture(scope="module", autouse=True)
def live_shm_runs():
    """Skip the module where a live shm consumer cannot run here (no C compiler, no POSIX shared memory)."""
    from hw_bridge.build import BuildError
    from hw_bridge.contract import BridgeSettings, LiveFailure
    from hw_bridge.shm import ShmEndpoint
    try:
        ep = ShmEndpoint(BridgeSettings("shm", timeout_ns=2_000_000_000))
        ep.open(32, 4, "classic")
        ep.close()
    except (BuildError, LiveFailure, OSError) as e:
        pytest.skip(f"a live shm consumer cannot run here: {str(e).splitlines()[0]}")


def scenario(tmp_path, *, shots=4000, bridge=None, traffic=None, decoder_code=("rep", 3, 1), **extra) -> Path:
    code, dist, rounds = decoder_code  # the standard tables (twin.qec.lookup.STANDARD): C in the runtime library
    doc = {"name": "live_decode_test", "calibration": str(ROOT / "calibrations" / "fitted" / "card_path.yaml"),
           "hosting": str(ROOT / "calibrations" / "hosting.yaml"), "seed": 3,
           "traffic": traffic or {"mode": "open_loop", "period": "1 us", "clock": "card"}, "deadline": "10 us",
           "decode": {"code": code, "distance": dist, "rounds": rounds, "p": 0.001, "shots": shots, "decoder": "lookup",
                      "placements": [{"device": "epyc7282", "mode": "inline", "model": "live",
                                      "bridge": bridge or {"backend": "shm", "timeout": "2 s", **PINS}}]},
           **extra}
    p = tmp_path / "sc.yaml"
    p.write_text(yaml.safe_dump(doc))
    return p


def decode(tmp_path, capsys, sc: Path):
    out = tmp_path / "out"
    rc = main(["decode", str(sc), "--out", str(out), "--quiet", "--no-plot"])
    cap = capsys.readouterr()
    doc = json.loads((out / "results.json").read_text()) if (out / "results.json").exists() else None
    return rc, cap.err + cap.out, doc, out


@pytest.mark.parametrize("code", [("rep", 3, 1), ("steane", 3, 2)])
def test_live_decoder_at_1us_gives_the_direct_decodes_corrections(tmp_path, capsys, code):
    """The acceptance: 0 corrections differing from the direct decode on a 1 µs stream; the live
    block holds the measured stream beside the simulated one over the same requests, with deadline
    misses counted on both and the late requests counted."""
    rc, err, doc, out = decode(tmp_path, capsys, scenario(tmp_path, decoder_code=code))
    assert rc == 0, err
    s = doc["placements"][0]
    assert s["model"] == "live" and s["engine"] == "paced"
    assert s["function"]["name"] == ("decode_rep3" if code[0] == "rep" else "decode_steane7")
    assert s["requests"] == 4000 and s["identical_corrections"] == 4000 and s["card_mismatches"] == 0
    assert s["replies_checked"] == 4000
    lv = s["live"]
    assert lv["backend"] == "shm" and lv["error"] is None
    for side in ("measured", "simulated"):
        x = lv[side]
        assert x["requests"] == 4000 and isinstance(x["deadline_misses"], int) and x["backlog"]["max"] >= 0
        assert x["reaction"]["p50_ns"] > 0
    pace = lv["pace"]
    assert pace["paced"] and len(pace["late_first"]) == min(20, pace["late_rounds"])
    # the measured side is this run's own rows: misses over the deadline of the card-boundary round trip
    assert lv["measured"]["deadline_misses"] == s["deadline_misses"]
    assert "against the same placement simulated" in " ".join(err.split())
    import pyarrow.parquet as pq
    t = pq.read_table(out / "requests.parquet").to_pandas()
    assert len(t) == 4000 and (t["start_ps"] >= t["arrival_ps"]).all() and (t["correction_ps"] > t["end_ps"]).all()


def test_a_syndrome_changes_the_live_correction(tmp_path, capsys):
    """The live corrections are the device's own bytes: a decode of all-zero syndromes answers 0, and
    the stream's syndromes give the table's nonzero corrections where the direct decode has them."""
    from twin.qec.load import load_decode
    from twin.studies.decode import _Study
    ld = load_decode(scenario(tmp_path, shots=20_000))
    st = _Study(ld, None, None, None, "auto", 10_000)
    r = st.runner(ld.sc.decode.placements[0])()
    assert r.extra["engine"] == "paced"
    assert np.array_equal(r.corrections, r.direct) and r.corrections.any() and not r.corrections.all()
    assert "simulated" in r.extra and r.extra["simulated"].extra["engine"] != "paced"


@pytest.mark.parametrize("kind", ["die", "hang"])
def test_a_live_decoder_that_dies_or_hangs_ends_the_study_with_its_whole_shots(tmp_path, capsys, kind):
    bridge = {"backend": "shm", "timeout": "300 ms", "fault": {"kind": kind, "round": 2500}, **PINS}
    rc, err, doc, out = decode(tmp_path, capsys, scenario(tmp_path, bridge=bridge))
    assert rc == 3, err
    line = next(ln for ln in err.splitlines() if ln.startswith("twin: error:"))
    assert "placement 'epyc7282:inline'" in line and f"{'dead' if kind == 'die' else 'hung'} at round 2500" in line
    assert "request 2,500 of 4,000" in line and "2,499 requests completed" in line
    assert doc["partial"] is True
    s = doc["placements"][0]
    assert s["requests"] == 2499 and s["identical_corrections"] == 2499 and s["shots_requested"] == 4000
    assert s["live"]["error"]["kind"] == ("dead" if kind == "die" else "hung") and s["live"]["error"]["round"] == 2500
    assert json.loads((out / "manifest.json").read_text()).get("partial")


def test_pace_true_where_the_paced_loop_cannot_run_is_refused_at_load(tmp_path):
    from twin.qec.load import load_decode
    sc = scenario(tmp_path, bridge={"backend": "shm", "pace": True},
                  traffic={"mode": "closed_loop", "in_flight": 2, "clock": "card"})
    with pytest.raises(ConfigError) as e:
        load_decode(sc)
    line = str(e.value)
    assert "\n" not in line and "decode.placements[0].bridge.pace: True" in line and "in_flight 2" in line


def test_pace_false_runs_round_by_round(tmp_path, capsys):
    rc, err, doc, _ = decode(tmp_path, capsys, scenario(tmp_path, shots=300, bridge={"backend": "shm", "pace": False}))
    assert rc == 0, err
    s = doc["placements"][0]
    assert s["engine"] == "event" and "live" not in s and s["identical_corrections"] == 300


def test_the_bundled_scenario_is_a_paced_live_stream():
    from twin.qec.load import load_decode
    ld = load_decode(ROOT / "scenarios" / "decode_live_rep3_1us.yaml")
    pl = ld.sc.decode.placements[0]
    assert pl.model == "live" and pl.bridge.backend == "shm" and pl.bridge.pace is True
    from twin.units import time_ps
    assert ld.sc.traffic.mode == "open_loop" and time_ps(ld.sc.traffic.period) == 1_000_000
