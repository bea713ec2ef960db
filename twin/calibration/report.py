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
