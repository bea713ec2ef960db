"""``twin decode [SCENARIO]`` and ``twin hosting [--fit]`` (registered by :func:`add_parsers`)."""
from __future__ import annotations

import argparse
from pathlib import Path

DEFAULT_DECODE = "scenarios/decode_rep3.yaml"
DEFAULT_HOSTING = "calibrations/hosting.yaml"
DEFAULT_CARD = "calibrations/fitted/card_path.yaml"


def cmd_decode(args: argparse.Namespace, console) -> int:
    """Run a decode scenario: table, results.json and plots. Returns 0, or 1 when a loop correction
    differs from the direct decode or the card counted a mismatch."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from twin.cli import _bundled, check_out_folder, out_error
    from twin.qec.study import load_decode, print_decode, run_decode_study, write_decode_outputs

    path = Path(args.scenario) if args.scenario else _bundled(DEFAULT_DECODE)
    ld = load_decode(path)
    out = check_out_folder(args.out or Path("runs") / ld.sc.name)  # before the study, not after
    shots = args.shots or ld.sc.decode.shots
    d = ld.sc.decode
    from twin.qec.workload import sample
    total = shots * sample(d.code, d.distance, d.rounds, d.p, 1, per=d.per).requests_per_shot
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, disable=args.quiet) as bar:
        tasks = {}

        def progress(name, done):
            if name not in tasks:
                tasks[name] = bar.add_task(name, total=total)
            bar.update(tasks[name], completed=done)
        doc = run_decode_study(ld, shots=shots, seed=args.seed, progress=progress, engine=args.engine,
                               verify_rounds=args.verify_rounds)
    print_decode(doc, console)
    try:
        paths = write_decode_outputs(doc, out)
    except OSError as e:
        raise out_error("--out", out, e) from None
    console.print("wrote " + ", ".join(str(p) for p in paths))
    rc = 0
    for s in doc["placements"]:
        if s["identical_corrections"] != s["requests"] or s["card_mismatches"]:
            console.print(f"[red]{s['device']} ({s['mode']}): {s['requests'] - s['identical_corrections']} corrections "
                          f"differ from the direct decode, {s['card_mismatches']} card mismatches[/red]")
            rc = 1
    return rc


def cmd_hosting(args: argparse.Namespace, console) -> int:
    """Print seed value vs model for the hosting modes (``--fit``: refit first and write the file)."""
    import yaml
    from rich.table import Table

    from twin.calibration.params import load_params
    from twin.cli import _bundled
    from twin.qec.hosting import hosting_document, load_hosting
    from twin.qec.hosting_fit import CLOSED, CONSUMER, SWEEP, fit, measure, table_rows

    card = Path(args.calibration) if args.calibration else _bundled(DEFAULT_CARD)
    params = load_params(card)
    path = Path(args.file) if args.file else _bundled(DEFAULT_HOSTING)
    if args.fit:
        hp = fit(params, rounds=args.rounds, seed=args.seed, log=console.print)
        meta = {"description": "Hosting-mode costs fitted by `twin hosting --fit` to "
                               "amd-qblox-exchange-runtime.txt (see twin/qec/hosting_fit.py); do not edit by hand.",
                "consumer": CONSUMER, "calibration": str(card), "function": "decode_rep3",
                "rounds": args.rounds, "seed": args.seed,
                "provenance": {"fitted_at_64_bytes": ["general_path", "omp_self", "omp_routed", "worker_handoff",
                                                      "chain_trigger", "rearm_mean"],
                               "held_out": "every 1,792-byte figure",
                               "assumed": {"chain_complete": "one MI210 poll period (a load of the completion signal)",
                                           "chain_trigger_jitter": "exponential, scale = the fitted P2P jitter"}}}
        path.write_text(yaml.safe_dump(hosting_document(hp, meta), sort_keys=False))
        console.print(f"wrote {path}")
    hp, _ = load_hosting(path)
    rows = table_rows(measure(params, hp, rounds=args.rounds, seed=args.seed,
                              traffic=CLOSED if args.closed_loop else SWEEP))
    setting = ("closed loop on the card's clock: GPU round trips move in whole 0.93 us poll periods"
               if args.closed_loop else "requests from an independent clock, one at a time")
    tb = Table(title=f"hosting modes on the {CONSUMER} (amd-qblox-exchange-runtime.txt vs model, {args.rounds} rounds; "
                     f"{setting})")
    for col in ("quantity", "frame", "seed", "model", "error", "within 5 %"):
        tb.add_column(col, justify="left" if col in ("quantity", "frame") else "right")
    ok = True
    for q, sz, seed, model, err, within in rows:
        ok &= within
        if isinstance(seed, str):
            tb.add_row(q, sz, seed, f"{model:.2f}", "inside" if within else f"{err:.2f} outside", "yes" if within else "NO")
        else:
            tb.add_row(q, sz, f"{seed:.3f}", f"{model:.3f}", f"{err:+.2f} %", "yes" if within else "NO")
    console.print(tb)
    return 0 if ok else 1


def add_parsers(sub) -> None:
    """Add ``decode`` and ``hosting`` to the ``twin`` subcommands (each sets ``handler``)."""
    from twin.cli import _count, _nonneg, _seed
    d = sub.add_parser("decode", help=f"run a decoder study (default: {DEFAULT_DECODE})")
    d.add_argument("scenario", nargs="?", help="decode scenario YAML")
    d.add_argument("--shots", type=_count, help="shots (default: the scenario's; e.g. 1e5)")
    d.add_argument("--seed", type=_seed, help="seed >= 0 (default: the scenario's)")
    d.add_argument("--out", help="output folder (default runs/<scenario name>)")
    d.add_argument("--engine", choices=("auto", "event"), default="auto",
                   help="auto: direct engine for inline hosting, checked against the byte-level event model "
                        "over --verify-rounds (event model alone for other modes or when requests queue); "
                        "event: event model for every request, every reply checked by the card")
    d.add_argument("--verify-rounds", type=_nonneg, default=10_000,
                   help="requests the event model checks in auto mode (default 10000)")
    d.add_argument("--quiet", action="store_true", help="no progress bar")
    d.set_defaults(handler=cmd_decode)
    h = sub.add_parser("hosting", help="hosting-mode costs: seed value vs model (--fit to refit)")
    h.add_argument("--fit", action="store_true", help="refit the costs and write the file first")
    h.add_argument("--file", help=f"hosting parameter file (default {DEFAULT_HOSTING})")
    h.add_argument("--calibration", help=f"card-path parameter set (default {DEFAULT_CARD})")
    h.add_argument("--rounds", type=_count, default=20_000, help="rounds per model run (default 20000)")
    h.add_argument("--seed", type=_seed, default=1, help="seed (default 1)")
    h.add_argument("--closed-loop", action="store_true",
                   help="measure the round-trip figures in the closed loop on the card's clock instead (shows "
                        "the poll-grid quantisation; see docs/decisions.md)")
    h.set_defaults(handler=cmd_hosting)
