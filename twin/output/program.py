"""A control program that waits on replies: its stall per round and in total, its effective cycle
time and, for a branching program, the conditional pulses against the decoder's answers, as
results.json holds them (docs/results.md) and as ``twin run`` / ``twin decode`` print them."""
from __future__ import annotations

import numpy as np
from rich.console import Console

from twin.stats import percentile_ps


def _pct(a: np.ndarray, q: float) -> float:
    """The ``q``-th percentile of int ps ``a`` in ns (a round's own: :func:`twin.stats.percentile_ps`); 0 for none."""
    return round(percentile_ps(a, q) / 1000, 3) if len(a) else 0.0


def program_summary(stats: dict) -> dict:
    """results.json's ``program`` block from a generator's statistics (``stall_ps``,
    ``stall_total_ps``, ``period_ps``, ``nominal_period_ps``; ``conditional`` for a branching
    program: :meth:`twin.devices.qblox.ListeningCluster.stats`), every time in ns: ``stall_ns``
    (per round: mean, p50, p99, max; ``total``; ``rounds_stalled``), ``period_ns`` (``nominal``:
    with no wait; ``effective``: the mean gap between rounds; p50, p99) and ``conditional``
    (``ran``, ``skipped``; ``ran_on_answer_1`` / ``ran_on_answer_0`` / ``skipped_on_answer_1``:
    replies after whose wait a conditional instruction ran, or none did, by the reply's answer bit)."""
    stall = np.asarray(stats["stall_ps"], np.int64)
    period = np.asarray(stats["period_ps"], np.int64)
    out = {"stall_ns": {"total": stats["stall_total_ps"] / 1000,
                        "per_round_mean": round(float(stall.mean()) / 1000, 3) if len(stall) else 0.0,
                        "p50": _pct(stall, 50), "p99": _pct(stall, 99),
                        "max": float(stall.max()) / 1000 if len(stall) else 0.0,
                        "rounds_stalled": int((stall > 0).sum())},
           "period_ns": {"nominal": stats["nominal_period_ps"] / 1000,
                         "effective": round(float(period.mean()) / 1000, 3) if len(period) else None,
                         "p50": _pct(period, 50), "p99": _pct(period, 99)}}
    fb = stats.get("feedback")
    if fb is not None:  # time-based feedback: the loop's reaction against the native path's latency
        out["feedback"] = feedback_summary(fb)
    c = stats.get("conditional")
    if c is not None:
        ran, ans = np.asarray(c["ran_by_reply"], bool), np.asarray(c["answers"], np.int64)
        out["conditional"] = {"ran": c["ran"], "skipped": c["skipped"], "answers_1": int(ans.sum()),
                              "ran_on_answer_1": int((ran & (ans == 1)).sum()),
                              "ran_on_answer_0": int((ran & (ans == 0)).sum()),
                              "skipped_on_answer_1": int((~ran & (ans == 1)).sum())}
    return out


def feedback_summary(fb: dict) -> dict:
    """results.json's ``program.feedback`` block from a control side whose conditional pulse reads
    its correction at a fixed time after the round's trigger (``native_ps``, ``read_ps``, per round
    ``reaction_ps`` and ``late``: :meth:`twin.devices.zhinst.ZhinstQccs.stats`), in ns: ``native_ns``
    (the vendor's native feedback latency), ``read_at_ns``, ``reaction_ns`` (trigger -> the correction
    at the generator: mean, p50, p99, max, inverted-CDF percentiles), ``over_native_ns`` (reaction
    minus native: p50, p99) and ``late_rounds`` (the correction came after the read)."""
    from twin.stats import percentile_ps
    r = np.asarray(fb["reaction_ps"], np.int64)
    native = int(fb["native_ps"])
    out: dict = {"native_ns": native / 1000, "read_at_ns": int(fb["read_ps"]) / 1000,
                 "late_rounds": int(np.count_nonzero(fb["late"])), "rounds": int(len(r))}
    if len(r):
        out["reaction_ns"] = {"mean": round(float(r.mean()) / 1000, 3), "p50": percentile_ps(r, 50) / 1000,
                              "p99": percentile_ps(r, 99) / 1000, "max": float(r.max()) / 1000}
        out["over_native_ns"] = {"p50": (percentile_ps(r, 50) - native) / 1000,
                                 "p99": (percentile_ps(r, 99) - native) / 1000}
    return out


def print_program_table(rows: list[tuple[str, dict]], console: Console, what: str) -> None:
    """``rows``: (label, summary) per consumer or placement; prints the rows whose summary has a
    ``program`` block (:func:`program_summary`), nothing when none has."""
    rows = [(label, s["program"]) for label, s in rows if s.get("program")]
    if not rows:
        return
    cond = any("conditional" in p for _, p in rows)
    from twin.output.table import Grid, Num
    cols = [what, "nominal", "effective", "p99", "stall p50", "stall p99", "stall total",
            "stalled"] + (["ran@1", "ran@0", "skip@1"] if cond else [])
    tb = Grid("control program: round period and stall per round in ns"
              + (", conditional pulses by the reply's answer bit (ran@1 ran@0 skipped@1)" if cond else ""), cols)
    for label, p in rows:
        st, pe = p["stall_ns"], p["period_ns"]
        eff = None if pe["effective"] is None else Num(pe["effective"], ",.1f")
        row = [label, Num(pe["nominal"], ",.0f"), eff, Num(pe["p99"], ",.0f"), Num(st["p50"], ",.0f"),
               Num(st["p99"], ",.0f"), Num(st["total"], ",.0f"), Num(st["rounds_stalled"], ",")]
        if cond:
            c = p.get("conditional")
            row += ([Num(c["ran_on_answer_1"], ","), Num(c["ran_on_answer_0"], ","), Num(c["skipped_on_answer_1"], ",")]
                    if c else [None] * 3)
        tb.add_row(*row)
    tb.print(console)
    for label, p in rows:
        fb = p.get("feedback")
        if fb and "reaction_ns" in fb:
            console.print(f"{label}: reaction {fb['reaction_ns']['p50']:,.0f} ns p50, {fb['reaction_ns']['p99']:,.0f} "
                          f"ns p99 against the native feedback latency {fb['native_ns']:,.0f} ns; "
                          f"{fb['late_rounds']:,} of {fb['rounds']:,} rounds late for the read at "
                          f"{fb['read_at_ns']:,.0f} ns")
        ag = (p.get("conditional") or {}).get("against_corrections")
        if ag:
            console.print(f"{label}: the conditional pulse ran as the decoder's correction said on {ag['agree']:,} of "
                          f"{ag['agree'] + ag['disagree']:,} requests")
