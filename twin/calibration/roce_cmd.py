"""``twin calibrate`` for a RoCE parameter set (``kind: roce_path``): fit, write, print residuals."""
from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from twin.calibration.report import residuals_table, write_fitted_yaml
from twin.calibration.roce import calibrate_roce, load_roce_params, roce_fitted_document
from twin.config import ConfigError


def cmd_calibrate_roce(args: argparse.Namespace, console: Console, prior_path: Path) -> int:
    """Fit the RoCE prior at ``prior_path``; write ``--out`` (default ``fitted/<name>`` beside it).
    Returns 0; raises :class:`ConfigError` for a prior without a fit section."""
    prior = load_roce_params(prior_path)
    if prior.fit is None:
        raise ConfigError(prior_path, "fit", None, "a prior needs a fit section to calibrate")
    out = Path(args.out) if args.out else prior_path.parent / "fitted" / prior_path.name
    out.parent.mkdir(parents=True, exist_ok=True)
    result = calibrate_roce(prior, prior_path, log=console.print, rounds=args.rounds, maxiter=args.maxiter,
                            popsize=args.popsize)
    doc = roce_fitted_document(result, prior_path, prior.fit.measured)
    write_fitted_yaml(out, prior_path, doc)
    console.print(residuals_table(result.residuals, f"residuals ({prior_path.parent / prior.fit.measured})"))
    for k, v in result.values.items():
        console.print(f"  {k} = {v}")
    console.print(f"{result.evaluations} model evaluations; wrote {out}")
    return 0
