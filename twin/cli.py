"""The ``twin`` command: ``twin run [SCENARIO]``, ``twin calibrate [PRIOR]``, ``twin gen``."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from rich.console import Console

from twin import __version__
from twin.config import ConfigError
from twin.engine.direct import DirectNotApplicable
from twin.rtl.build import RtlError


class UsageError(Exception):
    """A command-line value that cannot be used (one line, exit 2)."""

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SCENARIO = "scenarios/card_path_64b.yaml"
DEFAULT_PRIOR = "calibrations/card_path.yaml"
DEFAULT_FITTED = "calibrations/fitted/card_path.yaml"


def _bundled(rel: str) -> Path:
    """A bundled file: from the current folder if it has one, else from the source tree."""
    here = Path(rel)
    return here if here.exists() else ROOT / rel


def check_out_folder(value: str | Path, option: str = "--out", shown: str | Path | None = None) -> Path:
    """Check, before any work, that ``value`` is or can become an output folder; create nothing.

    Walks up to the nearest existing ancestor: it must be a folder we may write in (or ``value``
    itself an existing folder). Returns ``Path(value)``. Raises :class:`UsageError` naming the
    option and the value (``shown`` if given: the value the user typed), one line, e.g.
    ``--out /etc/passwd/x: /etc/passwd is not a folder``."""
    out = Path(value)
    it = "" if shown is None else f"{out} "
    value = value if shown is None else shown
    if out.exists():
        if not out.is_dir():
            raise UsageError(f"{option} {value}: {it}exists and is not a folder")
        if not os.access(out, os.W_OK | os.X_OK):
            raise UsageError(f"{option} {value}: {it}is a folder we may not write in")
        return out
    base = out.absolute().parent
    while not base.exists() and base != base.parent:
        base = base.parent
    if not base.is_dir():
        raise UsageError(f"{option} {value}: {base} is not a folder")
    if out.parent.exists() and out.is_symlink():
        raise UsageError(f"{option} {value}: a broken link")
    if not os.access(base, os.W_OK | os.X_OK):
        raise UsageError(f"{option} {value}: cannot create a folder in {base} (permission denied)")
    return out


def out_error(option: str, value: str | Path, e: OSError) -> "UsageError":
    """A filesystem error while writing an output, as one line naming the option and its value."""
    if isinstance(e, FileExistsError) and e.filename and not Path(e.filename).is_dir():
        return UsageError(f"{option} {value}: {e.filename} exists and is not a folder")
    where = f" ({e.filename})" if e.filename and str(e.filename) != str(value) else ""
    return UsageError(f"{option} {value}: {e.strerror or e}{where}")


MAX_ROUNDS = 100_000_000  # the scenario schema's bound too


def _whole(text: str, low: int) -> int:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not (low <= value <= MAX_ROUNDS) or value != int(value):
        raise argparse.ArgumentTypeError(f"must be a whole number from {low} to {MAX_ROUNDS:.0e}: {text!r}")
    return int(value)


def _count(text: str) -> int:
    """A round count >= 1; accepts ``100000``, ``1e5``, ``3e6``."""
    return _whole(text, 1)


def _nonneg(text: str) -> int:
    """A round count that may be 0."""
    return _whole(text, 0)


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0: {text!r}")
    return value


def _window(text: str) -> tuple[int, int]:
    """A round window ``FIRST:LAST`` (1-based, inclusive) or one round ``N``."""
    parts = text.split(":")
    try:
        first, last = (int(parts[0]), int(parts[-1])) if len(parts) in (1, 2) else (0, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a round window FIRST:LAST: {text!r}") from None
    if not 1 <= first <= last:
        raise argparse.ArgumentTypeError(f"needs 1 <= FIRST <= LAST: {text!r}")
    return first, last


def cmd_run(args: argparse.Namespace, console: Console) -> int:
    """``twin run``: run a scenario, print the table, write results.json, rounds.csv, histograms.png.
    Returns 0, or 1 if any reply mismatched; raises ConfigError for bad input."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from twin.report import plot_histograms, print_table, write_results_json, write_rounds_csv
    from twin.scenario import load_scenario
    from twin.study import run_study

    path = Path(args.scenario) if args.scenario else _bundled(DEFAULT_SCENARIO)
    loaded = load_scenario(path)
    sc = loaded.scenario
    if args.trace and "rtl" not in [n.model for n in sc.nodes]:
        raise UsageError(f"--trace: scenario {path} has no node with model rtl")
    if sc.flows:  # a mesh: every flow at once (twin.mesh)
        from twin.mesh.run import cmd_run_mesh
        return cmd_run_mesh(args, console, loaded)
    rounds = args.rounds or sc.rounds
    out = check_out_folder(args.out or Path("runs") / sc.name)  # before the run, not after
    consumers = sc.consumers()
    trace = None
    waves_before: dict[Path, int] = {}
    if args.trace:
        if args.trace[1] > rounds:
            raise UsageError(f"--trace {args.trace[0]}:{args.trace[1]}: outside the run's rounds 1:{rounds} "
                             f"(--rounds or the scenario's rounds)")
        trace = (str(out / "waves.vcd"), *args.trace)
        waves_before = {f: f.stat().st_mtime_ns for f in out.glob("waves.*.vcd")} if out.is_dir() else {}
    for n in consumers:  # a live endpoint that cannot start here: say so before any progress bar
        if n.bridge is not None:
            from hw_bridge.contract import LiveFailure, preflight
            try:
                preflight(n.bridge.settings())
            except LiveFailure as e:
                print(f"twin: error: node {n.name!r}: {e}", file=sys.stderr)
                return 3
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=False, disable=args.quiet) as bar:
        tasks = {n.name: bar.add_task(n.device, total=rounds) for n in consumers}
        study = run_study(loaded, rounds=rounds, seed=args.seed, engine=args.engine,
                          verify_rounds=args.verify_rounds, trace=trace,
                          progress=lambda name, done: bar.update(tasks[name], completed=done))
    if study.failures and not study.runs:  # a live endpoint could not start: nothing to write
        f = study.failures[0]
        print(f"twin: error: node {getattr(f, 'node', '?')!r}: {f}", file=sys.stderr)
        return 3
    try:
        out.mkdir(parents=True, exist_ok=True)  # only once the study has run: a refused run leaves nothing
    except OSError as e:
        raise out_error("--out", out, e) from None
    for flag, name in ((args.no_csv, "rounds.csv"), (args.no_plot, "histograms.png")):
        if flag and (out / name).exists():
            (out / name).unlink()  # an earlier run's file would not match this results.json
    print_table(study, console)
    write_results_json(study, out / "results.json")
    live_npz = None
    if any(n.model == "live" for n in consumers):
        from hw_bridge.report import print_live, write_live_rounds
        print_live(study, console)
        live_npz = write_live_rounds(study, out)
    if not args.no_csv:
        write_rounds_csv(study, out / "rounds.csv")
    if not args.no_plot and study.runs:
        plot_histograms(study, out / "histograms.png")
    for r in study.runs:
        if r.summary["backlog_max"]:
            console.print(f"[yellow]warning: {r.node}: requests waited for a free slot (up to "
                          f"{r.summary['backlog_max']} at once): the consumer fell behind (offered load, or a stall)[/yellow]")
    waves = [f for f in sorted(out.glob("waves.*.vcd")) if trace and waves_before.get(f) != f.stat().st_mtime_ns]
    console.print(f"wrote {out / 'results.json'}" + ("" if args.no_csv else f", {out / 'rounds.csv'}")
                  + ("" if args.no_plot else f", {out / 'histograms.png'}")
                  + (f", {live_npz}" if live_npz else "") + "".join(f", {f}" for f in waves))
    rc = 0
    for f in study.failures:  # a live endpoint died, hung or answered wrongly
        done = next((len(r.result.t_in) for r in study.runs if r.node == getattr(f, "node", None)), 0)
        print(f"twin: error: node {getattr(f, 'node', '?')!r}: {f}; {done:,} rounds completed and saved in {out}",
              file=sys.stderr)
        rc = 3
    for r in study.runs:
        injected = r.summary.get("faults", {}).get("injected", {}).get("corrupt_piece", 0)
        if r.summary["engine"] == "event" and r.summary["mismatches"] != injected:
            m = r.summary["mismatches"]
            node = next(n for n in consumers if n.name == r.node)
            why = [f"{injected} corrupted on purpose"] if injected else []
            if node.bridge is not None and node.bridge.fault is not None and node.bridge.fault.kind == "wrong":
                why.append(f"bridge.fault: a wrong answer injected at round {node.bridge.fault.round}")
            console.print(f"[red]{r.node}: {m} {'reply' if m == 1 else 'replies'} did not match the reference answer"
                          + (f" ({'; '.join(why)})" if why else "") + "[/red]")
            rc = 1
        elif r.summary["engine"] != "event" and r.summary["mismatches"]:
            console.print(f"[red]{r.node}: {r.summary['mismatches']} replies did not match the reference answer[/red]")
            rc = 1
    return 3 if study.failures else rc


def cmd_calibrate(args: argparse.Namespace, console: Console) -> int:
    """``twin calibrate``: fit a prior parameter set, write the fitted set, print the residuals."""
    from twin.calibration.fit import calibrate, fitted_document
    from twin.calibration.params import load_params
    from twin.calibration.report import residuals_table, write_fitted_yaml

    if args.from_live:
        return cmd_calibrate_live(args, console)
    prior_path = Path(args.prior) if args.prior else _bundled(DEFAULT_PRIOR)
    from twin.calibration.roce import is_roce_file
    if is_roce_file(prior_path):
        from twin.calibration.roce_cmd import cmd_calibrate_roce
        return cmd_calibrate_roce(args, console, prior_path)
    prior = load_params(prior_path)
    if prior.fit is None:
        raise ConfigError(prior_path, "fit", None, "a prior needs a fit section to calibrate")
    out = Path(args.out) if args.out else prior_path.parent / "fitted" / prior_path.name
    if out.is_dir():
        raise UsageError(f"--out {out}: is a folder; name the file to write")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)  # fail now, not after the fit
    except OSError as e:
        raise out_error("--out", out, e) from None
    result = calibrate(prior, prior_path, log=console.print, rounds=args.rounds, maxiter=args.maxiter,
                       popsize=args.popsize)
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
    out = Path(args.out) if args.out else _bundled("calibrations") / "fitted" / f"{fit.params.name}.yaml"
    if out.is_dir():
        raise UsageError(f"--out {out}: is a folder; name the file to write")
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


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for ``twin``."""
    p = argparse.ArgumentParser(prog="twin", description="Digital twin of the real-time QEC loop.")
    p.add_argument("--version", action="version", version=f"twin {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run a scenario (default: the bundled card_path_64b)")
    r.add_argument("scenario", nargs="?", help=f"scenario YAML (default {DEFAULT_SCENARIO})")
    r.add_argument("--rounds", type=_count, help="rounds per consumer (default: the scenario's; e.g. 1e5, 3e6)")
    r.add_argument("--seed", type=_seed, help="seed >= 0 (default: the scenario's)")
    r.add_argument("--out", help="output folder (default runs/<scenario name>)")
    r.add_argument("--engine", choices=("auto", "direct", "event"), default="auto",
                   help="auto: direct engine, checked against the byte-level event model over "
                        "--verify-rounds (event model alone when requests queue); direct: direct engine "
                        "only, no byte check, refuses runs where requests queue; event: event model "
                        "for every round")
    r.add_argument("--verify-rounds", type=_nonneg, default=10_000,
                   help="rounds the event model checks in auto mode (default 10000)")
    r.add_argument("--trace", type=_window, metavar="FIRST:LAST",
                   help="write VCD waveforms of the RTL nodes for rounds FIRST..LAST (within the run's rounds) "
                        "(OUT/waves.<loop>.<node>.vcd; needs a node with model rtl)")
    r.add_argument("--no-plot", action="store_true", help="skip histograms.png")
    r.add_argument("--no-csv", action="store_true", help="skip rounds.csv")
    r.add_argument("--quiet", action="store_true", help="no progress bar")
    c = sub.add_parser("calibrate", help="fit a prior parameter set to its measurements")
    c.add_argument("prior", nargs="?", help=f"prior parameter set (default {DEFAULT_PRIOR}); with --from-live, "
                                            "the scenario the run came from (default: the file the run recorded, else scenarios/<its name>.yaml)")
    c.add_argument("--from-live", metavar="RUN", help="fit a consumer model to the live node of a `twin run` "
                                                      "output folder (results.json + live_rounds.npz)")
    c.add_argument("--node", help="with --from-live: which live node (default: the first)")
    c.add_argument("--out", help=f"fitted set to write (default {DEFAULT_FITTED}; with --from-live "
                                 "calibrations/fitted/<scenario>_<node>_fitted.yaml)")
    c.add_argument("--rounds", type=_count, help="rounds per evaluation (default: the prior's fit.rounds)")
    c.add_argument("--maxiter", type=_count, help="differential-evolution generations (default: fit.maxiter)")
    c.add_argument("--popsize", type=_count, help="population multiplier (default: fit.popsize)")
    g = sub.add_parser("gen", help="generate the C header, Python dtypes and Verilog include from "
                                   "twin/exchange/contract.yaml")
    g.add_argument("--check", action="store_true", help="write nothing; exit 1 if a generated file is stale")
    from twin.qec.cli import add_parsers
    add_parsers(sub)  # twin decode, twin hosting
    from twin.topology import register as register_topology
    register_topology(sub)
    from twin.sweep import register as register_sweep
    register_sweep(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code (2 for bad input, with one line on stderr)."""
    args = build_parser().parse_args(argv)
    console = Console() if sys.stdout.isatty() else Console(width=120)
    try:
        if getattr(args, "handler", None):
            return args.handler(args, console)
        if args.command == "run":
            return cmd_run(args, console)
        if args.command == "topology":
            from twin.topology import cmd_topology
            return cmd_topology(args, console)
        if args.command == "sweep":
            from twin.sweep import cmd_sweep
            return cmd_sweep(args, console)
        if args.command == "gen":
            from twin.exchange.gen import main as gen_main
            return gen_main(["--check"] if args.check else [])
        return cmd_calibrate(args, console)
    except RtlError as e:
        print(f"twin: error: model rtl: {e}", file=sys.stderr)
        return 2
    except (ConfigError, UsageError) as e:
        print(f"twin: error: {e}", file=sys.stderr)
        return 2
    except DirectNotApplicable as e:
        print(f"twin: error: --engine direct: {e}; use --engine auto or event", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"twin: error: {e.filename or ''}: {e.strerror or e}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # `python -m twin.cli`: run the module's own copy, so the error
    from twin.cli import main as _main  # classes caught are those the subcommands raise
    sys.exit(_main())
