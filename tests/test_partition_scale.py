"""Speed of a partitioned mesh: the local cluster started early (twin.engine.cluster.Starting), its
workers preloading the engine (twin.worker), the table of a mesh of many flows, and the scaling
report of benchmarks/partition_scale.py --whole (whole twin run processes, 1 and 2, results.json
byte-identical for a mesh of link cards shared by four flows)."""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
import yaml

from twin.commands import main

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
pytest.importorskip("distributed")


def _mesh_file(tmp_path: Path, nodes: int, rounds: int) -> Path:
    from partition_scale import mesh_doc
    p = tmp_path / "mesh.yaml"
    p.write_text(yaml.safe_dump(mesh_doc(nodes, rounds), sort_keys=False))
    return p


def _loaded_in_workers(client) -> dict:
    return client.run(lambda: all(m in sys.modules for m in ("twin.engine.compiled", "twin.studies.mesh_reduce",
                                                             "twin.machine.parts")))


def _heap_padded() -> bool:
    import twin.worker
    return twin.worker.PADDED


def test_a_cluster_started_early_is_the_one_the_parts_run_on_and_its_workers_hold_the_engine():
    from twin.engine.cluster import Starting, local_client, starting
    start = Starting(2)
    with local_client(2, start) as client:
        assert client.cluster is start.cluster and start.taken
        assert len(client.scheduler_info()["workers"]) == 2
        assert list(_loaded_in_workers(client).values()) == [True, True]  # preloaded, before any part
        assert list(client.run(_heap_padded).values()) == [True, True]  # twin.worker.roomy_heap
    start.close()  # released by local_client: closing in the background until now
    assert start.cluster.status.name == "closed"
    with starting(1) as unused:  # not taken: closed at the block's end
        assert unused is not None
    assert unused.cluster.status.name == "closed" and not unused.taken
    with starting(None) as none:
        assert none is None


_FAULTS = """
import resource, sys
import numpy as np
from twin.worker import roomy_heap
padded = roomy_heap() if sys.argv[1] == "pad" else None
r0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(300):  # 1.28 MB of 64 kB arrays (under the mmap threshold: on the heap) made and freed
    a = [np.ones(8000) for _ in range(20)]
    del a
print(padded, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - r0)
"""


@pytest.mark.skipif(sys.platform != "linux", reason="glibc's allocator")
def test_a_workers_heap_keeps_its_top_pad_under_dasks_trim_threshold():
    """Dask's nanny starts workers with MALLOC_TRIM_THRESHOLD_=65536: without the preload's top pad
    every freed heap top is given back and faulted in again (84,000 faults here), with it a few hundred."""
    import os
    import platform
    import subprocess
    if platform.libc_ver()[0] != "glibc":
        pytest.skip("glibc's allocator")
    env = {**os.environ, "MALLOC_TRIM_THRESHOLD_": "65536", "PYTHONPATH": str(ROOT)}
    runs = {m: subprocess.run([sys.executable, "-c", _FAULTS, m], env=env, capture_output=True, text=True,
                              check=True).stdout.split() for m in ("pad", "none")}
    assert runs["pad"][0] == "True"
    assert int(runs["pad"][1]) * 20 < int(runs["none"][1])


def test_a_mesh_of_more_flows_than_the_table_prints_its_first_32_and_one_line(tmp_path, capsys):
    """40 flows (10 link cards shared by 4): the table's rows are flows 0-31, then one line for the 8
    others; the consumers' lines name 32 and one line the rest; results.json keeps all 40."""
    path = _mesh_file(tmp_path, 90, 40)
    assert main(["run", str(path), "--out", str(tmp_path / "out"), "--quiet", "--no-plot", "--no-csv"]) == 0
    out = capsys.readouterr().out
    rows = [int(m.group(1)) for m in re.finditer(r"^ (\d+) +ctrl\d+ -> card\d+ -> epyc", out, re.M)]
    assert rows == list(range(32))
    assert "flows, seed 1 (µs), the first 32" in out
    assert len(re.findall(r"^\.\.\. and 8 more flows \(40 in .*results\.json\): round trip p99 of all [\d.]+ \.\. "
                          r"[\d.]+ µs \(the largest: flow \d+, ctrl\d+ -> card\d+ -> epyc\d+_\d\), 1,600 rounds, 0 "
                          r"mismatches$", out, re.M)) == 1
    assert len(re.findall(r"^epyc\d+_\d: served 40, utilisation", out, re.M)) == 32
    assert re.search(r"^\.\.\. and 8 more consumers: utilisation [\d.]+ \.\. [\d.]+ % \(the largest: epyc\d+_\d\)$",
                     out, re.M)
    assert len(json.loads((tmp_path / "out" / "results.json").read_text())["flows"]) == 40


@pytest.mark.slow
def test_the_whole_scaling_report_runs_one_and_two_processes_with_the_same_results(tmp_path):
    """benchmarks/partition_scale.py --whole on a 9-card mesh: `twin run` as a process with 1 and with 2
    (--processes 2: the cluster started while the scenario loads), results.json byte-identical (the
    report refuses otherwise), a row each with its parts, balance and serial seconds."""
    from partition_scale import whole_table
    rows = whole_table(_mesh_file(tmp_path, 81, 300), [1, 2], tmp_path)
    one, two = (r.split("|")[1:-1] for r in rows[2:])
    assert [one[0].strip(), one[1].strip(), two[0].strip(), two[1].strip()] == ["1", "1", "2", "2"]
    assert float(two[2]) > 0 and float(two[3]) > 0 and float(two[8]) >= 0
    predicted, measured = (float(x) for x in two[9].split("/"))
    assert predicted == pytest.approx(1.0, abs=0.2) and measured >= 1.0
