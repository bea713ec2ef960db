"""One mesh partitioned across processes (``twin run MESH --processes N``): the same bytes as one process,
a placement balanced by expected events, a killed worker named with its part and the other parts saved,
Ctrl-C across every part, and the one-line refusals.

The mesh (:func:`mesh_doc`) has four components: two link cards each shared by two controllers (flows
0-1 through card ca, 2-3 through cb) and two cards of one flow each, reached by one controller (flows 4
and 5). A controller reaching two cards has one oscillator: its phase is its first flow's draw over the
whole topology, so a part holding only its second card's flows must be given it (drawn in the parent)."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import yaml

from twin.commands import main

ROOT = Path(__file__).resolve().parent.parent
FITTED = ROOT / "calibrations" / "fitted" / "card_path.yaml"
pytest.importorskip("distributed")


def mesh_doc(rounds: int = 2000, frame_bytes: int = 64) -> dict:
    """The four-component mesh of the module docstring (independent clocks, Poisson, periodic and
    closed-loop traffic, three functions, CPU and GPU consumers)."""
    gaps = {"mode": "open_loop", "gaps": {"distribution": "exponential", "mean": "3 us"}, "clock": "independent"}
    period = {"mode": "open_loop", "period": "4 us", "clock": "independent"}
    nodes = [{"name": g, "kind": "generator"} for g in ("g0", "g1", "g2")]
    nodes += [{"name": "ca", "kind": "link_card", "routes": {"invert": "a0", "xor_fold": "a1"}},
              {"name": "cb", "kind": "link_card", "routes": {"invert": "b0", "xor_fold": "b1"}},
              {"name": "cc", "kind": "link_card", "routes": {"echo": "c0"}},
              {"name": "cd", "kind": "link_card", "routes": {"invert": "d0"}}]
    nodes += [{"name": n, "kind": "consumer", "device": d}
              for n, d in (("a0", "epyc7282"), ("a1", "mi210"), ("b0", "epyc7282"), ("b1", "mi210"), ("c0", "v80"),
                           ("d0", "epyc7282"))]
    links = [{"from": g, "to": c, "kind": "aurora"} for g, c in (("g0", "ca"), ("g1", "ca"), ("g0", "cb"),
                                                                ("g1", "cb"), ("g2", "cc"), ("g2", "cd"))]
    links += [{"from": c, "to": n, "kind": "pcie"} for c, n in (("ca", "a0"), ("ca", "a1"), ("cb", "b0"), ("cb", "b1"),
                                                              ("cc", "c0"), ("cd", "d0"))]
    flows = [{"from": "g0", "via": "ca", "function": "invert", "traffic": {**gaps, "ppm": 5}},
             {"from": "g1", "via": "ca", "function": "xor_fold", "traffic": {**gaps, "ppm": -3}},
             {"from": "g0", "via": "cb", "function": "invert", "traffic": {**period, "ppm": 5}},
             {"from": "g1", "via": "cb", "function": "xor_fold", "traffic": {**period, "ppm": -3}},
             {"from": "g2", "via": "cc", "function": "echo",
              "traffic": {"mode": "closed_loop", "clock": "independent"}},
             {"from": "g2", "via": "cd", "function": "invert", "traffic": {**gaps, "ppm": 11}}]
    return {"name": "parts_shared_cards", "calibration": str(FITTED), "seed": 11, "rounds": rounds,
            "frame_bytes": frame_bytes, "nodes": nodes, "links": links, "flows": flows}


@pytest.fixture
def mesh_file(tmp_path: Path) -> Path:
    p = tmp_path / "parts.yaml"
    p.write_text(yaml.safe_dump(mesh_doc(), sort_keys=False))
    return p


def _twin(args: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "twin", *args], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300, **kw)


# -- the draws and the placement (no cluster) --------------------------------------------------------------
def test_a_part_runs_as_in_the_whole_topology_with_the_draws_of_the_whole(mesh_file):
    from twin.engine.event import run_topology
    from twin.engine.partition import components, part_topology, place
    from twin.engine.topology import Topology
    from twin.scenario import load_scenario
    from twin.studies.mesh import mesh_topology
    ld = load_scenario(mesh_file)
    topo = mesh_topology(ld.scenario, ld.params, rounds=500)
    assert components(topo) == [(0, 1), (2, 3), (4,), (5,)]
    whole = run_topology(topo)
    parts = place(topo, 2)
    # events 1000, 1000, 500, 500: the two cards of two flows apart, a card of one flow with each
    assert [p.flows for p in parts] == [(0, 1, 4), (2, 3, 5)]
    for p in parts:
        for i, res in zip(p.flows, run_topology(part_topology(topo, p.flows))):
            for col in ("t_send", "t_in", "t_have", "t_back"):
                np.testing.assert_array_equal(getattr(res, col), getattr(whole[i], col))
            np.testing.assert_array_equal(res.hops.start, whole[i].hops.start)
    # drawn in the part alone, controller g0's oscillator (and g2's) would be its flow 2's (5's) phase
    alone = run_topology(Topology(topo.name, topo.seed, tuple(topo.flows[i] for i in parts[1].flows)))
    assert not np.array_equal(alone[0].t_send, whole[2].t_send)


def _fake(rounds: list[int]):
    """A topology of one-flow components with these rounds (all that :func:`place` reads)."""
    flows = tuple(SimpleNamespace(spec=SimpleNamespace(traffic=SimpleNamespace(rounds=r))) for r in rounds)
    return SimpleNamespace(flows=flows), [(i,) for i in range(len(rounds))]


def test_placement_is_largest_first_onto_the_least_loaded_part():
    from twin.engine.partition import place
    topo, comps = _fake([3, 5, 3, 4, 3])
    # by hand: 5 -> p0; 4 -> p1; 3 (comp 0) -> p1 (4 < 5): 7; 3 (comp 2) -> p0: 8; 3 (comp 4) -> p1: 10
    parts = place(topo, 2, comps)  # type: ignore[arg-type]
    assert [(p.components, p.events) for p in parts] == [((1, 2), 8), ((0, 3, 4), 10)]
    assert sorted(i for p in parts for i in p.flows) == list(range(5))
    # more processes than components: one part each; one process: all in one
    assert [p.components for p in place(topo, 8, comps)] == [(1,), (3,), (0,), (2,), (4,)]  # type: ignore[arg-type]
    assert [p.events for p in place(topo, 1, comps)] == [18]  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        place(topo, 0, comps)  # type: ignore[arg-type]
    # equal components spread evenly: 8 of 1,000 rounds onto 4 parts, 2,000 each
    topo, comps = _fake([1000] * 8)
    assert [p.events for p in place(topo, 4, comps)] == [2000] * 4  # type: ignore[arg-type]


def test_two_timelines_in_two_threads_of_one_process_keep_their_bytes(tmp_path):
    """The compiled core runs with the GIL released: two parts in one worker process's threads each run
    a timeline at once. Its scratch (the payload, reply and reference of a step) is per thread; shared,
    the replies of one were checked against the other's and thousands of rounds mismatched."""
    import threading

    from twin.engine.event import run_topology
    from twin.scenario import load_scenario
    from twin.studies.mesh import mesh_topology
    p = tmp_path / "wide.yaml"
    p.write_text(yaml.safe_dump(mesh_doc(3000, 4096), sort_keys=False))
    ld = load_scenario(p)
    topo = mesh_topology(ld.scenario, ld.params)
    ref = run_topology(topo)
    got: dict = {}
    threads = [threading.Thread(target=lambda k=k: got.update({k: run_topology(topo)})) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [sum(r.mismatches for r in got[k]) for k in range(2)] == [0, 0]
    assert all(a.stats["reply_digest"] == b.stats["reply_digest"] for k in range(2) for a, b in zip(got[k], ref))


# -- the same bytes -------------------------------------------------------------------------------------------
def test_the_files_are_byte_identical_for_1_2_and_4_processes(mesh_file, tmp_path, capsys):
    assert main(["run", str(mesh_file), "--out", str(tmp_path / "one"), "--quiet", "--no-plot"]) == 0
    assert main(["run", str(mesh_file), "--processes", "1", "--out", str(tmp_path / "p1"), "--quiet",
                 "--no-plot"]) == 0
    one = "--processes 1: one part: 4 components, one part asked for; it runs in this process"
    assert one in capsys.readouterr().out
    for n in (2, 4):
        r = _twin(["run", str(mesh_file), "--processes", str(n), "--out", str(tmp_path / f"p{n}"), "--quiet",
                   "--no-plot"])
        assert r.returncode == 0, r.stderr
        placed = [ln for ln in r.stdout.splitlines() if re.match(r"part \d+ \(components", ln)]
        assert len(placed) == n and all("predicted" in ln for ln in placed)
        measured = [ln for ln in r.stdout.splitlines() if re.match(r"part \d+: CPU [\d.]+ s, measured", ln)]
        assert len(measured) == n
    for name in ("results.json", "rounds.parquet"):
        one = (tmp_path / "one" / name).read_bytes()
        for n in (1, 2, 4):
            assert (tmp_path / f"p{n}" / name).read_bytes() == one, (name, n)


def test_without_per_round_files_the_parts_ship_statistics_and_results_json_is_the_same(tmp_path):
    """``--no-rounds --no-plot``: each part ships its flows' statistics (counts and sums), not their
    rounds; results.json byte for byte the one process's, with a deadline's misses counted and a host
    freeze's report (per round, computed on the part's worker)."""
    doc = mesh_doc()
    doc["deadline"] = "2.5 us"
    doc["faults"] = {"host_freeze": [{"at": "2 ms", "duration": "50 us"}], "timeout": "20 us"}
    p = tmp_path / "deadline.yaml"
    p.write_text(yaml.safe_dump(doc, sort_keys=False))
    quiet = ["--quiet", "--no-plot", "--no-rounds"]
    assert main(["run", str(p), "--out", str(tmp_path / "one"), *quiet]) == 0
    one = (tmp_path / "one" / "results.json").read_bytes()
    flows = json.loads(one)["flows"]
    assert all("deadline_misses" in f for f in flows) and 0 < sum(f["deadline_misses"] for f in flows)
    assert all("host_freeze" in f for f in flows), flows[0].keys()
    for n in (1, 2, 4):
        r = _twin(["run", str(p), "--processes", str(n), "--out", str(tmp_path / f"p{n}"), *quiet])
        assert r.returncode == 0, r.stderr
        assert (tmp_path / f"p{n}" / "results.json").read_bytes() == one, n
        assert not (tmp_path / f"p{n}" / "rounds.parquet").exists()


def test_the_parts_statistics_are_a_fraction_of_their_rounds_and_give_the_same_document(mesh_file):
    """What a part ships (:func:`twin.studies.mesh_reduce.reduce_flows`) pickles to a small fraction of
    its rounds and builds the document a run keeping every round builds."""
    import pickle

    import distributed

    from twin.commands.run_mesh import mesh_document
    from twin.scenario import load_scenario
    from twin.studies.mesh import run_mesh
    from twin.studies.mesh_parts import run_mesh_parts
    from twin.studies.mesh_reduce import reduce_flows
    ld = load_scenario(mesh_file)
    whole = run_mesh(ld.scenario, ld.params)
    shipped = reduce_flows(whole.flows, ld.scenario.deadline, ld.scenario.faults)
    rounds_b = len(pickle.dumps(whole.flows, protocol=5))
    assert len(pickle.dumps(shipped, protocol=5)) < rounds_b / 50, rounds_b
    assert [r.rounds for r in shipped] == [2000] * 6 and all(len(r.result.t_in) == 0 for r in shipped)
    ref = json.dumps(mesh_document(ld, whole, ld.scenario.seed))
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as c, \
            distributed.Client(c) as client:
        from contextlib import nullcontext
        for keep in (False, True):
            pm = run_mesh_parts(ld.scenario, ld.params, 2, lambda parts: nullcontext(client), keep_rounds=keep)
            assert pm.result.reduced is not None  # the statistics computed in the parts, rounds kept or not
            assert all(len(ft.t_in) == (2000 if keep else 0) for ft in pm.result.flows)
            assert json.dumps(mesh_document(ld, pm.result, ld.scenario.seed)) == ref, keep
            assert len(pm.wall_s) == 2 and all(0 <= f <= w for f, w in zip(pm.finish_s, pm.wall_s))


def test_a_mesh_of_one_component_runs_in_one_part_and_says_so(tmp_path, capsys):
    sc = ROOT / "scenarios" / "mesh_two_controllers_one_gpu.yaml"
    assert main(["run", str(sc), "--rounds", "500", "--processes", "2", "--out", str(tmp_path / "a"), "--quiet",
                 "--no-plot", "--no-rounds"]) == 0
    lines = [ln for ln in capsys.readouterr().out.splitlines() if "one part" in ln]
    assert lines == ["--processes 2: one part: the topology's 2 flows form one component (they share lanes, a bridge, "
                     "a consumer or a stream); it runs in this process"]
    assert main(["run", str(sc), "--rounds", "500", "--out", str(tmp_path / "b"), "--quiet", "--no-plot",
                 "--no-rounds"]) == 0
    assert (tmp_path / "a" / "results.json").read_bytes() == (tmp_path / "b" / "results.json").read_bytes()


# -- a part lost, Ctrl-C ----------------------------------------------------------------------------------------
def _start_parted(tmp_path: Path, out: Path, *extra: str) -> tuple[subprocess.Popen, dict[int, int]]:
    """``twin run`` of the mesh with 32 KiB frames (slow enough to be caught running) on 2 processes, in
    its own session; returns once both parts said where they run (part -> worker pid), plus 0.5 s."""
    p = tmp_path / "big.yaml"
    p.write_text(yaml.safe_dump(mesh_doc(60_000, 32768), sort_keys=False))
    proc = subprocess.Popen([sys.executable, "-u", "-m", "twin", "run", str(p), "--processes", "2", "--out", str(out),
                             "--quiet", "--no-plot", "--no-rounds", *extra], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True, cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    pids: dict[int, int] = {}
    while len(pids) < 2:
        line = proc.stdout.readline()  # type: ignore[union-attr]
        assert line, proc.communicate()
        m = re.fullmatch(r"part (\d): running on tcp://127\.0\.0\.1:\d+ \(host \S+, pid (\d+)\)\n", line)
        if m:
            pids[int(m.group(1))] = int(m.group(2))
    time.sleep(0.5)
    return proc, pids


def _flows_saved(out: Path) -> dict[int, tuple[int, int]]:
    doc = json.loads((out / "results.json").read_text())
    assert doc["partial"] is True
    return {f["flow"]: (f["rounds"], f["rounds_requested"]) for f in doc["flows"]}


def test_a_killed_worker_ends_the_run_naming_its_part_and_the_others_are_saved_partial(tmp_path):
    out = tmp_path / "out"
    proc, pids = _start_parted(tmp_path, out)
    os.kill(pids[1], signal.SIGKILL)  # part 1: cards cb and cd (flows 2, 3, 5)
    killed = time.monotonic()
    _, err = proc.communicate(timeout=120)
    assert time.monotonic() - killed < 20  # the default part timeout; Dask reports the death at once
    assert proc.returncode == 3, err
    lines = err.splitlines()
    assert len(lines) == 1, err
    m = re.fullmatch(r"twin: error: part 1 \(components 1, 3; flows 2-3, 5\) lost: its worker process died "
                     r"\(tcp://127\.0\.0\.1:\d+\); the other parts' ([\d,]+) rounds are being saved in (.+) "
                     r"\(partial\)", lines[0])
    assert m and Path(m.group(2)) == out, lines[0]
    assert int(m.group(1).replace(",", "")) == sum(r for r, _ in _flows_saved(out).values())
    saved = _flows_saved(out)
    assert sorted(saved) == [0, 1, 4] and all(0 < r <= q == 60_000 for r, q in saved.values())
    doc = json.loads((out / "results.json").read_text())
    assert doc["parts_lost"][0]["part"] == 1 and doc["parts_lost"][0]["flows"] == [2, 3, 5]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["partial"] and manifest["partial_reason"].startswith("part 1 (components 1, 3; flows 2-3, 5) lost")
    assert not Path(f"/proc/{pids[0]}").exists()  # the local cluster is closed


def test_ctrl_c_stops_every_part_and_saves_each_flows_whole_rounds(tmp_path):
    out = tmp_path / "out"
    proc, pids = _start_parted(tmp_path, out)
    os.killpg(proc.pid, signal.SIGINT)  # the whole group, as a terminal's Ctrl-C: the workers are not in it
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    saved = _flows_saved(out)
    done = sum(r for r, _ in saved.values())
    assert err.splitlines() == [f"twin: interrupted at round {done:,} of 360,000; the {done:,} rounds so far are saved "
                                f"in {out} (partial)"]
    assert sorted(saved) == list(range(6)) and all(0 < r < q == 60_000 for r, q in saved.values())
    assert json.loads((out / "manifest.json").read_text())["partial_reason"] == (
        "interrupted: every flow's whole rounds so far (each part cut at its own instant)")


@pytest.mark.slow
def test_a_part_that_stops_answering_is_lost_after_the_part_timeout(tmp_path):
    out = tmp_path / "out"
    proc, pids = _start_parted(tmp_path, out, "--part-timeout", "2")
    os.kill(pids[0], signal.SIGSTOP)  # hung, not dead: only its silence tells
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 3, err
    assert re.fullmatch(r"twin: error: part 0 \(components 0, 2; flows 0-1, 4\) lost: no heartbeat from its worker "
                        r"\(tcp://127\.0\.0\.1:\d+, pid \d+\) for 2 s; .*", err.strip())
    assert sorted(_flows_saved(out)) == [2, 3, 5]
    assert not Path(f"/proc/{pids[0]}").exists()  # ended: it was this run's worker


# -- refusals ---------------------------------------------------------------------------------------------------
def _refused(capsys, args: list[str]) -> str:
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def test_refusals_are_one_line(mesh_file, tmp_path, capsys, monkeypatch):
    loop = ROOT / "scenarios" / "card_path_64b.yaml"
    out = ["--out", str(tmp_path / "o")]
    assert "partitions a mesh's flows" in _refused(capsys, ["run", str(loop), "--processes", "2", *out])
    assert "one or the other" in _refused(capsys, ["run", str(mesh_file), "--processes", "2", "--cluster",
                                                   "tcp://127.0.0.1:8786", *out])
    assert "needs --processes N or --cluster" in _refused(capsys, ["run", str(mesh_file), "--part-timeout", "5", *out])
    for bad, why in ((["--cluster", "http://x:1"], "tcp://HOST:PORT"), (["--part-timeout", "0"], "seconds from 0.5")):
        with pytest.raises(SystemExit) as e:  # argparse: usage, then the one error line
            main(["run", str(mesh_file), "--processes", "2", *bad, *out])
        assert e.value.code == 2 and why in capsys.readouterr().err.strip().splitlines()[-1]
    monkeypatch.setitem(sys.modules, "distributed", None)  # not installed: import fails
    assert _refused(capsys, ["run", str(mesh_file), "--processes", "2", *out]) == (
        "twin: error: --processes 2: needs Dask distributed, not installed here (pip install 'twin[cluster]')")
    assert not (tmp_path / "o").exists()


def test_cluster_runs_the_parts_on_an_existing_schedulers_workers(mesh_file, tmp_path, capsys):
    """``--cluster``: the same bytes, one part per worker of the scheduler (two workers, here in this
    process's threads: the scheduler's own, as `dask scheduler` / `dask worker` would be)."""
    import distributed
    assert main(["run", str(mesh_file), "--out", str(tmp_path / "one"), "--quiet", "--no-plot"]) == 0
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, protocol="tcp",
                                  host="127.0.0.1", dashboard_address=None) as cluster:
        assert main(["run", str(mesh_file), "--cluster", cluster.scheduler_address, "--out", str(tmp_path / "c"),
                     "--quiet", "--no-plot"]) == 0
    out = capsys.readouterr().out
    assert len(re.findall(r"^part \d \(components .* predicted", out, re.M)) == 2
    for name in ("results.json", "rounds.parquet"):
        assert (tmp_path / "c" / name).read_bytes() == (tmp_path / "one" / name).read_bytes(), name
