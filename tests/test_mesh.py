"""Meshes: routes on the graph, contention at a shared consumer against queueing theory, fan-out by
function id, the topology drawing, and mesh input errors.

The M/D/1 expectation is first principles: Poisson arrivals at total rate lambda into one server
with a fixed service time D wait on average W = lambda D^2 / (2 (1 - rho)), rho = lambda D.
"""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from twin.commands import main
from twin.config import ConfigError
from twin.scenario import load_scenario
from twin.studies.mesh import run_mesh

ROOT = Path(__file__).resolve().parent.parent
FITTED = ROOT / "calibrations" / "fitted" / "card_path.yaml"


def two_controllers(tmp_path: Path, mean_gap_us: float, consumer: str = "epyc7282"):
    """Two independent-clock controllers, Poisson arrivals each of mean gap ``mean_gap_us``, one
    link card, one shared consumer."""
    doc = yaml.safe_load((ROOT / "scenarios" / "mesh_two_controllers_one_gpu.yaml").read_text())
    doc["calibration"] = str(FITTED)
    doc["nodes"][2]["routes"] = {"echo": "shared"}
    doc["nodes"][3] = {"name": "shared", "kind": "consumer", "device": consumer}
    doc["links"][2] = {"from": "u55c", "to": "shared", "kind": "pcie"}
    for f in doc["flows"]:
        f["traffic"]["gaps"]["mean"] = f"{mean_gap_us} us"
    p = tmp_path / f"two_{mean_gap_us}.yaml"
    p.write_text(yaml.safe_dump(doc, sort_keys=False))
    return load_scenario(p)


def service_ps(loaded, service_ns: float) -> int:
    """The shared CPU thread's fixed service per request from the parameter set: poll cost (the load
    that sees the request) + piece checks + the function body, plus on average half a poll period
    to line up with the poll grid after a busy spell."""
    c = loaded.params.consumers["epyc7282"]
    pieces = 1 + -(-loaded.scenario.frame_bytes // 12)  # per-piece encoding: header piece + 12 B per piece
    return round((c.poll_cost_ns + pieces * c.piece_check_ns + service_ns + c.poll_period_ns / 2) * 1000)


@pytest.mark.parametrize("rho", [0.1, 0.2])
def test_shared_consumer_wait_matches_md1_at_low_load(tmp_path, rho):
    service_ns = 1000.0
    probe = two_controllers(tmp_path, 10.0)
    D = service_ps(probe, service_ns)
    lam = rho / D                       # per ps, both flows together
    gap_us = 2 / lam / 1e6              # each flow carries half
    loaded = two_controllers(tmp_path, round(gap_us, 4))
    res = run_mesh(loaded.scenario, loaded.params, rounds=15_000, service_ns={"shared": service_ns})
    waits = [w for ft in res.flows for w in ft.wait_ps]
    measured = sum(waits) / len(waits)
    lam_eff = lam  # the offered rate; Poisson gaps quantised to the 4 ns clock change it by < 0.1 %
    rho_eff = lam_eff * D
    expected = lam_eff * D * D / (2 * (1 - rho_eff))
    assert all(ft.ok.all() for ft in res.flows)
    assert measured == pytest.approx(expected, rel=0.12), (measured, expected)


@pytest.mark.parametrize("consumer, service", [("epyc7282", {"shared": 1000.0}), ("mi210", None)])
def test_queueing_delay_grows_with_offered_load(tmp_path, consumer, service):
    """A CPU core with a 1 µs function (rho ~ 0.06, 0.23, 0.45) and the MI210 with the echo, whose
    service is about two poll periods (~1.9 µs: rho ~ 0.1, 0.4, 0.75)."""
    means = []
    for gap in (40.0, 10.0, 5.0):
        loaded = two_controllers(tmp_path, gap, consumer)
        res = run_mesh(loaded.scenario, loaded.params, rounds=4000, service_ns=service)
        means.append(sum(float(ft.wait_ps.mean()) for ft in res.flows) / 2)
    assert means[0] < means[1] < means[2], means
    assert means[2] > 2 * means[1] > 0  # M/D/1: rho/(1 - rho) at least doubles from the middle load up


def test_no_wait_without_sharing(tmp_path):
    """The fan-out sends each flow to its own consumer: nobody waits for a consumer."""
    loaded = load_scenario(ROOT / "scenarios" / "mesh_fanout_by_function.yaml")
    res = run_mesh(loaded.scenario, loaded.params, rounds=3000)
    assert all(int(ft.wait_ps.max()) == 0 for ft in res.flows)


def test_fanout_routes_by_function_id_and_answers_correctly():
    loaded = load_scenario(ROOT / "scenarios" / "mesh_fanout_by_function.yaml")
    g = loaded.scenario.graph()
    routes = {r.function: r.nodes for r in g.graph["routes"]}
    assert routes == {"invert": ("qblox", "u55c", "epyc7282"), "xor_fold": ("qblox", "u55c", "mi210"),
                      "echo": ("qblox", "u55c", "v80")}
    res = run_mesh(loaded.scenario, loaded.params, rounds=2000)
    assert all(ft.ok.all() for ft in res.flows)       # every reply is its function's answer
    assert {n: s["served"] for n, s in res.stats["consumers"].items()} == {"epyc7282": 2000, "mi210": 2000, "v80": 2000}
    # the three flows share the Aurora cable and the card's PCIe paths only where routes share an edge
    assert set(res.stats["links"]) == {"qblox->u55c", "u55c->qblox", "u55c->epyc7282", "epyc7282->u55c",
                                       "u55c->mi210", "mi210->u55c", "u55c->v80", "v80->u55c"}
    assert res.stats["links"]["qblox->u55c"]["writes"] == 6000


def test_mesh_run_is_deterministic():
    loaded = load_scenario(ROOT / "scenarios" / "mesh_two_controllers_one_gpu.yaml")
    a = run_mesh(loaded.scenario, loaded.params, rounds=1500)
    b = run_mesh(loaded.scenario, loaded.params, rounds=1500)
    assert all((x.t_have == y.t_have).all() and (x.t_start == y.t_start).all() for x, y in zip(a.flows, b.flows))


def test_twin_run_and_topology_on_a_mesh(tmp_path, capsys, monkeypatch):
    import twin.commands.run_mesh as mesh_run
    panels = []
    finish = mesh_run.finish_panels
    monkeypatch.setattr(mesh_run, "finish_panels", lambda axes, *a: (panels.extend(axes[:, 0]), finish(axes, *a)))
    out = tmp_path / "run"
    assert main(["run", str(ROOT / "scenarios" / "mesh_two_controllers_one_gpu.yaml"), "--rounds", "500",
                 "--out", str(out), "--quiet"]) == 0
    doc = yaml.safe_load((out / "results.json").read_text())
    assert doc["schema"] == "twin.mesh-results/1" and len(doc["flows"]) == 2
    assert doc["flows"][0]["route"] == ["qblox_a", "u55c", "mi210"]
    # histograms.png: each flow's panel as a loop's, its rounds axis named and its p50/p90 drawn
    assert [ax.get_ylabel() for ax in panels] == ["rounds", "rounds"]
    assert [[(ln.get_label(), ln.get_xdata()[0]) for ln in ax.get_lines()] for ax in panels] == [
        [("twin p50", f["rtt"]["p50_ns"] / 1000), ("twin p90", f["rtt"]["p90_ns"] / 1000)] for f in doc["flows"]]
    assert (out / "histograms.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    png = tmp_path / "topo.png"
    assert main(["topology", str(ROOT / "scenarios" / "mesh_fanout_by_function.yaml"), "--out", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["topology", str(ROOT / "scenarios" / "card_path_64b.yaml"), "--out", str(tmp_path / "c.png")]) == 0


@pytest.mark.parametrize("mutate, key", [
    (lambda d: d["flows"][0].update({"function": "sum32"}), "flows[0].function"),
    (lambda d: d["flows"][0].update({"from": "u55c"}), "flows[0].from"),
    (lambda d: d["nodes"][2].update({"routes": {"echo": "qblox_a"}}), "nodes[2].routes.echo"),
    (lambda d: d["flows"][0]["traffic"].pop("gaps"), "flows[0].traffic.period"),
    (lambda d: d["flows"][0]["traffic"]["gaps"].update({"mean": "-3 us"}), "flows[0].traffic.gaps.mean"),
    (lambda d: d["flows"][0]["traffic"].update({"mode": "poisson"}), "flows[0].traffic.mode"),
])
def test_mesh_errors_name_the_key(tmp_path, mutate, key):
    doc = yaml.safe_load((ROOT / "scenarios" / "mesh_two_controllers_one_gpu.yaml").read_text())
    doc["calibration"] = str(FITTED)
    mutate(doc)
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump(doc, sort_keys=False))
    with pytest.raises(ConfigError) as e:
        load_scenario(p)
    assert e.value.key == key, str(e.value)


def test_flows_sharing_a_cable_serialise_on_it():
    """The fan-out's three flows leave the controller at the same clock edges (one controller, one
    clock) and share its Aurora cable: each frame waits for the one before it, so flow j enters the
    card one frame time (3 blocks of 66 bits on each of 4 lanes at 10.3125 Gb/s = 19.2 ns for 64 B)
    after flow j-1, up to the card's 4 ns clock edge."""
    loaded = load_scenario(ROOT / "scenarios" / "mesh_fanout_by_function.yaml")
    res = run_mesh(loaded.scenario, loaded.params, rounds=500)
    frame_ps = round(-(-(64 // 8 + 1) // 4) * 66 / 10.3125e9 * 1e12)
    assert frame_ps == 19_200
    send = [ft.t_send for ft in res.flows]
    assert (send[0] == send[1]).all() and (send[1] == send[2]).all()
    for a, b in ((0, 1), (1, 2)):
        gap = res.flows[b].t_in - res.flows[a].t_in
        assert ((gap >= frame_ps - 4000) & (gap <= frame_ps + 4000)).all(), (gap.min(), gap.max())


def test_a_one_flow_mesh_reproduces_the_single_loop(tmp_path):
    """Cross-check of the mesh engine against the loop engines: one closed-loop flow on the card's
    clock to one EPYC 7282 core is the seeds' card-path loop; its distribution must match the loop's
    within sampling error (the two use different random streams): p50 and p90 within two 4 ns
    buckets, p99 within five, the mean within 2 ns."""
    from twin.devices.generator import TrafficParams
    from twin.engine.direct import run_direct
    from twin.scenario.compile import flow_spec
    doc = {"name": "one_flow", "calibration": str(FITTED), "seed": 1, "rounds": 20000, "frame_bytes": 64,
           "nodes": [{"name": "gen", "kind": "generator"},
                     {"name": "u55c", "kind": "link_card", "routes": {"echo": "cpu"}},
                     {"name": "cpu", "kind": "consumer", "device": "epyc7282"}],
           "links": [{"from": "gen", "to": "u55c", "kind": "on_card"}, {"from": "u55c", "to": "cpu", "kind": "pcie"}],
           "flows": [{"from": "gen", "function": "echo", "traffic": {"mode": "closed_loop"}}]}
    p = tmp_path / "one.yaml"
    p.write_text(yaml.safe_dump(doc, sort_keys=False))
    mesh = load_scenario(p)
    ft = run_mesh(mesh.scenario, mesh.params).flows[0]
    tr = TrafficParams(mode="closed_loop", rounds=20000, frame_bytes=64)
    ref = run_direct(flow_spec(mesh.params, "epyc7282", tr, seed=1)).rtt_ps
    from twin.stats import percentile_ps
    for q, tol in ((50, 8000), (90, 8000), (99, 20000)):  # p99: ~5 ns standard error each at 20,000 rounds
        assert abs(percentile_ps(ft.rtt_ps, q) - percentile_ps(ref, q)) <= tol, q
    assert abs(ft.rtt_ps.mean() - ref.mean()) <= 2000, (ft.rtt_ps.mean(), ref.mean())  # SE of the mean ~0.5 ns
    assert int(ft.wait_ps.max()) == 0  # one request in flight never waits for its consumer


def test_two_link_cards_into_one_consumer(tmp_path):
    """Two controllers, each with its own link card, routed to one MI210: separate cables and PCIe
    paths (no shared link), but one consumer thread, so requests still queue there."""
    doc = {"name": "two_cards", "calibration": str(FITTED), "seed": 2, "rounds": 3000, "frame_bytes": 64,
           "nodes": [{"name": "a", "kind": "generator"}, {"name": "b", "kind": "generator"},
                     {"name": "card_a", "kind": "link_card", "routes": {"echo": "gpu"}},
                     {"name": "card_b", "kind": "link_card", "routes": {"echo": "gpu"}},
                     {"name": "gpu", "kind": "consumer", "device": "mi210"}],
           "links": [{"from": "a", "to": "card_a", "kind": "aurora"}, {"from": "b", "to": "card_b", "kind": "aurora"},
                     {"from": "card_a", "to": "gpu", "kind": "pcie"}, {"from": "card_b", "to": "gpu", "kind": "pcie"}],
           "flows": [{"from": g, "function": "echo",
                      "traffic": {"mode": "open_loop", "gaps": {"distribution": "exponential", "mean": "4 us"},
                                                                 "clock": "independent", "ppm": 3}} for g in "ab"]}
    p = tmp_path / "two_cards.yaml"
    p.write_text(yaml.safe_dump(doc, sort_keys=False))
    loaded = load_scenario(p)
    res = run_mesh(loaded.scenario, loaded.params)
    assert [r.nodes for r in res.routes] == [("a", "card_a", "gpu"), ("b", "card_b", "gpu")]
    assert {k: v["writes"] for k, v in res.stats["links"].items() if k.endswith("->gpu")} == \
        {"card_a->gpu": 3000, "card_b->gpu": 3000}
    assert res.stats["consumers"]["gpu"]["served"] == 6000
    assert all(ft.ok.all() for ft in res.flows)
    assert all((ft.wait_ps > 0).mean() > 0.1 for ft in res.flows)  # rho ~ 0.9: most requests wait
