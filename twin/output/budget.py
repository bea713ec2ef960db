"""What a study prints under its table, per consumer or flow: faults injected and detected, deadline
misses, and the latency budget (each stage of the round trip, twin.engine.hops, in the median round
and over the slowest 1 %, and the slowest round with the hop that held it)."""
from __future__ import annotations

from rich.console import Console

from twin.output.table import fmt


def print_budget_table(rows: list[tuple[str, dict]], console: Console, what: str) -> None:
    """``rows``: (label, summary) per consumer or flow, each summary with ``budget`` and
    ``slowest_round`` as results.json holds them (docs/results.md); ``what`` names the first column.
    Prints nothing when no row has a budget."""
    rows = [(label, s) for label, s in rows if s.get("budget")]
    if not rows:
        return
    longest = max((s["budget"] for _, s in rows), key=len)  # the stages in their order (a hand-off's inside)
    stages = list(dict.fromkeys([b["stage"] for b in longest] + [b["stage"] for _, s in rows for b in s["budget"]]))
    from twin.output.table import Grid, Num
    tb = Grid("latency budget: the median round's stages in ns (share), and the mean over the slowest 1 %",
              [what, *stages])
    for label, s in rows:
        by = {b["stage"]: b for b in s["budget"]}
        share = {st: f" ({fmt(100 * by[st]['share_median_round'], '.0f')}%)" for st in by}
        tb.add_row(label, *[Num(by[st]["median_round_ns"], ".0f", share[st]) if st in by else None for st in stages])
        tb.add_row("  slowest 1 %", *[Num(by[st]["p99_rounds_mean_ns"], ".0f") if st in by else None for st in stages])
    tb.print(console)
    for label, s in rows:
        w = s.get("slowest_round")
        if w:
            console.print(f"{label}: slowest round {w['round']:,}: {w['rtt_ns'] / 1000:.3f} µs, held by "
                          f"{w['held_by']} ({w['stages'][w['held_by']] / 1000:.3f} µs)")


def print_fault_and_deadline_lines(rows: list[tuple[str, dict]], console: Console, file: str = "",
                                   timeout: str | None = None) -> None:
    """For each (label, summary) with ``faults`` or ``deadline_ns`` (results.json's keys): one line of
    the faults injected and detected, one warning per fault the run did not reach (``faults.
    not_reached``: a ``--rounds`` shorter than the scenario's, naming ``file``, the key and its
    value), one warning when ``timeout`` (the scenario's ``faults.timeout``, as written) is under a
    loop's median round trip (most replies then count as overdue, yet only dropped frames are sent
    again), one line of the rounds over the deadline."""
    from twin.units import time_ps
    warned = set()  # a mesh's flows share one faults block: each key said once
    for label, s in rows:
        if "faults" in s:
            inj, det = s["faults"]["injected"], s["faults"]["detected"]
            console.print(f"{label}: faults injected " + ", ".join(f"{k} {v}" for k, v in inj.items())
                          + "; detected " + ", ".join(f"{k} {v}" for k, v in det.items()), soft_wrap=True)
            p50_ns = s.get("p50_ns", (s.get("rtt") or {}).get("p50_ns"))
            if timeout is not None and p50_ns and time_ps(timeout) < p50_ns * 1000 and "timeout" not in warned:
                warned.add("timeout")
                console.print(f"[yellow]warning: {file + ': ' if file else ''}faults.timeout: {timeout}: under "
                              f"{label}'s median round trip ({p50_ns / 1000:.3f} µs): most replies count as "
                              "overdue (reply_timeouts), yet the control side sends again only dropped frames; "
                              "set it above the round trip[/yellow]", soft_wrap=True)
            for miss in s["faults"].get("not_reached", []):
                if miss["key"] not in warned:
                    warned.add(miss["key"])
                    console.print(f"[yellow]warning: {file + ': ' if file else ''}{miss['key']}: {miss['value']}: "
                                  f"past {label}'s last reply (its {s['rounds']:,} rounds): not injected[/yellow]",
                                  soft_wrap=True)
        if "deadline_ns" in s:
            console.print(f"{label}: {s['deadline_misses']:,} of {s['rounds']:,} rounds over the "
                          f"{s['deadline_ns'] / 1000:g} µs deadline")
