"""What ``twin calibrate`` writes and prints, for either path (both in
:mod:`twin.commands.calibrate`): the fitted set's YAML file and the residuals table."""
from __future__ import annotations

from pathlib import Path
from typing import Iterable

import yaml

from twin.fitting.fit import Residual
from twin.output.files import write_file
from twin.output.table import Grid, Num, fmt


def write_fitted_yaml(out: Path, prior_path: Path, doc: dict) -> None:
    """Write the fitted document ``doc`` to ``out`` as YAML (keys in order), headed by a comment
    naming ``prior_path``'s file and saying not to edit it by hand (whole or not at all:
    :func:`twin.output.files.write_file`; raises its OutputError)."""
    write_file(out, "# Written by `twin calibrate` from " + prior_path.name + "; do not edit by hand.\n"
               + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True))


def residuals_table(residuals: Iterable[Residual], title: str) -> Grid:
    """A table (:class:`twin.output.table.Grid`), one row per residual: consumer, stat, measured and
    model (µs, 3 decimals), error (%, signed, 2 decimals)."""
    tb = Grid(title, ["consumer", "stat", "measured", "model", "error"], keys=2)
    for r in residuals:
        tb.add_row(r.consumer, r.stat, Num(r.measured_ns / 1000, ".3f", " µs"), Num(r.model_ns / 1000, ".3f", " µs"),
                   Num(r.error_pct, "+.2f", " %"))
    return tb


def comparison_table(checks, title: str) -> Grid:
    """A table (:class:`twin.output.table.Grid`), one row per (label,
    :class:`twin.calibration.distribution.Comparison`, role): measured and predicted p50/p99 (µs)
    with errors (%), the p90 error, W1 (ns and % of p50), KS, modes."""
    tb = Grid(title, ["run", "role", "p50 meas → pred", "err", "p90 err", "p99 meas → pred", "err", "W1", "W1/p50",
                      "KS", "modes m/p"], keys=2)
    for label, c, role in checks:
        (_, m50, p50), _, (_, m99, p99) = c.rows
        tb.add_row(label, role, f"{fmt(m50 / 1000, '.3f')} → {fmt(p50 / 1000, '.3f')} µs",
                   Num(c.error_pct("p50"), "+.2f", " %"), Num(c.error_pct("p90"), "+.2f", " %"),
                   f"{fmt(m99 / 1000, '.3f')} → {fmt(p99 / 1000, '.3f')} µs", Num(c.error_pct("p99"), "+.2f", " %"),
                   Num(c.w1_ns, ".1f", " ns"), Num(c.w1_pct, ".2f", " %"), Num(c.ks),
                   f"{c.modes_measured}/{c.modes_predicted}")
    return tb
