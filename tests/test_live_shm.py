"""Model live with the shm backend: a consumer process running qrt.h over POSIX shared memory
stands for a simulated consumer; failures are detected and the rounds so far kept."""
import json
import os
import signal
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from hw_bridge.contract import BridgeSettings, LiveFailure
from hw_bridge.shm import ShmEndpoint
from twin.commands import main
from twin.config import ConfigError
from twin.exchange.encoding import get_encoding
from twin.runtime.functions import lookup
from twin.scenario import load_scenario

ROOT = Path(__file__).resolve().parent.parent
CAL = str(ROOT / "calibrations" / "fitted" / "card_path.yaml")


def scenario(tmp_path, *, rounds=2000, encoding="classic", function="echo", bridge=None, faults=None,
             device="epyc7282", model="live", extra_nodes=(), traffic=None):
    doc = {"name": "live_test", "calibration": CAL, "seed": 5, "rounds": rounds, "frame_bytes": 64,
           "encoding": encoding, "function": function, "slots": 8,
           "nodes": [{"name": "gen", "kind": "generator"}, {"name": "u55c", "kind": "link_card"},
                     {"name": "live", "kind": "consumer", "device": device, "model": model,
                      **({"bridge": bridge} if bridge is not None else {})}, *extra_nodes],
           "links": [{"from": "gen", "to": "u55c", "kind": "on_card"}, {"from": "u55c", "to": "live", "kind": "pcie"}]
           + [{"from": "u55c", "to": n["name"], "kind": "pcie"} for n in extra_nodes]}
    if faults:
        doc["faults"] = faults
    if traffic:
        doc["traffic"] = traffic
    p = tmp_path / "sc.yaml"
    p.write_text(yaml.safe_dump(doc))
    return p


def run(tmp_path, capsys, **kw):
    out = tmp_path / "out"
    rc = main(["run", str(scenario(tmp_path, **kw)), "--out", str(out), "--quiet", "--no-plot"])
    cap = capsys.readouterr()
    err = cap.err + cap.out
    doc = json.loads((out / "results.json").read_text()) if (out / "results.json").exists() else None
    return rc, err, doc, out


SHM = {"backend": "shm", "timeout": "2 s"}


@pytest.mark.parametrize("encoding,function", [("classic", "echo"), ("per_piece", "sum32"), ("classic", "invert")])
def test_live_run_checks_every_reply(tmp_path, capsys, encoding, function):
    rounds = 5_000 if function == "echo" else 2000  # 8 slots: the ring wraps hundreds of times either way
    rc, err, doc, out = run(tmp_path, capsys, rounds=rounds, encoding=encoding, function=function, bridge=SHM)
    assert rc == 0, err
    s = doc["consumers"][0]
    assert s["model"] == "live" and s["engine"] == "paced"
    assert s["replies_checked"] == rounds and s["mismatches"] == 0
    lv = s["live"]
    assert lv["backend"] == "shm" and lv["rounds"] == rounds and lv["error"] is None
    # the simulated counterpart ran over the same rounds; the live round trip is the card path plus
    # the measured service, so it exceeds the service alone
    assert lv["simulated"]["model"] == "sim" and lv["simulated"]["p50_ns"] > 0
    assert s["p50_ns"] > lv["service"]["p50_ns"] > 0
    with np.load(out / "live_rounds.npz") as z:
        assert len(z["live.rtt_ps"]) == rounds and (z["live.service_ns"] > 0).all()


@pytest.mark.parametrize("function", ["decode_rep3", "decode_steane7"])
def test_live_consumer_serves_the_lookup_decoders(tmp_path, capsys, function):
    """The shm consumer's dispatch table holds the lookup decoders' C (qrt_functions.c): every reply of
    a live decode_rep3 / decode_steane7 flow is the reference answer (before, the consumer answered
    each with 'unknown function' and every round was a mismatch)."""
    rc, err, doc, _ = run(tmp_path, capsys, rounds=3000, function=function, bridge=SHM)
    assert rc == 0, err
    s = doc["consumers"][0]
    assert s["engine"] == "paced" and s["replies_checked"] == 3000 and s["mismatches"] == 0


def test_killing_the_consumer_ends_the_run_with_the_rounds_so_far(tmp_path, capsys):
    me = os.getpid()
    killed = []

    def killer():  # SIGKILL our consumer child once it has served a while
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not killed:
            for d in os.listdir("/proc"):
                if not d.isdigit():
                    continue
                try:
                    stat = Path(f"/proc/{d}/stat").read_text()
                except OSError:
                    continue
                comm, rest = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:].split()
                if comm.startswith("hb_shm_consume") and int(rest[1]) == me:
                    time.sleep(1.0)
                    os.kill(int(d), signal.SIGKILL)
                    killed.append(int(d))
                    return
            time.sleep(0.05)

    t = threading.Thread(target=killer, daemon=True)
    t.start()
    rc, err, doc, out = run(tmp_path, capsys, rounds=2_000_000, bridge={"backend": "shm", "timeout": "300 ms"})
    t.join()
    assert killed
    assert rc == 3
    assert "dead" in err and "killed by signal 9" in err and "rounds completed, being saved in" in err
    assert doc["partial"] is True
    done = doc["consumers"][0]["replies_checked"]
    assert 0 < done < 2_000_000
    assert doc["rounds"] == doc["consumers"][0]["rounds"] == done  # completed, not requested
    assert doc["rounds_requested"] == doc["consumers"][0]["rounds_requested"] == 2_000_000
    s = doc["consumers"][0]
    assert s["live"]["error"]["kind"] == "dead"
    done = s["live"]["rounds"]
    assert 0 < done < 2_000_000 and s["live"]["error"]["round"] == done + 1
    assert s["replies_checked"] == done and s["mismatches"] == 0
    assert (out / "live_rounds.npz").exists()


@pytest.mark.parametrize("kind,failure", [("die", "dead"), ("hang", "hung")])
def test_dead_or_hung_consumer_is_reported_with_its_round(tmp_path, capsys, kind, failure):
    rc, err, doc, _ = run(tmp_path, capsys, rounds=2000,
                          bridge={"backend": "shm", "timeout": "200 ms", "fault": {"kind": kind, "round": 1234}})
    assert rc == 3
    assert f"{failure} at round 1234" in err
    s = doc["consumers"][0]
    assert s["live"]["error"] == {"kind": failure, "round": 1234, "detail": s["live"]["error"]["detail"]}
    assert s["replies_checked"] == 1233


def test_wrong_answer_is_a_mismatch_on_its_round(tmp_path, capsys):
    rc, err, doc, out = run(tmp_path, capsys, rounds=2000, bridge={**SHM, "fault": {"kind": "wrong", "round": 777}})
    assert rc == 1
    assert "1 reply did not match the reference answer (bridge.fault: a wrong answer injected at round 777)" in err
    s = doc["consumers"][0]
    assert s["mismatches"] == 1 and s["live"]["error"] is None
    assert s["live"]["mismatch_rounds"] == [777] and "answered wrongly at round(s) 777" in err


def test_live_host_freeze_stalls_then_recovers(tmp_path, capsys):
    # SIGSTOP the live consumer for 50 ms at 1 ms of simulated time; the card's reply timeout 20 us
    faults = {"host_freeze": [{"at": "1 ms", "duration": "50 ms"}], "timeout": "20 us"}
    rc, err, doc, _ = run(tmp_path, capsys, rounds=2000, bridge=SHM, faults=faults)
    assert rc == 0, err
    s = doc["consumers"][0]
    hf = s["host_freeze"]
    assert s["mismatches"] == 0 and s["replies_checked"] == 2000
    assert s["live"]["frozen_at_rounds"] and hf["windows"][0]["stalled_rounds"] >= 1
    assert hf["longest_stall_ns"] >= 50e6 * 0.9  # the frozen round waited out the freeze (SIGCONT after 50 ms)
    assert hf["windows"][0]["recovered_after_rounds"] is not None


def test_sim_host_freeze_stops_cpu_not_gpu(tmp_path, capsys):
    faults = {"host_freeze": [{"at": "100 us", "duration": "200 us"}], "timeout": "50 us"}
    gpu = {"name": "gpu", "kind": "consumer", "device": "mi210"}
    rc, err, doc, _ = run(tmp_path, capsys, rounds=2000, model="sim", faults=faults, extra_nodes=[gpu])
    assert rc == 0, err
    cpu_s, gpu_s = doc["consumers"]
    assert cpu_s["kind"] == "cpu" and gpu_s["kind"] == "gpu"
    assert cpu_s["mismatches"] == gpu_s["mismatches"] == 0
    # the CPU consumer is a host thread: its round in flight waits for the 200 us freeze to end
    w = cpu_s["host_freeze"]["windows"][0]
    assert w["stalled_rounds"] >= 1 and cpu_s["host_freeze"]["longest_stall_ns"] > 100_000
    assert w["recovered_after_rounds"] >= 1 and cpu_s["faults"]["detected"]["reply_timeouts"] >= 1
    # the GPU keeps answering through it
    g = gpu_s["host_freeze"]
    assert g["stalled_rounds"] == 0 and g["windows"][0]["recovered_after_rounds"] == 0
    assert gpu_s["faults"]["detected"]["reply_timeouts"] == 0


@pytest.mark.parametrize("node,msg", [
    ({"model": "live"}, "model live needs a bridge block"),
    ({"model": "sim", "bridge": {"backend": "shm"}}, "a bridge block is for model live"),
    ({"model": "live", "bridge": {"backend": "cuda", "fault": {"kind": "die", "round": 3}}}, "for the shm backend"),
    ({"model": "live", "bridge": {"backend": "udp"}}, "needs the agent's port"),
    ({"model": "live", "bridge": {"backend": "shm", "timeout": 5}}, "needs a unit"),
])
def test_bridge_block_errors_name_the_key(tmp_path, node, msg):
    p = scenario(tmp_path, model=node["model"], bridge=node.get("bridge"))
    with pytest.raises(ConfigError) as e:
        load_scenario(p)
    assert msg in str(e.value) and "nodes[2]" in str(e.value)


@pytest.mark.parametrize("bridge,value", [({"backend": "udp"}, "'<missing>'"), ({"backend": "udp", "port": 0}, "0")])
def test_udp_port_missing_or_zero(tmp_path, bridge, value):
    with pytest.raises(ConfigError) as e:
        load_scenario(scenario(tmp_path, bridge=bridge))
    assert f"nodes[2].bridge.port: {value}: the udp backend needs the agent's port" in str(e.value)


@pytest.mark.parametrize("encoding", ["classic", "per_piece"])
def test_batch_rounds_in_c_check_every_reply(encoding):
    enc = get_encoding(encoding)
    slot = -(-enc.slot_bytes(64) // 16) * 16
    n = 5000
    img = np.zeros((n, slot), np.uint8)
    exp = np.zeros((n, slot), np.uint8)
    ln = np.zeros(n, np.uint32)
    eln = np.zeros(n, np.uint32)
    for i in range(n):
        seq, p = i + 1, bytes((i * 7 + j) & 255 for j in range(64))
        fid = 1 + i % 3
        for arr, writes in ((img, enc.writes(seq, p, function=fid)),
                            (exp, enc.writes(seq, lookup(fid).python(p), function=fid))):
            for off, d in writes:
                arr[i, off:off + len(d)] = np.frombuffer(d, np.uint8)
        ln[i], eln[i] = enc.slot_bytes(64), enc.slot_bytes(len(lookup(fid).python(p)))
    exp[7, 16 if encoding == "classic" else 20] ^= 1  # one expectation made wrong (first payload byte): flagged
    with ShmEndpoint(BridgeSettings("shm", timeout_ns=2_000_000_000)) as ep:
        ep.open(slot, 4, encoding)
        t0, t1, bad = ep.batch(img, ln, exp, eln)
        assert (t1 > t0).all() and list(np.nonzero(bad)[0]) == [7]
        assert ep.close()["served"] == n


def test_session_start_failure_is_one_error(tmp_path):
    ep = ShmEndpoint(BridgeSettings("shm"))
    with pytest.raises(LiveFailure) as e:
        ep.open(20, 4, "classic")  # 20 bytes: not a whole number of 16-byte pieces
    assert e.value.kind == "error" and "did not start" in str(e.value) or "refused" in str(e.value)


def test_consumer_does_not_outlive_a_killed_twin(tmp_path):
    import subprocess
    import sys
    code = ("from hw_bridge.contract import BridgeSettings; from hw_bridge.shm import ShmEndpoint; import time\n"
            "ep = ShmEndpoint(BridgeSettings('shm')); ep.open(80, 4, 'classic'); print(ep.consumer_pid, flush=True)\n"
            "time.sleep(60)\n")
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    pid = int(p.stdout.readline())
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    for _ in range(200):  # the kernel delivers the parent-death signal promptly; allow up to 10 s
        try:
            state = Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()[0]
        except OSError:
            break
        if state == "Z":  # reaped by init later; it no longer runs
            break
        time.sleep(0.05)
    else:
        os.kill(pid, signal.SIGKILL)
        pytest.fail("the consumer kept running after the twin was killed")


@pytest.mark.parametrize("model,function,bridge", [
    ("live", "decode_surface5", SHM), ("live", "decode_surface5", {"backend": "cuda"}),
    ("live", "decode_surface5", {"backend": "udp", "port": 47000})])
def test_function_without_c_code_is_refused_at_load(tmp_path, model, function, bridge):
    # a live consumer serves only the runtime library's C functions (model code also Python ones, called back);
    # the lookup decoders have C (twin/runtime/c/qrt_functions.c), PyMatching's surface decoder has not
    p = scenario(tmp_path, model=model, function=function, bridge=bridge)
    with pytest.raises(ConfigError) as e:
        load_scenario(p)
    line = str(e.value)
    assert "\n" not in line and f"function: '{function}'" in line and f"model {model}" in line
    assert "nodes[2]" in line and "invert" in line


@pytest.mark.parametrize("model,function", [("code", "decode_rep3"), ("code", "decode_surface5"), ("live", "sum32"),
                                            ("live", "echo"), ("live", "decode_rep3"), ("live", "decode_steane7")])
def test_function_with_c_or_native_build_loads(tmp_path, model, function):
    load_scenario(scenario(tmp_path, model=model, function=function, bridge=SHM if model == "live" else None))


@pytest.mark.parametrize("key", ["cpu", "producer_cpu"])
def test_core_outside_the_affinity_is_refused_in_one_line(tmp_path, capsys, key):
    core = max(os.sched_getaffinity(0)) + 97
    rc, err, doc, _ = run(tmp_path, capsys, rounds=100, bridge={**SHM, key: core})
    assert rc == 3 and doc is None
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len([ln for ln in lines if "error" in ln]) == 1
    assert f"bridge.{key}: {core}: not a core this process may run on" in err


def test_failed_consumer_pin_is_visible(monkeypatch):
    # skip the up-front check: the consumer's own failed sched_setaffinity must stop the session
    monkeypatch.setattr("hw_bridge.shm.check_cores", lambda settings: None)
    core = max(os.sched_getaffinity(0)) + 97
    ep = ShmEndpoint(BridgeSettings("shm", cpu=core))
    with pytest.raises(LiveFailure) as e:
        ep.open(80, 4, "classic")
    assert e.value.kind == "error" and f"bridge.cpu: {core}: cannot pin the consumer there" in str(e.value)


def _allowed_cores(pid: int) -> set[int]:
    """The cores process ``pid`` may run on (/proc's Cpus_allowed_list, e.g. ``0-3,6``)."""
    status = Path(f"/proc/{pid}/status").read_text().splitlines()
    line = next(ln for ln in status if ln.startswith("Cpus_allowed_list:"))
    cores = set()
    for part in line.split()[1].split(","):
        a, _, b = part.partition("-")
        cores |= set(range(int(a), int(b or a) + 1))
    return cores


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="pinning the producer alone needs two cores")
def test_pinning_the_producer_leaves_the_consumer_its_cores():
    """``producer_cpu`` alone pins this process, not the consumer (``cpu: null``): the consumer may run on
    every core this process could before the session, so the two never take turns on one core."""
    before = os.sched_getaffinity(0)
    core = min(before)
    ep = ShmEndpoint(BridgeSettings("shm", producer_cpu=core))
    ep.open(80, 4, "classic")
    try:
        assert os.sched_getaffinity(0) == {core}
        assert _allowed_cores(ep.consumer_pid) == before
    finally:
        ep.close()
    assert os.sched_getaffinity(0) == before


def test_pinning_is_for_shm_only(tmp_path):
    with pytest.raises(ConfigError) as e:
        load_scenario(scenario(tmp_path, bridge={"backend": "cuda", "cpu": 0}))
    assert "nodes[2].bridge.cpu: 0: pinning is for the shm backend" in str(e.value)


def test_a_timeout_shorter_than_one_round_trip_always_fails(tmp_path, capsys):
    # the producer checks its clock only every 1,024 polls while spinning; a reply first seen after
    # the deadline is still late, so 1 ns fails on a fast machine as on a slow one
    rc, err, doc, _ = run(tmp_path, capsys, rounds=200, bridge={"backend": "shm", "timeout": "1 ns"})
    assert rc == 3, err
    assert "live shm hung at round 1: no reply within 1e-06 ms" in err
    assert doc is None  # no round completed, nothing to save


def test_exchange_waits_the_idle_time_after_the_previous_reply():
    """exchange(..., idle_ns): the request is not written before idle_ns after the previous reply
    was seen (the C producer spins on CLOCK_MONOTONIC); 0 sends at once."""
    enc = get_encoding("classic")
    slot = -(-enc.slot_bytes(64) // 16) * 16
    with ShmEndpoint(BridgeSettings("shm", timeout_ns=2_000_000_000)) as ep:
        ep.open(slot, 8, "classic")
        for seq, idle in enumerate((0, 3_000_000, 0, 1_000_000), start=1):
            image = bytearray(enc.slot_bytes(8))
            for off, d in enc.writes(seq, bytes(range(seq, seq + 8))):
                image[off:off + len(d)] = d
            assert ep.exchange(seq, bytes(image), idle).data == bytes(image)
        t0, t1 = ep.timestamps()
    gaps = t0[1:] - t1[:-1]
    assert gaps[0] >= 3_000_000 and gaps[2] >= 1_000_000


def test_live_run_idles_as_the_traffic_says(tmp_path, capsys):
    """Closed loop with a 2 ms gap: before every round but the first the live consumer idles at
    least the gap (the simulated idle time is the gap plus the card path both ways), and what it
    had (measured) is at least what simulated time asked for; live_rounds.npz and results.json
    keep both."""
    rc, err, doc, out = run(tmp_path, capsys, rounds=12, bridge=SHM,
                            traffic={"mode": "closed_loop", "gap": "2 ms"})
    assert rc == 0, err
    d = np.load(out / "live_rounds.npz")
    target, idle = d["live.idle_target_ns"], d["live.idle_ns"]
    assert idle[0] == -1 and (target[1:] >= 2_000_000).all() and (idle[1:] >= target[1:]).all()
    live = doc["consumers"][0]["live"]
    assert live["idle"]["measured"]["p50_ns"] >= live["idle"]["target"]["p50_ns"] >= 2_000_000
