"""Issue 12, seconds to first result: `twin run` prints its table before the event model's check,
which still checks the same rounds and leaves the results as they were; decode's latency figure
draws blocks of requests beyond 10,000."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from twin.commands import main
from twin.reports.decode_figures import latency_blocks
from twin.scenario import load_scenario
from twin.studies.run import PENDING, run_study

DEFAULT = Path(__file__).parents[1] / "scenarios" / "card_path_64b.yaml"


def test_table_first_then_the_same_check():
    loaded = load_scenario(DEFAULT)
    seen = []

    def first(study):
        seen.append([(r.summary["engine"], r.summary["replies_checked"]) for r in study.runs])
    checked = []
    late = run_study(loaded, rounds=300, verify_rounds=40, first=first,
                     checking=lambda node, done: checked.append((node, done)))
    plain = run_study(loaded, rounds=300, verify_rounds=40)
    assert seen == [[(PENDING, 0)] * 5]  # called once, before any check
    assert [r.summary for r in late.runs] == [r.summary for r in plain.runs]
    assert all(r.summary["engine"] == "direct+event" and r.summary["replies_checked"] == 40 for r in late.runs)
    assert [n for n, done in checked if done == 40] == [r.node for r in late.runs]
    for a, b in zip(late.runs, plain.runs):
        assert np.array_equal(a.result.rtt_ps, b.result.rtt_ps)


def test_cli_prints_the_final_table_then_the_check_verdict(tmp_path, capsys):
    """The permanent table is printed once the check is done: its ``checked`` column filled, no
    ``checking`` / ``…`` placeholder left in the scrollback (issue 31)."""
    assert main(["run", "--rounds", "300", "--verify-rounds", "30", "--out", str(tmp_path), "--quiet",
                 "--no-plot", "--no-csv"]) == 0
    out = capsys.readouterr().out
    table, verdict = out.find("round trip in µs"), out.find("event-model check: 30 rounds of each of 5 consumers")
    assert 0 <= table < verdict, out
    assert "checking" not in out and "…" not in out and "0 mismatches" in out[verdict:]
    rows = [ln.split() for ln in out[table:out.find("latency budget")].splitlines()
            if ln.split()[:1] and ln.split()[0] in ("v80", "epyc7282", "mi210", "epyc9755", "mi355x")]
    assert len(rows) == 5 and all(r[-2:] == ["30", "0"] for r in rows), out


def test_terminal_preview_is_transient(tmp_path):
    """On a terminal the direct engines' table shows above the check bar while the check runs, in
    the bar's transient display; what stays is the final table."""
    import io

    from rich.console import Console

    from twin.commands.run import _preview
    from twin.output.progress import progress_bar
    loaded = load_scenario(DEFAULT)
    seen = []
    console = Console(file=io.StringIO(), force_terminal=True, width=80)
    check = progress_bar(console, transient=True)
    run_study(loaded, rounds=200, verify_rounds=20, first=lambda s: (_preview(s, check, console, False),
                                                                      seen.append(check.get_renderables())))
    assert check.live.transient and len(seen) == 1 and len(seen[0]) >= 3  # title, table, ..., the bar


def test_latency_blocks():
    x = np.arange(10, dtype=np.int64)
    at, mid, top, block = latency_blocks(x, points=10)
    assert block == 1 and np.array_equal(at, np.arange(1, 11)) and np.array_equal(mid, x) and np.array_equal(top, x)
    x = np.array([5, 1, 9, 2, 2, 8, 7, 3, 4, 6, 100], dtype=np.int64)
    at, mid, top, block = latency_blocks(x, points=8)  # blocks of ceil(11 / 4) = 3; the last has 2
    assert block == 3
    assert at.tolist() == [1, 4, 7, 10]
    assert mid.tolist() == [5, 2, 4, 6] and top.tolist() == [9, 8, 7, 100]
