"""``twin run [SCENARIO]``: run a scenario (a mesh's flows through :func:`twin.commands.run_mesh.cmd_run_mesh`),
print the table, write results.json, rounds.parquet (or rounds.csv) and histograms.png."""
from __future__ import annotations

import argparse
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from twin.commands.common import (
    DEFAULT_SCENARIO,
    MAX_ROUNDS,
    UsageError,
    _count,
    _file_name,
    _nonneg,
    _run_rounds,
    _seed,
    _window,
    add_allow_code,
    add_figure_format,
    add_overwrite,
    add_table,
    check_out_folder,
    phase_spinner,
    run_folder,
    scenario_arg,
)
from twin.commands.interrupt import EXIT, interrupted_before_any, interrupted_line, interruptible

if TYPE_CHECKING:
    from rich.console import Console


def register(sub) -> None:
    """Add ``run`` to the ``twin`` subcommands."""
    r = sub.add_parser("run", help="run a scenario (default: the bundled card_path_64b)")
    r.add_argument("scenario", nargs="?", type=_file_name, help=f"scenario YAML (default {DEFAULT_SCENARIO})")
    r.add_argument("--rounds", type=_run_rounds, help="rounds per consumer (default: the scenario's; e.g. 1e5, 3e6; "
                                                      f"above {MAX_ROUNDS:.0e} a run that streams: --engine direct "
                                                      "--no-plot)")
    r.add_argument("--seed", type=_seed, help="seed >= 0 (default: the scenario's)")
    r.add_argument("--out", help="output folder (default runs/<scenario name>)")
    r.add_argument("--engine", choices=("auto", "direct", "event"), default="auto",
                   help="auto: direct engine, checked against the byte-level event model over "
                        "--verify-rounds (event model alone where the direct engine does not apply: a "
                        "request waiting for a free slot, faults, models other than sim, a function other "
                        "than the echo); direct: direct engine only, no byte check, refuses those runs; "
                        "event: event model for every round. A mesh runs on the event engine")
    r.add_argument("--verify-rounds", type=_nonneg, default=None,
                   help="rounds the event model checks in auto mode (default 10000; loops only)")
    r.add_argument("--trace", type=_window, metavar="FIRST:LAST",
                   help="write VCD waveforms of the RTL nodes for rounds FIRST..LAST (within the run's rounds) "
                        "(OUT/waves.<loop>.<node>.vcd; needs a node with model rtl)")
    r.add_argument("--no-plot", action="store_true", help="do not write histograms.png (one that is there is "
                                                          "left alone, or removed if an earlier run wrote it)")
    r.add_argument("--no-rounds", "--no-csv", dest="no_csv", action="store_true",
                   help="do not write the per-round file, rounds.parquet or rounds.csv (likewise)")
    r.add_argument("--format", choices=("parquet", "csv"), default="parquet", dest="rounds_format",
                   help="the per-round file: parquet (rounds.parquet, default: pyarrow, about a second per 3e6 "
                        "rows) or csv (rounds.csv, the same columns and rows as text: gigabytes for a long run)")
    r.add_argument("--chunk-rounds", type=_count, metavar="N",
                   help="stream each loop's rounds in batches of N (e.g. 1e6) in memory independent of the run's "
                        "length (the direct engine twice: counts, then the budget's median and slowest rounds; "
                        "results.json the same as unstreamed; rounds.parquet written batch by batch as the run "
                        "goes); needs --engine direct and --no-plot. "
                        f"Those runs over {STREAM_ABOVE:,} rounds stream in batches of {STREAM_BATCH:,} anyway")
    from twin.commands import parted_args
    parted_args.add(r, "a mesh: run its independent components (flows sharing no lane, bridge, consumer or stream) "
                       "on a local Dask cluster of N worker processes, grouped into N parts balanced by rounds; the "
                       "same files as one process (needs twin[cluster])",
                    "a mesh: run its parts (as --processes, one part per worker) on this Dask scheduler",
                    "the others' rounds are saved, partial")
    r.add_argument("--quiet", action="store_true", help="no progress bar")
    add_table(r)
    add_figure_format(r, "histograms")
    add_overwrite(r)
    add_allow_code(r)
    r.set_defaults(handler=cmd_run, stops_at_a_round=True,  # its own signal handlers (interruptible)
                   starts_itself=True)  # it ends its start-up itself (twin.startup.started)




STREAM_ABOVE = 1_000_000
"""Rounds above which a ``--engine direct --no-plot`` run streams its rounds (157 B a round of each
loop kept otherwise: 1e7 rounds of one loop peak at 1.6 GB); the same results.json, the same
per-round file (written batch by batch)."""
STREAM_BATCH = 262_144
"""Rounds of a streamed batch: its block (8 columns, 16 MiB) stays in cache between the core and the counts."""


def _stream_rounds(args: argparse.Namespace, rounds: int) -> int | None:
    """The batch a run streams its rounds in (``--chunk-rounds``, or :data:`STREAM_BATCH` for a long
    direct run that keeps no rounds), or None; refuses ``--chunk-rounds`` where the rounds are kept."""
    if args.chunk_rounds is None:
        keeps = not args.no_plot or args.trace
        return STREAM_BATCH if args.engine == "direct" and not keeps and rounds > STREAM_ABOVE else None
    why = [w for w, bad in (("--engine direct (the event model keeps its rounds)", args.engine != "direct"),
                            ("--no-plot (the histograms draw every round)", not args.no_plot),
                            ("no --trace", bool(args.trace))) if bad]
    if why:
        raise UsageError(f"--chunk-rounds {args.chunk_rounds}: streamed rounds are not kept: needs " + ", ".join(why))
    return args.chunk_rounds


def _mesh_rounds(args: argparse.Namespace) -> None:
    """A mesh keeps every round (the event engine): refuse --chunk-rounds and --rounds above the schema's."""
    if args.chunk_rounds is not None:
        raise UsageError(f"--chunk-rounds {args.chunk_rounds}: a mesh runs on the event engine, which keeps its "
                         "rounds; streamed rounds are a loop's on the direct engine")
    if (args.rounds or 0) > MAX_ROUNDS:
        raise UsageError(f"--rounds {args.rounds:.0e}: a mesh keeps every round (the event engine): at most "
                         f"{MAX_ROUNDS:.0e}")


def _parted_options(args: argparse.Namespace, path, mesh: bool) -> None:
    """Refuse ``--processes``, ``--cluster`` and ``--part-timeout`` where they would change nothing or
    cannot run (one line each): on a loop scenario, together, without Dask distributed."""
    from twin.commands.parted_args import flag_of, require_engine
    flag = flag_of(args, "a partitioned mesh run")
    if flag is None:
        return
    if not mesh:
        raise UsageError(f"{flag}: partitions a mesh's flows (a scenario with flows:); {path} is a loop scenario, "
                         "whose consumers run one after another in this process")
    require_engine(flag)


def cmd_run(args: argparse.Namespace, console: Console) -> int:
    """``twin run``: run a scenario, print the table, write results.json, rounds.parquet (``--format csv``:
    rounds.csv), histograms.png
    (with their manifest.json). Returns 0, or 1 if any reply mismatched, 3 when a live endpoint
    failed, 130 when a SIGINT or SIGTERM stopped it (:mod:`twin.commands.interrupt`: the rounds so
    far are written, marked partial); raises ConfigError for bad input. With ``--processes N`` the local
    cluster of N workers starts in the background from here (:class:`twin.engine.cluster.Starting`)."""
    from twin.engine.cluster import starting
    processes = getattr(args, "processes", None) if getattr(args, "cluster", None) is None else None
    with interruptible(), starting(processes) as start:  # a local cluster starts while the scenario loads
        args.cluster_start = start
        return _run(args, console)


def _run(args: argparse.Namespace, console: Console) -> int:
    from twin.engine.stop import Interrupted
    from twin.output.progress import progress_bar
    from twin.scenario import load_scenario
    from twin.studies.run import PENDING, run_study

    path = scenario_arg(args.scenario, DEFAULT_SCENARIO)
    try:
        loaded = load_scenario(path)
    finally:
        from twin.startup import started
        started()  # the start-up's objects frozen, the collector on for the run (twin.startup)
    sc = loaded.scenario
    from twin.scenario.compile import cosimulated, model_of
    if args.trace and not any(cosimulated(model_of(n)) for n in sc.nodes):
        raise UsageError(f"--trace: scenario {path} has no node with model rtl")
    if args.trace:  # its files are named by the nodes: before any folder
        from twin.scenario.compile import check_trace_names
        check_trace_names(loaded)
    if args.verify_rounds is not None and (sc.flows or args.engine != "auto"):  # it would change nothing
        raise UsageError(f"--verify-rounds {args.verify_rounds}: the event model checks the direct engine's "
                         "rounds in --engine auto on a loop scenario; " + (
                             "a mesh runs on the event engine, every reply checked" if sc.flows else
                             "--engine direct checks no reply" if args.engine == "direct" else
                             "--engine event checks every reply"))
    args.verify_rounds = 10_000 if args.verify_rounds is None else args.verify_rounds
    _parted_options(args, path, bool(sc.flows))
    if sc.flows:  # a mesh: every flow at once (twin.studies.mesh)
        _mesh_rounds(args)
        from twin.commands.run_mesh import cmd_run_mesh
        return cmd_run_mesh(args, console, loaded)
    rounds = args.rounds or sc.rounds
    stream = _stream_rounds(args, rounds)
    if rounds > MAX_ROUNDS and stream is None:
        raise UsageError(f"--rounds {rounds:.0e}: above {MAX_ROUNDS:.0e} rounds a run must stream them (--engine "
                         "direct --no-plot, no --trace): the event model and the histograms keep every round")
    from twin.scenario.load import check_memory, check_rounds
    check_rounds(loaded, rounds)  # before any folder or progress bar (the study checks them again)
    check_memory(loaded, rounds, streamed=stream is not None)
    out = check_out_folder(args.out or Path("runs") / sc.name)  # before the run, not after
    consumers = sc.consumers()
    if args.trace and args.trace[1] > rounds:
        raise UsageError(f"--trace {args.trace[0]}:{args.trace[1]}: outside the run's rounds 1:{rounds} "
                         f"(--rounds or the scenario's rounds)")
    live = any(model_of(n).supports.get("real_device") for n in consumers)
    folder = run_folder(args, out, sc.seed if args.seed is None else args.seed)
    folder.check(["results.json", *([] if args.no_csv else [f"rounds.{args.rounds_format}"]),
                  *([] if args.no_plot else ["histograms.png"]), *(["live_rounds.npz"] if live else []),
                  *(_wave_names(sc, consumers) if args.trace else [])])  # before the run: refused, nothing written
    with folder:  # an error or Ctrl-C before the commit leaves the folder as it was (and releases its lock)
        for n in consumers:  # a live endpoint that cannot start here: say so before any progress bar
            if n.bridge is not None:
                from hw_bridge.contract import LiveFailure, preflight
                try:
                    preflight(n.bridge.settings())
                except LiveFailure as e:
                    print(f"twin: error: node {n.name!r}: {e}", file=sys.stderr)
                    return 3
        trace = (str(folder.stage_dir() / "waves.vcd"), *args.trace) if args.trace else None
        bar = progress_bar(console, quiet=args.quiet)
        check = progress_bar(console, quiet=args.quiet, transient=True)
        checks: dict = {}

        def first(so_far) -> None:  # every direct engine has run: the event model's check, then the table
            bar.stop()
            _preview(so_far, check, console, args.quiet)
            n = min(args.verify_rounds, rounds)
            checks.update({r.node: check.add_task(f"{r.node}: event-model check", total=n)
                           for r in so_far.runs if r.summary["engine"] == PENDING})
            check.start()  # after the bar's display stopped: its own (a live display started inside another nests)
        from twin.rtl.build import build_status
        streamed = _streamed_rounds(args, stream, folder, consumers)
        with bar, _stopped_after(check), build_status(phase_spinner(bar, console, args.quiet)), streamed:
            tasks = {n.name: bar.add_task(n.device, total=rounds) for n in consumers}
            study = run_study(loaded, rounds=rounds, seed=args.seed, engine=args.engine,
                              verify_rounds=args.verify_rounds, trace=trace,
                              progress=lambda name, done: bar.update(tasks[name], completed=done),
                              stopped=lambda node, e, done: _verdict(node, e, done, out),
                              first=first, checking=lambda name, done: check.update(checks[name], completed=done),
                              stream_rounds=stream, rounds_sink=getattr(streamed, "add", None))
        if study.failures and not study.runs:  # a live endpoint could not start, or a stop before round 1
            f = study.failures[0]
            if isinstance(f, Interrupted):
                print(interrupted_before_any(rounds), file=sys.stderr)
                return EXIT
            if not getattr(f, "keeps_partial", False):
                print(f"twin: error: node {getattr(f, 'node', '?')!r}: {f}", file=sys.stderr)
            return 3
        folder.seed = study.seed
        return _report(args, console, study, folder, consumers, live, bool(checks), rounds_written=stream is not None)


def _streamed_rounds(args, stream: int | None, folder, consumers):
    """The per-round file written as a streamed run goes (:class:`twin.reports.run.StreamedRounds`), or a
    context that does nothing (no streaming, or ``--no-rounds``)."""
    if stream is None or args.no_csv:
        from contextlib import nullcontext
        return nullcontext()
    from twin.reports.run import StreamedRounds
    return StreamedRounds(folder, args.rounds_format, [n.name for n in consumers])


@contextmanager
def _stopped_after(progress):
    """Stop ``progress`` (a rich Progress started later, if at all) when the block ends."""
    try:
        yield progress
    finally:
        progress.stop()


def _preview(so_far, check, console: Console, quiet: bool) -> None:
    """On a terminal, the headline table of the direct engines' rounds above the event model's
    check bar (``check``, transient: both go when the check is done, and the final table, its
    ``checked`` column filled, is printed in their place; never a ``-`` left in the scrollback)."""
    if quiet or not console.is_terminal:
        return
    from twin.reports.run import headline_table
    shown = headline_table(so_far).renderables(console)
    check.get_renderables = lambda: [*shown, check.make_tasks_table(check.tasks)]


def _wave_names(sc, consumers) -> list[str]:
    """The VCD files ``--trace`` may write (``waves.<loop>.<node>.vcd``, :mod:`twin.rtl.loop`)."""
    from twin.scenario.compile import cosimulated, model_of
    card = cosimulated(model_of(next(n for n in sc.nodes if n.kind == "link_card")))
    return [f"waves.{n.name}.{who}.vcd" for n in consumers
            for who, rtl in (("card", card), (n.name, cosimulated(model_of(n)))) if rtl]


def _report(args, console: Console, study, folder, consumers, live: bool, checked: bool = False,
            rounds_written: bool = False) -> int:
    """Print the tables, once every number in them is known (``checked``: the event model checked
    the direct engine's rounds: its outcome in one line under them), write the outputs into
    ``folder`` (``rounds_written``: the per-round file is staged already, written as the run went)
    and commit them; the exit code."""
    from twin.engine.stop import Interrupted
    from twin.reports.run import plot_histograms, print_check, print_table, write_results_json, write_rounds

    out = folder.out
    print_table(study, console)
    if checked:
        print_check(study, console)
    write_results_json(study, folder)
    if live:
        from twin.output.live import print_live, write_live_rounds
        print_live(study, console)
        write_live_rounds(study, folder)
    if not args.no_csv and not rounds_written:  # seconds for a long run: a spinner says what it writes
        with _status(console, args, f"writing rounds.{args.rounds_format}"):
            write_rounds(study, folder, args.rounds_format)
    if not args.no_plot and study.runs:
        with _status(console, args, f"drawing {folder.figure_name('histograms.png')}"):
            plot_histograms(study, folder)
    for f in study.failures:
        folder.mark_partial(f"{f}{'' if f.node is None else f' (node {f.node!r})'}" if isinstance(f, Interrupted)
                            else f"node {getattr(f, 'node', '?')!r}: {f}")
    written = folder.commit()
    for r in study.runs:
        if r.summary["backlog_max"]:
            console.print(f"[yellow]warning: {r.node}: requests waited for a free slot (up to "
                          f"{r.summary['backlog_max']} at once): the consumer fell behind (offered load, "
                          "or a stall)[/yellow]", soft_wrap=True)
    console.print("wrote " + ", ".join(str(p) for p in written) + f" ({out / 'manifest.json'} lists them)")
    rc = 0
    for r in study.runs:  # a stopped run's replies so far are judged too
        injected = r.summary.get("faults", {}).get("injected", {}).get("corrupt_piece", 0)
        if r.summary["engine"] in ("event", "paced") and r.summary["mismatches"] != injected:  # both check each reply
            m = r.summary["mismatches"]
            node = next(n for n in consumers if n.name == r.node)
            why = [f"{injected} corrupted on purpose"] if injected else []
            if node.bridge is not None and node.bridge.fault is not None and node.bridge.fault.kind == "wrong":
                why.append(f"bridge.fault: a wrong answer injected at round {node.bridge.fault.round}")
            console.print(f"[red]{r.node}: {m} {'reply' if m == 1 else 'replies'} did not match the reference answer"
                          + (f" ({'; '.join(why)})" if why else "") + "[/red]")
            rc = 1
        elif r.summary["engine"] not in ("event", "paced") and r.summary["mismatches"]:
            console.print(f"[red]{r.node}: {r.summary['mismatches']} replies did not match the reference answer[/red]")
            rc = 1
    for f in study.failures:  # stopped early: a live endpoint's failure (its line is out already), or a signal
        if getattr(f, "stop_requested", isinstance(f, Interrupted)):
            print(stopped_line(study, f, [n.name for n in consumers], out), file=sys.stderr)
            return EXIT
        rc = 3
    return rc


def stopped_line(study, f, names: list[str], out: Path) -> str:
    """The one line of a run a signal stopped (``f``: the :class:`Interrupted`, or the live endpoint's
    failure that ended the loop while the stop waited for it: its own line is out already), after the
    files are written: the stopped loop's round (and node), and, with several consumers (``names``, in
    run order), the rounds each has in the folder: the loops before it whole, the stopped one cut, the
    ones after it not saved."""
    from twin.engine.stop import Interrupted
    node = getattr(f, "node", None)
    kept = {r.node: r.summary["rounds"] for r in study.runs}
    done = kept.get(node, 0)
    if not isinstance(f, Interrupted):
        head = (f"twin: interrupted while node {node!r} waited for its reply to round {f.round:,} of "
                f"{study.rounds:,} (live {f.backend} {f.kind})")
        saved = f"the {done:,} rounds completed are saved in {out} (partial)"
    elif len(names) == 1:
        return interrupted_line(done, study.rounds, out)
    else:
        head = f"twin: interrupted at round {done:,} of {study.rounds:,} of node {node!r}"
        saved = f"the rounds so far are saved in {out} (partial)"
    if len(names) == 1:
        return f"{head}; {saved}"
    each = ", ".join(f"{n!r} {kept[n]:,} rounds" + ("" if n == node else " (whole)") for n in names if n in kept)
    missing = [repr(n) for n in names if n not in kept]
    return f"{head}; {saved}: {each}" + ("; not saved: " + ", ".join(missing) if missing else "")


def _status(console: Console, args, text: str):
    """A spinner with ``text`` while a step runs (rich's status; none with ``--quiet``)."""
    from contextlib import nullcontext
    return nullcontext() if args.quiet else console.status(text)


def _verdict(node: str, e: Exception, done: int, out: Path) -> None:
    """A live endpoint's failure, on stderr the moment the study catches it (before the summaries and
    files: the run ends within the endpoint's timeout). A stop (Interrupted) says its line after
    the files are written."""
    from twin.engine.stop import Interrupted
    if isinstance(e, Interrupted):
        return
    print(f"twin: error: node {node!r}: {e}; " + (f"{done:,} rounds completed, being saved in {out}" if done
                                                  else "no round completed"), file=sys.stderr, flush=True)
