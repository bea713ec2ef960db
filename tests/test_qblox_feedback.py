"""Control programs that wait and branch (issue 14, part 1): Q1ASM ``wait_trigger`` blocks until the
reply has reached the sequencer over the trigger network, ``set_cond`` plays the correction only when
the reply's answer bit says so, and the link-card generator's ``traffic.program.waits`` delays a round
until an earlier round's correction is back.

Expected instants are worked out from the programs' own instruction timing (a real-time instruction
takes its last argument in ns), Qblox's published trigger network (a trigger leaves on the next point
of a 28 ns grid aligned at ``wait_sync``, reaches every sequencer 212 ns later, the next one may leave
252 ns after it) and the round trip each reply took in the engine (``t_back``). Answers come from the
bytes the consumer returned: the echo's (the request's own syndrome bits, :func:`payload_for`), or a
decode study's corrections (the decoder's answers, checked against its direct decoding).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from twin.config import ConfigError
from twin.devices.generator import payload_for
from twin.devices.q1asm import Q1AsmError, Sequencer, Triggers
from twin.engine.direct import DirectNotApplicable, run_direct
from twin.engine.event import run_event
from twin.scenario import load_scenario
from twin.studies.run import run_study

ROOT = Path(__file__).resolve().parent.parent
CAL = str(ROOT / "calibrations" / "fitted" / "card_path.yaml")
LATENCY, SPACING, GRID = 212, 252, 28  # Qblox: trigger network latency, spacing and grid (ns)
RESULT, LINQ = 150, 250  # the scenario's result latency and trigger network hop towards the link (ns)


def program(rounds: int, slack: int) -> str:
    """Per round: gates, four acquisitions, reset of the counters, ``slack`` ns of work needing no
    correction, then wait for the reply and play the correction if the answer bit is 1."""
    return f"""wait_sync 4
move {rounds},R0
set_latch_en 1,4
round: upd_param 4
wait 3196
acquire 0,0,300
acquire 1,0,300
acquire 2,0,300
acquire 3,0,300
latch_rst 4
wait {slack}
wait_trigger 2,4
set_cond 1,1,0,20
play 0,0,20
set_cond 0,0,0,4
loop R0,@round
stop
"""


def cluster(rounds: int, slack: int, **kw) -> dict:
    return {"device": "Qblox Cluster", "result_latency_ns": RESULT, "trigger_network_ns": LINQ, "clock": "card",
            "sequencers": [{"name": "s0", "measurements_per_round": 4, "program": program(rounds, slack)}], **kw}


def loop_doc(rounds: int, slack: int, device: str = "v80", **kw) -> dict:
    return {"name": "fb", "calibration": CAL, "seed": 3, "rounds": rounds, "frame_bytes": 64,
            "qblox": cluster(rounds, slack, **kw),
            "nodes": [{"name": "qblox", "kind": "generator"}, {"name": "u55c", "kind": "link_card"},
                      {"name": device, "kind": "consumer", "device": device}],
            "links": [{"from": "qblox", "to": "u55c", "kind": "aurora"},
                      {"from": "u55c", "to": device, "kind": "pcie"}]}


def load(doc: dict, tmp_path: Path, name: str = "s.yaml"):
    p = tmp_path / name
    p.write_text(yaml.safe_dump(doc, sort_keys=False))
    return load_scenario(p)


def run_loop(doc: dict, tmp_path: Path):
    ld = load(doc, tmp_path)
    study = run_study(ld, engine="event")
    return ld, study.runs[0].result, study.runs[0].summary


def echo_answers(ld, res, bit: int = 0) -> np.ndarray:
    """The echo's answer bit per round: bit ``bit`` of the request it sent back (the round's syndrome)."""
    sc = ld.scenario
    spec_salt = None
    from twin.scenario.compile import flow_spec
    spec = flow_spec(ld.params, sc.consumers()[0].device, sc.traffic_params(), sc.seed, slots=sc.slots,
                     external_control=sc.external_control())
    _, _, spec_salt = spec.draws()
    bits = sc.qblox.syndrome_bits()
    return np.array([payload_for(k, sc.frame_bytes, spec_salt, bits)[0] >> bit & 1
                     for k in range(1, len(res.t_in) + 1)])


# -- the interpreter alone, on a board filled by hand ------------------------------------------------

def test_wait_trigger_blocks_until_the_trigger_and_takes_each_in_turn():
    q = Sequencer("s", "wait 100\nwait_trigger 2,4\nacquire 0,0,8\nwait_trigger 2,4\nacquire 0,0,8\nstop")
    board = Triggers()
    board.known_ns = 10**9
    assert q.run(board) == "blocked" and q.blocked == ("trigger", 2) and q.t == 100
    board.add(2, 700, tag=1)  # arrives after the sequencer got there: it stands still 600 ns
    board.add(2, 705, tag=2)  # arrives before it gets to the second wait (at 712): no stall
    assert q.run(board) == "stop"
    assert q.tl.acquisitions == [704, 716]  # 700 + 4; 704 + 8 + 4
    assert q.tl.stall_ns() == [600, 0] and [w[2] for w in q.tl.waits] == [1, 2]


@pytest.mark.parametrize("operator, counted, plays", [
    (0, (1,), True), (0, (), False),          # OR over address 1
    (1, (1,), False), (1, (), True),          # NOR
    (2, (1,), False), (2, (1, 3), True),      # AND over addresses 1 and 3 (mask 0b101)
    (3, (1, 3), False), (3, (3,), True),      # NAND
    (4, (1, 3), False), (4, (3,), True),      # XOR: odd number counted
    (5, (1, 3), True), (5, (1,), False),      # XNOR
])
def test_set_cond_plays_on_the_thresholded_counters(operator, counted, plays):
    mask = 0b101 if operator >= 2 else 0b1
    q = Sequencer("s", f"set_latch_en 1,4\nwait 100\nset_cond 1,{mask},{operator},12\nplay 0,0,40\nacquire 0,0,8\n"
                       "set_cond 0,0,0,4\nstop")
    board = Triggers()
    for a in counted:
        board.add(a, 50)
    board.known_ns = 10**9
    assert q.run(board) == "stop"
    assert [c[2] for c in q.tl.conditional] == [plays, plays]  # the play and the acquisition after it
    # 4 + 100, then the play's 40 ns or else 12 ns; a skipped acquisition is not made
    assert q.tl.acquisitions == ([144] if plays else [])
    assert q.tl.end_ns == (152 if plays else 128)


def test_counters_latch_and_reset():
    prog = ("set_latch_en 1,4\nwait 100\nlatch_rst 4\nwait 100\nset_cond 1,1,0,12\nplay 0,0,40\nset_cond 0,0,0,4\n"
            "set_latch_en 0,4\nwait 100\nset_cond 1,1,0,12\nplay 0,0,40\nstop")
    q = Sequencer("s", prog)
    board = Triggers()
    board.add(1, 50)    # cleared by latch_rst at 104
    board.add(1, 150)   # counted: plays at 208
    board.known_ns = 10**9
    q.run(board)
    assert [c[2] for c in q.tl.conditional] == [True, True]  # the held count still holds after disabling
    q2 = Sequencer("s", prog)
    b2 = Triggers()
    b2.add(1, 50)
    b2.known_ns = 10**9
    q2.run(b2)
    assert [c[2] for c in q2.tl.conditional] == [False, False]
    q3 = Sequencer("s", "set_latch_en 1,4\nwait 200\nset_latch_en 0,4\nstop")
    b3 = Triggers()
    b3.known_ns = 100
    assert q3.run(b3) == "blocked" and q3.blocked == ("time", 204)  # holding needs the triggers up to 204
    with pytest.raises(Q1AsmError, match="operator 6 outside"):
        Sequencer("s", "set_cond 1,1,6,12\nstop").run()


def test_a_condition_waits_until_the_board_is_known_to_its_instant():
    q = Sequencer("s", "set_latch_en 1,4\nwait 500\nset_cond 1,1,0,12\nplay 0,0,40\nstop")
    board = Triggers()
    board.known_ns = 300
    assert q.run(board) == "blocked" and q.blocked == ("time", 504)
    board.known_ns = 504
    board.add(1, 504)  # arriving at the very instant counts
    assert q.run(board) == "stop" and q.tl.conditional[0][2]


# -- the loop: the program's period and its conditional pulses --------------------------------------

def expected_rounds(res, answers, slack: int):
    """Each round's publish instant (ns) after the first, from the previous round's reply (t_back),
    the program's timing and the trigger network's; and each round's stall."""
    pub = res.t_send // 1000  # card clock: the cluster's ns are the kernel's
    sync0 = 0 + 4  # wait_sync 4 at 0: the grid starts when it ends
    net_free, want, stall = 0, [], []
    for k in range(len(pub) - 1):
        acq_end = pub[k] - RESULT - LINQ
        reached = acq_end + 4 + slack  # latch_rst 4, the slack
        back = -(-int(res.t_back[k]) // 1000)  # the first cluster ns at or after the reply's arrival
        s = max(sync0 + -(-(back - sync0) // GRID) * GRID, net_free)
        ready = s + SPACING * answers[k]  # an answer of 1 goes first, on address 1
        net_free = ready + SPACING
        arrival = ready + LATENCY
        stall.append(max(0, arrival - reached))
        resume = max(reached, arrival) + 4  # wait_trigger 2,4
        nxt = resume + 20 + 4 + 3196 + 4 * 300  # play or else 20 ns, upd_param 4, gates, acquisitions
        want.append(nxt + RESULT + LINQ)
    return np.array(want), np.array(stall)


NOMINAL = 4 + 3196 + 1200 + 4 + 600 - 4 + 4 + 20  # the round with every reply there at once: 5,024 ns


def test_wait_trigger_makes_the_period_grow_by_the_round_trip_minus_the_slack(tmp_path):
    ld, res, summary = run_loop(loop_doc(120, 596), tmp_path)
    answers = echo_answers(ld, res)
    want, stall = expected_rounds(res, answers, 596)
    assert np.array_equal(res.t_send[1:] // 1000, want)
    assert (res.t_send % 1000 == 0).all()
    prog = res.stats["program"]
    assert np.array_equal(prog["stall_ps"][:-1] // 1000, stall)  # the last reply's stall too, not checked here
    period = np.diff(res.t_send // 1000)
    assert np.array_equal(period, NOMINAL + stall)  # nominal period plus what the round waited
    assert (stall > 0).all()  # a ~2.4 us round trip against 600 - 400 ns of slack after the publish
    assert summary["program"]["period_ns"]["nominal"] == NOMINAL
    assert summary["program"]["period_ns"]["effective"] == pytest.approx(period.mean(), abs=1e-3)
    assert summary["program"]["stall_ns"]["total"] == prog["stall_total_ps"] / 1000


def test_slack_longer_than_the_round_trip_keeps_the_nominal_period(tmp_path):
    _, res, summary = run_loop(loop_doc(60, 9596), tmp_path)  # 9.6 us of work before the correction is needed
    assert (np.diff(res.t_send) == (NOMINAL + 9000) * 1000).all()
    assert summary["program"]["stall_ns"]["rounds_stalled"] == 0


def test_set_cond_plays_the_correction_exactly_on_the_rounds_the_answer_says(tmp_path):
    ld, res, summary = run_loop(loop_doc(150, 596, feedback={"answer_bit": 3}), tmp_path)
    answers = echo_answers(ld, res, 3)  # the fourth syndrome bit (bit 0 of the echo's counter word alternates)
    c = res.stats["program"]["conditional"]
    assert np.array_equal(c["answers"], answers)  # the bits the program saw are the replies' bytes
    assert np.array_equal(c["ran_by_reply"], answers.astype(bool))
    assert 30 < answers.sum() < 120  # both answers occur
    s = summary["program"]["conditional"]
    assert (s["ran_on_answer_1"], s["ran_on_answer_0"], s["skipped_on_answer_1"]) == (answers.sum(), 0, 0)


def test_answer_bit_picks_the_replys_bit(tmp_path):
    ld, res, _ = run_loop(loop_doc(80, 596, feedback={"answer_bit": 5}), tmp_path)
    sc = ld.scenario
    from twin.scenario.compile import flow_spec
    spec = flow_spec(ld.params, "v80", sc.traffic_params(), sc.seed, slots=sc.slots, external_control=True)
    _, _, salt = spec.draws()
    want = [payload_for(k, 64, salt, 4)[0] >> 5 & 1 for k in range(1, 81)]  # 4 syndrome bits: bit 5 is padding
    assert want == [0] * 80
    assert not res.stats["program"]["conditional"]["ran_by_reply"].any()


def test_the_direct_engine_refuses_a_listening_program(tmp_path):
    ld = load(loop_doc(20, 596), tmp_path)
    from twin.scenario.compile import flow_spec
    sc = ld.scenario
    spec = flow_spec(ld.params, "v80", sc.traffic_params(), 1, slots=16, external_control=True)
    with pytest.raises(DirectNotApplicable, match="event engine"):
        run_direct(spec)
    assert spec.traffic.listens


@pytest.mark.parametrize("change, key", [
    ({"rounds": 121}, "rounds"),  # the program publishes 120 rounds
    ({"qblox.feedback": {"ready_address": 3}}, "qblox.sequencers"),  # its wait_trigger waits on address 2
    ({"qblox.feedback": {"ready_address": 1}}, "qblox.feedback.ready_address"),  # the answer's address
    ({"qblox.feedback": {"answer_bit": 512}}, "qblox.feedback.answer_bit"),  # a 64-byte echo carries bits 0..511
])
def test_refusals_name_the_key(tmp_path, change, key):
    doc = loop_doc(120, 596)
    for k, v in change.items():
        if k.startswith("qblox."):
            doc["qblox"][k.split(".", 1)[1]] = v
        else:
            doc[k] = v
    with pytest.raises(ConfigError) as e:
        load(doc, tmp_path)
    assert e.value.key.startswith(key), e.value


def test_set_cond_without_latching_and_feedback_without_listening_are_refused(tmp_path):
    doc = loop_doc(120, 596)
    doc["qblox"]["sequencers"][0]["program"] = program(120, 596).replace("set_latch_en 1,4\n", "")
    with pytest.raises(ConfigError, match="never count"):
        load(doc, tmp_path)
    quiet = yaml.safe_load((ROOT / "scenarios" / "qblox_cluster.yaml").read_text())
    quiet["qblox"]["feedback"] = {"answer_bit": 0}
    quiet["calibration"] = CAL
    with pytest.raises(ConfigError, match="neither wait_trigger nor set_cond"):
        load(quiet, tmp_path)


# -- traffic.program: the link-card generator's rounds wait for earlier corrections ----------------

def waits_spec(tmp_path, for_round: int, then: str, period: str = "2 us"):
    doc = {"name": "w", "calibration": CAL, "seed": 5, "rounds": 400, "frame_bytes": 64,
           "traffic": {"mode": "open_loop", "period": period, "program": {"waits": {"for_round": for_round,
                                                                                   "then": then}}},
           "nodes": [{"name": "gen", "kind": "generator"}, {"name": "u55c", "kind": "link_card"},
                     {"name": "epyc7282", "kind": "consumer", "device": "epyc7282"}],
           "links": [{"from": "gen", "to": "u55c", "kind": "on_card"},
                     {"from": "u55c", "to": "epyc7282", "kind": "pcie"}]}
    ld = load(doc, tmp_path)
    from twin.scenario.compile import flow_spec
    sc = ld.scenario
    return flow_spec(ld.params, "epyc7282", sc.traffic_params(), sc.seed, slots=sc.slots)


@pytest.mark.parametrize("for_round, then", [(-1, "300 ns"), (-2, "2 us")])
def test_waits_delay_each_round_until_the_correction_plus_then(tmp_path, for_round, then):
    spec = waits_spec(tmp_path, for_round, then)
    ev = run_event(spec)
    di = run_direct(spec)
    assert np.array_equal(ev.t_send, di.t_send) and np.array_equal(ev.t_back, di.t_back)
    then_ps = {"300 ns": 300_000, "2 us": 2_000_000}[then]
    clock = 4000  # the card's 250 MHz clock
    want = [int(ev.t_send[0])]
    for i in range(1, len(ev.t_send)):
        t = want[-1] + 2_000_000  # one period after the previous request
        if i + for_round >= 0:
            t = max(t, -(-(int(ev.t_back[i + for_round]) + then_ps) // clock) * clock)
        want.append(t)
    assert np.array_equal(ev.t_send, want)
    stall = ev.stats["program"]["stall_ps"]
    assert np.array_equal(stall, di.stats["program"]["stall_ps"])
    assert np.array_equal(stall[1:], ev.t_send[1:] - ev.t_send[:-1] - 2_000_000)
    assert (stall > 0).sum() > 10  # a ~2.2 us round trip plus `then` against a 2 us period: rounds stall


def test_waits_with_room_to_spare_are_the_open_loop(tmp_path):
    spec = waits_spec(tmp_path, -1, "0 ns", period="5 us")
    res = run_event(spec)
    assert (np.diff(res.t_send) == 5_000_000).all() and res.stats["program"]["stall_total_ps"] == 0


def test_waits_are_refused_in_closed_loop(tmp_path):
    doc = {"name": "w", "calibration": CAL, "rounds": 10,
           "traffic": {"mode": "closed_loop", "program": {"waits": {"for_round": -1}}},
           "nodes": [{"name": "gen", "kind": "generator"}, {"name": "u55c", "kind": "link_card"},
                     {"name": "epyc7282", "kind": "consumer", "device": "epyc7282"}],
           "links": [{"from": "gen", "to": "u55c", "kind": "on_card"}, {"from": "u55c", "to": "epyc7282",
                                                                       "kind": "pcie"}]}
    with pytest.raises(ConfigError) as e:
        load(doc, tmp_path)
    assert e.value.key == "traffic.program"
    doc["traffic"] = {"mode": "open_loop", "period": "2 us", "program": {"waits": {"for_round": 0}}}
    with pytest.raises(ConfigError) as e:
        load(doc, tmp_path)
    assert e.value.key == "traffic.program.waits.for_round"


# -- twin decode: the decoder's corrections are the answer bits set_cond branches on ----------------

def decode_doc(shots: int) -> dict:
    return {"name": "dqfb", "calibration": CAL, "hosting": str(ROOT / "calibrations" / "hosting.yaml"), "seed": 4,
            "control": "aurora", "qblox": {**cluster(shots, 596), "clock": "independent", "ppm": 12.5},
            "decode": {"code": "rep", "distance": 3, "p": 0.08, "shots": shots, "decoder": "lookup",
                       "placements": [{"device": "epyc7282"}]}}


def test_twin_decode_with_a_listening_qblox_cluster(tmp_path):
    """``twin decode`` runs a scenario whose Qblox program waits for each correction and plays the
    correction pulse on exactly the requests whose correction (observable 0, the reply's bit 0) is 1."""
    import contextlib
    import io
    import json

    from twin.cli import main
    p = tmp_path / "dqfb.yaml"
    p.write_text(yaml.safe_dump(decode_doc(80), sort_keys=False))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(["decode", str(p), "--out", str(tmp_path / "out")])
    assert rc in (0, None), out.getvalue()
    assert "control program" in out.getvalue()
    doc = json.loads((tmp_path / "out" / "results.json").read_text())
    pl = doc["placements"][0]
    assert doc["traffic"]["feedback"]["latency_ns"] == LATENCY
    c = pl["program"]["conditional"]
    assert c["against_corrections"] == {"agree": 80, "disagree": 0}
    assert c["ran_on_answer_0"] == 0 and c["skipped_on_answer_1"] == 0 and c["answers_1"] > 5
    assert pl["program"]["stall_ns"]["rounds_stalled"] == 80  # a CPU core's ~2 us round trip against 200 ns
    assert pl["program"]["period_ns"]["effective"] > NOMINAL


def test_decode_corrections_drive_the_pulses(tmp_path):
    """The same through the study: each request's pulse against the decoder's own answer, read from
    the replies the card checked (which equal the direct decode)."""
    from twin.qec.load import load_decode
    from twin.studies.decode import run_decode_study
    p = tmp_path / "dqfb.yaml"
    p.write_text(yaml.safe_dump(decode_doc(120), sort_keys=False))
    study = run_decode_study(load_decode(p))
    run = study.runs[0]
    assert (run.corrections == run.direct).all()
    prog = run.result.stats["program"]
    seqs = prog["reply_seqs"]
    want = run.corrections[seqs - 1, 0] & 1
    assert np.array_equal(prog["conditional"]["answers"], want)
    assert np.array_equal(prog["conditional"]["ran_by_reply"], want.astype(bool))
    assert 5 < want.sum() < 115


def test_an_answer_bit_beyond_the_correction_is_refused_in_decode(tmp_path):
    """A decode study's reply is the correction, one bit per observable: a bit past them would read 0
    on every request, so the conditional pulse could never play (refused at load, naming the key)."""
    from twin.qec.load import load_decode
    doc = yaml.safe_load((ROOT / "scenarios" / "decode_qblox_feedback.yaml").read_text())
    doc["calibration"] = CAL
    doc["hosting"] = str(ROOT / "calibrations" / "hosting.yaml")
    doc.setdefault("qblox", {}).setdefault("feedback", {})["answer_bit"] = 8
    p = tmp_path / "d.yaml"
    p.write_text(yaml.safe_dump(doc, sort_keys=False))
    with pytest.raises(ConfigError) as e:
        load_decode(p)
    assert e.value.key == "qblox.feedback.answer_bit" and "observable" in str(e.value)
