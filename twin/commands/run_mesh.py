"""``twin run`` on a mesh scenario: run every flow together, print a table, write results.

Writes ``results.json`` (schema ``twin.mesh-results/1``: per flow its route, rounds, byte
mismatches, card-boundary round trip and controller loop percentiles, mean and p99 queueing
delay at the shared consumer; per shared link and consumer its utilisation), ``rounds.parquet``
or ``rounds.csv`` (per request: flow, round, rtt_ps, loop_ps, wait_ps, every hop's instant) and ``histograms.png``
(one panel per flow, 4 ns bins, its p50/p90 drawn).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from twin.config import ConfigError
from twin.engine.hops import CSV_COLUMNS
from twin.engine.stop import Interrupted
from twin.output.histogram import draw_panel, finish_panels, panel_figure, percentile_lines
from twin.studies.mesh import MeshResult, flow_summaries, run_mesh
from twin.usage import INTERRUPTED_EXIT, interrupted_line

if TYPE_CHECKING:
    from rich.console import Console

SCHEMA = "twin.mesh-results/1"
PART_LOST_EXIT = 3
"""Exit code of a partitioned mesh run that lost a part (as a run whose live endpoint failed): the other
parts' rounds are saved, partial."""


def mesh_document(loaded, res: MeshResult, seed: int, requested: dict[int, int] | None = None) -> dict:
    """The results.json mapping of a mesh run (each flow's entry a
    :class:`twin.output.summary.MeshFlowSummary`); ``requested``: after a stop, the rounds each flow
    was asked for."""
    sc = loaded.scenario
    return {"schema": SCHEMA, "scenario": sc.name, "calibration": loaded.params.name, "seed": seed,
            "frame_bytes": sc.frame_bytes, "flows": [f.to_json() for f in flow_summaries(sc, res, requested)],
            "shared": res.stats["links"], "consumers": res.stats["consumers"]}


def cmd_run_mesh(args: argparse.Namespace, console: Console, loaded) -> int:
    """Run a mesh scenario (``flows``); returns 0, or 1 when a reply mismatched, or 130 when
    stopped by a signal (the caller's :func:`twin.commands.interrupt.interruptible`): every flow's
    rounds so far are written (``"partial": true``, per flow ``rounds`` and ``rounds_requested``)."""
    sc = loaded.scenario
    if args.engine == "direct":
        raise ConfigError(loaded.path, "flows", "[...]", "--engine direct computes one flow alone; a mesh's flows "
                          "contend for links and consumers, so it runs on the event engine (--engine auto or event)")
    if getattr(args, "trace", None):
        raise ConfigError(loaded.path, "flows", "[...]", "--trace writes waveforms of one loop's RTL nodes; run "
                          "the RTL node in a loop scenario to trace it")
    from twin.scenario.compile import is_roce
    if is_roce(loaded.params):
        raise ConfigError(loaded.path, "calibration", sc.calibration, "a mesh needs a card-path parameter set")
    from twin.output.files import RunFolder
    from twin.usage import check_out_folder
    out = check_out_folder(args.out or Path("runs") / sc.name)  # before the run, not after
    seed = sc.seed if args.seed is None else args.seed
    folder = RunFolder(out, overwrite=getattr(args, "overwrite", False), command=getattr(args, "argv", None),
                       seed=seed, figure_format=getattr(args, "figure_format", "png"))
    fmt = getattr(args, "rounds_format", "parquet")
    folder.check(["results.json", *([] if args.no_csv else [f"rounds.{fmt}"]),
                  *([] if args.no_plot else ["histograms.png"])])  # refused before the run, nothing written
    with folder:  # an error or Ctrl-C before the commit leaves the folder as it was
        return _run_and_write(args, console, loaded, folder, seed)


def _run_and_write(args: argparse.Namespace, console: Console, loaded, folder, seed: int) -> int:
    """Run the mesh, print its tables, stage and commit its files in ``folder``; the exit code."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    sc = loaded.scenario
    from twin.scenario.load import check_memory, check_rounds
    if args.rounds:
        check_rounds(loaded, args.rounds)
    check_memory(loaded, args.rounds)
    from twin.output.progress import phase_spinner
    from twin.rtl.build import build_status
    parted = None
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, disable=args.quiet) as bar, build_status(phase_spinner(bar, console, args.quiet)):
        task = bar.add_task("replies (all flows)", total=None)
        progress = lambda d, t: bar.update(task, completed=d, total=t)  # noqa: E731
        from twin.commands.parted_args import parted as is_parted
        if is_parted(args):  # a live node is refused there (its session is this process's)
            from twin.commands.run_parts import run_parted
            parted = run_parted(args, console, loaded, seed, progress, lambda text: bar.update(task, description=text),
                                folder.out)
            res, stopped, failed = parted.result, (Interrupted("parts") if parted.stopped else None), None
        else:
            res, stopped, failed = _run(args, loaded, seed, progress, folder.out)
    if res is None:  # the live device failed before its first round (its line is out): nothing to save
        return 3
    requested = None
    lost = bool(parted and parted.lost)
    if stopped is not None or failed is not None or lost:  # each flow's rounds done and asked for
        requested = {r.flow: (args.rounds or sc.flows[r.flow].rounds or sc.rounds) for r in res.routes}
    doc = mesh_document(loaded, res, seed, requested)
    _mark_partial(doc, folder, res, parted, stopped, failed)
    folder.write_json("results.json", doc)
    from twin.output.table import Grid, Num
    shown = doc["flows"][:TABLE_FLOWS]  # results.json keeps every flow
    tb = Grid(f"{sc.name}: mesh, {len(res.flows)} flows, seed {seed} (µs)" +
              (f", the first {len(shown)}" if len(shown) < len(doc["flows"]) else ""),
              ["flow", "route", "function", "rounds", "rtt p50", "p90", "p99", "loop p50", "wait mean", "wait p99",
               "mismatches"])
    for f in shown:
        us = lambda ns: Num(ns / 1000)  # noqa: E731
        tb.add_row(str(f["flow"]), " -> ".join(f["route"]), f["function"], Num(f["rounds"], ","),
                   us(f["rtt"]["p50_ns"]), us(f["rtt"]["p90_ns"]), us(f["rtt"]["p99_ns"]), us(f["loop"]["p50_ns"]),
                   us(f["wait"]["mean_ns"]), us(f["wait"]["p99_ns"]), Num(f["mismatches"], "d"))
    tb.print(console)
    if len(shown) < len(doc["flows"]):
        console.print(rest_line(doc["flows"], len(shown), folder.out / "results.json"), highlight=False, soft_wrap=True)
    from twin.output.budget import print_budget_table, print_fault_and_deadline_lines
    print_budget_table([(f"flow {f['flow']}", f) for f in shown], console, "flow")
    from twin.output.program import print_program_table
    print_program_table([(f"flow {f['flow']}", f) for f in shown], console, "flow")
    print_consumer_lines(doc, console)
    for f in doc["flows"]:
        if "live" in f:
            print_live_flow(f, console)
    print_fault_and_deadline_lines([(f"flow {f['flow']}", f) for f in doc["flows"]], console, str(loaded.path),
                                   sc.faults.timeout if sc.faults else None)
    if not args.no_csv:
        write_mesh_rounds(res, folder, getattr(args, "rounds_format", "parquet"))
    if not args.no_plot:
        _plot(res, folder, doc["flows"])
    if parted is not None:
        from twin.commands.run_parts import print_measured
        print_measured(parted, console)
    written = folder.commit()
    console.print("wrote " + ", ".join(map(str, written)) + f" ({folder.out / 'manifest.json'} lists them)")
    return _exit_code(doc, folder, lost, stopped, failed)


TABLE_FLOWS = 32
"""The flows a mesh's tables print (the first), and the consumers its utilisation lines name; the rest
in one line each (results.json keeps every one)."""


def rest_line(flows: list[dict], shown: int, path) -> str:
    """One line for the flows past the first ``shown`` of ``flows`` (results.json's): how many, the
    largest round-trip p99 of all flows (which), the mismatches of all, and where every flow is."""
    worst = max(flows, key=lambda f: (f["rtt"]["p99_ns"], -f["flow"]))
    return (f"... and {len(flows) - shown:,} more flows ({len(flows):,} in {path}): round trip p99 of all "
            f"{min(f['rtt']['p99_ns'] for f in flows) / 1000:.3f} .. {worst['rtt']['p99_ns'] / 1000:.3f} µs (the "
            f"largest: flow {worst['flow']}, {' -> '.join(worst['route'])}), {sum(f['rounds'] for f in flows):,} "
            f"rounds, {sum(f['mismatches'] for f in flows):,} mismatches")


def print_consumer_lines(doc: dict, console: Console) -> None:
    """Per consumer (the first :data:`TABLE_FLOWS`) requests served and utilisation, and one line for
    the others (their number, their utilisation's range and its largest)."""
    live_nodes = {f["to"] for f in doc["flows"] if "live" in f}
    items = list(doc["consumers"].items())
    for name, c in items[:TABLE_FLOWS]:
        own = "a live device: measured, not modelled" if name in live_nodes else "model rtl: its own logic"
        util = f"n/a ({own})" if c["utilisation"] is None else f"{100 * c['utilisation']:.1f} %"
        console.print(f"{name}: served {c['served']:,}, utilisation {util}")
    rest = [(name, c) for name, c in items[TABLE_FLOWS:] if c["utilisation"] is not None]
    if len(items) > TABLE_FLOWS:
        line = f"... and {len(items) - TABLE_FLOWS:,} more consumers"
        if rest:
            top = max(rest, key=lambda nc: nc[1]["utilisation"])
            line += (f": utilisation {100 * min(c['utilisation'] for _, c in rest):.1f} .. "
                     f"{100 * top[1]['utilisation']:.1f} % (the largest: {top[0]})")
        console.print(line, highlight=False, soft_wrap=True)


def _mark_partial(doc: dict, folder, res: MeshResult, parted, stopped, failed) -> None:
    """A run cut short in the document and the manifest: a stop (each flow's whole rounds so far), a lost
    part (its flows missing, ``parts_lost``) or a paced live flow's failure (its ``live.error``)."""
    lost = bool(parted and parted.lost)
    if stopped is not None or lost:
        doc["partial"] = True
    if lost:
        from twin.commands.run_parts import lost_document, lost_reason
        doc["parts_lost"] = lost_document(parted)
        folder.mark_partial(lost_reason(parted))
    elif stopped is not None:
        folder.mark_partial("interrupted: every flow's whole rounds so far" +
                            (" (each part cut at its own instant)" if parted and not parted.here else ""))
    if failed is not None:
        _mark_failed(doc, failed, res, folder)


def _exit_code(doc: dict, folder, lost: bool, stopped, failed) -> int:
    """3 for a lost part or a failed live flow, INTERRUPTED_EXIT after a stop (its line printed), 1 for
    mismatches beyond the injected corruptions, else 0."""
    if lost:
        return PART_LOST_EXIT
    injected = [f.get("faults", {}).get("injected", {}).get("corrupt_piece", 0) for f in doc["flows"]]
    if stopped is not None:  # rounds: replies of all flows together
        print(interrupted_line(sum(f["rounds"] for f in doc["flows"]),
                               sum(f["rounds_requested"] for f in doc["flows"]), folder.out), file=sys.stderr)
        return INTERRUPTED_EXIT
    if failed is not None:
        return 3
    return 1 if any(f["mismatches"] != k for f, k in zip(doc["flows"], injected)) else 0


def _run(args, loaded, seed: int, progress, out):
    """The mesh run: ``(result, stop, live failure)``, the result after a stop or a paced live flow's
    failure (its device died or hung) being every flow's rounds so far (the simulated ones whole)."""
    from twin.scenario.compile import rtl_config
    try:
        return run_mesh(loaded.scenario, loaded.params, rounds=args.rounds, seed=seed, progress=progress,
                        rtl_config=lambda node: rtl_config(loaded, node, None)), None, None
    except Interrupted as e:  # every flow's whole rounds so far (at least one each)
        return e.partial, e, None
    except Exception as e:
        if not getattr(e, "keeps_partial", False) or not hasattr(e, "flow"):
            raise
        _live_failed(e, e.partial, out)  # type: ignore[attr-defined]
        return e.partial, None, e  # type: ignore[attr-defined]


def _mark_failed(doc: dict, e, res: MeshResult, folder) -> None:
    """A paced live flow's failure in the document (partial; its ``live.error``) and the manifest."""
    k = e.flow
    doc["partial"] = True
    doc["flows"][k]["live"]["error"] = {"kind": e.kind, "round": e.round, "detail": e.detail}
    folder.mark_partial(f"flow {k} ({res.routes[k].consumer}): {e}")


def _live_failed(e, res: MeshResult, out) -> None:
    """A paced live flow's failure, on stderr the moment it is caught (before the summaries and files):
    the flow, its node, the round it waited for, what happened, and what is saved."""
    k = e.flow
    if res is None:
        print(f"twin: error: flow {k}: {e}; no round of it completed, nothing saved", file=sys.stderr, flush=True)
        return
    done = len(res.flows[k].t_in)
    print(f"twin: error: flow {k} (node {res.routes[k].consumer!r}): {e}; {done:,} rounds completed, the other "
          f"flows whole, being saved in {out}", file=sys.stderr, flush=True)


def print_live_flow(f: dict, console) -> None:
    """A paced live flow of a mesh: its measured round trip and loop beside the simulated flow's over
    the same rounds, the pace (live rounds per wall-second, lateness) and the late rounds named."""
    lv, p = f["live"], f["live"]["pace"]
    sim = lv["simulated"]
    late = p["lateness"] or {}
    rate = "n/a" if p["rounds_per_s"] is None else f"{p['rounds_per_s']:,.0f}"
    us = lambda d: f"{d['p50_ns'] / 1000:.3f} / {d['p99_ns'] / 1000:.3f} µs"  # noqa: E731
    console.print(f"flow {f['flow']} ({f['to']}, live {lv['backend']}, paced): round trip p50 / p99 {us(f['rtt'])} "
                  f"measured, {us(sim['rtt'])} simulated; loop {us(f['loop'])} measured, {us(sim['loop'])} "
                  f"simulated; {rate} live rounds per wall-second, lateness p50 {late.get('p50_ns', 0):,.0f} ns, "
                  f"p99 {late.get('p99_ns', 0):,.0f} ns", soft_wrap=True)
    if p["late_rounds"]:
        console.print(f"[yellow]warning: flow {f['flow']}: {p['late_rounds']:,} rounds sent more than "
                      f"{p['late_threshold_ns']:,} ns after their instant (every slot awaited its reply, or the "
                      f"machine preempted the producer); first: {', '.join(map(str, p['late_first']))}[/yellow]",
                      soft_wrap=True)


MESH_ROUND_COLUMNS = ("flow", "round", "rtt_ps", "loop_ps", "wait_ps", *(f"{c}_ps" for c in CSV_COLUMNS))


def write_mesh_rounds(res: MeshResult, folder, fmt: str = "parquet") -> Path:
    """Per request: flow, round, rtt_ps, loop_ps, wait_ps (queueing at the shared consumer), then
    every hop's instant as in a loop's per-round file (integer ps, int64 in Parquet; docs/results.md),
    as ``rounds.parquet`` or ``rounds.csv`` (``fmt``, :func:`twin.output.rows.write_rows`). Staged in
    ``folder`` (a :class:`twin.output.files.RunFolder`); returns its path."""
    from twin.output.rows import Block, write_rows
    blocks = []
    for r, ft in zip(res.routes, res.flows):
        h, n = ft.hops, len(ft.t_in)
        assert h is not None  # a mesh's flows record their hops
        blocks.append(Block((), (np.full(n, r.flow, np.int64), np.arange(1, n + 1), ft.rtt_ps, ft.loop_ps, ft.wait_ps,
                                 ft.t_send, ft.t_in, *(h.instant(c) for c in CSV_COLUMNS[2:-2]), ft.t_have,
                                 ft.t_back)))
    return write_rows(folder, "rounds", fmt, (), MESH_ROUND_COLUMNS, blocks)


def _plot(res: MeshResult, folder, flows: list[dict], name: str = "histograms.png", bin_ps: int = 4000) -> Path:
    """histograms.png of a mesh: one panel per flow as a loop's (:func:`twin.output.histogram.draw_panel`),
    the flow's round-trip p50/p90 (``flows``: results.json's, ``rtt``) as solid lines, one legend."""
    fig, axes = panel_figure(len(res.flows))
    drawn = [draw_panel(ax, ft.rtt_ps, bin_ps, f"flow {r.flow}: {' -> '.join(r.nodes)} ({r.function})",
                        percentile_lines(f["rtt"], "twin"))
             for ax, r, ft, f in zip(axes[:, 0], res.routes, res.flows, flows) if len(ft.rtt_ps)]
    finish_panels(axes, "card-boundary round trip", bin_ps, drawn)
    return folder.savefig(name, fig)
