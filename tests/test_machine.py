"""The machine study (twin/machine): queueing against theory, policies, windows, links, refusals.

Each check can fail: the backlog's growth is held to the M/D/K overload formula, EDF to static on a
skewed load by a margin, parallel windows to streaming on a decoder slower than the commit period,
a placement across nodes to one on a node, every key to a change in the results.
"""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from twin.config import ConfigError
from twin.machine.study import load_machine, run_machine

ROOT = Path(__file__).resolve().parents[1]


def base(**over) -> dict:
    """A small machine: P patches in a row, one node of K decoders, fixed cost, streaming C=1 B=0."""
    m = {"cycle": "1 us", "cycles": 1500, "distance": 3, "layout": {"rows": 1, "cols": 10},
         "window": {"kind": "streaming", "commit": 1, "buffer": 0},
         "decoder": {"cost": {"fixed": "5 us"}},
         "links": {"syndrome": {"kind": "aurora", "latency": "0 ns"},
                   "correction": {"kind": "aurora", "latency": "0 ns"},
                   "fabric": {"kind": "roce", "latency": "2 us"}, "local": "0 ns"},
         "pools": [{"name": "pool", "policy": "static", "nodes": [{"name": "n0", "device": "epyc9755",
                                                                    "decoders": 4}]}]}
    for k, v in over.items():
        m[k] = v
    return {"name": "m", "seed": 3, "machine": m}


def write(tmp_path: Path, doc: dict, name: str = "m.yaml") -> Path:
    p = tmp_path / name
    p.write_text(yaml.safe_dump(doc))
    return p


def run(tmp_path: Path, doc: dict, **kw):
    return run_machine(load_machine(write(tmp_path, doc)), **kw)


def with_pool(doc: dict, **pool) -> dict:
    d = copy.deepcopy(doc)
    d["machine"]["pools"][0].update(pool)
    return d


# -- queueing: the backlog grows as theory says ------------------------------------------------------
@pytest.mark.parametrize("policy", ["static", "least_loaded", "edf"])
@pytest.mark.parametrize("patches,decoders,cost_us", [(10, 4, 5), (10, 4, 3), (8, 4, 2), (3, 4, 1)])
def test_backlog_growth_matches_the_overload_formula(tmp_path, policy, patches, decoders, cost_us):
    """K decoders of fixed cost S serving P patches, a job per patch per cycle T: the backlog grows by
    max(0, 1 - K T / (P S)) of the arriving jobs, within 5 % (0.02 absolute where it is 0)."""
    doc = base(layout={"rows": 1, "cols": patches}, decoder={"cost": {"fixed": f"{cost_us} us"}})
    doc["machine"]["pools"][0]["nodes"][0]["decoders"] = decoders
    doc = with_pool(doc, policy=policy)
    _, res = run(tmp_path, doc)
    got = res["pools"][0]["growth_per_arrival"]
    want = max(0.0, 1 - decoders * 1.0 / (patches * cost_us))
    if want:
        assert abs(got - want) <= 0.05 * want, (got, want)
    else:
        assert got <= 0.02, (got, want)


def test_edf_meets_more_deadlines_than_static_on_a_skewed_load(tmp_path):
    """Six patches on four decoders: static gives decoders 0 and 1 two patches each (load 1.2 there,
    0.9 on average), EDF's shared queue balances them. EDF meets at least 30 % more of the jobs'
    5 us deadlines (measured here: static 34.3 %, least loaded and EDF 100 %)."""
    doc = base(layout={"rows": 1, "cols": 6}, decoder={"cost": {"fixed": "600 ns"}}, deadline="5 us")
    met = {}
    for policy in ("static", "least_loaded", "edf"):
        _, res = run(tmp_path, with_pool(doc, policy=policy))
        p = res["pools"][0]
        met[policy] = p["deadline_met"] / p["jobs"]
    assert met["edf"] >= met["static"] + 0.30, met
    assert met["least_loaded"] > met["static"], met


# -- windows, links, ensembles, back-pressure ----------------------------------------------------------
def test_parallel_windows_keep_up_where_a_streaming_chain_cannot(tmp_path):
    """One patch, a decoder twice as slow as the commit period (S = 2 C T), eight decoders: the
    streaming windows wait on each other (the backlog grows), A/B parallel windows do not
    (Skoric et al., Nat. Commun. 14, 7040 (2023)). EDF: any free decoder takes any eligible window
    (static would keep the one patch on one decoder)."""
    growth = {}
    for kind in ("streaming", "parallel"):
        doc = base(layout={"rows": 1, "cols": 1}, window={"kind": kind, "commit": 5, "buffer": 2},
                   decoder={"cost": {"fixed": "10 us"}})
        doc["machine"]["pools"][0]["nodes"][0]["decoders"] = 8
        _, res = run(tmp_path, with_pool(doc, policy="edf"))
        growth[kind] = res["pools"][0]["backlog_growth_per_cycle"]
        if kind == "parallel":
            assert set(res["jobs_by_kind"]) == {"A", "B"}
    assert growth["streaming"] > 0.05 and growth["parallel"] < 0.005, growth


def test_placement_across_nodes_pays_the_fabric(tmp_path):
    """The same pool on one node or split over two joined by a 2 us RoCE fabric, least loaded, A/B
    parallel windows: split, a B window's two A windows ran on either node and their boundaries
    cross the fabric; the mean commit latency grows."""
    doc = base(layout={"rows": 1, "cols": 2}, window={"kind": "parallel", "commit": 2, "buffer": 1},
               decoder={"cost": {"fixed": "4 us"}})
    doc["machine"]["pools"][0]["nodes"][0]["decoders"] = 8
    doc = with_pool(doc, policy="least_loaded")
    _, one = run(tmp_path, doc)
    two = copy.deepcopy(doc)
    two["machine"]["pools"][0]["nodes"] = [{"name": "a", "device": "epyc9755", "decoders": 4},
                                          {"name": "b", "device": "epyc9755", "decoders": 4}]
    _, split = run(tmp_path, two)
    assert one["fabric"]["transfers"] == 0 and split["fabric"]["transfers"] > 100, split["fabric"]
    assert split["commit_latency"]["mean_ns"] > one["commit_latency"]["mean_ns"] + 500


def test_an_ensemble_cuts_the_tail_of_a_measured_cost(tmp_path):
    """Jobs whose time is drawn from the measured per-call file: each sent to two decoders, the first
    answer wins, so the latency's p99 drops (and the work grows: the cancelled copies ran too)."""
    doc = base(layout={"rows": 1, "cols": 2}, distance=5, p=0.001, decoder={"cost": {"how": "measured"}})
    doc["machine"]["pools"][0]["nodes"][0]["decoders"] = 8
    _, single = run(tmp_path, doc)
    _, ens = run(tmp_path, with_pool(doc, ensemble={"size": 2}))
    assert ens["pools"][0]["latency"]["p99_ns"] < single["pools"][0]["latency"]["p99_ns"]


def test_a_full_pool_holds_the_control_side(tmp_path):
    """An overloaded pool with room for 8 jobs: the rest are held at the control system (counted),
    and no more than 8 ever wait in the pool."""
    model, res = run(tmp_path, with_pool(base(), queue=8))
    p = res["pools"][0]
    assert p["held_jobs"] > 1000 and p["held_ns"] > 0
    assert model.pools[0].waiting <= 8


def test_t_gates_wait_for_their_correction(tmp_path):
    """A program of T gates: each waits for its rounds' correction; the reaction time is at least the
    window's lookahead (buffer B rounds) and the logical clock slows with a slower decoder."""
    doc = base(layout={"rows": 2, "cols": 2}, distance=5, program={"t_rate": 0.5, "merge_rate": 0.3},
               window={"kind": "streaming", "commit": 5, "buffer": 5}, decoder={"cost": {"fixed": "1 us"}})
    _, fast = run(tmp_path, doc)
    slow_doc = copy.deepcopy(doc)
    slow_doc["machine"]["decoder"] = {"cost": {"fixed": "8 us"}}
    _, slow = run(tmp_path, slow_doc)
    assert fast["t_gates"]["count"] > 50 and fast["t_gates"]["reaction"]["p50_ns"] >= 5 * 1000
    assert fast["merges"]["count"] > 10 and fast["jobs_by_kind"].get("seam", 0) > 10
    assert slow["logical_clock"]["effective_step_ns"] > fast["logical_clock"]["effective_step_ns"] * 1.2


def test_the_same_seed_gives_the_same_bytes_and_another_seed_another_run(tmp_path):
    doc = base(layout={"rows": 2, "cols": 3}, distance=5, program={"t_rate": 0.2, "merge_rate": 0.3},
               window={"kind": "streaming", "commit": 5, "buffer": 5}, p=0.001, decoder={"cost": {"how": "measured"}})
    a = json.dumps(run(tmp_path, doc)[1], sort_keys=True)
    b = json.dumps(run(tmp_path, doc)[1], sort_keys=True)
    c = json.dumps(run(tmp_path, doc, seed=4)[1], sort_keys=True)
    assert a == b and a != c


def test_the_stalls_cost_logical_error_decoded_for_real(tmp_path):
    """ler: a slow decoder makes T gates stall; the decoded sample of a step with the p99 stall (more
    rounds streamed) has more logical errors than a bare step (d=3, p=0.01: enough errors to tell)."""
    doc = base(layout={"rows": 1, "cols": 2}, p=0.01, program={"t_rate": 0.5}, decoder={"cost": {"fixed": "3 us"}},
               window={"kind": "streaming", "commit": 3, "buffer": 3}, ler={"shots": 4000})
    _, res = run(tmp_path, doc)
    rows = {r["case"]: r for r in res["ler"]}
    assert rows["step"]["rounds"] == 3 and rows["T step+p99 stall"]["rounds"] > 10
    assert rows["T step+p99 stall"]["errors"] > 2 * rows["step"]["errors"] > 0, rows


def test_the_cost_check_times_real_decodes_of_a_job(tmp_path):
    """check: a d=5 streaming window (C=B=5: 10 rounds, 240 detectors) decoded for real per call here,
    beside the model's draw (the d=5 file's 120-detector calls scaled x2): both positive, same order."""
    doc = base(layout={"rows": 1, "cols": 2}, distance=5, p=0.001, decoder={"cost": {"how": "measured"}},
               window={"kind": "streaming", "commit": 5, "buffer": 5}, check={"calls": 300})
    _, res = run(tmp_path, doc)
    c = res["check"]
    assert c["job"] == {"kind": "streaming window", "rounds": 10, "detectors": 240} and c["calls"] == 300
    assert c["measured_here"]["p50_ns"] > 0 and 0.1 < c["model_over_measured_p50"] < 10, c


# -- every key matters, or is refused in one line -------------------------------------------------------
MUTATIONS = [
    ("cycle", "2 us"), ("cycles", 1200), ("distance", 5), ("layout", {"rows": 2, "cols": 5}),
    ("program", {"t_rate": 0.3, "merge_rate": 0.2}), ("window", {"kind": "parallel", "commit": 1, "buffer": 1}),
    ("deadline", "1 us"), ("decoder", {"cost": {"fixed": "400 ns"}}),
    ("links", {"syndrome": {"kind": "pcie", "latency": "900 ns"}, "correction": {"kind": "aurora", "latency": "0 ns"},
               "fabric": {"kind": "roce", "latency": "2 us"}, "local": "0 ns"}),
]


@pytest.mark.parametrize("key,value", MUTATIONS, ids=[k for k, _ in MUTATIONS])
def test_every_machine_key_changes_the_results(tmp_path, key, value):
    doc = base(program={"t_rate": 0.1, "merge_rate": 0.1}, deadline="20 us", decoder={"cost": {"fixed": "300 ns"}})
    _, a = run(tmp_path, doc)
    other = copy.deepcopy(doc)
    other["machine"][key] = value
    _, b = run(tmp_path, other)
    assert json.dumps(a, sort_keys=True) != json.dumps(b, sort_keys=True)


def test_p_and_ler_change_the_results(tmp_path):
    doc = base(layout={"rows": 1, "cols": 2}, p=0.01, ler={"shots": 1000}, program={"t_rate": 0.3},
               decoder={"cost": {"fixed": "2 us"}})
    _, a = run(tmp_path, doc)
    for key, value in (("p", 0.02), ("ler", {"shots": 500})):
        other = copy.deepcopy(doc)
        other["machine"][key] = value
        assert run(tmp_path, other)[1]["ler"] != a["ler"], key


@pytest.mark.parametrize("pool", [{"policy": "least_loaded"}, {"queue": 4}, {"ensemble": {"size": 2}}])
def test_every_pool_key_changes_the_results(tmp_path, pool):
    doc = base(decoder={"cost": {"how": "measured"}}, distance=3, p=0.001)
    _, a = run(tmp_path, doc)
    _, b = run(tmp_path, with_pool(doc, **pool))
    assert json.dumps(a["pools"], sort_keys=True) != json.dumps(b["pools"], sort_keys=True)


def node(**over) -> dict:
    """:func:`base` with its one node's keys replaced."""
    d = base()
    d["machine"]["pools"][0]["nodes"][0].update(over)
    return d


REFUSED = [
    (("pools", 0, "ensemble"), with_pool(base(), policy="edf", ensemble={"size": 2}), "edf's shared queue"),
    (("window", "buffer"), base(window={"kind": "parallel", "commit": 2, "buffer": 0}), "need seams"),
    (("program", "merge_rate"), base(program={"t_rate": 0.7, "merge_rate": 0.5}), "add to at most 1"),
    (("ler", "shots"), base(p=0.001, ler={"shots": 0}), "greater than or equal to 1"),
    (("p",), base(p=0.001), "changes nothing"),
    (("check",), base(check={"calls": 500}), "with cost fixed there is none"),
    (("p",), base(ler={"shots": 10}), "give p"),
    (("distance",), base(distance=4), "odd"),
    (("code",), base(code="steane"), "rotated surface codes"),
    (("cycles",), base(cycles=2, distance=3), "at least 3 cycles"),
    (("deadline",), base(deadline="0 ns"), "must be > 0"),
    (("pools", 0, "colour"), with_pool(base(), colour="red"), "unknown key"),
    (("decoder", "cost", "call"), base(decoder={"cost": {"fixed": "1 us", "call": "python"}}), "how: measured"),
    # a value of another type is refused, not coerced (issue 27's hostile-input check)
    (("pools", 0, "nodes", 0, "decoders"), node(decoders="24"), "valid integer"),
    (("pools", 0, "nodes", 0, "decoders"), node(decoders=True), "valid integer"),
    (("program", "t_rate"), base(program={"t_rate": "0.1"}), "valid number"),
    (("program", "t_rate"), base(program={"t_rate": True}), "valid number"),
    (("layout", "rows"), base(layout={"rows": 1.0, "cols": 10}), "valid integer"),
    (("ler", "shots"), base(p=0.001, ler={"shots": True}), "valid integer"),
    (("cycles",), base(cycles=True), "valid integer"),
    (("pools", 0, "nodes", 0, "device"), node(device="nosuchcpu"), "one of epyc7282, epyc9755"),
]


@pytest.mark.parametrize("key,doc,why", REFUSED, ids=[".".join(map(str, k)) for k, _, _ in REFUSED])
def test_a_bad_machine_key_is_refused_in_one_line(tmp_path, key, doc, why):
    p = write(tmp_path, doc)
    with pytest.raises(ConfigError) as e:
        load_machine(p)
    msg = str(e.value)
    assert "\n" not in msg and str(p) in msg and why in msg, msg
    dotted = "machine." + ".".join(f"[{k}]" if isinstance(k, int) else k for k in key).replace(".[", "[")
    assert dotted in msg, (dotted, msg)


def test_two_pools_must_share_the_patches_out(tmp_path):
    doc = base()
    doc["machine"]["pools"] = [
        {"name": "a", "patches": [0, 6], "nodes": [{"name": "n", "device": "epyc9755", "decoders": 2}]},
        {"name": "b", "patches": [5, 10], "nodes": [{"name": "n", "device": "epyc9755", "decoders": 2}]}]
    with pytest.raises(ConfigError, match="patch 5 is pool a's already"):
        load_machine(write(tmp_path, doc))
    doc["machine"]["pools"][1]["patches"] = [6, 10]
    _, res = run(tmp_path, doc)
    assert [p["patches"] for p in res["pools"]] == [[0, 6], [6, 10]]


# -- the command ---------------------------------------------------------------------------------------
def test_cycles_too_short_for_a_window_are_refused_on_the_command_line(tmp_path, capsys):
    from twin.commands import main
    assert main(["machine", "machine_100q", "--cycles", "5", "--out", str(tmp_path / "o"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--cycles 5" in err and "at least 14 cycles" in err, err


def test_twin_machine_writes_results_and_the_figure(tmp_path, capsys):
    from twin.commands import main
    out = tmp_path / "out"
    assert main(["machine", "machine_100q", "--cycles", "300", "--decoders", "16,32", "--out", str(out),
                 "--quiet"]) == 0
    doc = json.loads((out / "results.json").read_text())
    assert doc["schema"] == "twin.machine/1" and doc["patches"] == 100 and len(doc["sweep"]) == 2
    assert (out / "machine.png").stat().st_size > 10_000
    text = capsys.readouterr().out
    assert "logical clock" in text and "decoder pools" in text


def refused(tmp_path: Path, capsys, args: list[str], *parts: str) -> str:
    """``twin machine ARGS`` exits 2 with exactly one stderr line holding each of ``parts``, no traceback."""
    from twin.commands import main
    assert main(["machine", *args, "--quiet"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert all(p in err for p in parts), (parts, err)
    return err


@pytest.mark.parametrize("key,value,shown", [("decoders", "24", "'24'"), ("device", "nosuchcpu", "'nosuchcpu'")])
def test_a_node_of_another_type_or_an_unknown_device_is_refused_by_the_command(tmp_path, capsys, key, value, shown):
    p = write(tmp_path, node(**{key: value}))
    refused(tmp_path, capsys, [str(p), "--out", str(tmp_path / "o")], str(p), f"machine.pools[0].nodes[0].{key}",
            shown)
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("text", ["TOPSECRET-4242 is the key\n", "TOPSECRET: 4242\n", "schema: TOPSECRET\nx: [1\n"])
def test_a_bad_cost_file_is_refused_naming_the_scenario_key_without_its_content(tmp_path, capsys, text):
    """decoder.cost.file naming a file that is not a per-call file (any readable file: a key, a
    password file): one line naming the scenario, machine.decoder.cost.file and the file, none of its text."""
    (tmp_path / "secret.txt").write_text(text)
    p = write(tmp_path, base(p=0.001, decoder={"cost": {"how": "measured", "file": "secret.txt"}}))
    err = refused(tmp_path, capsys, [str(p), "--out", str(tmp_path / "o")], str(p), "machine.decoder.cost.file",
                  "'secret.txt'")
    assert "TOPSECRET" not in err and "4242" not in err, err


def test_a_cost_file_of_another_decoder_is_refused(tmp_path, capsys):
    import shutil
    shutil.copy(ROOT / "calibrations/measured/decoders/lookup_rep_d3_r1_p0.001_circuit.yaml", tmp_path / "l.yaml")
    p = write(tmp_path, base(p=0.001, decoder={"cost": {"how": "measured", "file": "l.yaml"}}))
    refused(tmp_path, capsys, [str(p), "--out", str(tmp_path / "o")], str(p), "machine.decoder.cost.file",
            "measured on a lookup decoder")


def test_overwrite_removes_the_earlier_runs_figure_it_does_not_write_again(tmp_path, capsys):
    """--overwrite --no-plot, or another --figure-format: the earlier machine.png goes (it would not match
    the new results) and the next run may overwrite the folder again."""
    from twin.commands import main
    p, out = write(tmp_path, base(cycles=40)), tmp_path / "o"
    args = ["machine", str(p), "--out", str(out), "--quiet"]
    assert main(args) == 0 and (out / "machine.png").exists()
    assert main([*args, "--overwrite", "--no-plot"]) == 0
    assert not (out / "machine.png").exists()
    assert "machine.png" not in json.loads((out / "manifest.json").read_text())["files"]
    assert main([*args, "--overwrite"]) == 0 and (out / "machine.png").exists()
    assert main([*args, "--overwrite", "--figure-format", "svg"]) == 0
    assert (out / "machine.svg").exists() and not (out / "machine.png").exists()
    assert main([*args, "--overwrite"]) == 0, capsys.readouterr().err


def test_a_run_too_short_for_the_backlog_fit_says_so(tmp_path, capsys):
    """Three ticks (C=1, B=0, 3 cycles): the second half's slope cannot be told; results.json says null, the
    table "too short to tell" (never 0.000); four ticks give a number."""
    from twin.commands import main
    p, out = write(tmp_path, base(cycles=3)), tmp_path / "o"
    assert main(["machine", str(p), "--out", str(out), "--quiet", "--no-plot", "--decoders", "2,4"]) == 0
    doc = json.loads((out / "results.json").read_text())
    pool = doc["pools"][0]
    assert pool["backlog_growth_per_cycle"] is None and pool["growth_per_arrival"] is None
    assert all(r["backlog_growth_per_cycle"] is None for r in doc["sweep"])
    assert "too short to tell" in capsys.readouterr().out
    _, res = run(tmp_path, base(cycles=4))
    assert res["pools"][0]["backlog_growth_per_cycle"] is not None


# -- memory: estimated before the run, refused in one line ---------------------------------------------
def _no_run(monkeypatch):
    """The model's run, the check and the decoded sample fail the test if reached (a refusal comes first)."""
    from twin.machine import check, engine, ler

    def reached(*a, **k):
        raise AssertionError("ran: not refused")
    monkeypatch.setattr(engine.MachineModel, "run", reached)
    monkeypatch.setattr(check, "cost_check", reached)
    monkeypatch.setattr(ler, "step_ler", reached)


def _memory(monkeypatch, mib: int):
    from twin.engine import memory
    monkeypatch.setattr(memory, "available_bytes", lambda: (mib * 2**20, f"a test's {mib} MiB"))


def test_cycles_beyond_the_scenarios_bound_are_refused(tmp_path, capsys, monkeypatch):
    _no_run(monkeypatch)
    refused(tmp_path, capsys, ["machine_100q", "--cycles", "10000001", "--out", str(tmp_path / "o")],
            "machine_100q.yaml", "--cycles: 10000001", "10,000,000")


@pytest.mark.parametrize("cli", [[], ["--cycles", "1400"], ["--decoders", "2"]])
def test_a_run_whose_jobs_do_not_fit_is_refused_before_it_runs(tmp_path, capsys, monkeypatch, cli):
    """10,000 patches x 1,500 ticks: 15 million jobs, about 15 GB estimated, 1 GiB there."""
    _no_run(monkeypatch)
    _memory(monkeypatch, 1024)
    p = write(tmp_path, base(layout={"rows": 100, "cols": 100}))
    key = "--cycles: 1400" if cli[:1] == ["--cycles"] else "machine.cycles: 1500"
    err = refused(tmp_path, capsys, [str(p), "--out", str(tmp_path / "o"), *cli], str(p), key, "decode jobs",
                  "a test's 1024 MiB")
    assert ("the machine's and a sweep point's" in err) == ("--decoders" in cli), err
    assert not (tmp_path / "o").exists()


def test_a_check_or_a_decoded_sample_that_does_not_fit_is_refused_before_the_run(tmp_path, capsys, monkeypatch):
    _no_run(monkeypatch)
    _memory(monkeypatch, 456)
    p = write(tmp_path, base(p=0.001, distance=5, window={"kind": "streaming", "commit": 5, "buffer": 5},
                             decoder={"cost": {"how": "measured"}}, check={"calls": 1_000_000}), "c.yaml")
    refused(tmp_path, capsys, [str(p), "--out", str(tmp_path / "o")], str(p), "machine.check.calls: 1000000",
            "ask for fewer calls")
    p = write(tmp_path, base(p=0.001, distance=5, ler={"shots": 10_000_000}), "l.yaml")
    refused(tmp_path, capsys, [str(p), "--out", str(tmp_path / "o")], str(p), "machine.ler.shots: 10000000",
            "ask for fewer shots")


def test_a_decoded_sample_the_stalls_make_too_big_is_refused_before_it_is_drawn(tmp_path, capsys, monkeypatch):
    """A slow decoder makes the T gates stall (the p99 case > 10 rounds, as in the LER test above): a
    million shots of d = 3 fit for one step (3 rounds, ~72 MB) but not for the stalled one (~0.3 GB)."""
    from twin.machine import ler
    monkeypatch.setattr(ler, "step_ler", lambda *a, **k: (_ for _ in ()).throw(AssertionError("drawn")))
    _memory(monkeypatch, 456)
    p = write(tmp_path, base(layout={"rows": 1, "cols": 2}, p=0.01, program={"t_rate": 0.5},
                             decoder={"cost": {"fixed": "3 us"}}, window={"kind": "streaming", "commit": 3,
                                                                         "buffer": 3}, ler={"shots": 1_000_000}))
    err = refused(tmp_path, capsys, [str(p), "--out", str(tmp_path / "o"), "--no-plot"], str(p),
                  "machine.ler.shots: 1000000", "ask for fewer shots")
    assert "(3 rounds)" not in err, err


def test_the_printout_says_what_the_cost_is_and_separates_thousands(tmp_path, capsys):
    """A fixed cost is not called measured; counts over 999 (the deadlines missed) carry separators;
    --no-plot's help names the figure whatever its format."""
    from twin.commands import build_parser, main
    doc = base(deadline="1 us", decoder={"cost": {"fixed": "5 us"}})
    assert main(["machine", str(write(tmp_path, doc)), "--out", str(tmp_path / "o"), "--quiet", "--no-plot"]) == 0
    out = capsys.readouterr().out
    missed = json.loads((tmp_path / "o" / "results.json").read_text())["pools"][0]["deadline_missed"]
    assert missed > 1000 and f"{missed:,}" in out, (missed, out)
    assert "fixed decoder cost" in out and "measured decoder cost" not in out, out
    sub = next(a for a in build_parser()._subparsers._group_actions[0].choices.items() if a[0] == "machine")[1]
    text = " ".join(sub.format_help().split())
    assert "machine.pdf / machine.svg" in text, text
