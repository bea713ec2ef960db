"""NVIDIA platforms (issue 16): the NVQLink path, NVLink-C2C placements, two-stage consumers.

Numbers come from first principles (bytes / rate) or from the cited publications
(calibrations/measured/nvqlink.yaml: NVQLink's maximum FPGA -> GPU -> FPGA round trip of 3.96 us,
arXiv 2510.25213; NVLink-C2C 450 GB/s per direction, NVIDIA's Grace Hopper whitepaper)."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import yaml

from twin.calibration.roce import load_roce_measured, load_roce_params
from twin.config import ConfigError
from twin.devices.generator import TrafficParams
from twin.engine.direct import DirectNotApplicable, run_direct
from twin.engine.event import run_event
from twin.engine.hops import stage_times
from twin.exchange.encoding import get_encoding
from twin.links.c2c import NvlinkC2C
from twin.scenario.compile import flow_spec

ROOT = Path(__file__).resolve().parent.parent
PRIOR = ROOT / "calibrations" / "nvqlink.yaml"
FITTED = ROOT / "calibrations" / "fitted" / "nvqlink.yaml"
MEASURED = ROOT / "calibrations" / "measured" / "nvqlink.yaml"
PUBLISHED_MAX_PS = 3_960_000  # arXiv 2510.25213: the maximum FPGA -> GPU -> FPGA round trip


def _quiet(ps, **hosts_jitter0):
    """``ps`` with every path's jitter 0 (exact arithmetic for the first-principles checks)."""
    vals = {}
    for h, host in ps.hosts.items():
        vals[f"hosts.{h}.host_memory.jitter_ns"] = 0.0
        vals[f"hosts.{h}.p2p.jitter_ns"] = 0.0
        if host.c2c is not None:
            vals[f"hosts.{h}.c2c.jitter_ns"] = 0.0
    return ps.with_values(vals)


def _closed(rounds=400, frame=64):
    return TrafficParams(mode="closed_loop", rounds=rounds, frame_bytes=frame, clock_ps=4000)


def test_c2c_serialises_whole_cache_lines_at_450_gb_per_s():
    w = NvlinkC2C(450e9, latency_ps=400_000)
    assert w.serialise_ps(64) == round(64 / 450e9 * 1e12)      # one 64-byte line: 142 ps
    assert w.serialise_ps(65) == round(128 / 450e9 * 1e12)     # two lines
    assert w.serialise_ps(1) == w.serialise_ps(64)
    assert w.one_way_ps(64) == 400_000 + round(64 / 450e9 * 1e12)
    with pytest.raises(ValueError):
        NvlinkC2C(0)


def test_the_c2c_rate_is_nvidia_s_900_gb_per_s_total():
    ps = load_roce_params(PRIOR)
    link = ps.hosts["gb200"].c2c.link()
    assert 2 * link.bytes_per_s == pytest.approx(900e9)


def test_a_c2c_poll_costs_the_coherence_miss():
    ps = load_roce_params(PRIOR)
    miss = int(ps.hosts["gb200"].c2c.coherence_miss_ns * 1000)
    c2c = ps.hosts["gb200"].c2c
    grace = ps.consumers["grace_polls_hbm"].params(None, c2c=c2c)
    assert grace.poll_cost_ps == miss and grace.read_ps == miss
    assert grace.poll_period_ps == int(ps.consumers["grace_polls_hbm"].poll_period_ns * 1000)  # a spin hits its cache
    gpu = ps.consumers["gb200_gpu_polls_lpddr"].params(None, c2c=c2c)
    assert gpu.poll_period_ps == gpu.poll_cost_ps == max(miss, 200_000)  # dependent loads across the link
    with pytest.raises(ValueError, match="c2c"):
        ps.consumers["grace_polls_hbm"].params(None, c2c=None)


def test_coherence_miss_moves_the_round_trip_by_the_miss_less_the_local_cost():
    """The same core polling the same queue: over c2c the poll that sees a request costs the miss instead
    of the local load (per-piece echo: no payload read), so the round trip moves by their difference (the
    10 ns spin period adds at most one period of phase)."""
    ps = _quiet(load_roce_params(PRIOR))
    local = ps.with_values({"consumers.grace_polls_hbm.poll": "local"})
    tr = _closed()
    far = run_direct(flow_spec(ps, "grace_polls_hbm", tr, 1)).rtt_ps
    near = run_direct(flow_spec(local, "grace_polls_hbm", tr, 1)).rtt_ps
    c = ps.consumers["grace_polls_hbm"]
    want = (ps.hosts["gb200"].c2c.coherence_miss_ns - c.poll_cost_ns) * 1000
    assert abs(np.median(far) - np.median(near) - want) <= c.poll_period_ns * 1000 + 4000  # + one card cycle


def test_placements_are_checked_in_the_parameter_set(tmp_path):
    doc = yaml.safe_load(PRIOR.read_text())
    bad = dict(doc, hosts={**doc["hosts"], "gb200": {k: v for k, v in doc["hosts"]["gb200"].items() if k != "c2c"}})
    f = tmp_path / "p.yaml"
    f.write_text(yaml.safe_dump(bad))
    with pytest.raises(ConfigError, match="c2c"):
        load_roce_params(f)
    bad = yaml.safe_load(PRIOR.read_text())
    bad["consumers"]["grace_polls_hbm"]["path"] = "host_memory"  # a core polling GPU memory: the NIC writes p2p
    f.write_text(yaml.safe_dump(bad))
    with pytest.raises(ConfigError, match="path"):
        load_roce_params(f)
    bad = yaml.safe_load(PRIOR.read_text())
    bad["consumers"]["gb200_gpu_to_grace"]["handoff"]["to"] = "h200_gpu"  # another node
    f.write_text(yaml.safe_dump(bad))
    with pytest.raises(ConfigError, match="one node"):
        load_roce_params(f)


def test_handoff_is_a_second_queue_pair_in_memory_and_every_hop_is_timed():
    """GPU receives, forms detectors, hands the request to a Grace core over C2C, which answers. From the
    parameters: preprocess = 8 x frame x ns-per-measurement + the receiving kernel's service; the hand-off
    write = the C2C latency + the pieces' serialisation; the serving core's poll that sees it costs its
    own miss (its own memory, written by the other chip), within one spin period."""
    ps = _quiet(load_roce_params(PRIOR))
    spec = flow_spec(ps, "gb200_gpu_to_grace", _closed(300), 3)
    assert spec.event_only and spec.handoff.to == "grace_core"
    with pytest.raises(DirectNotApplicable, match="handed"):
        run_direct(spec)
    res = run_event(spec)
    assert res.mismatches == 0 and len(res.t_in) == 300  # the reply came back byte for byte through both stages
    st = stage_times(res.t_in, res.t_have, res.hops)
    assert sum(st.values()).tolist() == (res.t_have - res.t_in).tolist()  # the stages add up exactly
    c, g = ps.consumers["gb200_gpu_to_grace"], ps.consumers["grace_core"]
    c2c = ps.hosts["gb200"].c2c
    pre = round((8 * 64 * c.preprocess_ns_per_measurement + c.service_ns) * 1000)
    assert set(st["preprocess"].tolist()) == {pre}
    enc = get_encoding("per_piece")
    sizes = [len(d) for _, d in enc.writes(1, bytes(64))]
    link = c2c.link()
    write = int(c2c.latency_ns * 1000) + sum(link.serialise_ps(n) for n in sizes)
    assert set(st["handoff_write"].tolist()) == {write}
    cost = int(g.poll_cost_ns * 1000)
    assert st["handoff_poll"].min() >= cost and st["handoff_poll"].max() < cost + int(g.poll_period_ns * 1000)
    checks = enc.pieces(64) * round(g.piece_check_ns * 1000)  # every piece's sequence number, then the echo body
    assert (st["service"] == round(g.service_ns * 1000) + checks).all()


def test_the_handoff_lane_carries_the_requests():
    from twin.engine.event import run_topology
    from twin.engine.topology import Topology
    ps = _quiet(load_roce_params(PRIOR))
    spec = flow_spec(ps, "gb200_gpu_to_grace", _closed(50), 3)
    res = run_topology(Topology.single(spec))[0]
    lane = res.stats["shared"]["lanes"]["gb200_gpu_to_grace->grace_core"]
    writes = get_encoding("per_piece").writes(1, bytes(64))  # one burst of self-validating 16-byte pieces
    assert lane["writes"] == 50 * len(writes)
    assert lane["bytes"] == 50 * sum(len(d) for _, d in writes) == 50 * 16 * get_encoding("per_piece").pieces(64)


def test_models_that_serve_on_one_device_refuse_a_handoff():
    from twin.nodes.models import Situation, refusal
    two = Situation(device_kind="gpu", path="roce", stages=2)
    for model in ("code", "live"):
        assert "second device" in refusal("consumer", model, two)
    assert refusal("consumer", "sim", two) is None
    assert "fault" in refusal("consumer", "sim", replace(two, faults=frozenset({"stall"})))
    assert "event" in refusal("consumer", "sim", replace(two, engine="direct"))


@pytest.mark.parametrize("consumer", ["gb200_gpu", "h200_gpu"])
def test_the_fitted_set_reproduces_the_published_nvqlink_round_trip(consumer):
    """The H200 scenario's loop (10^6 rounds, its seed) against the published maximum compared at its
    N (the 1 - 1/N quantile, N = max_samples), within 1 %; the free parameter is the one the fit lists
    (one per host: one published number)."""
    from twin.stats import percentile_ps
    ps = load_roce_params(FITTED)
    assert [k for k in ps.fitted["values"]] == ["hosts.gb200.p2p.latency_ns", "hosts.h200_host.p2p.latency_ns"]
    row = load_roce_measured(MEASURED).consumers[consumer]
    assert row.stats_ps() == {"max": PUBLISHED_MAX_PS} and row.max_samples == 100_000
    sc = yaml.safe_load((ROOT / "scenarios" / "nvqlink_h200.yaml").read_text())
    assert sc["rounds"] >= 10 * row.max_samples
    rtt = run_direct(flow_spec(ps, consumer, _closed(sc["rounds"]), sc["seed"])).rtt_ps
    assert abs(percentile_ps(rtt, row.quantile("max")) - PUBLISHED_MAX_PS) <= 0.01 * PUBLISHED_MAX_PS


def test_c2c_links_in_a_scenario_are_checked(tmp_path):
    doc = yaml.safe_load((ROOT / "scenarios" / "nvqlink_gb200.yaml").read_text())
    doc["calibration"] = str(FITTED)
    doc["measured"] = str(MEASURED)
    from twin.scenario.load import load_scenario

    def load(d):
        f = tmp_path / "s.yaml"
        f.write_text(yaml.safe_dump(d))
        return load_scenario(f)
    load(doc)
    no_link = dict(doc, links=[ln for ln in doc["links"] if not (ln["kind"] == "c2c" and ln["from"] == "gpu_to_grace")])
    with pytest.raises(ConfigError) as e:
        load(no_link)
    assert e.value.key == "nodes[6].device"  # gpu_to_grace hands off across C2C: it needs the link
    two_gpus = dict(doc, links=doc["links"] + [{"from": "gb200_gpu", "to": "gpu_polls_lpddr", "kind": "c2c"}])
    with pytest.raises(ConfigError) as e:
        load(two_gpus)
    assert e.value.key == f"links[{len(doc['links'])}].kind"


def test_twin_run_on_the_gb200_scenario_gives_every_placement_its_budget():
    from twin.scenario.load import load_scenario
    from twin.studies.run import run_study
    st = run_study(load_scenario(ROOT / "scenarios" / "nvqlink_gb200.yaml"), rounds=1500, verify_rounds=200)
    by = {r.node: r.summary for r in st.runs}
    assert set(by) == {"gb200_gpu", "grace_polls_hbm", "gpu_polls_lpddr", "gpu_to_grace", "grace"}
    assert by["gpu_to_grace"]["engine"] == "event" and by["gb200_gpu"]["engine"] == "direct+event"
    stages = [b["stage"] for b in by["gpu_to_grace"]["budget"]]
    assert stages[:2] == ["card", "slot_wait"]
    assert stages[4:9] == ["queue", "preprocess", "handoff_write", "handoff_poll", "handoff_queue"]
    assert "max" in by["gb200_gpu"]["error_pct"] and by["grace"]["measured"] is None
    assert all(s["mismatches"] == 0 for s in by.values())


def test_decode_d7_on_gb200_prints_each_stage_s_share(tmp_path):
    """A surface-code d=7 reaction time through the hand-off placement: the budget's stages add up to
    the median round's round trip (shares sum to 1), PyMatching's corrections equal the direct decode."""
    from twin.qec.load import load_decode
    from twin.studies.decode import run_decode_study
    doc = yaml.safe_load((ROOT / "scenarios" / "decode_nvqlink_gb200_d7.yaml").read_text())
    doc["decode"]["shots"] = 60
    doc["decode"]["placements"] = [{"device": "gb200_gpu_to_grace", "mode": "inline"}]
    for k in ("calibration", "hosting"):
        doc[k] = str((ROOT / "scenarios" / doc[k]).resolve())
    f = tmp_path / "d7.yaml"
    f.write_text(yaml.safe_dump(doc))
    study = run_decode_study(load_decode(f))
    (s,) = study.document["placements"]
    assert s["identical_corrections"] == s["requests"] == 60 and s["card_mismatches"] == 0
    shares = {b["stage"]: b["share_median_round"] for b in s["budget"]}
    assert {"preprocess", "handoff_write", "handoff_poll", "service"} <= set(shares)
    assert sum(shares.values()) == pytest.approx(1.0, abs=1e-5)
    assert s["reaction"]["p50_ns"] > 0
