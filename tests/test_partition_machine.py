"""``twin machine --processes N``: the machine cut where it shares nothing (pools no merge couples), the
same files for any number of parts, a placement balanced by expected decoder load, a killed part named
and the other parts' pools saved partial (exit 3).
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from twin.cli import main
from twin.machine.parts import pool_components, run_machine_parts
from twin.machine.study import load_machine, pool_specs, run_machine

ROOT = Path(__file__).resolve().parents[1]
pytest.importorskip("distributed")


def machine_doc(cycles: int = 600, merge_rate: float = 0.0, ler: bool = False) -> dict:
    """Four pools of 8 patches (a 4 x 8 grid, one row each) of every policy, measured cost, T gates."""
    node = {"device": "epyc9755"}
    m = {"cycle": "1 us", "cycles": cycles, "distance": 5, "p": 0.001, "layout": {"rows": 4, "cols": 8},
         "program": {"t_rate": 0.2, "merge_rate": merge_rate},
         "window": {"kind": "streaming", "commit": 5, "buffer": 5}, "deadline": "20 us",
         "decoder": {"name": "matching", "cost": {"how": "measured", "call": "native"}},
         "links": {"syndrome": {"kind": "aurora", "latency": "400 ns"},
                   "correction": {"kind": "aurora", "latency": "400 ns"},
                   "fabric": {"kind": "roce", "latency": "2 us"}, "local": "200 ns"},
         "pools": [{"name": "a", "policy": "static", "queue": 256, "patches": [0, 8],
                    "nodes": [{**node, "name": "ha", "decoders": 4}]},
                   {"name": "b", "policy": "least_loaded", "queue": 256, "patches": [8, 16],
                    "nodes": [{**node, "name": "hb", "decoders": 3}]},
                   {"name": "c", "policy": "edf", "queue": 256, "patches": [16, 24],
                    "nodes": [{**node, "name": "hc", "decoders": 4}, {**node, "name": "hc2", "decoders": 2}]},
                   {"name": "d", "policy": "static", "queue": 256, "patches": [24, 32],
                    "nodes": [{**node, "name": "hd", "decoders": 5}]}]}
    if ler:
        m["ler"] = {"shots": 200}
    return {"name": "parts", "seed": 3, "machine": m}


def write(tmp_path: Path, doc: dict, name: str = "m.yaml") -> Path:
    p = tmp_path / name
    p.write_text(yaml.safe_dump(doc, sort_keys=False))
    return p


def test_merges_across_pools_couple_them_and_without_merges_each_pool_is_its_own(tmp_path):
    m = load_machine(write(tmp_path, machine_doc())).sc.machine
    assert pool_components(m, pool_specs(m), 3) == [(0,), (1,), (2,), (3,)]
    merged = load_machine(write(tmp_path, machine_doc(merge_rate=0.3), "b.yaml")).sc.machine
    assert pool_components(merged, pool_specs(merged), 3) == [(0, 1, 2, 3)]  # rows are neighbours
    big = load_machine(ROOT / "scenarios" / "machine_1000q_d15.yaml").sc.machine
    assert pool_components(big.model_copy(update={"cycles": 300}), pool_specs(big), 11) == [tuple(range(10))]


def test_each_part_alone_gives_the_whole_machines_document(tmp_path):
    """Parts run one by one in this process (no cluster): the document is the one-part run's, byte for
    byte, for 2 and 4 parts: each pool draws from its own streams, whatever runs beside it."""
    lm = load_machine(write(tmp_path, machine_doc(ler=True)))
    one = json.dumps(run_machine(lm)[1], sort_keys=True, default=float)
    for n in (2, 4):
        def parted(m, cost, pools, seed, n=n):
            pm = run_machine_parts(m, cost, pools, seed, n)
            assert len(pm.parts) == n and sorted(p for part in pm.parts for p in part.pools) == [0, 1, 2, 3]
            return pm
        assert json.dumps(run_machine(lm, parted=parted)[1], sort_keys=True, default=float) == one, n


def test_placement_balances_the_expected_decoder_load(tmp_path):
    doc = machine_doc()
    doc["machine"]["pools"][3]["patches"] = [24, 32]
    doc["machine"]["layout"] = {"rows": 4, "cols": 8}
    lm = load_machine(write(tmp_path, doc))
    from twin.machine.cost import job_cost
    from twin.machine.parts import expected_load, place_pools
    m = lm.sc.machine
    pools = pool_specs(m)
    from types import SimpleNamespace
    cost = job_cost(m, lm.path, [SimpleNamespace(name=n, device="epyc9755") for p in pools for n, _, _ in p[2]], 3)
    loads = expected_load(m, pools, cost)
    assert len(set(loads)) == 1 and loads[0] > 0  # 8 patches each, one device class
    skew = [4 * loads[0], loads[0], loads[0], loads[0]]
    parts = place_pools(m, pools, [(0,), (1,), (2,), (3,)], skew, 2)
    assert [p.pools for p in parts] == [(0,), (1, 2, 3)] and [p.load for p in parts] == [4 * loads[0], 3 * loads[0]]


def _without_seconds(folder: Path) -> list[list[str]]:
    """stats.csv's rows without sinter's ``seconds`` column: the wall time the decoded sample took here,
    which differs between any two runs, one process or many."""
    import csv
    rows = list(csv.reader((folder / "stats.csv").read_text().splitlines()))
    k = [c.strip() for c in rows[0]].index("seconds")
    assert len(rows) == 4
    return [r[:k] + r[k + 1:] for r in rows]


def test_the_files_are_byte_identical_for_1_and_2_processes(tmp_path, capsys):
    sc = write(tmp_path, machine_doc(ler=True))
    assert main(["machine", str(sc), "--out", str(tmp_path / "one"), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["machine", str(sc), "--processes", "2", "--out", str(tmp_path / "two"), "--quiet"]) == 0
    out = capsys.readouterr().out
    for k in (0, 1):
        assert re.search(rf"^part {k} \(\w, \w\): 16 patches, expected decoder load [\d.]+ ms, predicted 50\.0 % of "
                         r"the load$", out, re.M), out
        assert re.search(rf"^part {k} \(\w, \w\): CPU [\d.]+ s, measured [\d.]+ % of the parts' CPU time, predicted "
                         r"50\.0 %$", out, re.M), out
    name = "results.json"
    assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes()
    assert _without_seconds(tmp_path / "one") == _without_seconds(tmp_path / "two")
    assert (tmp_path / "two" / "machine.png").exists()


def test_coupled_pools_run_in_one_part_and_say_so(tmp_path, capsys):
    sc = write(tmp_path, machine_doc(cycles=200, merge_rate=0.3))
    assert main(["machine", str(sc), "--processes", "2", "--out", str(tmp_path / "o"), "--quiet", "--no-plot"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == (
        "--processes 2: one part: the machine's 4 pools form one component (merges join patches of different pools; "
        "such pools run in one process); it runs in this process")


def test_a_killed_part_ends_the_run_naming_it_and_the_other_pools_are_saved_partial(tmp_path):
    doc = machine_doc(cycles=60_000)
    doc["machine"]["pools"] = doc["machine"]["pools"][:2]
    doc["machine"]["layout"] = {"rows": 2, "cols": 8}
    sc, out = write(tmp_path, doc), tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-u", "-m", "twin", "machine", str(sc), "--processes", "2", "--out",
                             str(out), "--quiet", "--no-plot", "--part-timeout", "10"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True, cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    pids: dict[int, int] = {}
    while len(pids) < 2:
        line = proc.stdout.readline()  # type: ignore[union-attr]
        assert line, proc.communicate()
        got = re.fullmatch(r"part (\d): running on tcp://127\.0\.0\.1:\d+ \(host \S+, pid (\d+)\)\n", line)
        if got:
            pids[int(got.group(1))] = int(got.group(2))
    time.sleep(0.5)
    os.kill(pids[1], signal.SIGKILL)
    killed = time.monotonic()
    _, err = proc.communicate(timeout=120)
    assert time.monotonic() - killed < 10, err  # within --part-timeout: Dask reports the death at once
    assert proc.returncode == 3, err
    assert re.fullmatch(r"twin: error: part 1 \(b\) lost: its worker process died \(tcp://127\.0\.0\.1:\d+\); the "
                        rf"other parts' pools \(1 of 2\) are being saved in {re.escape(str(out))} \(partial\)",
                        err.strip()), err
    res = json.loads((out / "results.json").read_text())
    assert res["partial"] is True and [p["name"] for p in res["pools"]] == ["a"]
    assert res["parts_lost"][0]["part"] == 1 and res["parts_lost"][0]["pools"] == ["b"]
    assert 0 < res["pools"][0]["done"] < 60_000 // 5 * 8  # stopped mid-run: some of its jobs
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["partial"] and manifest["partial_reason"].startswith("part 1 (b) lost: its worker process died")


def test_refusals_are_one_line(tmp_path, capsys):
    sc = str(write(tmp_path, machine_doc()))
    for args, want in ((["--processes", "2", "--cluster", "tcp://127.0.0.1:1"], "one or the other"),
                       (["--part-timeout", "2"], "needs --processes N or --cluster")):
        assert main(["machine", sc, "--out", str(tmp_path / "r"), *args]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and want in err[0], err
