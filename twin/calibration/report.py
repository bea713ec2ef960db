"""What ``twin calibrate`` writes and prints, for either path (both in
:mod:`twin.commands.calibrate`): the fitted set's YAML file and the residuals table."""
from __future__ import annotations

from pathlib import Path
from typing import Iterable

import yaml
from rich.table import Table

from twin.calibration.fit import Residual
from twin.output.files import write_file


def write_fitted_yaml(out: Path, prior_path: Path, doc: dict) -> None:
    """Write the fitted document ``doc`` to ``out`` as YAML (keys in order), headed by a comment
    naming ``prior_path``'s file and saying not to edit it by hand (whole or not at all:
    :func:`twin.output.files.write_file`; raises its OutputError)."""
    write_file(out, "# Written by `twin calibrate` from " + prior_path.name + "; do not edit by hand.\n"
               + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True))


def residuals_table(residuals: Iterable[Residual], title: str) -> Table:
    """A rich table, one row per residual: consumer, stat, measured and model (µs, 3 decimals),
    error (%, signed, 2 decimals)."""
    tb = Table(title=title)
    for col in ("consumer", "stat", "measured", "model", "error"):
        tb.add_column(col, justify="left" if col in ("consumer", "stat") else "right")
    for r in residuals:
        tb.add_row(r.consumer, r.stat, f"{r.measured_ns / 1000:.3f} µs", f"{r.model_ns / 1000:.3f} µs",
                   f"{r.error_pct:+.2f} %")
    return tb


def comparison_table(checks, title: str) -> Table:
    """A rich table, one row per (label, :class:`twin.calibration.distribution.Comparison`, role):
    measured and predicted p50/p90/p99 (µs) with errors (%), W1 (ns and % of p50), KS, modes."""
    tb = Table(title=title)
    for col in ("run", "role", "p50 meas → pred", "err", "p90 err", "p99 meas → pred", "err", "W1", "W1/p50", "KS",
                "modes m/p"):
        tb.add_column(col, justify="left" if col in ("run", "role") else "right",
                      overflow="fold" if col == "run" else "ellipsis")  # a run's name whole, folded if need be
    for label, c, role in checks:
        (_, m50, p50), _, (_, m99, p99) = c.rows
        tb.add_row(label, role, f"{m50 / 1000:.3f} → {p50 / 1000:.3f} µs", f"{c.error_pct('p50'):+.2f} %",
                   f"{c.error_pct('p90'):+.2f} %", f"{m99 / 1000:.3f} → {p99 / 1000:.3f} µs",
                   f"{c.error_pct('p99'):+.2f} %", f"{c.w1_ns:.1f} ns", f"{c.w1_pct:.2f} %", f"{c.ks:.3f}",
                   f"{c.modes_measured}/{c.modes_predicted}")
    return tb
