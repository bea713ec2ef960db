"""The `twin` command end to end: `twin run` on the bundled scenarios and `twin calibrate` on a tiny
budget. Expected numbers come from the seed (the published p50/p90 table, the card's 250 MHz clock,
the 0.44 us Aurora round trip) or from first principles (64B/66B framing), never from a run.
"""
from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from twin.calibration.params import load_params
from twin.commands import main

ROOT = Path(__file__).resolve().parents[1]
QBLOX = ROOT / "scenarios" / "qblox_open_loop.yaml"
FITTED = ROOT / "calibrations" / "fitted" / "card_path.yaml"

CONSUMERS = ["v80", "epyc7282", "mi210", "epyc9755", "mi355x"]   # scenario order
# Published card-path round trips (seed amd-qblox-exchange-runtime.txt, Figure 7 and its table), ns.
PUBLISHED = {"v80": (2428.0, 2492.0), "epyc7282": (2172.0, 2268.0), "mi210": (3708.0, 3804.0),
             "epyc9755": (1772.0, 1820.0), "mi355x": (3036.0, 3036.0)}
# Seed: V80, EPYC 7282 and MI210 sit in the EPYC 7282 host; EPYC 9755 and MI355X in the EPYC 9755 host.
PLATFORM = {"v80": "epyc7282", "epyc7282": "epyc7282", "mi210": "epyc7282", "epyc9755": "epyc9755",
            "mi355x": "epyc9755"}
KIND = {"v80": "fpga", "epyc7282": "cpu", "mi210": "gpu", "epyc9755": "cpu", "mi355x": "gpu"}
# Seed: at 64 B the GPUs and the EPYC 7282 use per-piece; the V80 and the EPYC 9755 classic.
ENCODING = {"v80": "classic", "epyc7282": "per_piece", "mi210": "per_piece", "epyc9755": "classic",
            "mi355x": "per_piece"}
DEFAULT_SEED = 20261129          # scenarios/card_path_64b.yaml
CARD_CLOCK_PS = 4000             # 250 MHz card clock
STATS = ("p50_ns", "p90_ns", "p99_ns", "p999_ns", "mean_ns")
PCTL = {"p50_ns": 50.0, "p90_ns": 90.0, "p99_ns": 99.0, "p999_ns": 99.9}

# Aurora 64B/66B from first principles: a 64-byte frame is 64 // 8 data blocks + 1 separator
# block = 9 blocks of 66 bits, striped over 4 lanes -> ceil(9 / 4) = 3 block times per lane, one
# block time = 66 bit / 10.3125 Gb/s = 6.4 ns.
SER_PS = math.ceil((64 // 8 + 1) / 4) * 66 * 10**12 / 10.3125e9
REPLY_SEND_PS = 30_000           # seed footnote 1: sending the reply back, 30 ns
LINK_ROUND_TRIP_PS = 440_000     # seed footnote 1: 0.44 us across the cable and both link stages
LINK_STAGE_PS = LINK_ROUND_TRIP_PS / 2 - SER_PS


def env_with_root() -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


def run_cli(args: list[str], columns: int = 80) -> tuple[int, str, str]:
    """`twin ARGS` in-process with stdout/stderr captured and an 80-column console (the width of
    a plain terminal and rich's default when output is not a terminal)."""
    out, err = io.StringIO(), io.StringIO()
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(columns)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = main(args)
            except SystemExit as e:
                rc = e.code
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old
    return rc, out.getvalue(), err.getvalue()


def read_rounds(path: Path) -> dict[str, list[dict[str, int]]]:
    """A run's per-round file (rounds.parquet or rounds.csv) as consumer -> its rows in order."""
    rows: dict[str, list[dict[str, int]]] = {}
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq
        records = pq.read_table(path).to_pylist()
    else:
        with path.open() as f:
            records = list(csv.DictReader(f))
    for r in records:
        rows.setdefault(r["consumer"], []).append({k: int(v) for k, v in r.items() if k != "consumer"})
    return rows


def inverted_cdf(samples: list[int], q: float) -> int:
    """Smallest sample with at least q % of the samples at or below it."""
    s = sorted(samples)
    return s[max(0, math.ceil(q / 100 * len(s)) - 1)]


def sorted_keys_hook(pairs):
    keys = [k for k, _ in pairs]
    assert keys == sorted(keys), f"results.json keys not sorted: {keys}"
    return dict(pairs)


# -- the default scenario, 2000 rounds (shared by the tests below) ------------------------------

ROUNDS = 2000
VERIFY = 200


@pytest.fixture(scope="module")
def default_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("default") / "out"
    assert FITTED.is_file(), f"{FITTED} is missing: `twin run` needs the committed fitted set"
    rc, stdout, stderr = run_cli(["run", "--rounds", str(ROUNDS), "--verify-rounds", str(VERIFY),
                                  "--out", str(out)])
    text = (out / "results.json").read_text() if (out / "results.json").exists() else None
    doc = json.loads(text, object_pairs_hook=sorted_keys_hook) if text else None
    return {"rc": rc, "stdout": stdout, "stderr": stderr, "out": out, "text": text, "doc": doc}


def test_default_run_succeeds_and_writes_three_files(default_run):
    assert default_run["rc"] == 0, default_run["stderr"]
    out = default_run["out"]
    for name in ("results.json", "rounds.parquet", "histograms.png"):  # Parquet by default, no CSV
        assert (out / name).is_file(), name
    assert not (out / "rounds.csv").exists()
    assert (out / "histograms.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "Traceback" not in default_run["stderr"]


def table_part(stdout: str) -> str:
    """The printed table: from its title on (the progress bar above it also shows the names)."""
    i = stdout.find("card-boundary round trip")
    assert i >= 0, stdout
    j = stdout.find("latency budget", i)  # the budget table follows, one row per consumer too
    return stdout[i:j if j > 0 else None]


def test_table_names_every_consumer(default_run):
    """When output is not a terminal (CI, a pipe, a log file)."""
    table = table_part(default_run["stdout"])
    for name in CONSUMERS:
        assert name in table, f"{name!r} not in the printed table:\n{table}"


def test_table_shows_measured_and_twin_values_readably(default_run):
    """Piped output: each consumer's row holds the published p50 and the twin's p50 in µs, unclipped."""
    table = table_part(default_run["stdout"])
    assert "in µs" in table
    rows: dict = {}
    for line in table.splitlines():  # a consumer's row in each fold of the table, joined
        if line.split()[:1] and line.split()[0] in CONSUMERS:
            rows[line.split()[0]] = rows.get(line.split()[0], "") + line
    for c in default_run["doc"]["consumers"]:
        row = rows[c["name"]]
        assert f"{PUBLISHED[c['name']][0] / 1000:.3f}" in row, f"measured p50 of {c['name']} not readable in:\n{table}"
        assert f"{c['p50_ns'] / 1000:.3f}" in row


def test_table_rows_on_a_wide_console(tmp_path):
    """On a wide console each consumer's row holds its measured p50/p90 and the twin's p50/p90."""
    rc, stdout, err = run_cli(["run", "--rounds", "300", "--verify-rounds", "30", "--out", str(tmp_path),
                               "--no-plot", "--no-csv", "--quiet"], columns=250)
    assert rc == 0, err
    doc = json.loads((tmp_path / "results.json").read_text())
    rows = {line.split()[0]: line for line in table_part(stdout).splitlines()
            if line.split()[:1] and line.split()[0] in CONSUMERS}
    assert list(rows) == CONSUMERS, stdout
    for c in doc["consumers"]:
        row = rows[c["name"]]
        p50, p90 = PUBLISHED[c["name"]]
        for ns in (p50, p90, c["p50_ns"], c["p90_ns"], c["p99_ns"], c["p999_ns"]):
            assert f"{ns / 1000:.3f}" in row, (c["name"], ns, row)
        assert f"{c['error_pct']['p50']:+.2f}%" in row


def test_results_json_top_level_follows_docs(default_run):
    doc = default_run["doc"]
    assert set(doc) == {"schema", "scenario", "calibration", "seed", "rounds", "frame_bytes", "traffic",
                        "timing_boundary", "measured", "consumers"}
    assert doc["schema"] == "twin.results/1"
    assert doc["scenario"] == "card_path_64b"
    assert isinstance(doc["calibration"], str) and doc["calibration"]
    assert doc["seed"] == DEFAULT_SEED and type(doc["seed"]) is int
    assert doc["rounds"] == ROUNDS and type(doc["rounds"]) is int
    assert doc["frame_bytes"] == 64 and type(doc["frame_bytes"]) is int
    assert set(doc["traffic"]) == {"mode", "clock", "period_ns", "ppm", "control"}
    assert doc["traffic"]["mode"] == "closed_loop"
    assert doc["traffic"]["clock"] == "card"
    assert doc["traffic"]["period_ns"] is None
    assert doc["traffic"]["ppm"] == 0
    assert doc["traffic"]["control"] == "on card"
    assert isinstance(doc["timing_boundary"], str) and doc["timing_boundary"]
    assert set(doc["measured"]) == {"file", "source"}
    assert doc["measured"]["file"] == "../calibrations/measured/card_path_64b.yaml"  # as the scenario names it
    assert "amd-qblox-exchange-runtime" in doc["measured"]["source"]
    assert isinstance(doc["consumers"], list)


def test_results_json_is_machine_independent(default_run):
    text = default_run["text"]
    assert text.endswith("\n")
    assert str(default_run["out"]) not in text
    assert str(ROOT) not in text


def test_results_json_consumers_follow_docs(default_run):
    cons = default_run["doc"]["consumers"]
    assert [c["name"] for c in cons] == CONSUMERS
    for c in cons:
        name = c["name"]
        assert c["model"] == "sim" and c["function"] == "echo"
        assert set(c) == {"name", "node", "model", "function", "device", "kind", "host", "encoding", "engine", "rounds",
                          "replies_checked", "mismatches", "backlog_max", *STATS, "budget", "measured",
                          "error_pct", "reply_digest", "slowest_round"}, name
        w = c["slowest_round"]
        assert w["rtt_ns"] == c["p999_ns"] or w["rtt_ns"] >= c["p999_ns"], name  # the slowest round
        assert round(sum(w["stages"].values()) * 1000) == round(w["rtt_ns"] * 1000), name
        budget = c["budget"]
        assert [b["stage"] for b in budget] == ["card", "slot_wait", "request_write", "poll", "queue", "service",
                                                "fence", "reply_write", "card_poll"], name
        # the median round's stages add up to a real round trip on the card's 4 ns clock
        total_ps = round(sum(b["median_round_ns"] for b in budget) * 1000)
        assert total_ps % CARD_CLOCK_PS == 0 and total_ps > 0, name
        assert c["node"] == name  # the default scenario's node names are the consumers' names
        assert isinstance(c["device"], str) and c["device"]
        assert c["kind"] == KIND[name]
        assert c["host"] == PLATFORM[name]
        assert c["encoding"] == ENCODING[name]
        assert c["engine"] == "direct+event"
        assert c["rounds"] == ROUNDS and type(c["rounds"]) is int
        assert c["replies_checked"] == min(VERIFY, ROUNDS) and type(c["replies_checked"]) is int
        assert c["mismatches"] == 0 and type(c["mismatches"]) is int
        for k in STATS:
            assert type(c[k]) is float, (name, k)
        assert set(c["measured"]) == {"p50_ns", "p90_ns", "device", "platform", "role"}
        assert c["measured"]["role"] == {"p50": "fit", "p90": "fit"}  # the default calibration's fit targets
        assert set(c["error_pct"]) == {"p50", "p90"}


def test_measured_values_are_the_published_ones(default_run):
    for c in default_run["doc"]["consumers"]:
        p50, p90 = PUBLISHED[c["name"]]
        m = c["measured"]
        assert (m["p50_ns"], m["p90_ns"]) == (p50, p90), c["name"]
        assert m["platform"] == PLATFORM[c["name"]]
        assert isinstance(m["device"], str) and m["device"]
        for stat, meas in (("p50", p50), ("p90", p90)):
            assert c["error_pct"][stat] == pytest.approx(100 * (c[f"{stat}_ns"] - meas) / meas, abs=1e-3)


def test_percentiles_ordered_and_on_the_card_clock(default_run):
    for c in default_run["doc"]["consumers"]:
        assert c["p50_ns"] <= c["p90_ns"] <= c["p99_ns"] <= c["p999_ns"], c
        for k in PCTL:
            ps = c[k] * 1000
            assert ps == round(ps), (c["name"], k)          # exact to the picosecond
            assert round(ps) % CARD_CLOCK_PS == 0, (c["name"], k, c[k])


def test_rounds_file(default_run):
    import pyarrow.parquet as pq
    path = default_run["out"] / "rounds.parquet"
    table = pq.read_table(path)
    hops = ["t_send", "t_in", "ready", "issue", "land", "seen", "start", "reply", "publish", "rland", "t_have",
            "t_back"]
    assert table.column_names == ["consumer", "round", "rtt_ps", "loop_ps", *(f"{h}_ps" for h in hops)]
    assert all(str(t) == "int64" for t in table.schema.types[1:])
    assert table.num_rows == len(CONSUMERS) * ROUNDS
    rows = read_rounds(path)
    assert list(rows) == CONSUMERS
    for name, rs in rows.items():
        assert [r["round"] for r in rs] == list(range(1, ROUNDS + 1)), name
        for r in rs:
            assert r["rtt_ps"] == r["t_have_ps"] - r["t_in_ps"], (name, r)
            assert r["t_in_ps"] % CARD_CLOCK_PS == 0 and r["t_have_ps"] % CARD_CLOCK_PS == 0, (name, r)
            assert r["rtt_ps"] > 0
            # the hops are in order and their stages add up to the round trip exactly
            inner = [r[f"{h}_ps"] for h in hops[1:-1]]
            assert inner == sorted(inner) and sum(b - a for a, b in zip(inner, inner[1:])) == r["rtt_ps"], (name, r)
            # generator on the card: no link, so generator to generator is the card-boundary trip
            assert r["loop_ps"] == r["rtt_ps"], (name, r)
        # closed loop, one in flight, on the card's clock, no gap: the next request enters the
        # card on the edge where the previous reply is back
        for prev, nxt in zip(rs, rs[1:]):
            assert nxt["t_in_ps"] == prev["t_have_ps"], (name, nxt["round"])


def test_results_json_agrees_with_rounds_csv(default_run):
    rows = read_rounds(default_run["out"] / "rounds.parquet")
    for c in default_run["doc"]["consumers"]:
        rtt = [r["rtt_ps"] for r in rows[c["name"]]]
        for k, q in PCTL.items():
            assert c[k] * 1000 == inverted_cdf(rtt, q), (c["name"], k)
        assert c["mean_ns"] == pytest.approx(sum(rtt) / len(rtt) / 1000, abs=1e-3)


# -- argument parsing ---------------------------------------------------------------------------

def test_rounds_in_scientific_notation(tmp_path):
    rc, _, err = run_cli(["run", "--rounds", "1e3", "--verify-rounds", "20", "--out", str(tmp_path),
                          "--no-plot", "--no-csv", "--quiet"])
    assert rc == 0, err
    doc = json.loads((tmp_path / "results.json").read_text())
    assert doc["rounds"] == 1000
    assert [c["rounds"] for c in doc["consumers"]] == [1000] * len(CONSUMERS)
    assert [c["replies_checked"] for c in doc["consumers"]] == [20] * len(CONSUMERS)


@pytest.mark.parametrize("value", ["0", "1.5", "-3", "many", "1e-3"])
def test_bad_rounds_rejected_by_argparse(value, tmp_path):
    rc, out, err = run_cli(["run", "--rounds", value, "--out", str(tmp_path / "o"), "--quiet"])
    assert rc == 2
    assert "--rounds" in err and value in err
    assert "Traceback" not in err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("args", [["--rounds", "inf"], ["--rounds", "1e400"], ["--seed", "-1"]],
                         ids=["rounds-inf", "rounds-overflow", "seed-negative"])
def test_bad_cli_values_exit_2_without_traceback(args, tmp_path):
    """Like a bad scenario value: exit 2 with a message, not an uncaught exception."""
    rc, out, err = run_cli(["run", *args, "--verify-rounds", "5", "--out", str(tmp_path / "o"), "--quiet",
                            "--no-plot", "--no-csv"])
    assert rc == 2, (rc, err)
    assert args[0] in err or args[1] in err
    assert not (tmp_path / "o" / "results.json").exists()


def test_out_that_is_a_file_exits_2(tmp_path):
    target = tmp_path / "not_a_dir"
    target.write_text("keep me\n")
    rc, out, err = run_cli(["run", "--rounds", "10", "--verify-rounds", "5", "--out", str(target), "--quiet",
                            "--no-plot", "--no-csv"])
    assert rc == 2, (rc, err)
    assert str(target) in err
    assert target.read_text() == "keep me\n"


# -- determinism and engines --------------------------------------------------------------------

def small_run(out: Path, *extra: str, rounds: int = 500) -> tuple[bytes, bytes]:
    verify = [] if "event" in extra else ["--verify-rounds", "50"]  # the event engine checks every round
    rc, _, err = run_cli(["run", "--rounds", str(rounds), *verify, "--out", str(out), "--no-plot", "--quiet",
                          *extra])
    assert rc == 0, err
    return (out / "results.json").read_bytes(), (out / "rounds.parquet").read_bytes()


def test_same_seed_same_bytes_other_seed_other_rounds(tmp_path):
    a = small_run(tmp_path / "a", "--seed", "11")
    b = small_run(tmp_path / "b", "--seed", "11")
    c = small_run(tmp_path / "c", "--seed", "12")
    assert a[0] == b[0]
    assert a[1] == b[1]
    assert a[1] != c[1]
    assert json.loads(a[0])["seed"] == 11 and json.loads(c[0])["seed"] == 12


def test_event_engine_gives_the_same_rounds_as_auto(tmp_path):
    auto_json, auto_csv = small_run(tmp_path / "auto", "--seed", "3", "--engine", "auto", rounds=300)
    ev_json, ev_csv = small_run(tmp_path / "event", "--seed", "3", "--engine", "event", rounds=300)
    assert auto_csv == ev_csv
    auto, ev = json.loads(auto_json), json.loads(ev_json)
    for a, e in zip(auto["consumers"], ev["consumers"]):
        assert e["engine"] == "event"
        assert e["replies_checked"] == 300 and e["mismatches"] == 0   # every reply checked
        assert a["engine"] == "direct+event" and a["replies_checked"] == 50
        assert {k: a[k] for k in STATS} == {k: e[k] for k in STATS}


# -- an external control system over Aurora, open loop ----------------------------------------

@pytest.fixture(scope="module")
def qblox_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("qblox") / "out"
    rc, stdout, stderr = run_cli(["run", str(QBLOX), "--rounds", "1000", "--verify-rounds", "100",
                                  "--out", str(out), "--no-plot"])
    assert rc == 0, stderr
    return {"doc": json.loads((out / "results.json").read_text()), "rows": read_rounds(out / "rounds.parquet")}


def test_qblox_traffic_block(qblox_run):
    doc = qblox_run["doc"]
    assert doc["scenario"] == "qblox_open_loop"
    assert doc["rounds"] == 1000
    assert doc["traffic"] == {"mode": "open_loop", "clock": "independent", "period_ns": 5000.0, "ppm": 12.5,
                              "control": "external (aurora)"}
    assert doc["measured"] is None
    assert [c["name"] for c in doc["consumers"]] == CONSUMERS


def test_qblox_loop_block_adds_the_link_and_the_send(qblox_run):
    for c in qblox_run["doc"]["consumers"]:
        assert set(c["loop"]) == set(STATS), c["name"]
        assert c["measured"] is None and "error_pct" not in c
        assert c["loop"]["p50_ns"] <= c["loop"]["p90_ns"] <= c["loop"]["p99_ns"] <= c["loop"]["p999_ns"]
        # at least the Aurora serialisation both ways plus the card's 30 ns send
        assert (c["loop"]["p50_ns"] - c["p50_ns"]) * 1000 >= 2 * SER_PS + REPLY_SEND_PS, c["name"]


def test_qblox_per_round_loop_is_rtt_plus_link_both_ways(qblox_run):
    """Per round: loop = rtt + (serialisation + link stage) both ways + the 30 ns send, plus the
    wait for the card's next 4 ns edge on arrival (0 <= wait < 4 ns); the link stage is the
    seed's 0.44 us link round trip less the two serialisations."""
    fixed = 2 * (SER_PS + LINK_STAGE_PS) + REPLY_SEND_PS    # = 440 ns + 30 ns
    for name, rs in qblox_run["rows"].items():
        for r in rs:
            extra = r["loop_ps"] - r["rtt_ps"]
            assert fixed <= extra < fixed + CARD_CLOCK_PS, (name, r["round"], extra)


def test_qblox_requests_every_5us_on_an_offset_clock(qblox_run):
    """Open loop at 5 us on an independent clock 12.5 ppm off: successive requests enter the card
    5 us +- one 4 ns card cycle apart, and over 999 periods the offset adds up to 999 * 5 us *
    12.5e-6 = 62.4 ns (either sign), give or take one card cycle."""
    period_ps = 5_000_000
    for name, rs in qblox_run["rows"].items():
        t_in = [r["t_in_ps"] for r in rs]
        for a, b in zip(t_in, t_in[1:]):
            assert abs(b - a - period_ps) <= CARD_CLOCK_PS, (name, a, b)
        drift = abs(t_in[-1] - t_in[0] - 999 * period_ps)
        assert abs(drift - 999 * period_ps * 12.5e-6) <= CARD_CLOCK_PS, (name, drift)


# -- a real process ----------------------------------------------------------------------------

def test_twin_run_as_a_process_from_another_folder(tmp_path):
    """`twin run` with no scenario from a folder without scenarios/: the bundled default, output
    under ./runs/card_path_64b/, exit status 0."""
    proc = subprocess.run([sys.executable, "-m", "twin", "run", "--rounds", "300", "--verify-rounds", "30",
                           "--no-plot", "--quiet"], capture_output=True, text=True, cwd=tmp_path,
                          env=env_with_root())
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    doc = json.loads((tmp_path / "runs" / "card_path_64b" / "results.json").read_text())
    assert doc["rounds"] == 300 and [c["name"] for c in doc["consumers"]] == CONSUMERS
    assert (tmp_path / "runs" / "card_path_64b" / "rounds.parquet").is_file()


# -- twin calibrate on a tiny budget ------------------------------------------------------------

@pytest.fixture(scope="module")
def calibrated(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("calibrate")
    shutil.copy(ROOT / "calibrations" / "card_path.yaml", tmp / "card_path.yaml")
    shutil.copytree(ROOT / "calibrations" / "measured", tmp / "measured")
    out = tmp / "fitted.yaml"
    rc, stdout, stderr = run_cli(["calibrate", str(tmp / "card_path.yaml"), "--rounds", "300", "--maxiter", "2",
                                  "--popsize", "2", "--out", str(out)], columns=200)
    return {"rc": rc, "stdout": stdout, "stderr": stderr, "out": out, "tmp": tmp,
            "prior": yaml.safe_load((tmp / "card_path.yaml").read_text())}


def test_calibrate_writes_a_loadable_fitted_set(calibrated):
    assert calibrated["rc"] == 0, calibrated["stderr"]
    fitted = load_params(calibrated["out"])
    assert fitted.fit is None
    block = fitted.fitted
    prior = calibrated["prior"]
    n_free = sum(len(g["free"]) for g in prior["fit"]["groups"])
    assert block["measured_numbers"] == 2 * len(CONSUMERS) == 10
    assert block["free_parameters"] == n_free
    assert block["free_parameters"] < block["measured_numbers"]
    assert block["tied_parameters"] == len(prior["fit"]["tie"])
    assert len(block["residuals"]) == 10
    got = {(r["consumer"], r["stat"]): r["measured_ns"] for r in block["residuals"]}
    assert got == {(c, s): PUBLISHED[c][i] for c in CONSUMERS for i, s in enumerate(("p50", "p90"))}


def test_calibrate_prints_its_time_estimate_before_the_fit(calibrated):
    out = calibrated["stdout"]
    # maxiter 2, popsize 2: groups of 5 and 4 free -> Sobol populations 16 and 8; 3 generations each,
    # plus at most 2 x 14 x free polishing moves
    most = 3 * 16 + 3 * 8 + 28 * 9
    line = next(ln for ln in out.splitlines() if "model evaluations" in ln)
    assert f"at most {most:,} model evaluations" in line and "about" in line, out
    assert out.index("at most") < out.index("fitting group 1/2")


def test_calibrate_derives_the_aurora_link_stage(calibrated):
    fitted = load_params(calibrated["out"])
    assert fitted.aurora.link_stage_ns == pytest.approx(LINK_ROUND_TRIP_PS / 2000 - SER_PS / 1000, abs=1e-9)
    assert fitted.aurora.link_stage_ns == pytest.approx(440 / 2 - 19.2, abs=1e-9)


def test_calibrate_keeps_bounds_ties_and_measured_constants(calibrated):
    fitted = load_params(calibrated["out"])
    prior = calibrated["prior"]
    for g in prior["fit"]["groups"]:
        for key, bounds in g["free"].items():
            assert bounds[0] <= fitted.get(key) <= bounds[1], key
            assert fitted.provenance[key].startswith("fitted"), key
    for dst, src in prior["fit"]["tie"].items():
        assert fitted.get(dst) == fitted.get(src)
    # seed footnote 1 and the V80 paragraph: fixed, not fitted
    assert (fitted.card.engine_land_ns, fitted.card.reply_read_ns, fitted.card.reply_send_ns) == (10, 40, 30)
    assert fitted.consumers["v80"].answer_ns == 28
    assert fitted.provenance["aurora.link_stage_ns"].startswith("derived")


def test_calibrate_prints_residuals(calibrated):
    text = calibrated["stdout"]
    for name in CONSUMERS:
        assert name in text
    assert "10 measured numbers" in text


def test_fitted_set_runs(calibrated, tmp_path):
    sc = yaml.safe_load((ROOT / "scenarios" / "card_path_64b.yaml").read_text())
    sc["calibration"] = str(calibrated["out"])
    sc["measured"] = str(calibrated["tmp"] / "measured" / "card_path_64b.yaml")
    path = tmp_path / "sc.yaml"
    path.write_text(yaml.safe_dump(sc))
    rc, _, err = run_cli(["run", str(path), "--rounds", "200", "--verify-rounds", "20", "--out",
                          str(tmp_path / "o"), "--no-plot", "--no-csv", "--quiet"])
    assert rc == 0, err
    doc = json.loads((tmp_path / "o" / "results.json").read_text())
    assert [c["mismatches"] for c in doc["consumers"]] == [0] * len(CONSUMERS)
