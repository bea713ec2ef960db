"""``twin sweep``: grid parsing, per-point seeds, the frame-size slope against serialisation from the
link parameters, and the same numbers on a local Dask cluster as in local worker processes."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from twin.calibration.roce import load_roce_params
from twin.commands import main
from twin.studies.sweep import Axis, SweepError, grid, parse_param, point_seed, run_point, run_sweep

ROOT = Path(__file__).resolve().parent.parent
ROCE = ROOT / "scenarios" / "backline_roce.yaml"


def test_parse_lists_and_ranges():
    assert parse_param("frame_bytes=64,256,1792") == Axis("frame_bytes", (64, 256, 1792))
    assert parse_param("frame_bytes=64:1792:576") == Axis("frame_bytes", (64, 640, 1216, 1792))
    assert parse_param("params.ethernet.switch_latency_ns=0:1:0.5").values == (0.0, 0.5, 1.0)
    assert parse_param("traffic.period=5 us,10 us").values == ("5 us", "10 us")
    for bad in ("frame_bytes", "frame_bytes=", "frame_bytes=10:1:1", "frame_bytes=1:10:0", "x=a:b:c"):
        with pytest.raises(SweepError):
            parse_param(bad)


def test_grid_and_point_seeds_depend_only_on_the_point():
    pts = grid([Axis("a", (1, 2)), Axis("b", ("x", "y"))])
    assert pts == [{"a": 1, "b": "x"}, {"a": 1, "b": "y"}, {"a": 2, "b": "x"}, {"a": 2, "b": "y"}]
    assert point_seed(7, {"a": 1, "b": "x"}) == point_seed(7, {"b": "x", "a": 1})
    assert len({point_seed(7, p) for p in pts}) == 4
    assert point_seed(7, pts[0]) != point_seed(8, pts[0])


def test_bad_parameter_paths_and_values_are_refused_before_running():
    with pytest.raises(SweepError, match="params.nope"):
        run_sweep(ROCE, [parse_param("params.nope.x=1,2")], rounds=10)
    with pytest.raises(SweepError, match="frame_bytes"):
        run_sweep(ROCE, [parse_param("frame_bytes=0,16")], rounds=10)


def test_period_sweep_on_a_closed_loop_is_refused_before_running(tmp_path, capsys):
    """A closed loop has no period: sweeping one would give identical points."""
    rc = main(["sweep", str(ROCE), "--param", "traffic.period=5 us,10 us", "--rounds", "10", "--quiet",
               "--out", str(tmp_path / "sw")])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.splitlines()) == 1, err
    assert "--param traffic.period='5 us'" in err and "open_loop" in err
    assert not (tmp_path / "sw").exists()


def test_frame_size_slope_matches_serialisation_from_the_link_parameters():
    """RoCE path, Threadripper core, per-piece encoding (16 bytes on the wire per 12 payload
    bytes) in both directions. Per payload byte the round trip grows by:
    the controller's datapath (8 bits per byte over datapath_bits per 5 ns cycle), each direction's
    Ethernet serialisation plus one store-and-forward hop at the receiver (2 x 8 bits / rate) and
    the PCIe write at the NIC (bytes / PCIe rate, plus a TLP header and framing per 256 bytes), and
    the consumer checking one more piece per 12 bytes. Computed here from the parameter set's link
    parameters, not from the code's serialisation functions."""
    params = load_roce_params(ROOT / "calibrations" / "fitted" / "backline_roce.yaml")
    eth_rate = 100e9
    assert params.ethernet.rate == "100 Gb/s" and not params.ethernet.switch_store_and_forward
    pcie = params.hosts["threadripper"].pcie
    gt = {3: 8e9, 4: 16e9, 5: 32e9}[pcie.generation]
    pcie_ns_per_byte = 1e9 / (pcie.lanes * gt * 128 / 130 / 8) * (1 + (pcie.tlp_header_bytes + pcie.tlp_overhead_bytes)
                                                                  / pcie.max_payload_bytes)
    eth_ns_per_byte = 8 / eth_rate * 1e9
    wire_per_payload = 16 / 12
    core = params.consumers["threadripper_core"]
    clock_ns = 5.0
    predicted = (8 / params.controller.datapath_bits * clock_ns
                 + 2 * wire_per_payload * (2 * eth_ns_per_byte + pcie_ns_per_byte)
                 + core.piece_check_ns / 12)
    sizes = list(range(192, 1793, 192))  # multiples of 12 and of 64: pieces and datapath words exact
    rows = run_sweep(ROCE, [Axis("frame_bytes", tuple(sizes))], rounds=4000, workers=1)
    cpu = [r for r in rows if r["consumer"] == "threadripper_core"]
    slope = np.polyfit([r["frame_bytes"] for r in cpu], [r["mean_ns"] for r in cpu], 1)[0]
    assert slope == pytest.approx(predicted, rel=0.04), (slope, predicted)
    # and latency grows with size at every step
    p50 = [r["p50_ns"] for r in cpu]
    assert all(b > a for a, b in zip(p50, p50[1:])), p50


def test_dask_cluster_gives_the_local_numbers(tmp_path):
    distributed = pytest.importorskip("distributed")
    axes = [parse_param("frame_bytes=16,256,1024")]
    local = run_sweep(ROCE, axes, rounds=3000, workers=2)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tcp",
                                  host="127.0.0.1", dashboard_address=None) as cluster:
        remote = run_sweep(ROCE, axes, rounds=3000, cluster=cluster.scheduler_address)
    assert remote == local
    assert {r["seed"] for r in local} == {point_seed(20261129, {"frame_bytes": v}) for v in (16, 256, 1024)}
    # one point run alone gives its row of the grid
    row = [r for r in local if r["frame_bytes"] == 256]
    assert run_point(str(ROCE.resolve()), {"frame_bytes": 256}, 3000, None) == row


def test_twin_sweep_writes_table_csv_json_and_plot(tmp_path, capsys):
    out = tmp_path / "sw"
    rc = main(["sweep", str(ROOT / "scenarios" / "card_path_64b.yaml"), "--param", "frame_bytes=64,1792",
               "--param", "params.hosts.epyc7282.pcie.lanes=8,16", "--rounds", "800", "--workers", "1",
               "--out", str(out), "--quiet"])
    assert rc == 0
    doc = json.loads((out / "sweep.json").read_text())
    assert len(doc["rows"]) == 4 * 5 and doc["axes"][1]["values"] == [8, 16]
    assert (out / "sweep.png").read_bytes()[:4] == b"\x89PNG"
    assert (out / "sweep.csv").read_text().startswith("frame_bytes,params.hosts.epyc7282.pcie.lanes,consumer")
    assert main(["sweep", str(ROCE), "--param", "params.hosts.threadripper.pcie.lanes=3", "--rounds", "10"]) == 2


def test_aurora_lane_count_sweep_moves_the_loop_by_the_serialisation():
    """Qblox across the Aurora cable (scenarios/qblox_open_loop.yaml), EPYC 7282 core: a 64-byte
    frame is 9 blocks of 66 bits; on L lanes it takes ceil(9 / L) block times of 66 bits at
    10.3125 Gb/s (6.4 ns), each way. From 4 lanes to 1 the loop grows by 2 x (9 - 3) x 6.4 ns = 76.8 ns;
    the card-boundary round trip (inside the cable) does not move."""
    rows = run_sweep(ROOT / "scenarios" / "qblox_open_loop.yaml", [parse_param("params.aurora.lanes=1,4")],
                     rounds=4000, workers=1)
    cpu = {r["params.aurora.lanes"]: r for r in rows if r["consumer"] == "epyc7282"}
    block_ns = 66 / 10.3125
    expected = 2 * (9 - 3) * block_ns
    assert cpu[1]["loop_p50_ns"] - cpu[4]["loop_p50_ns"] == pytest.approx(expected, abs=8.0)
    assert abs(cpu[1]["p50_ns"] - cpu[4]["p50_ns"]) <= 8.0


def test_a_size_or_gap_sweep_of_a_poll_locked_closed_loop_is_warned_before_running(tmp_path, capsys):
    """card_path_64b: closed loop, fixed gap; the MI355X (poll 337.15 ns) reads 3.036 µs flat from 64 to
    1,024 B. The warning names the param and why, before the first point; random gaps do not lock."""
    import yaml

    from twin.commands.sweep import locked_warnings
    from twin.scenario import load_scenario
    card = ROOT / "scenarios" / "card_path_64b.yaml"
    rc = main(["sweep", str(card), "--param", "frame_bytes=64,1024", "--rounds", "600", "--workers", "1",
               "--out", str(tmp_path / "sw"), "--quiet"])
    out = capsys.readouterr().out
    assert rc == 0
    warning = next(ln for ln in out.splitlines() if ln.startswith("warning:"))
    assert "--param frame_bytes" in warning and "mi355x (polls every 337.15 ns)" in warning and "flat" in warning
    assert out.index("warning:") < out.index("sweep, 2 points")
    rows = json.loads((tmp_path / "sw" / "sweep.json").read_text())["rows"]
    mi = [r["p50_ns"] for r in rows if r["consumer"] == "mi355x"]
    assert mi[0] == mi[1]  # what the warning says: flat
    loaded = load_scenario(card)
    assert [w.split(":")[0] for w in locked_warnings(loaded, [parse_param("traffic.gap=0 ns,100 ns")])] == \
        ["--param traffic.gap"]
    assert locked_warnings(loaded, [parse_param("params.hosts.epyc7282.pcie.lanes=8,16")]) == []
    doc = yaml.safe_load(card.read_text())
    doc["traffic"]["gaps"] = {"distribution": "uniform", "min": "0 ns", "max": "400 ns"}
    doc["calibration"] = str(ROOT / "calibrations" / "fitted" / "card_path.yaml")
    doc["measured"] = None
    random_gaps = tmp_path / "gaps.yaml"
    random_gaps.write_text(yaml.safe_dump(doc))
    assert locked_warnings(load_scenario(random_gaps), [parse_param("frame_bytes=64,1024")]) == []
