"""``twin calibrate [PRIOR]``: fit a prior parameter set (card path, or RoCE: ``kind: roce_path``) to
its measurements, write the fitted set, print the residuals; ``--from-live RUN [RUN ...]`` fits a
consumer model to live runs (``--validate RUN ...``: held-out runs it is checked on). A fit writes a
new file (``calibrations/fitted/NAME-YYYYMMDD-HHMM.yaml``) unless ``--out`` names one; an existing
file is replaced only with ``--overwrite``; ``twin calibrate decoder SCENARIO.yaml`` times a decode
scenario's decoder per call and fits its cost (:mod:`twin.commands.calibrate_decoder`)."""
from __future__ import annotations

import argparse
import json
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from twin.bundled import is_bundled
from twin.commands.common import (
    DEFAULT_PRIOR,
    UsageError,
    _bundled,
    _count,
    _file_name,
    add_allow_code,
    add_overwrite,
    out_error,
    stamped,
)
from twin.output.files import check_file

if TYPE_CHECKING:
    from rich.console import Console


def register(sub) -> None:
    """Add ``calibrate`` to the ``twin`` subcommands."""
    c = sub.add_parser("calibrate", help="fit a prior parameter set to its measurements; `calibrate decoder "
                                         "SCENARIO.yaml`: time a decoder per call and fit its cost")
    c.add_argument("prior", nargs="*", metavar="prior", type=_file_name,
                   help=f"prior parameter set (default {DEFAULT_PRIOR}); with --from-live, "
                        "the scenario the run came from (default: the file the run recorded, "
                        "else scenarios/<its name>.yaml); `decoder SCENARIO.yaml`: time that decode "
                        "scenario's decoder (see the options below)")
    c.add_argument("--from-live", metavar="RUN", nargs="+", type=_file_name,
                   help="fit a consumer model to the live node of `twin run` output folders (results.json + "
                        "live_rounds.npz): shape and service on the first, the service's frame-byte, reply-byte, "
                        "function and idle-gap terms across all (a scenario file among them is SCENARIO)")
    c.add_argument("--validate", metavar="RUN", nargs="+", default=[], type=_file_name,
                   help="with --from-live: held-out live runs the fitted set is checked on (p50/p90/p99 error, "
                        "W1, KS), recorded in the file's fitted.validated_on")
    c.add_argument("--node", help="with --from-live: which live node (default: the first)")
    c.add_argument("--idle-priors", metavar="SPEC", type=_file_name,
                   help="fit the idle priors per device class from the live folders SPEC names "
                        "(calibrations/priors/idle_fit.yaml) and write them (default: idle.yaml beside SPEC)")
    c.add_argument("--idle-prior", metavar="PRIORS", type=_file_name,
                   help="with --from-live (back-to-back runs only): the stand-in's idle cost is its class's prior "
                        "from PRIORS (calibrations/priors/idle.yaml), re-based at the idle gap the runs had, instead "
                        "of a table fitted to longer-gap runs")
    c.add_argument("--shape", choices=("service", "poll"), default="service",
                   help="with --from-live: the stand-in's distribution: service (default; the first run's measured "
                        "service as a quantile table behind a consumer that notices at once, as the live node did) "
                        "or poll (poll period, service and path jitter fitted by differential evolution on W1)")
    c.add_argument("--out", help="fitted set to write (default: a new file, calibrations/fitted/<prior's name>"
                                 "-YYYYMMDD-HHMM.yaml, UTC; with --from-live calibrations/fitted/"
                                 "<scenario>_<node>_fitted-YYYYMMDD-HHMM.yaml); never the committed set unless named")
    c.add_argument("--rounds", type=_count, help="rounds per evaluation (default: the prior's fit.rounds)")
    c.add_argument("--maxiter", type=_count, help="differential-evolution generations (default: fit.maxiter)")
    c.add_argument("--popsize", type=_count, help="population multiplier (default: fit.popsize)")
    add_overwrite(c, "an existing file at --out (a fit never replaces a calibration file unless told to)")
    from twin.commands.calibrate_decoder import add_options
    add_options(c)
    add_allow_code(c)
    c.set_defaults(handler=cmd_calibrate)


def _writable(default: Path) -> Path:
    """A default output beside a bundled file; for a file inside an installed wheel, the same
    name under ./calibrations/fitted/ instead (never write into site-packages)."""
    return Path("calibrations") / "fitted" / default.name if is_bundled(default) else default


def fitted_out(args: argparse.Namespace, prior_path: Path) -> Path:
    """Where a fit writes its fitted set: ``--out`` or a new ``fitted/<prior's stem>-YYYYMMDD-HHMM.yaml``
    beside the prior (in the working folder for a bundled prior). Checked before the fit: raises
    :class:`UsageError` for a folder, an existing file (without ``--overwrite``) or a place that
    cannot be created."""
    out = Path(args.out) if args.out else stamped(_writable(prior_path.parent / "fitted" / prior_path.name))
    return checked_out(out, args)


def checked_out(out: Path, args: argparse.Namespace) -> Path:
    """``out`` if it may be written (not there, or ``--overwrite``) and its folder can be made."""
    check_file(out, args.overwrite, "--out")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)  # fail now, not after the fit
    except OSError as e:
        raise out_error("--out", out, e) from None
    return out


def cmd_calibrate(args: argparse.Namespace, console: Console) -> int:
    """``twin calibrate``: fit a prior parameter set, write the fitted set, print the residuals."""
    # scipy first: its initialisation swallows a Ctrl-C (twin.fitting.fit imports it only when it fits,
    # so that `twin run` never does)
    import scipy.optimize  # noqa: F401

    from twin.calibration.params import load_params
    from twin.commands.calibrate_decoder import cmd_calibrate_decoder, refuse_decoder_options
    from twin.fitting.fit import calibrate, fitted_document
    from twin.fitting.report import residuals_table, write_fitted_yaml

    positional = args.prior or []
    if positional and positional[0] == "decoder":
        return cmd_calibrate_decoder(args, console, positional[1:])
    refuse_decoder_options(args)
    if args.validate and not args.from_live:
        raise UsageError("--validate RUN: only with --from-live (held-out live runs)")
    if len(positional) > 1:
        raise UsageError(f"calibrate: one prior parameter set, got {len(positional)} ({' '.join(positional)})")
    args.prior = positional[0] if positional else None
    if args.idle_priors:
        return cmd_idle_priors(args, console)
    if args.idle_prior and not args.from_live:
        raise UsageError("--idle-prior PRIORS: only with --from-live (use --idle-priors SPEC to fit them)")
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
    from twin.calibration.targets import prior_targets
    residuals_table(result.residuals, f"residuals ({measured_rel}; role: fit = a number the fit matched)",
                    prior_targets(prior.fit)).print(console)
    console.print(f"{result.n_measured} measured numbers, {result.n_free} free parameters, "
                  f"{result.n_tied} tied; fixed from measurements: card 10/40/30 ns, V80 28 ns, "
                  f"Aurora link stage from 0.44 µs; {result.evaluations} model evaluations")
    for k, v in result.values.items():
        console.print(f"  {k} = {v}")
    console.print(f"wrote {out}")
    return 0


def cmd_calibrate_live(args: argparse.Namespace, console: Console) -> int:
    """``twin calibrate --from-live RUN [RUN ...] [--validate RUN ...]``: fit a consumer model to live
    runs (twin.fitting.live), write the fitted set, print measured vs predicted p50/p90/p99, W1,
    KS and the modes for every run, fitted and held out."""
    from twin.fitting.live import calibrate_from_live, write_fitted
    from twin.fitting.live_runs import load_run

    items = [Path(x) for x in args.from_live]
    for p in items:  # a file of a run folder where its folder is meant
        if p.is_file() and p.name in ("results.json", "live_rounds.npz", "passes.json", "manifest.json"):
            raise UsageError(f"--from-live {p}: a file of a run; name its folder ({p.parent})")
    files = [p for p in items if p.is_file()]  # `--from-live RUN SCENARIO`: the scenario among the runs
    runs = [p for p in items if not p.is_file()]
    if len(files) > 1 or (files and args.prior):
        raise UsageError("calibrate --from-live: one SCENARIO, got " + " ".join(map(str, files + [args.prior or ""])))
    scenario = args.prior or (files[0] if files else None)
    for run in runs + [Path(v) for v in args.validate]:
        if not run.is_dir():
            raise UsageError(f"--from-live/--validate {run}: not a run folder")
    if not runs:
        raise UsageError("--from-live: name at least one run folder")
    from twin.fitting.live_runs import overlap
    held = [Path(v) for v in args.validate]
    for opt, got in (("--from-live", overlap(runs)), ("--validate", overlap(held))):
        if got:
            raise UsageError(f"{opt} {got[0]}: {got[1]} {got[2]}, also named: each run once (its rounds would count "
                             "twice)")
    got = overlap(held, runs)
    if got:
        raise UsageError(f"--validate {got[0]}: also a fit run ({got[1]} --from-live {got[2]}); a held-out run must "
                         "not be fitted on")
    first = load_run(runs[0], scenario, args.node)  # a missing scenario is said now, before the fit
    for run in runs[1:]:  # one fit is one device: the same live backend standing for the same consumer
        other = load_run(run, scenario, args.node)
        a, b = (f"a {x.summary.get('live', {}).get('backend', '?')} run of {x.summary.get('name', '?')}"
                for x in (first, other))
        if a != b:
            raise UsageError(f"--from-live {run}: {b}, but {runs[0]} is {a}; one fit is of one device")
    for run in held:  # a held-out run that does not load is said now too, not after the fit
        load_run(run, scenario, args.node)
    from twin.fitting.live import _default_name
    out = Path(args.out) if args.out else stamped(_writable(_bundled("calibrations") / "fitted"
                                                            / f"{_default_name(first)}.yaml"))
    checked_out(out, args)
    with fit_progress(console) as progress:
        fit = calibrate_from_live(runs, scenario=scenario, node=args.node, rounds=args.rounds or 20_000,
                                  maxiter=args.maxiter or 30, popsize=args.popsize or 8, log=console.print,
                                  validate=args.validate, progress=progress, shape=args.shape,
                                  idle_prior=args.idle_prior)
    write_fitted(fit, out, runs, "twin calibrate --from-live " + " ".join(map(str, runs))
                 + (" --validate " + " ".join(args.validate) if args.validate else "")
                 + (f" --idle-prior {args.idle_prior}" if args.idle_prior else ""))
    from twin.fitting.report import comparison_table
    comparison_table([(r.label, c, role) for r, c, role in fit.checks],
                     f"{fit.consumer}: live (measured, stalled rounds left out) vs fitted model "
                     "(predicted), card-boundary round trip").print(console)
    for k, v in fit.values.items():
        console.print(f"  {k} = {v:.5g}")
    for n in fit.notes:
        console.print(f"  note: {n}")
    console.print(f"{fit.evaluations} model evaluations; wrote {out} (consumer {fit.consumer})")
    return 0


def cmd_idle_priors(args: argparse.Namespace, console: Console) -> int:
    """``twin calibrate --idle-priors SPEC``: fit the idle prior of each device class SPEC names
    (:func:`twin.fitting.idle_priors.fit_priors`), write them and print each class's points,
    fixed gaps as ``fit`` and random gaps as ``held out``."""
    import yaml

    from twin.fitting.idle_priors import fit_priors
    from twin.output.files import write_file
    spec = Path(args.idle_priors)
    if args.prior or args.validate:
        raise UsageError("--idle-priors SPEC: no PRIOR and no --validate (the spec names its sources)")
    out = checked_out(Path(args.out) if args.out else spec.parent / "idle.yaml", args)
    cmd = f"twin calibrate --idle-priors {spec}" + (f" --out {args.out}" if args.out else "")
    priors = fit_priors(spec, cmd)
    doc = json.loads(json.dumps(priors.model_dump(), default=float))
    write_file(out, "# Written by `twin calibrate --idle-priors`; do not edit by hand.\n"
               + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=110))
    for kind, c in priors.classes.items():
        console.print(f"{kind}: idle cost table (gap ns, cost ns) {c.table}; widen (gap ns, p10..p90 factor) "
                      f"{c.widen}", soft_wrap=True)
        for role, rows in (("fit", c.points), ("held out", c.held_out)):
            for r in rows:
                spread = "" if r["spread_ns"] is None else f", spread across sources {r['spread_ns']:.1f} ns"
                console.print(f"  {role:8s} {r['point']:13s} gap {r['gap_ns'] / 1e3:10.3f} µs  cost "
                              f"{r['cost_ns']:+8.1f} ns  widen x{r['widen']:.2f} ({len(r['per_source'])} source(s)"
                              f"{spread})")
        for n in c.notes:
            console.print(f"  note: {n}", soft_wrap=True)
    console.print(f"wrote {out}")
    return 0


def cmd_calibrate_roce(args: argparse.Namespace, console: Console, prior_path: Path) -> int:
    """Fit the RoCE prior at ``prior_path``; write ``--out`` (default ``fitted/<name>`` beside it).
    Returns 0; raises :class:`ConfigError` for a prior without a fit section."""
    from twin.calibration.roce import load_roce_params
    from twin.fitting.report import residuals_table, write_fitted_yaml
    from twin.fitting.roce import calibrate_roce, roce_fitted_document

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
    from twin.fitting.roce import roce_targets
    residuals_table(result.residuals, f"residuals ({prior_path.parent / prior.fit.measured}; role: fit = a number the "
                    "fit matched)", roce_targets(prior, prior_path)).print(console)
    from twin.calibration.roce import load_roce_measured, max_note
    for c, row in load_roce_measured(prior_path.parent / prior.fit.measured).consumers.items():
        if row.max_samples:
            console.print(f"{c}: " + max_note(row.max_samples, row.max_samples_source,
                                              args.rounds or prior.fit.rounds), soft_wrap=True)
    for k, v in result.values.items():
        console.print(f"  {k} = {v}")
    console.print(f"{result.evaluations} model evaluations; wrote {out}")
    return 0


@contextmanager
def fit_progress(console: Console):
    """A progress bar per fit group (its differential-evolution generations; a fit takes minutes):
    yields the ``progress(label, done, maxiter)`` callback of :func:`twin.fitting.fit.fit_groups`."""
    from twin.output.progress import progress_bar

    tasks: dict = {}
    with progress_bar(console) as bar:
        def progress(label: str, done: int, total: int) -> None:
            if label not in tasks:
                tasks[label] = bar.add_task(f"fitting {label}: generations", total=total)
            bar.update(tasks[label], completed=done)
        yield progress
