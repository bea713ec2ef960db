"""What a study writes: the terminal table, results.json, the per-round CSV, the histogram figure.

results.json's schema is documented in docs/results.md. Nothing in it depends on the wall clock
or the machine, so two runs with the same seed write the same bytes.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
from rich.console import Console

from twin.engine.hops import CSV_COLUMNS
from twin.output.budget import print_budget_table, print_fault_and_deadline_lines
from twin.output.files import RunFolder
from twin.output.histogram import draw_panel, finish_panels, panel_figure, percentile_lines
from twin.studies.run import PENDING, StudyResult
from twin.units import period_ps, time_ps

SCHEMA = "twin.results/1"


def results_document(study: StudyResult) -> dict:
    """The results.json mapping (see docs/results.md)."""
    sc = study.scenario.scenario
    t = sc.traffic
    traffic = {"mode": t.mode, "clock": t.clock, "period_ns": time_ps(t.period) / 1000 if t.period else None,
               "ppm": t.ppm, "control": "external (aurora)" if sc.external_control() else "on card"}
    if t.in_flight != 1:
        traffic["in_flight"] = t.in_flight
    if time_ps(t.gap):
        traffic["gap_ns"] = time_ps(t.gap) / 1000
    if t.gaps is not None:
        traffic["gaps"] = t.gaps.model_dump(exclude_none=True)
    if t.program is not None:
        traffic["program"] = t.program.model_dump()
    ctl = sc.control()
    if ctl is not None and ctl.settings is not None:  # a control kind with its own parameters says what it sends
        traffic = ctl.settings.describe()  # type: ignore[attr-defined]
    if sc.qblox is not None:  # a Qblox cluster: traffic from its Q1ASM programs
        q = sc.qblox
        traffic = {"mode": "open_loop", "clock": q.clock, "period_ns": q.period_ns(), "ppm": q.ppm,
                   "drift_ppb_per_s": q.drift_ppb_per_s, "control": f"{q.device} (aurora)"}
        if q.listens():  # its programs wait for the replies: period_ns is the nominal one (no wait)
            traffic["feedback"] = q.fb().model_dump()
    doc = {
        "schema": SCHEMA,
        "scenario": sc.name,
        "calibration": study.scenario.params.name,
        "seed": study.seed,
        "rounds": study.rounds,
        "frame_bytes": sc.frame_bytes,
        "traffic": traffic,
        "timing_boundary": _boundary(study),
        "measured": None,
        "consumers": [r.summary for r in study.runs],
    }
    if study.measured is not None:
        doc["measured"] = {"file": sc.measured, "source": study.measured.source}
    short = [r.summary["rounds"] for r in study.runs if "rounds_requested" in r.summary]
    if short or study.failures:  # stopped early (a live failure, a signal): the rounds completed, and the request
        doc["rounds"], doc["rounds_requested"] = min(short, default=0), study.rounds
        doc["partial"] = True
    return doc


def _boundary(study: StudyResult) -> str:
    """The timing boundary in words: the card's, or the FPGA controller's on the RoCE path."""
    p = study.scenario.params
    if getattr(p, "kind", None) == "roce_path":
        return f"the FPGA controller issues the request -> it has read the reply ({p.controller.clock} clock)"
    return "request enters the link card -> the card has the reply (4 ns card clock)"


def write_results_json(study: StudyResult, folder: RunFolder, name: str = "results.json") -> Path:
    """Stage results.json in ``folder`` (sorted keys, fixed float formatting: byte-identical for a
    seed; a NaN or infinity is refused naming the field: :func:`twin.output.files.dumps_json`)."""
    return folder.write_json(name, results_document(study))


ROUND_COLUMNS = ("round", "rtt_ps", "loop_ps", *(f"{c}_ps" for c in CSV_COLUMNS))  # after "consumer"


def round_columns(run) -> list[np.ndarray]:
    """One consumer's per-round columns, in :data:`ROUND_COLUMNS` order, each int64 of length rounds:
    round (from 1), rtt_ps, loop_ps, then every hop's instant (-1 where a node does not expose it)."""
    r = run.result
    return rounds_block(0, r.t_send, r.t_in, r.t_have, r.t_back, r.hops)


def rounds_block(first: int, t_send, t_in, t_have, t_back, hops) -> list[np.ndarray]:
    """The per-round columns (:data:`ROUND_COLUMNS` order, int64) of the rounds ``first + 1`` ..
    ``first + len(t_in)`` of one consumer from their instants (ps) and hops (None: every hop -1)."""
    n = len(t_in)
    unknown = np.full(n, -1, np.int64)
    inner = [hops.instant(c) if hops is not None else unknown for c in CSV_COLUMNS[2:-2]]
    t_send, t_in, t_have, t_back = (np.asarray(a, np.int64) for a in (t_send, t_in, t_have, t_back))
    return [np.ascontiguousarray(c, dtype=np.int64) for c in (np.arange(first + 1, first + n + 1), t_have - t_in,
                                                               t_back - t_send, t_send, t_in, *inner, t_have, t_back)]


class StreamedRounds:
    """The per-round file (:func:`write_rounds`'s, the same columns and rows) written while a
    streamed run goes (:func:`twin.studies.run.run_study`'s ``rounds_sink``): each batch of each
    loop's rounds a block as it is computed (Parquet: its own row groups), so the file costs no
    memory that grows with the run. ``folder`` stages it (a run that fails or is discarded leaves
    nothing); ``nodes`` the consumers' names (a CSV quotes every label when one needs quotes).
    Use as a context manager around the run; :meth:`add` is the sink."""

    def __init__(self, folder: RunFolder, fmt: str, nodes: list[str]):
        from twin.output.rows import RowStream, file_name, plain_labels
        self.path = folder.path(file_name("rounds", fmt))
        self._f = open(self.path, "xb")
        self._rows = RowStream(self._f, fmt, ("consumer",), ROUND_COLUMNS, quoted=not plain_labels(nodes))

    def add(self, node: str, first: int, t_send, t_in, t_have, t_back, hops) -> None:
        """Rounds ``first + 1`` .. of loop ``node`` (their instants, ps, and hops)."""
        from twin.output.rows import Block
        self._rows.add(Block((node,), tuple(rounds_block(first, t_send, t_in, t_have, t_back, hops))))

    def __enter__(self) -> StreamedRounds:
        return self

    def __exit__(self, *exc) -> None:
        try:
            self._rows.close()
        finally:
            self._f.close()


def _round_blocks(study: StudyResult):
    from twin.output.rows import Block
    return [Block((run.node,), tuple(round_columns(run))) for run in study.runs]


def write_rounds(study: StudyResult, folder: RunFolder, fmt: str = "parquet") -> Path:
    """The per-round file, ``rounds.parquet`` (``fmt`` ``parquet``, the default) or ``rounds.csv``
    (``csv``), through :func:`twin.output.rows.write_rows`: columns consumer (the scenario's node
    name), round, rtt_ps, loop_ps, then every hop's instant (integer picoseconds; -1 where a node
    does not expose it, e.g. inside RTL): t_send, t_in, issue, land, seen, start, reply, publish,
    rland, t_have, t_back (:mod:`twin.engine.hops`). ``rtt_ps`` is the card-boundary round trip
    (t_have - t_in); ``loop_ps`` generator to generator (t_back - t_send). In Parquet ``consumer``
    is a dictionary-encoded string and the rest int64; one row group per consumer or more. Staged
    in ``folder``; returns its path."""
    from twin.output.rows import write_rows
    return write_rows(folder, "rounds", fmt, ("consumer",), ROUND_COLUMNS, _round_blocks(study))


def write_rounds_csv(study: StudyResult, folder: RunFolder) -> Path:
    """:func:`write_rounds` as ``rounds.csv``."""
    return write_rounds(study, folder, "csv")


def write_rounds_parquet(study: StudyResult, folder: RunFolder) -> Path:
    """:func:`write_rounds` as ``rounds.parquet``."""
    return write_rounds(study, folder, "parquet")


def print_table(study: StudyResult, console: Console) -> None:
    """The headline table (:func:`headline_table`), then the fault and deadline lines, the control
    program's table and the latency budget."""
    headline_table(study).print(console)
    for line in max_notes(study):
        console.print(line, soft_wrap=True)
    faults = study.scenario.scenario.faults
    print_fault_and_deadline_lines([(r.node, r.summary) for r in study.runs], console, str(study.scenario.path),
                                   faults.timeout if faults else None)
    from twin.output.program import print_program_table
    print_program_table([(r.node, r.summary) for r in study.runs], console, "consumer")
    print_budget(study, console)


def headline_table(study: StudyResult):
    """One row per consumer: measured p50/p90 beside the twin's p50/p90/p99/p99.9 and errors, whether
    the measured numbers are fit targets of the calibration or held out ("meas is"), the replies
    checked and mismatches (``-`` before the event model's check ran), as a
    :class:`twin.output.table.Grid` (folded, never cut). A live consumer's row is its measured round
    trip: the header then says ``p50``, not ``twin p50``, and the row ``(live)``."""
    from twin.output.table import Grid, Num
    where = "FPGA" if getattr(study.scenario.params, "kind", None) == "roce_path" else "card-boundary"
    def published(key: str) -> bool:
        return any((r.summary.get("measured") or {}).get(f"{key}_ns") is not None for r in study.runs)
    # the RoCE path's published summary has p99, not p90; NVQLink's its maximum round trip
    second = "p99" if published("p99") else "max" if published("max") else "p90"
    live = any(r.summary.get("live") for r in study.runs)
    tb = Grid(f"{study.scenario.scenario.name}: {where} round trip in µs, "
              + (f"{study.rounds:,} rounds" if not study.failures else  # stopped early: what was kept
                 f"{min(r.summary['rounds'] for r in study.runs):,} of {study.rounds:,} rounds (partial)")
              + f", seed {study.seed}",
              ["consumer", "meas p50", f"meas {second}", "p50" if live else "twin p50", "p90", "p99", "p99.9",
               "err p50", f"err {second}", "meas is", "checked", "mismatches"])
    for run in study.runs:
        s = run.summary
        m = s.get("measured") or {}
        e = s.get("error_pct") or {}
        us = lambda ns: None if ns is None else Num(ns / 1000)  # noqa: E731
        pct = lambda v: None if v is None else Num(v, "+.2f", "%")  # noqa: E731
        tb.add_row(run.node + (" (live)" if s.get("live") else ""), us(m.get("p50_ns")), us(m.get(f"{second}_ns")),
                   us(s["p50_ns"]), us(s["p90_ns"]), us(s["p99_ns"]), us(s["p999_ns"]),
                   pct(e.get("p50")), pct(e.get(second)), _role_cell(m, ("p50", second)),
                   *((None, None) if s["engine"] == PENDING  # the event model's check has not run (yet)
                     else (Num(s["replies_checked"], ","), Num(s["mismatches"], "d"))))
    return tb


def _role_cell(measured: dict, stats) -> str | None:
    """The "meas is" cell: whether the row's measured numbers are ones the calibration was fitted to
    (``fit``) or not (``held out``): :func:`twin.calibration.targets.role_label` of those shown."""
    from twin.calibration.targets import role_label
    by = {k: v for k, v in (measured.get("role") or {}).items() if k in stats and measured.get(f"{k}_ns") is not None}
    return role_label(by) if by else None


def max_notes(study: StudyResult) -> list[str]:
    """One line per consumer whose measured row is a maximum: the N it is compared at and its source
    (:func:`twin.calibration.roce.max_note`), with a warning when the run is shorter than N."""
    out = []
    for run in study.runs:
        m = run.summary.get("measured") or {}
        if m.get("max_samples"):
            from twin.calibration.roce import max_note
            out.append(f"{run.node}: " + max_note(m["max_samples"], m.get("max_samples_source"), run.summary["rounds"]))
    return out


def print_check(study: StudyResult, console: Console) -> None:
    """The event model's check in one line, under the table (``twin run`` prints the table once
    the check is done: its ``checked`` column): replies checked byte for byte per consumer and the
    mismatches."""
    done = [r.summary for r in study.runs if r.summary["engine"] == "direct+event"]
    if not done:
        return
    counts = sorted({s["replies_checked"] for s in done})
    one = (f"{counts[0]:,} rounds of the consumer" if len(done) == 1 else
           f"{counts[0]:,} rounds of each of {len(done)} consumers")
    each = (one if len(counts) == 1 else
            ", ".join(f"{s['node']} {s['replies_checked']:,}" for s in done) + " rounds")
    bad = sum(s["mismatches"] for s in done)
    console.print(f"[{'red' if bad else 'green'}]event-model check: {each}, every reply byte for byte and every "
                  f"timestamp equal to the direct engine's: {bad} mismatches[/{'red' if bad else 'green'}]")


def print_budget(study: StudyResult, console: Console) -> None:
    """Where the time goes, per consumer (:func:`twin.output.budget.print_budget_table`)."""
    print_budget_table([(r.node, r.summary) for r in study.runs], console, "consumer")


def plot_histograms(study: StudyResult, folder: RunFolder, name: str = "histograms.png",
                    bin_ps: int | None = None) -> Path:
    """Figure in the style of the seeds' Figure 7: one panel per consumer (:func:`histogram_panel`),
    timing-clock bins, p0.1-p99.9, its p50/p90 as solid lines and the published ones dashed, one
    legend. Staged in ``folder``."""
    if bin_ps is None:  # the timing clock's resolution: the card's 4 ns, or the RoCE controller's
        p = study.scenario.params
        bin_ps = period_ps(p.controller.clock) if getattr(p, "kind", None) == "roce_path" else 4000
    fig, axes = panel_figure(len(study.runs))
    drawn = [histogram_panel(ax, run, bin_ps) for ax, run in zip(axes[:, 0], study.runs) if len(run.result.rtt_ps)]
    finish_panels(axes, "round trip", bin_ps, drawn)
    return folder.savefig(name, fig)


def histogram_panel(ax, run, bin_ps: int):
    """One consumer's panel: its round trips (at results.json's timing boundary), the p50/p90 of
    results.json as solid lines (``twin``; ``live`` for a live consumer: the round trip measured
    with the live device, the ``measured`` row of the live table) and the published ``measured``
    values dashed. A live run's
    stalled rounds (``live.stalled``: preempted, not the device's, with the rounds queued behind
    them) are set apart before the p0.1-p99.9 clip and counted in the title; its lines are then the
    percentiles without them (``live.clean.round_trip``). Returns the :class:`Binned` drawn."""
    s = run.summary
    rtt, aside, title = run.result.rtt_ps, "", f"{run.node} — {s['device']}"
    lines = percentile_lines(s, "twin")
    lv = s.get("live")
    if lv:
        title = f"{run.node} — live {lv.get('backend', '')} consumer in place of the {s['device']}"
        lines = percentile_lines(s, "live")
        clean, st = (lv.get("clean") or {}).get("round_trip"), lv.get("stalled")
        if clean and st and st["rounds"] + st.get("queued_behind", 0):
            from twin.output.live import stall_mask
            mask = stall_mask(run.result.stats.get("service_ns", []), rtt)
            if mask is not None and mask.sum() < len(rtt):
                rtt, q = rtt[~mask], st.get("queued_behind", 0)
                aside = f"{st['rounds']:,} stalled rounds" + (f" and {q:,} queued behind them" if q else "")
                lines = percentile_lines(clean, "live")
                lines = [replace(ln, label=ln.label + ", stalled left out") for ln in lines]
    if s.get("measured"):
        lines += percentile_lines(s["measured"], "measured", dashed=True, keys=("p50", "p90", "p99", "max"))
    return draw_panel(ax, rtt, bin_ps, title, lines, aside)
