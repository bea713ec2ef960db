"""Long runs in constant memory: the direct engine's rounds streamed in batches into counts
(twin.engine.hops.FlowStats) give results.json byte for byte as the run kept whole."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import yaml

from twin.commands import main
from twin.engine.direct import run_direct
from twin.engine.hops import budget, slowest_round
from twin.scenario import load_scenario
from twin.scenario.compile import compile_scenario
from twin.stats import DENSE_SPAN, summary_ns
from twin.studies.run import run_study, stream_one


def _run(tmp_path, name, *extra):
    out = tmp_path / name
    rc = main(["run", "scenarios/nvqlink_h200.yaml", "--engine", "direct", "--rounds", "2e6", "--no-rounds",
               "--no-plot", "--quiet", "--out", str(out), *extra])
    assert rc == 0
    return (out / "results.json").read_bytes()


def test_chunked_run_writes_the_same_results_json(tmp_path):
    """2e6 rounds in batches of 131,071 (no batch boundary on a round number of any other batch size)."""
    assert _run(tmp_path, "chunked", "--chunk-rounds", "131071") == _run(tmp_path, "whole")


@pytest.mark.parametrize("scenario", ["scenarios/card_path_64b.yaml", "scenarios/qblox_open_loop.yaml"])
def test_streamed_summaries_equal_the_whole_runs(scenario):
    """Every consumer (classic and per-piece encodings, an Aurora link: the loop's own percentiles)."""
    loaded = load_scenario(scenario)
    whole = run_study(loaded, rounds=30_001, engine="direct")
    streamed = run_study(loaded, rounds=30_001, engine="direct", stream_rounds=4_096)
    assert [r.summary for r in streamed.runs] == [r.summary for r in whole.runs]
    assert all(len(r.result.t_in) == 0 for r in streamed.runs)  # no round kept


def test_deadline_misses_counted_as_they_pass(tmp_path):
    doc = yaml.safe_load(Path("scenarios/qblox_open_loop.yaml").read_text())
    doc["calibration"] = str(Path("calibrations/fitted/card_path.yaml").resolve())
    doc["deadline"] = "2.2 us"
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(doc))
    loaded = load_scenario(tmp_path / "s.yaml")
    whole = run_study(loaded, rounds=20_000, engine="direct")
    streamed = run_study(loaded, rounds=20_000, engine="direct", stream_rounds=3_000)
    misses = [r.summary["deadline_misses"] for r in whole.runs]
    assert [r.summary["deadline_misses"] for r in streamed.runs] == misses and any(misses)


def test_memory_is_the_counts_not_the_rounds():
    """The accumulator's size is bounded by the values' ranges (one count per ps, DENSE_SPAN at most per
    statistic), the same for ten times the rounds; the streamed result keeps no round."""
    spec = compile_scenario(load_scenario("scenarios/nvqlink_h200.yaml"), 400_000, 7).flows[0].spec
    sizes = []
    for n in (40_000, 400_000):
        res, acc, stop = stream_one(dataclasses.replace(spec, traffic=dataclasses.replace(spec.traffic, rounds=n)),
                                    10_000)
        assert stop is None and acc.n == n and len(res.t_in) == 0
        sizes.append(acc.nbytes)
        whole = run_direct(dataclasses.replace(spec, traffic=dataclasses.replace(spec.traffic, rounds=n)))
        assert acc.budget() == budget(whole.t_in, whole.t_have, whole.hops)
        assert acc.slowest_round() == slowest_round(whole.t_in, whole.t_have, whole.hops)
        assert acc.rtt.summary_ns() == summary_ns(whole.rtt_ps)
    assert sizes[1] <= (2 + len(acc.stages)) * 8 * DENSE_SPAN
    assert sizes[1] < 4 * sizes[0]  # a range widened by the tail, not 10x the rounds


@pytest.mark.parametrize("extra, why", [
    (["--engine", "auto", "--no-rounds", "--no-plot"], "--engine direct"),
    (["--engine", "direct", "--no-rounds"], "--no-plot"),
])
def test_chunk_rounds_refused_where_rounds_are_kept(tmp_path, capsys, extra, why):
    rc = main(["run", "scenarios/nvqlink_h200.yaml", "--rounds", "1000", "--chunk-rounds", "100", "--quiet",
               "--out", str(tmp_path / "o"), *extra])
    err = capsys.readouterr().err
    assert rc == 2 and "--chunk-rounds 100" in err and why in err and not (tmp_path / "o").exists()


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_the_per_round_file_is_written_as_a_streamed_run_goes(tmp_path, fmt):
    """Streamed in batches of 7,777 rounds, the per-round file has the same rows as the run kept
    whole (every column, byte for byte once read), its batches as they came (Parquet: one row group
    each), and results.json is the same."""
    import pyarrow.csv as pc
    import pyarrow.parquet as pq

    def run(name, *extra):
        out = tmp_path / name
        assert main(["run", "scenarios/card_path_64b.yaml", "--engine", "direct", "--rounds", "30000", "--no-plot",
                     "--quiet", "--format", fmt, "--out", str(out), *extra]) == 0
        f = out / f"rounds.{fmt}"
        return (pq.read_table(f) if fmt == "parquet" else pc.read_csv(f)), (out / "results.json").read_bytes(), f
    streamed, doc_s, f = run("streamed", "--chunk-rounds", "7777")
    whole, doc_w, _ = run("whole")
    assert streamed.num_rows == whole.num_rows == 5 * 30_000 and streamed.equals(whole)
    assert doc_s == doc_w
    if fmt == "parquet":
        assert pq.ParquetFile(f).num_row_groups == 5 * 4  # 30,000 rounds: batches of 7,777 and the rest


def test_a_streamed_run_s_rounds_file_stays_out_of_memory(tmp_path):
    """The rounds a streamed run writes are not kept: the peak of Python's allocations while a
    loop's 2e6 rounds go to rounds.parquet is a few batches, not the rounds (2e6 x 15 columns x 8 B
    = 240 MB)."""
    import tracemalloc
    tracemalloc.start()
    try:
        rc = main(["run", "scenarios/nvqlink_h200.yaml", "--engine", "direct", "--rounds", "2e6", "--no-plot",
                   "--quiet", "--chunk-rounds", "65536", "--out", str(tmp_path / "o")])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert rc == 0 and peak < 60e6, peak


@pytest.mark.parametrize("extra", [["--engine", "auto", "--no-plot"], ["--engine", "direct"]])
def test_more_than_1e8_rounds_only_streamed(tmp_path, capsys, extra):
    """Above the scenario schema's 1e8 rounds a run must stream (memory independent of the rounds);
    one that would keep every round is refused before it starts, in one line."""
    rc = main(["run", "scenarios/nvqlink_h200.yaml", "--rounds", "2e8", "--quiet", "--out", str(tmp_path / "o"),
               *extra])
    err = capsys.readouterr().err
    assert rc == 2 and "--rounds 2e+08" in err and "must stream" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "o").exists()


def test_chunk_rounds_refused_for_a_mesh(tmp_path, capsys):
    rc = main(["run", "scenarios/mesh_fanout_by_function.yaml", "--rounds", "1000", "--chunk-rounds", "100",
               "--quiet", "--no-rounds", "--no-plot", "--out", str(tmp_path / "o")])
    assert rc == 2 and "mesh" in capsys.readouterr().err


def test_streamed_rounds_are_the_engines_batch_for_batch():
    spec = compile_scenario(load_scenario("scenarios/nvqlink_h200.yaml"), 50_000, 3).flows[0].spec
    whole = run_direct(spec)
    got: dict[str, list] = {}
    run_direct(spec, chunk_rounds=7_777, sink=lambda i, c: [got.setdefault(k, []).append(v.copy())
                                                           for k, v in c.items()])
    for f in ("t_send", "t_in", "t_have", "t_back"):
        assert np.array_equal(np.concatenate(got[f]), getattr(whole, f))
    for f in ("issue", "land", "seen", "start", "reply", "publish", "rland"):
        assert np.array_equal(np.concatenate(got[f]), getattr(whole.hops, f))


@pytest.mark.parametrize("at", [2, 10])
def test_a_stop_keeps_the_rounds_so_far_and_their_budget(at):
    """One pass over the rounds: asked to stop at its 2nd progress call (20,000 rounds), the rounds
    done by the next look (30,000), their budget exact; asked at its 10th (the last batch done), it
    has completed every round, the request left pending for what runs next."""
    from twin.engine.stop import clear_stop, request_stop, stop_requested
    spec = compile_scenario(load_scenario("scenarios/nvqlink_h200.yaml"), 100_000, 7).flows[0].spec
    seen: list[int] = []

    def progress(done: int) -> None:
        seen.append(done)
        if len(seen) == at:
            request_stop()
    try:
        res, acc, stop = stream_one(spec, 10_000, progress)
        if at == 2:
            assert stop is not None and acc.n == res.stats["rounds"] == 30_000
        else:
            assert stop is None and acc.n == 100_000 and stop_requested()
            assert seen == [*range(10_000, 100_001, 10_000), 100_000]  # one pass: each round once
    finally:
        clear_stop()
    whole = run_direct(spec).head(acc.n)
    assert acc.budget() == budget(whole.t_in, whole.t_have, whole.hops)
    assert acc.rtt.summary_ns() == summary_ns(whole.rtt_ps)
