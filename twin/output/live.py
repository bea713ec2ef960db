"""Measured (live) beside simulated: the summary a live node adds to results.json, the table
``twin run`` prints, and ``live_rounds.npz`` (per-round data ``twin calibrate --from-live`` reads).

results.json, per live consumer, key ``live``: ``backend``, ``endpoint`` (one line), ``rounds``
completed, ``service`` (the live device's measured time per round: request written -> reply seen,
p50/p90/p99/p99.9/mean in ns), ``simulated`` (the same loop with the node's ``sim`` model:
card-boundary round trip percentiles in ns), ``error`` (None, or kind, round, detail).

Also ``idle``: the idle time before each round, ``target`` (the simulated one the endpoint waited
for) and ``measured`` (what the device had on the wall clock), percentiles in ns over rounds 2...
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from twin.stats import summary_ns

NPZ = "live_rounds.npz"


def live_summary(res, failure, sim_rtt_ps: np.ndarray) -> dict:
    """The ``live`` mapping of one live consumer (see module docstring); ``sim_rtt_ps``: the round
    trips of the node's ``sim`` model over the same rounds (the side-by-side)."""
    live = dict(res.stats.get("live", {}))
    live.pop("endpoint_stats", None)
    svc = np.asarray(res.stats.get("service_ns", []), np.int64)
    live["service"] = summary_ns(svc * 1000) if len(svc) else None
    live["simulated"] = summary_ns(sim_rtt_ps)
    live["simulated"]["model"] = "sim"
    idle = np.asarray(res.stats.get("idle_ns", []), np.int64)[1:]
    target = np.asarray(res.stats.get("idle_target_ns", []), np.int64)[1:]
    live["idle"] = {"target": summary_ns(target * 1000), "measured": summary_ns(idle * 1000)} if len(idle) else None
    bad = np.nonzero(~np.asarray(res.ok, bool))[0]
    live["mismatch_rounds"] = [int(i) + 1 for i in bad[:20]]  # the first 20 wrong replies, by round
    live["error"] = None if failure is None else {"kind": failure.kind, "round": failure.round,
                                                  "detail": failure.detail}
    live.update(stall_summary(svc, np.asarray(res.rtt_ps)))
    return live


def stall_summary(service_ns: np.ndarray, rtt_ps: np.ndarray) -> dict:
    """Honest live numbers: ``stalled`` (rounds whose live service lies far beyond the service
    distribution, preempted or interrupted, and those queued behind them:
    :func:`twin.devices.isolation.find_live_stalls`) and ``clean``
    (the round trip's and the service's percentiles without them: the device's own), ``level``
    (whether the clean round trip stayed at one level through the run:
    :func:`twin.devices.isolation.find_level_shift`; None for a short run). The machine's
    state before the run is ``isolation`` (:func:`twin.devices.isolation.check_isolation`, from the
    endpoint's stats). Empty when the series do not match (a run stopped mid-round)."""
    if not len(service_ns) or len(service_ns) != len(rtt_ps):
        return {}
    from twin.devices.isolation import find_level_shift, find_live_stalls
    st = find_live_stalls(service_ns, rtt_ps)
    keep = ~st.mask
    return {"stalled": st.summary(), "level": find_level_shift(rtt_ps, keep),
            "clean": {"round_trip": summary_ns(rtt_ps[keep]) if keep.any() else None,
                      "service": summary_ns(service_ns[keep] * 1000) if keep.any() else None}}


def print_live(study, console) -> None:
    """For each live consumer: measured (live) and simulated (its sim model) side by side."""
    from rich.table import Table

    rows = [r for r in study.runs if r.summary.get("live")]
    if not rows:
        return
    tb = Table(title="live vs simulated: card-boundary round trip in µs (live: the card path simulated, "
                     "the consumer measured)")
    for col in ("consumer", "source", "p50", "p90", "p99", "p99.9", "mean", "rounds"):
        tb.add_column(col, justify="left" if col in ("consumer", "source") else "right", no_wrap=True)
    us = lambda ns: f"{ns / 1000:.3f}"  # noqa: E731
    for r in rows:
        s, lv = r.summary, r.summary["live"]
        tb.add_row(r.node, f"measured ({lv.get('backend', '?')})", us(s["p50_ns"]), us(s["p90_ns"]), us(s["p99_ns"]),
                   us(s["p999_ns"]), us(s["mean_ns"]), f"{len(r.result.t_in):,}")
        sm = lv["simulated"]
        tb.add_row("", f"simulated (sim {s['name']})", us(sm["p50_ns"]), us(sm["p90_ns"]), us(sm["p99_ns"]),
                   us(sm["p999_ns"]), us(sm["mean_ns"]), f"{s['rounds']:,}")
        if lv.get("service"):
            sv = lv["service"]
            tb.add_row("", "live service alone", us(sv["p50_ns"]), us(sv["p90_ns"]), us(sv["p99_ns"]),
                       us(sv["p999_ns"]), us(sv["mean_ns"]), "")
        st, cl = lv.get("stalled"), (lv.get("clean") or {}).get("round_trip")
        if st and st["rounds"] and cl:
            tb.add_row("", "measured, stalled rounds left out", us(cl["p50_ns"]), us(cl["p90_ns"]), us(cl["p99_ns"]),
                       us(cl["p999_ns"]), us(cl["mean_ns"]),
                       f"{len(r.result.t_in) - st['rounds'] - st.get('queued_behind', 0):,}")
    console.print(tb)
    for r in rows:
        lv = r.summary["live"]
        for w in (lv.get("isolation") or {}).get("warnings", []):
            console.print(f"[yellow]warning: {r.node}: machine not quiet before the run: {w}[/yellow]")
        st = lv.get("stalled")
        if st and st["rounds"]:
            console.print(f"[yellow]warning: {r.node}: {st['rounds']:,} of {len(r.result.t_in):,} rounds "
                          f"({100 * st['fraction']:.2f} %) stalled (service > {st['threshold_ns'] / 1000:.3f} µs, "
                          f"longest {st['longest_ns'] / 1000:,.1f} µs; {st.get('queued_behind', 0):,} more queued "
                          "behind them): "
                          "preemption or interrupts, not the device; "
                          "the row 'stalled rounds left out' is the device's own distribution[/yellow]")
        lvl = lv.get("level")
        if lvl and lvl["shifted"]:
            meds = lvl["block_p50_ns"]
            console.print(f"[yellow]warning: {r.node}: the round trip changed level during the run: the p50 of "
                          f"{lvl['blocks']} consecutive blocks ranged {min(meds) / 1000:.3f} to "
                          f"{max(meds) / 1000:.3f} µs "
                          f"({lvl['spread_pct']:.1f} % of p50; Kruskal-Wallis p {lvl['kruskal_p']:.1e}): the machine "
                          "changed state mid-run (a thread moved to another core or cache domain, a clock "
                          "changed); its percentiles mix two machines[/yellow]")
    for r in rows:
        console.print(f"{r.node}: {r.summary['live'].get('endpoint', '')}")
        if r.summary["live"].get("mismatch_rounds"):
            console.print(f"[red]{r.node}: the live device answered wrongly at round(s) "
                          f"{', '.join(map(str, r.summary['live']['mismatch_rounds']))}[/red]")
        hf = r.summary.get("host_freeze")
        if hf:
            console.print(f"{r.node}: host freeze: " + "; ".join(
                f"{w['stalled_rounds']} round(s) stalled in the freeze at {w['at_ns'] / 1e3:g} µs, back to normal "
                f"{w['recovered_after_rounds']} round(s) after" for w in hf["windows"])
                + f"; {r.summary['mismatches']} verification failures; {hf['stalled_rounds']} rounds over the "
                  f"timeout in the whole run (longest {hf['longest_stall_ns'] / 1e3:.1f} µs)")


def write_live_rounds(study, folder) -> Path | None:
    """Stage ``live_rounds.npz`` in ``folder`` (a :class:`twin.output.files.RunFolder`): per live
    consumer ``<node>.rtt_ps``, ``<node>.service_ns``, ``<node>.t_in_ps``, ``<node>.t_have_ps``,
    ``<node>.idle_ns`` and ``<node>.idle_target_ns`` (the idle time before each round, measured and
    simulated, ns; the first round's measured one is -1).
    Returns its path, or None without live consumers (an earlier run's file is then the folder's
    business: its manifest)."""
    arrays = {}
    for r in study.runs:
        if r.summary.get("live"):
            arrays[f"{r.node}.rtt_ps"] = r.result.rtt_ps
            arrays[f"{r.node}.t_in_ps"] = r.result.t_in
            arrays[f"{r.node}.t_have_ps"] = r.result.t_have
            for k in ("service_ns", "idle_ns", "idle_target_ns"):
                arrays[f"{r.node}.{k}"] = np.asarray(r.result.stats.get(k, []), np.int64)
    if not arrays:
        return None
    return folder.savez(NPZ, arrays)
