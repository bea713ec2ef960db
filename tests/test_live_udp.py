"""The udp agent: every datagram is validated before anything runs; malformed, oversized,
replayed and unconfigured frames are dropped and counted; valid frames get the runtime's reply."""
import socket
import struct
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hw_bridge.agent import BYE, HELLO, OK, REASONS, Agent, FrameValidator
from hw_bridge.contract import BridgeSettings, LiveFailure
from hw_bridge.udp import UdpEndpoint
from twin.exchange.encoding import get_encoding
from twin.runtime.functions import lookup

SLOT = 96  # classic: 80 bytes of payload at most; per-piece: 5 pieces of data
PEER = ("127.0.0.1", 40001)  # a session's sender in the tests that call Agent.handle directly


def opened(a: Agent, peer=PEER) -> Agent:
    """``a`` with a session opened by ``peer`` (its HELLO answered)."""
    assert a.handle(HELLO + b"s" * 8, peer) == OK + b"s" * 8
    return a


def frame(enc, seq, payload, fid=0):
    out = bytearray(enc.slot_bytes(len(payload)))
    for off, d in enc.writes(seq, payload, function=fid):
        out[off:off + len(d)] = d
    return bytes(out)


@pytest.fixture
def agent():
    a = Agent(["echo", "sum32"], "classic", SLOT)
    yield a
    a.close()


@pytest.mark.parametrize("encoding", ["classic", "per_piece"])
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=3 * SLOT))
def test_random_bytes_are_rejected_and_counted_or_are_a_valid_frame(encoding, data):
    v = FrameValidator(encoding, SLOT, {0, 3})
    why = v.check(data)
    assert sum(v.rejected.values()) + v.accepted == 1
    if why is None:  # then it really is request 1, a whole message of a served function
        enc = get_encoding(encoding)
        seq, fid, length = struct.unpack_from("<IHH", data)
        assert seq == 1 and fid in (0, 3) and len(data) == enc.slot_bytes(length) <= SLOT
        assert v.expect == 2
    else:
        assert why in REASONS and v.expect == 1


@settings(max_examples=300, deadline=None)
@given(payload=st.binary(max_size=80), junk=st.binary(min_size=1, max_size=40), fid=st.sampled_from([0, 1, 2, 3]))
def test_agent_serves_valid_and_drops_the_rest(payload, junk, fid):
    a = opened(Agent(["echo", "sum32"], "classic", SLOT))
    try:
        enc = get_encoding("classic")
        good = frame(enc, 1, payload, fid)
        out = a.handle(good, PEER)
        if fid in (0, 3):  # configured: served by the runtime, reply = the function's answer
            h = enc.header(bytearray(out), 0)
            assert (h.seq, h.function, h.flags) == (1, fid, 0)
            assert enc.payload(bytearray(out), 0) == lookup(fid).python(payload)
            assert a.served == 1
            assert a.handle(good, PEER) is None and a.validator.rejected["replay"] == 1  # replayed
        else:  # not configured: never executed
            assert out is None and a.served == 0 and a.validator.rejected["unknown_function"] == 1
        served, rejected = a.served, sum(a.validator.rejected.values())
        assert a.handle(good + junk, PEER) is None  # oversized, or longer than its header says
        if junk[:8] not in (HELLO, BYE):
            assert a.handle(junk, PEER) is None
            assert sum(a.validator.rejected.values()) == rejected + 2
        assert a.served == served
    finally:
        a.close()


def test_replayed_old_frame_after_progress(agent):
    enc = get_encoding("classic")
    frames = [frame(enc, s, bytes([s]) * 8) for s in range(1, 6)]
    opened(agent)
    for f in frames:
        assert agent.handle(f, PEER) is not None
    assert agent.handle(frames[1], PEER) is None and agent.validator.rejected["replay"] == 1
    assert agent.handle(frame(enc, 9, b"x"), PEER) is None and agent.validator.rejected["out_of_order"] == 1
    assert agent.handle(frame(enc, 6, b"y"), PEER) is not None and agent.served == 6


def test_per_piece_torn_piece_rejected():
    a = opened(Agent(["echo"], "per_piece", SLOT))
    try:
        enc = get_encoding("per_piece")
        f = bytearray(frame(enc, 1, bytes(range(30))))
        f[32:36] = struct.pack("<I", 7)  # piece 2 carries another sequence number
        assert a.handle(bytes(f), PEER) is None and a.validator.rejected["torn_piece"] == 1
    finally:
        a.close()


def test_agent_binds_loopback_by_default(agent):
    assert agent.address[0] == "127.0.0.1"


def test_endpoint_over_real_udp_with_garbage_in_between(agent):
    t = threading.Thread(target=agent.serve, daemon=True)
    t.start()
    enc = get_encoding("classic")
    ep = UdpEndpoint(BridgeSettings("udp", timeout_ns=2_000_000_000, port=agent.address[1]))
    ep.open(SLOT, 4, "classic")
    junk = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        for seq in range(1, 301):
            p = bytes((seq + j) & 255 for j in range(64))
            fid = 3 if seq % 2 else 0
            junk.sendto(b"\x01" * (seq % 50), agent.address)  # malformed datagrams from another socket
            rep = ep.exchange(seq, frame(enc, seq, p, fid))
            assert enc.payload(bytearray(rep.data), 0) == lookup(fid).python(p)
    finally:
        junk.close()
        ep.close()
        agent.stop()
        t.join()
    assert agent.served == 300
    assert sum(agent.validator.rejected.values()) >= 290  # all but the empty ones arrived


def test_twin_run_over_udp(tmp_path, agent, capsys):
    from test_live_shm import run
    t = threading.Thread(target=agent.serve, daemon=True)
    t.start()
    try:
        rc, err, doc, _ = run(tmp_path, capsys, rounds=500, function="sum32",
                              bridge={"backend": "udp", "port": agent.address[1], "timeout": "2 s"})
    finally:
        agent.stop()
        t.join()
    assert rc == 0, err
    s = doc["consumers"][0]
    assert s["replies_checked"] == 500 and s["mismatches"] == 0 and s["live"]["backend"] == "udp"


def test_no_agent_is_a_clear_error():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with pytest.raises(LiveFailure) as e:
        UdpEndpoint(BridgeSettings("udp", timeout_ns=300_000_000, port=port)).open(SLOT, 4, "classic")
    assert e.value.kind == "error" and "no agent answered" in str(e.value)


@pytest.mark.parametrize("name,msg", [("decode_surface5", "function decode_surface5 has no C implementation"),
                                      ("nosuch", "no function 'nosuch' (have: echo, invert, xor_fold, sum32, "
                                                 "decode_rep3, decode_steane7, decode_uf_surface3)")])
def test_agent_refuses_functions_it_cannot_serve(name, msg):
    """The agent serves the runtime library's C functions, the lookup decoders' included; PyMatching's
    surface decoder has no C."""
    with pytest.raises(ValueError) as e:
        Agent([name], "classic", SLOT)
    assert msg in str(e.value) and "surface5" not in str(e.value).split("(")[-1]
    Agent(["decode_rep3", "decode_steane7"], "classic", SLOT)


def test_unresolvable_host_names_the_key(tmp_path):
    from test_live_shm import scenario

    from twin.config import ConfigError
    from twin.scenario import load_scenario
    p = scenario(tmp_path, bridge={"backend": "udp", "host": "no.such.host.invalid", "port": 47000})
    with pytest.raises(ConfigError) as e:
        load_scenario(p)
    assert "nodes[2].bridge.host: 'no.such.host.invalid': cannot resolve" in str(e.value)
    with pytest.raises(LiveFailure) as e:  # the same at session start (a name that stopped resolving)
        UdpEndpoint(BridgeSettings("udp", host="no.such.host.invalid", port=47000)).open(SLOT, 4, "classic")
    assert e.value.kind == "error" and "bridge.host: no.such.host.invalid: cannot reach" in str(e.value)


@pytest.mark.parametrize("args,msg", [
    (["--slot-bytes", "0"], "argument --slot-bytes: 0: a slot is a multiple of 16"),
    (["--slot-bytes", "8"], "argument --slot-bytes: 8: a slot is a multiple of 16"),
    (["--slot-bytes", "-1"], "argument --slot-bytes: -1: a slot is a multiple of 16"),
    (["--port", "99999"], "argument --port: 99999: a UDP port is 0..65535"),
    (["--log-rejections", "-1"], "argument --log-rejections: -1: must be a finite number of lines a second"),
    (["--log-rejections", "lots"], "argument --log-rejections: 'lots': not a number of lines a second"),
    (["--function", "decode_surface5"], "argument --function: function decode_surface5 has no C implementation"),
    (["--function", "nosuch"], "argument --function: no function 'nosuch' (have: echo, invert, xor_fold, sum32, "
                               "decode_rep3, decode_steane7, decode_uf_surface3)"),
])
def test_agent_command_line_errors_are_one_line(capsys, monkeypatch, args, msg):
    from hw_bridge import agent
    from hw_bridge.agent import main

    def serve(self, *a):  # an argument list it accepted would serve forever: fail instead of hanging
        raise AssertionError(f"the agent accepted {args} and started serving")
    monkeypatch.setattr(agent.Agent, "serve", serve)
    argv = ["--function", "echo"] + args
    with pytest.raises(SystemExit) as e:
        main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1 and err.startswith("hw_bridge.agent: error: ") and msg in err


def test_agent_prints_its_counters_on_sigterm():
    import os
    import signal
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    p = subprocess.Popen([sys.executable, "-m", "hw_bridge.agent", "--function", "echo"], cwd=root,
                         env={**os.environ, "PYTHONPATH": str(root)}, stderr=subprocess.PIPE, text=True)
    try:
        assert "serving" in p.stderr.readline()
        p.send_signal(signal.SIGTERM)
        rest = p.communicate(timeout=20)[1]
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0 and "hw_bridge.agent: served 0, accepted 0, rejected: none" in rest


def test_session_belongs_to_the_sender_that_opened_it(agent):
    enc = get_encoding("classic")
    owner, other = ("127.0.0.1", 40001), ("127.0.0.1", 40002)
    assert agent.handle(HELLO + b"n" * 8, owner) == OK + b"n" * 8
    assert agent.handle(frame(enc, 1, b"a"), owner) is not None
    # another sender can neither reset the live session nor feed it
    assert agent.handle(HELLO + b"x" * 8, other) is None and agent.validator.rejected["foreign_hello"] == 1
    assert agent.handle(frame(enc, 2, b"b"), other) is None and agent.validator.rejected["foreign_sender"] == 1
    assert agent.handle(frame(enc, 2, b"b"), owner) is not None and agent.served == 2  # not reset
    # the owner's BYE ends the session: the other sender may open one
    assert agent.handle(BYE + b"n" * 8, owner) == BYE + b"n" * 8
    assert agent.handle(HELLO + b"x" * 8, other) == OK + b"x" * 8
    assert agent.handle(frame(enc, 1, b"c"), other) is not None and agent.served == 3


def test_silent_session_can_be_taken_over(agent):
    agent.session_idle_s = 0.0
    assert agent.handle(HELLO + bytes(8), ("127.0.0.1", 1)) is not None
    assert agent.handle(HELLO + bytes(8), ("127.0.0.1", 2)) is not None and not agent.validator.rejected


def test_hello_from_another_socket_during_a_run_is_rejected(agent):
    t = threading.Thread(target=agent.serve, daemon=True)
    t.start()
    try:
        ep = UdpEndpoint(BridgeSettings("udp", timeout_ns=2_000_000_000, port=agent.address[1]))
        ep.open(SLOT, 4, "classic")
        enc = get_encoding("classic")
        assert ep.exchange(1, frame(enc, 1, b"abc")).data[:4] == struct.pack("<I", 1)
        intruder = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        intruder.sendto(HELLO + bytes(8), agent.address)
        intruder.settimeout(0.3)
        with pytest.raises(socket.timeout):
            intruder.recv(64)
        intruder.close()
        assert ep.exchange(2, frame(enc, 2, b"def")).data[:4] == struct.pack("<I", 2)  # session unharmed
        ep.close()
    finally:
        agent.stop()
        t.join()
    assert agent.validator.rejected["foreign_hello"] == 1 and agent.served == 2


# -- the agent trusts no one: nothing is served outside the session of the sender that opened it ----------
datagrams = st.one_of(
    st.binary(max_size=2 * SLOT),  # anything
    st.builds(lambda seq, p, fid: frame(get_encoding("classic"), seq, p, fid),  # well-formed requests
              st.integers(1, 4), st.binary(max_size=80), st.sampled_from([0, 3])),
    st.builds(lambda k, n: k + n, st.sampled_from([HELLO, BYE]), st.binary(min_size=8, max_size=8)))


@settings(max_examples=300, deadline=None)
@given(junk=st.lists(datagrams, min_size=1, max_size=8))
def test_nothing_is_served_before_a_hello(junk):
    """Frames (valid ones too) before any HELLO: not served, each counted; the session then works."""
    a = Agent(["echo", "sum32"], "classic", SLOT, log_per_s=0)
    try:
        for i, d in enumerate(j for j in junk if j[:8] != HELLO):  # a HELLO would open a session
            assert a.handle(d, PEER) is None
            assert a.served == 0 and a.stats()["rejected_total"] == i + 1
        opened(a)
        enc = get_encoding("classic")
        out = a.handle(frame(enc, 1, b"ok", 3), PEER)
        assert out is not None and enc.payload(bytearray(out), 0) == lookup(3).python(b"ok") and a.served == 1
    finally:
        a.close()


def test_a_frame_after_bye_is_not_served(agent):
    enc = get_encoding("classic")
    opened(agent)
    assert agent.handle(frame(enc, 1, b"a"), PEER) is not None
    assert agent.handle(BYE + bytes(8), ("127.0.0.1", 40009)) is None  # only the owner ends it
    assert agent.handle(BYE + bytes(8), PEER) == BYE + bytes(8)
    assert agent.handle(frame(enc, 2, b"b"), PEER) is None and agent.validator.rejected["no_session"] == 1
    assert agent.validator.rejected["foreign_hello"] == 1 and agent.served == 1


def _until(cond, what: str, timeout_s: float = 5.0) -> None:
    import time
    end = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < end, what
        time.sleep(0.001)


@settings(max_examples=20, deadline=None)
@given(junk=st.lists(datagrams, min_size=1, max_size=6))
def test_datagrams_from_a_second_socket_are_counted_never_served(junk):
    """Over real UDP: a session open, then datagrams from another socket (another port): none is
    answered or served, each is counted; the session's own next round still works."""
    agent = Agent(["echo", "sum32"], "classic", SLOT, log_per_s=0)
    t = threading.Thread(target=agent.serve, daemon=True)
    t.start()
    intruder = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    intruder.settimeout(0.05)
    try:
        ep = UdpEndpoint(BridgeSettings("udp", timeout_ns=2_000_000_000, port=agent.address[1]))
        ep.open(SLOT, 4, "classic")
        enc = get_encoding("classic")
        assert ep.exchange(1, frame(enc, 1, b"abc")).data[:4] == struct.pack("<I", 1)
        before = agent.stats()
        for i, d in enumerate(junk):
            intruder.sendto(d, agent.address)
            _until(lambda: agent.stats()["rejected_total"] == before["rejected_total"] + i + 1, "not counted")
            with pytest.raises(socket.timeout):
                intruder.recv(4096)
        assert agent.served == before["served"] == 1
        assert ep.exchange(2, frame(enc, 2, b"def")).data[:4] == struct.pack("<I", 2)  # the session works
        ep.close()
    finally:
        intruder.close()
        agent.stop()
        t.join()
        agent.close()
    assert agent.served == 2


def test_rejection_lines_are_rate_limited_but_all_counted():
    import io
    log = io.StringIO()
    a = Agent(["echo"], "classic", SLOT, log_per_s=3, log=log)
    try:
        from hw_bridge.agent import TokenBucket
        now = [0.0]
        a._log_bucket = TokenBucket(3, clock=lambda: now[0])  # a flood within one instant
        for _ in range(100):
            assert a.handle(b"junk", PEER) is None
        assert log.getvalue().count("\n") == 3 and "rejected 4-byte datagram from 127.0.0.1:40001: no_session" in \
            log.getvalue()
        assert a.stats()["rejected"]["no_session"] == 100 and a.stats()["log_suppressed"] == 97
        now[0] = 1.0  # a second later: three more lines may go out
        for _ in range(5):
            a.handle(b"junk", PEER)
        assert log.getvalue().count("\n") == 6 and a.stats()["log_suppressed"] == 99
        assert "99 rejection lines left out" in a.stats_line()
    finally:
        a.close()
