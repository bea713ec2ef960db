"""``twin decode [SCENARIO]``: a decoder study through the loop (table, results.json, plots)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from twin.commands.common import (
    DEFAULT_DECODE,
    _count,
    _file_name,
    _nonneg,
    _seed,
    add_allow_code,
    add_figure_format,
    add_overwrite,
    add_table,
    check_out_folder,
    run_folder,
    scenario_arg,
)
from twin.commands.interrupt import EXIT, interrupted_before_any, interrupted_line, interruptible


def register(sub) -> None:
    """Add ``decode`` to the ``twin`` subcommands."""
    d = sub.add_parser("decode", help=f"run a decoder study (default: {DEFAULT_DECODE})")
    d.add_argument("scenario", nargs="?", type=_file_name,
                   help=f"decode scenario YAML, or a bundled one's name (default {DEFAULT_DECODE})")
    d.add_argument("--shots", type=_count, help="shots (default: the scenario's; e.g. 1e5)")
    d.add_argument("--seed", type=_seed, help="seed >= 0 (default: the scenario's)")
    d.add_argument("--out", help="output folder (default runs/<scenario name>)")
    d.add_argument("--engine", choices=("auto", "event"), default="auto",
                   help="auto: direct engine for inline hosting, checked against the byte-level event model "
                        "over --verify-rounds (event model alone for other modes or when requests queue); "
                        "event: event model for every request, every reply checked by the card")
    d.add_argument("--verify-rounds", type=_nonneg, default=10_000,
                   help="requests the event model checks in auto mode (default 10000)")
    d.add_argument("--format", choices=("parquet", "csv"), default="parquet", dest="rounds_format",
                   help="the per-request file: parquet (requests.parquet, default) or csv (requests.csv, the same "
                        "columns and rows as text); stats.csv stays sinter's CSV")
    d.add_argument("--no-plot", action="store_true", help="do not write the figures (latency_vs_round.png, "
                   "backlog_vs_time.png, ler_vs_latency.png; ones that are there are left alone, or removed if an "
                   "earlier run wrote them)")
    d.add_argument("--quiet", action="store_true", help="no progress bar")
    add_table(d)
    add_figure_format(d, "latency_vs_round, backlog_vs_time, ler_vs_latency")
    add_overwrite(d)
    add_allow_code(d)
    d.set_defaults(handler=cmd_decode, stops_at_a_round=True)  # its own signal handlers (interruptible)


def cmd_decode(args: argparse.Namespace, console) -> int:
    """Run a decode scenario: table, results.json and plots. Returns 0, or 1 when a loop correction
    differs from the direct decode or the card counted a mismatch, 3 when a live endpoint died, hung
    or could not start (its whole shots so far written, ``"partial": true``), or 130 when a SIGINT or SIGTERM
    stopped it (:mod:`twin.commands.interrupt`: the placements so far, the last one's whole shots,
    written with ``"partial": true``)."""
    from twin.qec.load import check_shots, load_decode
    from twin.reports.decode import decode_files

    path = scenario_arg(args.scenario, DEFAULT_DECODE)
    ld = load_decode(path)
    total = check_shots(ld, args.shots or ld.sc.decode.shots)  # --shots as the scenario's own, before any folder
    from twin.qec.streaming import slot_bound_warnings
    for line in slot_bound_warnings(ld.path, ld.sc):  # before the study: workers the ring leaves idle
        console.print(f"[yellow]warning: {line}[/yellow]", soft_wrap=True, markup=True, highlight=False)
    out = check_out_folder(args.out or Path("runs") / ld.sc.name)  # before the study, not after
    seed = ld.sc.seed if args.seed is None else args.seed
    with interruptible():  # before the folder's lock: a signal from then on stops the study, as its line says
        folder = run_folder(args, out, seed).check(decode_files(args.rounds_format, not args.no_plot))
        with folder:  # an error or a second Ctrl-C before the commit leaves the folder as it was
            return _decode(args, console, ld, folder, total)


def _decode(args: argparse.Namespace, console, ld, folder, total: int) -> int:
    """Run the study of ``total`` requests per placement, print it, write and commit its files in
    ``folder``; the exit code."""
    from twin.reports.decode import print_decode, write_decode_outputs
    from twin.studies.decode import run_decode_study

    shots = args.shots or ld.sc.decode.shots
    d = ld.sc.decode
    from twin.output.progress import phase_spinner, progress_bar
    from twin.rtl.build import build_status
    with progress_bar(console, quiet=args.quiet) as bar, build_status(phase_spinner(bar, console, args.quiet)):
        tasks = {}

        def progress(name, done):
            if name not in tasks:
                tasks[name] = bar.add_task(name, total=total)
            bar.update(tasks[name], completed=done)
        study = run_decode_study(ld, shots=shots, seed=args.seed, progress=progress, engine=args.engine,
                                 verify_rounds=args.verify_rounds,
                                 failed=lambda label, e, done: _failed(label, e, done, total, folder.out))
    requested = total * len(d.placements)  # requests: each placement's stream
    if study.interrupted and not study.document["placements"]:
        print(interrupted_before_any(requested, "request"), file=sys.stderr)
        return EXIT
    if study.failure is not None and not study.document["placements"]:
        return 3  # its line is out already (no whole shot to keep)
    print_decode(study, console)
    from contextlib import nullcontext
    what = f"requests.{args.rounds_format}" + ("" if args.no_plot else " and the figures")
    with nullcontext() if args.quiet else console.status(f"writing {what}"):
        write_decode_outputs(study, folder, args.rounds_format, not args.no_plot)  # seconds for 1e5+ requests
    if study.interrupted:
        folder.mark_partial("interrupted: the placements so far, the last one's whole shots")
    if study.failure is not None:
        folder.mark_partial(f"placement {study.failure.placement!r}: {study.failure}")
    paths = folder.commit()
    console.print("wrote " + ", ".join(str(p) for p in paths) + f" ({folder.out / 'manifest.json'} lists them)")
    rc = 0
    for s in study.document["placements"]:
        if s["identical_corrections"] != s["requests"] or s["card_mismatches"]:
            console.print(f"[red]{s['device']} ({s['mode']}): {s['requests'] - s['identical_corrections']} corrections "
                          f"differ from the direct decode, {s['card_mismatches']} card mismatches[/red]")
            rc = 1
    if study.interrupted:
        print(_stopped_line(study, d.placements, requested, folder.out), file=sys.stderr)
        return EXIT
    return 3 if study.failure is not None else rc


def _failed(label: str, e: Exception, done: int, total: int, out) -> None:
    """A live endpoint's failure, on stderr the moment the study catches it (before the summaries and
    files: the study ends within the endpoint's timeout): the placement, the request it waited for, what
    happened, and what is saved."""
    print(f"twin: error: placement {label!r}: {e} (request {getattr(e, 'round', done + 1):,} of {total:,}); "
          + (f"{done:,} requests completed, the whole shots among them being saved in {out}" if done
             else "no request completed"), file=sys.stderr, flush=True)


def _stopped_line(study, placements, requested: int, out) -> str:
    """The line of a study a signal stopped (:func:`twin.usage.interrupted_line`, requests of every
    placement); with several placements, the requests each has in the folder (the ones before the
    stopped one whole) and the placements not saved."""
    from twin.studies.decode import placement_label
    kept = study.document["placements"]
    line = interrupted_line(sum(s["requests"] for s in kept), requested, out, "request")
    if len(placements) == 1:
        return line
    labels = [placement_label("+".join(pl.names), pl.mode, pl.workers, pl.order, pl.dispatch_used)
              for pl in placements]
    line += ": " + ", ".join(f"{lab!r} {s['requests']:,} requests" + ("" if s.get("shots_requested") else " (whole)")
                             for lab, s in zip(labels, kept))
    return line + ("; not saved: " + ", ".join(repr(x) for x in labels[len(kept):]) if len(kept) < len(labels) else "")
