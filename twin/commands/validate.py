"""``twin validate CAL RUN [RUN ...]``: a calibration's predictions against live runs it was not
fitted on (:mod:`twin.fitting.validate`): a table (p50/p90/p99 error, W1 as % of p50, KS,
modes), ``validate.json`` and an overlaid histogram figure ``validate.png`` in ``--out``.
``twin validate --leave-one-out CAL``: each of the fit's targets predicted by a refit without it
(:mod:`twin.fitting.loo`): a table and ``leave_one_out.json`` in ``--out``."""
from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from twin.commands.common import UsageError, _count, _file_name, _seed, add_figure_format, add_overwrite, run_folder


def register(sub) -> None:
    """Add ``validate`` to the ``twin`` subcommands."""
    v = sub.add_parser("validate", help="a calibration's predictions against live runs it was not fitted on")
    v.add_argument("calibration", type=_file_name,
                   help="parameter set (e.g. one written by `twin calibrate --from-live`)")
    v.add_argument("runs", nargs="*", metavar="RUN", type=_file_name, help="`twin run` output folders with a live node")
    v.add_argument("--leave-one-out", action="store_true",
                   help="instead of runs: refit CAL's prior (CAL, or the prior its fitted.from names) once per fit "
                        "target without it and print each left-out number's prediction error")
    v.add_argument("--maxiter", type=_count, help="with --leave-one-out: differential-evolution generations of every "
                                                  "fit (default: the prior's fit.maxiter)")
    v.add_argument("--popsize", type=_count, help="with --leave-one-out: population multiplier (default: fit.popsize)")
    v.add_argument("--consumer", help="the calibration's consumer that stands for the live node "
                                      "(default <node>_fitted)")
    v.add_argument("--scenario", type=_file_name,
                   help="the scenario the runs came from (default: the file each recorded)")
    v.add_argument("--rounds", type=_count, help="predicted rounds per run (default: the run's, at least 20000); "
                                                 "with --leave-one-out: rounds per fit evaluation (default fit.rounds)")
    v.add_argument("--seed", type=_seed, default=7, help="seed of the predictions (default 7)")
    v.add_argument("--out", help="output folder (default runs/validate-<calibration name>)")
    v.add_argument("--no-plot", action="store_true", help="do not write validate.png")
    add_figure_format(v, "validate")
    add_overwrite(v)
    v.set_defaults(handler=cmd_validate)


def cmd_validate(args: argparse.Namespace, console: Console) -> int:
    """Print the validation table; write validate.json and validate.png. Returns 0."""
    from twin.fitting.report import comparison_table
    from twin.fitting.validate import prepare, validate
    from twin.output.progress import progress_bar
    from twin.output.validate import overlay_figure, validation_document

    cal = Path(args.calibration)
    if args.leave_one_out:
        return cmd_leave_one_out(args, console, cal)
    if args.maxiter or args.popsize:
        raise UsageError("validate: --maxiter/--popsize only with --leave-one-out (they set its fits)")
    if not args.runs:
        raise UsageError("validate: name at least one RUN folder, or pass --leave-one-out")
    for r in args.runs:
        if not Path(r).is_dir():
            raise UsageError(f"validate: {r}: not a run folder")
    from twin.fitting.live_runs import overlap
    got = overlap(args.runs)
    if got:
        raise UsageError(f"validate: RUN {got[0]}: {got[1]} {got[2]}, also named: each run once")
    folder = run_folder(args, args.out or Path("runs") / f"validate-{cal.stem}", args.seed)
    folder.check(["validate.json"] + ([] if args.no_plot else ["validate.png"]))
    prepared = prepare(cal, args.runs, args.consumer, args.scenario)  # what is refused, before the progress bar
    with progress_bar(console, transient=True) as bar:
        task = bar.add_task("predicting the runs", total=len(args.runs))
        checks = validate(cal, args.runs, args.consumer, args.scenario, args.seed, args.rounds,
                          progress=lambda i, n: bar.update(task, completed=i), prepared=prepared)
    fitted_on = _fitted_on(cal)
    comparison_table([(v.run.label, v.comparison, "fitted on" if overlap([v.run.path], fitted_on)
                       else "held out") for v in checks],
                     f"{cal}: predicted vs live (stalled rounds left out), card-boundary round trip").print(console)
    for v in checks:
        if v.run.passes:
            console.print(v.run.pass_note())
        if v.run.stalls.count:
            console.print(f"[yellow]warning: {v.run.path}: {v.run.stalls.count:,} stalled round(s) and "
                          f"{v.run.stalls.queued:,} queued behind them left out "
                          f"(service > {v.run.stalls.threshold_ns / 1000:.3f} µs)[/yellow]", soft_wrap=True)
    with folder:
        folder.write_json("validate.json", validation_document(str(cal), checks))
        if not args.no_plot:
            folder.savefig("validate.png", overlay_figure(checks, cal.name))
        folder.commit()
    console.print(f"wrote {folder.out / 'validate.json'}"
                  + ("" if args.no_plot else f", {folder.out / folder.figure_name('validate.png')}"))
    return 0


def _fitted_on(cal: Path) -> set[Path]:
    """The run folders calibration ``cal`` was fitted on (:func:`twin.calibration.targets.fitted_runs`
    of its ``fitted`` record); empty when it names none or does not load. A run is "fitted on" when it
    is, holds or lies inside one of them (a pass of a fitted point)."""
    from twin.calibration.targets import fitted_runs
    from twin.config import ConfigError, load_yaml
    try:
        doc = load_yaml(cal)
    except ConfigError:  # the validation itself says what is wrong with the file
        return set()
    return fitted_runs(doc.get("fitted") if isinstance(doc, dict) else None)


def cmd_leave_one_out(args: argparse.Namespace, console: Console, cal: Path) -> int:
    """``twin validate --leave-one-out CAL``: the in-sample fit and one refit per target (a progress
    bar per fit group's generations), the table of :func:`twin.fitting.report.leave_one_out_table`,
    ``leave_one_out.json`` in ``--out``. Returns 0."""
    from twin.commands.calibrate import fit_progress
    from twin.fitting.loo import leave_one_out, prior_of
    from twin.fitting.report import leave_one_out_document, leave_one_out_table, loo_summary

    if args.runs:
        raise UsageError(f"validate --leave-one-out: no RUN folders ({args.runs[0]}): it refits CAL's prior")
    prior_of(cal)  # a file that does not load, or that nothing was fitted to, is refused before the fits
    folder = run_folder(args, args.out or Path("runs") / f"validate-loo-{cal.stem}")
    folder.check(["leave_one_out.json"])
    with fit_progress(console) as progress:
        loo = leave_one_out(cal, rounds=args.rounds, maxiter=args.maxiter, popsize=args.popsize,
                            log=console.print, progress=progress)
    leave_one_out_table(loo, f"{loo.prior_path}: leave-one-out, each target predicted by a refit without it "
                             "(µs)").print(console)
    for line in loo_summary(loo):
        console.print(line, soft_wrap=True)
    with folder:
        folder.write_json("leave_one_out.json", leave_one_out_document(loo, str(cal)))
        folder.commit()
    console.print(f"wrote {folder.out / 'leave_one_out.json'}")
    return 0
