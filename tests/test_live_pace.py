"""The paced live loop (hb_paced, hw_bridge.paced, twin.engine.paced): requests leave at their
simulated instants mapped to wall time, never before; every round's lateness and the consumer's
own clock are recorded; late rounds are counted and named. Timing bounds are generous (a loaded
2-core machine): the speed targets are benchmarks/live_pace.py's."""
import json
import os
from pathlib import Path

import numpy as np
import pytest
import yaml
from test_live_shm import run, scenario

from hw_bridge.contract import BridgeSettings
from hw_bridge.paced import PacedFlow, Pacing
from hw_bridge.shm import ShmEndpoint
from twin.commands import main
from twin.engine.paced import _images
from twin.exchange.encoding import get_encoding

ROOT = Path(__file__).resolve().parents[1]

# producer and consumer on cores of their own where this process has two: both spin, and on one core
# they would take turns a scheduler slice at a time
PINS = {"producer_cpu": 0, "cpu": 1} if {0, 1} <= os.sched_getaffinity(0) else {}


def frames(n: int, enc="classic", payload=64, stride=128):
    seqs = np.arange(1, n + 1, dtype=np.uint32)
    pay = (np.arange(n * payload, dtype=np.uint64).reshape(n, payload) * 7 % 253).astype(np.uint8)
    return _images(get_encoding(enc), seqs, pay, 0, stride)


def paced(at_ps, closed, pacing=Pacing(), enc="classic", window=1, replies=None):
    n = len(at_ps)
    ep = ShmEndpoint(BridgeSettings("shm", timeout_ns=2_000_000_000, **PINS))
    ep.open(128, 8, enc, stamps=True)
    try:
        img, ln = frames(n, enc)
        f = PacedFlow(ep, np.asarray(at_ps, np.int64), closed, pacing, window=window)
        while f.done < n:
            d = f.done
            f.step(img[d:], ln[d:], img[d:], ln[d:], None if replies is None else replies[d:])
    finally:
        ep.close()
    return f


def test_a_window_streams_requests_before_the_replies_come():
    """Open loop with a window of 8 (the ring's slots): requests are written at their instants while
    fewer than 8 await replies, so some request leaves before the reply to the one before it is seen
    (one in flight never does); never more than 8 in flight, every reply right, each reply's bytes
    kept, the consumer's own clock stamped for every round; calls of a few rounds go on with the
    requests in flight."""
    n = 3000
    at = np.arange(n, dtype=np.int64) * 1000  # 1 ns apart: the window is always full
    rep = np.zeros((n, 128), np.uint8)
    f = paced(at, False, Pacing(chunk=37), window=8, replies=rep)
    assert f.done == n and not f.bad.any() and (f.lateness_ns() >= 0).all()
    assert (f.sent[1:] < f.seen[:-1]).any()  # streamed: written before the previous reply was seen
    assert (f.sent[8:] > f.seen[:-8]).all()  # at most 8 in flight: round k + 8 waits for reply k
    img, _ = frames(n)
    assert np.array_equal(rep, img)  # echo: each reply is its request, as the producer saw it
    # the consumer saw each request after it was written (its out stamp is read after it published,
    # so a consumer preempted there may stamp after the producer saw the reply: not asserted)
    assert (f.dev_in >= f.sent).all() and (f.dev_in <= f.dev_out).all()
    one = paced(at[:500], False)
    assert (one.sent[1:] > one.seen[:-1]).all()


def test_a_window_is_an_open_loops_and_within_the_ring():
    ep = ShmEndpoint(BridgeSettings("shm"))
    ep.slots = 8
    with pytest.raises(ValueError, match="1 for a closed loop"):
        PacedFlow(ep, np.zeros(4, np.int64), closed=True, window=2)
    with pytest.raises(ValueError, match="min\\(slots 8, 160\\)"):
        PacedFlow(ep, np.zeros(4, np.int64), closed=False, window=9)


def test_images_are_the_encodings_own_layout():
    for name in ("classic", "per_piece"):
        enc = get_encoding(name)
        img, ln = frames(3, name, payload=40)
        for i in range(3):
            want = bytearray(128)
            pay = bytes(img[i, 16:56]) if name == "classic" else None
            if pay is None:  # per-piece: the payload is the pieces' data
                pay = b"".join(bytes(img[i, 16 * k + 4:16 * k + 16]) for k in range(1, 5))[:40]
            for off, d in enc.writes(i + 1, pay):
                want[off:off + len(d)] = d
            assert ln[i] == enc.slot_bytes(40) and bytes(img[i]) == bytes(want)


def test_closed_loop_sends_each_request_its_gap_after_the_reply():
    """Closed loop, 300 µs simulated from reply to next request: never sent early, the planned
    instant is the previous reply seen + the gap, and the consumer's own clock sees at least it."""
    n = 40
    at = np.full(n, 300_000_000, np.int64)
    at[0] = 0
    f = paced(at, True)
    assert f.done == n and not f.bad.any()
    late = f.lateness_ns()
    assert (late >= 0).all()  # never before its instant
    assert (f.planned[1:] == f.seen[:-1] + 300_000).all()
    # generous: under `nice` on a loaded machine the scheduler holds either process off its core for
    # tens of ms at a time (the benchmark measures the pace on a quiet one)
    assert (late < 1_000_000_000).all()
    assert f.late_rounds == int((late > 1000).sum())
    # the consumer's clock: it saw each request after it was written and stamped its reply after that;
    # its publish stamp is read just after the publish, so a consumer preempted between the two stamps
    # later than the producer saw the reply (seen on a loaded machine): only the typical round is ordered
    assert (f.dev_in >= f.sent).all() and (f.dev_in <= f.dev_out).all()
    assert np.median(f.seen - f.dev_out) >= 0
    seen, sim = f.device_gaps_ns()
    assert len(seen) == n - 1 and (sim == 300_000).all() and np.median(seen) >= 300_000
    assert (seen < sim + 10**9).all()


def test_open_loop_keeps_its_instants_whatever_the_replies():
    """Open loop: request k is planned at epoch + at[k] (not after the reply), so a period shorter
    than a round trip makes rounds late, and every one of them is counted."""
    n = 2000
    at = np.arange(n, dtype=np.int64) * 1000  # 1 ns apart: far faster than any round trip
    f = paced(at, False, enc="per_piece")
    assert not f.bad.any()
    assert (f.planned - f.planned[0] == np.arange(n)).all()
    late = f.lateness_ns()
    assert (late >= 0).all() and f.late_rounds == int((late > 1000).sum()) > n // 2
    # 2 ms apart, spun (a stall is caught up); the sleep path's timing is the benchmark's
    slow = paced(np.arange(60, dtype=np.int64) * 2_000_000_000, False, Pacing(spin_ns=5_000_000))
    assert (slow.planned - slow.planned[0] == np.arange(60) * 2_000_000).all()
    assert (slow.lateness_ns() < 1_000_000_000).all()  # generous, as above
    seen, sim = slow.device_gaps_ns()
    assert (sim == 2_000_000).all() and len(seen) == 59 and (seen > 0).all()


def test_long_gaps_sleep_and_never_leave_early():
    """Gaps above the spin threshold are slept (clock_nanosleep) to just before the instant, then spun:
    no request leaves before its instant, the instants are the plan's."""
    at = np.arange(8, dtype=np.int64) * 3_000_000_000  # 3 ms apart, spin below 500 µs
    f = paced(at, False, Pacing(spin_ns=500_000))
    assert (f.planned - f.planned[0] == np.arange(8) * 3_000_000).all() and (f.lateness_ns() >= 0).all()


def test_a_plan_must_be_one_instant_per_round():
    ep = ShmEndpoint(BridgeSettings("shm"))
    with pytest.raises(ValueError, match="open loop"):
        PacedFlow(ep, np.array([5, 10]), closed=False)
    with pytest.raises(ValueError, match="non-negative"):
        PacedFlow(ep, np.array([0, -1]), closed=True)


def test_twin_run_records_lateness_and_names_late_rounds(tmp_path, capsys):
    """twin run of a live shm node: the paced loop, lateness_ps per round in live_rounds.npz, the
    late rounds (bridge.late 0 ns: any lateness) counted and named in results.json and the output."""
    bridge = {"backend": "shm", "timeout": "2 s", "late": "0 ns", **PINS}
    rc, err, doc, out = run(tmp_path, capsys, rounds=300, bridge=bridge,
                            traffic={"mode": "closed_loop", "gap": "20 us"})
    assert rc == 0, err
    s = doc["consumers"][0]
    assert s["engine"] == "paced" and s["replies_checked"] == 300
    pace = s["live"]["pace"]
    with np.load(out / "live_rounds.npz") as z:
        late = z["live.lateness_ps"]
        target = z["live.idle_target_ns"]
        assert len(late) == len(z["live.service_ns"]) == 300 and (late >= 0).all()
        assert (z["live.device_in_ns"] > 0).all()
    assert pace["paced"] and pace["late_threshold_ns"] == 0 and pace["late_rounds"] == int((late > 0).sum())
    assert pace["late_first"] == [int(i) + 1 for i in np.nonzero(late > 0)[0][:20]]
    assert (target[1:] >= 20_000).all()  # the gap and the card path both ways
    if pace["late_rounds"]:
        assert f"{pace['late_rounds']:,} round(s) sent more than 0 µs after their instant" in err


def test_pace_false_runs_round_by_round_and_says_so(tmp_path, capsys):
    rc, err, doc, out = run(tmp_path, capsys, rounds=200, bridge={"backend": "shm", "timeout": "2 s", "pace": False})
    assert rc == 0, err
    s = doc["consumers"][0]
    assert s["engine"] == "event" and s["live"]["pace"] == {"paced": False, "why": "bridge.pace is false"}
    with np.load(out / "live_rounds.npz") as z:
        assert "live.lateness_ps" not in z


@pytest.mark.parametrize("bridge,key", [({"backend": "cuda", "pace": True}, "pace"),
                                        ({"backend": "shm", "pace": False, "late": "2 us"}, "late"),
                                        ({"backend": "cuda", "spin": "10 us"}, "spin")])
def test_pace_keys_that_would_not_apply_are_refused_at_load(tmp_path, capsys, bridge, key):
    rc = main(["run", str(scenario(tmp_path, bridge=bridge)), "--out", str(tmp_path / "o"), "--quiet"])
    err = capsys.readouterr().err.strip()
    assert rc != 0 and len(err.splitlines()) == 1 and f"bridge.{key}" in err


def test_pace_true_where_the_paced_loop_cannot_run_is_one_error(tmp_path, capsys):
    faults = {"host_freeze": [{"at": "50 us", "duration": "20 us"}]}
    p = scenario(tmp_path, bridge={"backend": "shm", "pace": True}, faults=faults)
    rc = main(["run", str(p), "--out", str(tmp_path / "o"), "--quiet", "--no-plot"])
    err = capsys.readouterr().err.strip()
    assert rc != 0 and len(err.splitlines()) == 1 and "bridge.pace" in err and "host_freeze" in err
    doc = yaml.safe_load(p.read_text())
    doc["nodes"][2]["bridge"] = {"backend": "shm"}  # the default: round by round, the reason kept
    p.write_text(yaml.safe_dump(doc))
    out = tmp_path / "o2"
    assert main(["run", str(p), "--out", str(out), "--quiet", "--no-plot", "--rounds", "50"]) == 0
    pace = json.loads((out / "results.json").read_text())["consumers"][0]["live"]["pace"]
    assert pace["paced"] is False and "host_freeze" in pace["why"]


def test_a_live_cuda_flow_runs_on_the_paced_loop_and_udp_stays_round_by_round():
    """The cuda backend's producer side is the same C loop as shm's: its flows are paced (no Python
    between rounds); the UDP agent's are not (each round is a datagram through Python)."""
    from twin.engine.paced import paced_refusal
    from twin.scenario import load_scenario
    from twin.scenario.compile import compile_scenario
    loaded = load_scenario(ROOT / "scenarios" / "live_gpu_cuda.yaml")
    spec = compile_scenario(loaded, 100).flows[0].spec
    assert spec.bridge.backend == "cuda" and paced_refusal(spec) is None
    from dataclasses import replace
    udp = replace(spec, bridge=replace(spec.bridge, backend="udp"))
    assert "round by round" in (paced_refusal(udp) or "")


@pytest.mark.skipif(not __import__("hw_bridge.cuda", fromlist=["gpu_available"]).gpu_available()[0],
                    reason="no NVIDIA GPU, CuPy or nvcc here")
def test_twin_run_paces_a_live_cuda_kernel(tmp_path):
    out = tmp_path / "o"
    assert main(["run", str(ROOT / "scenarios" / "live_gpu_cuda.yaml"), "--rounds", "2000", "--out", str(out),
                 "--quiet", "--no-plot"]) == 0
    c = json.loads((out / "results.json").read_text())["consumers"][0]
    assert c["engine"] == "paced" and c["live"]["backend"] == "cuda" and c["live"]["pace"]["paced"] is True
    assert c["mismatches"] == 0


def test_a_stop_from_another_thread_ends_a_whole_call_at_a_round_boundary():
    """A whole-block call (no chunk, no wall-time bound) runs until the flow's end unless stopped: a
    stop set from another thread ends it at a round boundary, every round before it whole and right,
    the call returning (not raising) well before the flow's end; cleared, the flow goes on."""
    import threading
    import time
    n = 400_000
    at = np.full(n, 20_000_000, np.int64)  # closed loop, 20 µs after each reply: 8 s in all
    at[0] = 0
    ep = ShmEndpoint(BridgeSettings("shm", timeout_ns=2_000_000_000, **PINS))
    ep.open(128, 8, "classic", stamps=True)
    try:
        img, ln = frames(n)
        f = PacedFlow(ep, at, True)
        threading.Timer(0.3, f.stop).start()
        t = time.monotonic()
        got = f.step(img, ln, img, ln, whole=True)
        took = time.monotonic() - t
        assert 0 < got == f.done < n and took < 4 and not f.bad[:got].any()
        f.clear_stop()
        d = f.done
        more = f.step(img[d:d + 100], ln[d:d + 100], img[d:d + 100], ln[d:d + 100], whole=True)
        assert more == 100 and not f.bad[:f.done].any()
    finally:
        ep.close()


def test_twin_run_paces_a_block_in_one_call_and_a_stop_still_saves_the_rounds(tmp_path, capsys, monkeypatch):
    """A live flow whose slot images fit a block runs in one C call (no Python between its rounds,
    none every 16,384 rounds as before); a stop asked for while it runs (the signal handler's
    request_stop) ends it at a round boundary within a fraction of a second, exit 130, the whole
    rounds so far saved as partial (a 10 s flow stopped 0.3 s in)."""
    import threading

    from twin.engine import stop as engine_stop
    calls = []
    step = PacedFlow.step
    stop_after: list[float] = []  # set: ask for a stop this long after the live flow starts

    def counted(self, *a, **kw):
        calls.append(kw.get("whole", False))
        if stop_after:
            threading.Timer(stop_after[0], engine_stop.request_stop).start()
        return step(self, *a, **kw)
    monkeypatch.setattr(PacedFlow, "step", counted)
    bridge = {"backend": "shm", "timeout": "2 s", **PINS}
    rc, err, doc, out = run(tmp_path, capsys, rounds=40_000, bridge=bridge)
    assert rc == 0, err
    assert doc["consumers"][0]["engine"] == "paced" and calls == [True]
    calls.clear()
    stop_after.append(0.3)
    (tmp_path / "b").mkdir()
    try:
        rc, err, doc, out = run(tmp_path / "b", capsys, rounds=200_000, bridge=bridge,
                                traffic={"mode": "closed_loop", "gap": "50 us"})
    finally:
        engine_stop.clear_stop()
    assert rc == 130, err
    assert calls == [True]
    assert doc["partial"] is True and 0 < doc["consumers"][0]["rounds"] < 200_000
    assert doc["consumers"][0]["mismatches"] == 0
