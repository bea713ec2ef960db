"""``twin calibrate [PRIOR]``: fit a prior parameter set (card path, or RoCE: ``kind: roce_path``) to
its measurements, write the fitted set, print the residuals; ``--from-live RUN`` fits a consumer
model to a live run; ``twin calibrate decoder SCENARIO.yaml`` times a decode scenario's decoder per
call and fits its cost (:mod:`twin.commands.calibrate_decoder`)."""
from __future__ import annotations

import argparse
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from twin.bundled import is_bundled
from twin.commands.common import DEFAULT_FITTED, DEFAULT_PRIOR, UsageError, _bundled, _count, add_overwrite, out_error
from twin.output.files import check_file

if TYPE_CHECKING:
    from rich.console import Console

OURS = ("Written by `twin calibrate",)  # the first line of a fitted set the twin wrote: it may be refitted


def register(sub) -> None:
    """Add ``calibrate`` to the ``twin`` subcommands."""
    c = sub.add_parser("calibrate", help="fit a prior parameter set to its measurements; `calibrate decoder "
                                         "SCENARIO.yaml`: time a decoder per call and fit its cost")
    c.add_argument("prior", nargs="*", metavar="prior",
                   help=f"prior parameter set (default {DEFAULT_PRIOR}); with --from-live, "
                        "the scenario the run came from (default: the file the run recorded, "
                        "else scenarios/<its name>.yaml); `decoder SCENARIO.yaml`: time that decode "
                        "scenario's decoder (see the options below)")
    c.add_argument("--from-live", metavar="RUN", help="fit a consumer model to the live node of a `twin run` "
                                                      "output folder (results.json + live_rounds.npz)")
    c.add_argument("--node", help="with --from-live: which live node (default: the first)")
    c.add_argument("--out", help=f"fitted set to write (default {DEFAULT_FITTED}; with --from-live "
                                 "calibrations/fitted/<scenario>_<node>_fitted.yaml)")
    c.add_argument("--rounds", type=_count, help="rounds per evaluation (default: the prior's fit.rounds)")
    c.add_argument("--maxiter", type=_count, help="differential-evolution generations (default: fit.maxiter)")
    c.add_argument("--popsize", type=_count, help="population multiplier (default: fit.popsize)")
    add_overwrite(c, "a file at --out that the twin did not write (a fitted set it wrote, headed "
                     "'# Written by `twin calibrate`', is refitted in place)")
    from twin.commands.calibrate_decoder import add_options
    add_options(c)
    c.set_defaults(handler=cmd_calibrate)


def _writable(default: Path) -> Path:
    """A default output beside a bundled file; for a file inside an installed wheel, the same
    name under ./calibrations/fitted/ instead (never write into site-packages)."""
    return Path("calibrations") / "fitted" / default.name if is_bundled(default) else default


def fitted_out(args: argparse.Namespace, prior_path: Path) -> Path:
    """Where a fit writes its fitted set: ``--out`` or ``fitted/<prior's name>`` beside the prior (in
    the working folder for a bundled prior). Checked before the fit: raises :class:`UsageError` for a
    folder, a file the twin did not write (without ``--overwrite``) or a place that cannot be created."""
    out = Path(args.out) if args.out else _writable(prior_path.parent / "fitted" / prior_path.name)
    check_file(out, args.overwrite, "--out", OURS)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)  # fail now, not after the fit
    except OSError as e:
        raise out_error("--out", out, e) from None
    return out


def cmd_calibrate(args: argparse.Namespace, console: Console) -> int:
    """``twin calibrate``: fit a prior parameter set, write the fitted set, print the residuals."""
    # scipy first: its initialisation swallows a Ctrl-C (twin.calibration.fit imports it only when it fits,
    # so that `twin run` never does)
    import scipy.optimize  # noqa: F401

    from twin.calibration.fit import calibrate, fitted_document
    from twin.calibration.params import load_params
    from twin.calibration.report import residuals_table, write_fitted_yaml
    from twin.commands.calibrate_decoder import cmd_calibrate_decoder, refuse_decoder_options

    positional = args.prior or []
    if positional and positional[0] == "decoder":
        return cmd_calibrate_decoder(args, console, positional[1:])
    refuse_decoder_options(args)
    if len(positional) > 1:
        raise UsageError(f"calibrate: one prior parameter set, got {len(positional)} ({' '.join(positional)})")
    args.prior = positional[0] if positional else None
    if args.from_live:
        return cmd_calibrate_live(args, console)
    prior_path = Path(args.prior) if args.prior else _bundled(DEFAULT_PRIOR)
    from twin.calibration.roce import is_roce_file
    if is_roce_file(prior_path):
        return cmd_calibrate_roce(args, console, prior_path)
    prior = load_params(prior_path)
    if prior.fit is None:
        from twin.config import ConfigError
        raise ConfigError(prior_path, "fit", None, "a prior needs a fit section to calibrate")
    out = fitted_out(args, prior_path)
    with fit_progress(console) as progress:
        result = calibrate(prior, prior_path, log=console.print, rounds=args.rounds, maxiter=args.maxiter,
                           popsize=args.popsize, progress=progress)
    measured_rel = str((prior_path.parent / prior.fit.measured))
    doc = fitted_document(result, prior_path, prior.fit.measured)
    write_fitted_yaml(out, prior_path, doc)
    console.print(residuals_table(result.residuals, f"residuals ({measured_rel})"))
    console.print(f"{result.n_measured} measured numbers, {result.n_free} free parameters, "
                  f"{result.n_tied} tied; fixed from measurements: card 10/40/30 ns, V80 28 ns, "
                  f"Aurora link stage from 0.44 µs; {result.evaluations} model evaluations")
    for k, v in result.values.items():
        console.print(f"  {k} = {v}")
    console.print(f"wrote {out}")
    return 0


def cmd_calibrate_live(args: argparse.Namespace, console: Console) -> int:
    """``twin calibrate --from-live RUN``: fit a consumer model to a live run (twin.calibration.live),
    write the fitted set, print measured vs predicted p50/p90/p99 and the Wasserstein-1 distance."""
    from rich.table import Table

    from twin.calibration.live import calibrate_from_live, write_fitted

    run = Path(args.from_live)
    if not run.is_dir():
        raise UsageError(f"--from-live {run}: not a run folder")
    fit = calibrate_from_live(run, scenario=args.prior, node=args.node, rounds=args.rounds or 20_000,
                              maxiter=args.maxiter or 30, popsize=args.popsize or 8, log=console.print)
    out = Path(args.out) if args.out else _writable(_bundled("calibrations") / "fitted" / f"{fit.params.name}.yaml")
    check_file(out, args.overwrite, "--out", OURS)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise out_error("--out", out, e) from None
    write_fitted(fit, out, run)
    tb = Table(title=f"{fit.consumer}: live (measured) vs fitted model (predicted), card-boundary round trip")
    for col in ("stat", "measured", "predicted", "error"):
        tb.add_column(col, justify="left" if col == "stat" else "right")
    for stat, m, p in fit.rows:
        tb.add_row(stat, f"{m / 1000:.3f} µs", f"{p / 1000:.3f} µs", f"{100 * (p - m) / m:+.2f} %")
    tb.add_row("W1", "", f"{fit.w1_ns:.1f} ns", "")
    tb.add_row("KS", "", f"{fit.ks:.3f}", "")
    console.print(tb)
    for k, v in fit.values.items():
        console.print(f"  {k} = {v:.3f}")
    console.print(f"{fit.evaluations} model evaluations; wrote {out} (consumer {fit.consumer})")
    return 0


def cmd_calibrate_roce(args: argparse.Namespace, console: Console, prior_path: Path) -> int:
    """Fit the RoCE prior at ``prior_path``; write ``--out`` (default ``fitted/<name>`` beside it).
    Returns 0; raises :class:`ConfigError` for a prior without a fit section."""
    from twin.calibration.report import residuals_table, write_fitted_yaml
    from twin.calibration.roce import calibrate_roce, load_roce_params, roce_fitted_document

    prior = load_roce_params(prior_path)
    if prior.fit is None:
        from twin.config import ConfigError
        raise ConfigError(prior_path, "fit", None, "a prior needs a fit section to calibrate")
    out = fitted_out(args, prior_path)
    with fit_progress(console) as progress:
        result = calibrate_roce(prior, prior_path, log=console.print, rounds=args.rounds, maxiter=args.maxiter,
                                popsize=args.popsize, progress=progress)
    doc = roce_fitted_document(result, prior_path, prior.fit.measured)
    write_fitted_yaml(out, prior_path, doc)
    console.print(residuals_table(result.residuals, f"residuals ({prior_path.parent / prior.fit.measured})"))
    for k, v in result.values.items():
        console.print(f"  {k} = {v}")
    console.print(f"{result.evaluations} model evaluations; wrote {out}")
    return 0


@contextmanager
def fit_progress(console: Console):
    """A progress bar per fit group (its differential-evolution generations; a fit takes minutes):
    yields the ``progress(label, done, maxiter)`` callback of :func:`twin.calibration.fit.fit_groups`."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    tasks: dict = {}
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console) as bar:
        def progress(label: str, done: int, total: int) -> None:
            if label not in tasks:
                tasks[label] = bar.add_task(f"fitting {label}: generations", total=total)
            bar.update(tasks[label], completed=done)
        yield progress
