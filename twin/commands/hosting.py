"""``twin hosting [--fit]``: the hosting modes' costs, seed value vs model (``--fit`` refits them)."""
from __future__ import annotations

import argparse
from pathlib import Path

from twin.bundled import is_bundled
from twin.commands.common import (
    DEFAULT_CARD,
    DEFAULT_HOSTING,
    _bundled,
    _count,
    _file_name,
    _seed,
    add_overwrite,
    stamped,
)
from twin.output.files import check_file, write_file


def register(sub) -> None:
    """Add ``hosting`` to the ``twin`` subcommands."""
    h = sub.add_parser("hosting", help="hosting-mode costs: seed value vs model (--fit to refit)")
    h.add_argument("--fit", action="store_true", help="refit the costs and write a new file first (default "
                   "calibrations/hosting-YYYYMMDD-HHMM.yaml, UTC; --file names another; an existing one is replaced "
                   "only with --overwrite)")
    h.add_argument("--file", type=_file_name, help=f"hosting parameter file (default {DEFAULT_HOSTING})")
    h.add_argument("--calibration", type=_file_name, help=f"card-path parameter set (default {DEFAULT_CARD})")
    h.add_argument("--rounds", type=_count, default=20_000, help="rounds per model run (default 20000)")
    h.add_argument("--seed", type=_seed, default=1, help="seed (default 1)")
    h.add_argument("--closed-loop", action="store_true",
                   help="measure the round-trip figures in the closed loop on the card's clock instead (shows "
                        "the poll-grid quantisation; see docs/decisions.md)")
    add_overwrite(h, "with --fit, an existing --file")
    h.set_defaults(handler=cmd_hosting)


def cmd_hosting(args: argparse.Namespace, console) -> int:
    """Print seed value vs model for the hosting modes (``--fit``: refit first and write the file)."""
    import yaml

    from twin.calibration.params import load_params
    from twin.qec.hosting import hosting_document, load_hosting
    from twin.qec.hosting_fit import CLOSED, CONSUMER, SWEEP, fit, measure, table_rows

    card = Path(args.calibration) if args.calibration else _bundled(DEFAULT_CARD)
    params = load_params(card)
    path = Path(args.file) if args.file else _bundled(DEFAULT_HOSTING)
    if args.fit:
        if not args.file:  # a new file; never into an installed wheel: ./calibrations/ instead
            path = stamped(Path("calibrations") / path.name if is_bundled(path) else path)
        check_file(path, args.overwrite, "--file")  # before the fit
        from twin.qec.hosting_fit import estimate_s
        runs, per = estimate_s(params, args.rounds, args.seed)
        console.print(f"fitting 6 hosting costs: at most {runs} model runs of {args.rounds:,} rounds x {per:.2f} s = "
                      f"about {runs * per / 60:.1f} min here; then writing {path}")
        hp = fit(params, rounds=args.rounds, seed=args.seed, log=console.print)
        meta = {"description": "Hosting-mode costs fitted by `twin hosting --fit` to the AMD-Qblox blog "
                               "(docs/sources.md; seed amd-qblox-exchange-runtime.txt; see twin/qec/hosting_fit.py); "
                               "do not edit by hand.",
                "consumer": CONSUMER, "calibration": str(card), "function": "decode_rep3",
                "rounds": args.rounds, "seed": args.seed,
                "provenance": {"fitted_at_64_bytes": ["general_path", "omp_self", "omp_routed", "worker_handoff",
                                                      "chain_trigger", "rearm_mean"],
                               "held_out": "every 1,792-byte figure",
                               "targets": "the seed's 64-byte medians of each hosting mode (inline, external, "
                                          "worker, chain) and its re-arm fraction",
                               "validated_on": "the seed's 1,792-byte figures (twin hosting prints them)",
                               "assumed": {"chain_complete": "one MI210 poll period (a load of the completion signal)",
                                           "chain_trigger_jitter": "exponential, scale = the fitted P2P jitter"}}}
        write_file(path, yaml.safe_dump(hosting_document(hp, meta), sort_keys=False))
        console.print(f"wrote {path}")
    hp, doc = load_hosting(path)
    from twin.output.progress import progress_bar
    with progress_bar(console, quiet=not console.is_terminal, transient=True) as bar:  # about 20 s: 12 runs
        task = bar.add_task(f"model runs ({args.rounds:,} rounds each)", total=None)
        rows = table_rows(measure(params, hp, rounds=args.rounds, seed=args.seed,
                                  traffic=CLOSED if args.closed_loop else SWEEP,
                                  progress=lambda done, total: bar.update(task, completed=done, total=total)))
    setting = ("closed loop on the card's clock: GPU round trips move in whole 0.93 us poll periods"
               if args.closed_loop else "requests from an independent clock, one at a time")
    from twin.output.table import Grid, Num
    tb = Grid(f"hosting modes on the {CONSUMER} (amd-qblox-exchange-runtime.txt vs model, {args.rounds} rounds; "
              f"{setting})", ["quantity", "frame", "seed", "seed is", "model", "error", "within 5 %"], keys=2)
    from twin.calibration.targets import FIT, HELD_OUT
    fitted_64 = bool((doc.get("provenance") or {}).get("fitted_at_64_bytes"))  # the file's record of its targets
    ok = True
    for q, sz, seed, model, err, within in rows:
        ok &= within
        role = FIT if fitted_64 and sz == "64 B" else HELD_OUT
        if isinstance(seed, str):
            tb.add_row(q, sz, seed, role, Num(model, ".2f"), "inside" if within else f"{err:.2f} outside",
                       "yes" if within else "NO")
        else:
            tb.add_row(q, sz, Num(seed), role, Num(model), Num(err, "+.2f", " %"), "yes" if within else "NO")
    tb.print(console)
    return 0 if ok else 1
