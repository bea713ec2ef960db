"""Honest live measurement: a live run on a contended machine reports its stalled rounds apart, with
a warning, and gives the device's percentiles without them. The contention is made certain: the
shm consumer process is stopped (SIGSTOP) for 50 ms at the first round, so at least the round in flight is
stalled far beyond 1 ms, whatever the machine's load."""
from __future__ import annotations

import json

import numpy as np
import pytest
from test_live_shm import SHM, scenario

from twin.commands import main


@pytest.mark.slow  # a live run: tens of seconds on a loaded machine; the output's machinery: test_validate.py
def test_a_contended_live_run_reports_stalled_rounds_apart(tmp_path, capsys):
    # the window opens before the first request lands (about 1 us of simulated time): whatever the
    # machine's load, the first round is frozen for 50 ms of wall clock
    faults = {"host_freeze": [{"at": "500 ns", "duration": "50 ms"}], "timeout": "20 us"}
    sc = scenario(tmp_path, rounds=1500, bridge=SHM, faults=faults)
    out = tmp_path / "out"
    assert main(["run", str(sc), "--out", str(out), "--no-plot", "--no-csv"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    live = json.loads((out / "results.json").read_text())["consumers"][0]["live"]
    st = live["stalled"]
    frozen = live["frozen_at_rounds"]
    with np.load(out / "live_rounds.npz") as z:  # the frozen round is counted stalled (on a loaded machine
        svc = z[f"{live_node(out)}.service_ns"]     # more than the 20 listed may come before it)
    assert frozen and svc[frozen[0] - 1] > st["threshold_ns"]
    assert st["rounds"] >= 1 and st["longest_ns"] >= 45e6          # it waited out (most of) the 50 ms freeze
    assert live["clean"]["round_trip"]["p999_ns"] < 1e6            # and is not in the device's own percentiles
    assert "stalled rounds left out" in text and "warning" in text and "rounds" in text
    assert "isolation" in live and "load_1min" in live["isolation"]


def live_node(out) -> str:
    return json.loads((out / "results.json").read_text())["consumers"][0]["node"]


def test_a_run_that_changes_level_midway_is_flagged_and_a_stationary_one_is_not():
    """find_level_shift: 20,000 rounds drawn from one distribution (2 us + Exp(100 ns), on the 4 ns
    grid) are one level; the same with the second half 150 ns slower (a thread moved to a farther
    core: 7 % of the median) is flagged, its block medians showing the step."""
    from twin.devices.isolation import SHIFT_WARN_PCT, find_level_shift
    rng = np.random.default_rng(7)
    one = (2_000_000 + rng.exponential(100_000, 20_000)) // 4000 * 4000
    flat = find_level_shift(one.astype(np.int64))
    assert not flat["shifted"] and flat["spread_pct"] < SHIFT_WARN_PCT
    step = one.copy()
    step[10_000:] += 152_000
    got = find_level_shift(step.astype(np.int64))
    assert got["shifted"] and got["kruskal_p"] < 1e-100
    meds = got["block_p50_ns"]
    assert max(meds[:5]) + 100 < min(meds[5:])  # the step between the fifth and the sixth block
    assert find_level_shift(step[:400].astype(np.int64)) is None  # too few rounds per block to say
    keep = np.zeros(len(step), bool)
    keep[:10_000] = True  # the rounds kept (the slow half left out as if stalled): one level again
    assert not find_level_shift(step.astype(np.int64), keep)["shifted"]
