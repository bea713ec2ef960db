"""What ``twin machine`` prints and draws: the machine table and the machine figure.

The figure is a hardware paper's three panels: (a) each pool's backlog over the run, (b) the T
gates' reaction time distribution (the field's headline latency at machine scale), (c) the
logical clock against the decoder count when a sweep ran (else the commit latency distribution).
"""
from __future__ import annotations

import numpy as np

from twin.output.figure import new_figure, series_styles

MACHINE_FILES = ("results.json", "machine.png")


def print_machine(doc: dict, console, sweep: list[dict] | None = None) -> None:
    """The machine's table, its pools' table and (with a sweep) the logical clock per decoder count."""
    from rich.table import Table
    lc, tg = doc["logical_clock"], doc["t_gates"]
    console.print(f"{doc['scenario']}: {doc['patches']:,} patches, surface d={doc['distance']}, "
                  f"{doc['cycles']:,} cycles of {doc['cycle_ns']:g} ns, window {doc['window']['kind']} "
                  f"C={doc['window']['commit']} B={doc['window']['buffer']}", highlight=False)
    rx = tg["reaction"] or {}
    console.print(f"logical clock: {_count(lc['effective_step_ns'])} ns per logical step (ideal "
                  f"{lc['ideal_step_ns']:,g} ns, x{lc['slowdown']}); T gates {tg['count']:,}: reaction p50 "
                  f"{_count(rx.get('p50_ns'))} ns, p99 {_count(rx.get('p99_ns'))} ns, mean stall "
                  f"{tg['stall_rounds_mean']} rounds; merges "
                  f"{doc['merges']['count']:,}", highlight=False)
    how = (doc.get("cost") or {}).get("how")
    t = Table(title="decoder pools (prediction: " + ("fixed decoder cost" if how == "fixed" else
                                                     "measured decoder cost") + ", modelled links)")
    for col in ("pool", "policy", "decoders", "needed", "jobs", "busy", "backlog max", "growth/cycle",
                "held", "wait p99 ns", "latency p99 ns", "deadline missed"):
        t.add_column(col, justify="left" if col in ("pool", "policy") else "right")
    for p in doc["pools"]:
        t.add_row(p["name"], p["policy"], f"{p['decoders']:,}", f"{p['decoders_needed']:,}", f"{p['jobs']:,}",
                  f"{p['busy_fraction']:.1%}", f"{p['backlog_max']:,}", _growth(p['backlog_growth_per_cycle']),
                  f"{p['held_jobs']:,}", f"{(p['wait'] or {}).get('p99_ns', 0):,.0f}",
                  f"{(p['latency'] or {}).get('p99_ns', 0):,.0f}", _count(p.get('deadline_missed')))
    console.print(t)
    c = doc.get("check")
    if c:
        console.print(f"cost checked here: {c['calls']:,} {c['call']} decodes of a {c['job']['kind']} "
                      f"({c['job']['detectors']:,} detectors): p50 {c['measured_here']['p50_ns']:,} ns, p99 "
                      f"{c['measured_here']['p99_ns']:,} ns; the model draws p50 {c['model']['p50_ns']:,} ns, p99 "
                      f"{c['model']['p99_ns']:,} ns (x{c['model_over_measured_p50']} at p50)", highlight=False)
    for r in doc.get("ler") or []:
        lo, hi = r["ci"]
        console.print(f"decoded for real: {r['case']} ({r['rounds']} rounds, {r['shots']:,} shots): LER per step "
                      f"{r['ler']:.3e} [{lo:.2e}, {hi:.2e}] (wilson, 95%)", highlight=False)
    if sweep:
        s = Table(title="logical clock against the decoder count (every pool at K)")
        for col in ("decoders", "ns per logical step", "slowdown", "T reaction p99 ns", "growth/cycle",
                    "deadline missed"):
            s.add_column(col, justify="right")
        for r in sweep:
            s.add_row(f"{r['decoders']:,}", _count(r['effective_step_ns']), f"{r['slowdown']}",
                      _count(r['t_reaction_p99_ns']), _growth(r['backlog_growth_per_cycle']),
                      f"{r['deadline_missed']:,}")
        console.print(s)


def _count(n: float | None) -> str:
    """A count or a figure as printed: with thousands separators, "-" for none."""
    return "-" if n is None else f"{n:,}"


def _growth(g: float | None) -> str:
    """A growth per cycle as printed: ``0.123``, or "too short to tell" (None: fewer ticks than a fit needs)."""
    return "too short to tell" if g is None else f"{g:.3f}"


def machine_figure(model, doc: dict, sweep: list[dict] | None = None):
    """The three-panel machine figure (module docstring), a matplotlib Figure."""
    fig = new_figure(11.0, 3.4)
    ax = fig.subplots(1, 3)
    t_us = np.asarray(model.tick_times, np.float64) / 1e6
    for (colour, _), p, bl in zip(series_styles(len(model.pools)), doc["pools"], model.backlog):
        ax[0].plot(t_us, bl, color=colour, lw=1.2, label=f"{p['name']} ({p['decoders']} decoders)")
    ax[0].set_xlabel("time (µs)")
    ax[0].set_ylabel("jobs waiting (backlog)")
    ax[0].set_title("(a) backlog per pool", fontsize=10)
    if len(model.pools) <= 8:
        ax[0].legend(fontsize=7, frameon=False)
    r = np.sort(np.asarray(model.t_reaction, np.float64)) / 1e3
    if r.size:
        ax[1].step(r, np.arange(1, r.size + 1) / r.size, where="post", color="#1f77b4")
        ax[1].set_xscale("log")
    ax[1].set_xlabel("T-gate reaction time (ns)")
    ax[1].set_ylabel("fraction of T gates")
    ax[1].set_title(f"(b) reaction time, {r.size:,} T gates", fontsize=10)
    if sweep:
        k = [s["decoders"] for s in sweep]
        ax[2].plot(k, [s["effective_step_ns"] / 1e3 for s in sweep], "o-", color="#d62728")
        ax[2].axhline(doc["logical_clock"]["ideal_step_ns"] / 1e3, color="0.5", ls="--", lw=1, label="d cycles")
        ax[2].set_xlabel("decoders per pool")
        ax[2].set_ylabel("µs per logical step")
        ax[2].set_title("(c) logical clock", fontsize=10)
        ax[2].legend(fontsize=7, frameon=False)
    else:
        c = np.sort(np.asarray(model.commit_latency, np.float64)) / 1e3
        if c.size:
            ax[2].step(c, np.arange(1, c.size + 1) / c.size, where="post", color="#2ca02c")
            ax[2].set_xscale("log")
        ax[2].set_xlabel("commit latency (ns)")
        ax[2].set_ylabel("fraction of commits")
        ax[2].set_title("(c) correction back, every window", fontsize=10)
    for a in ax:
        a.grid(alpha=0.3, lw=0.5)
    fig.tight_layout()
    return fig
