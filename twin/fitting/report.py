"""What ``twin calibrate`` writes and prints, for either path (both in
:mod:`twin.commands.calibrate`): the fitted set's YAML file and the residuals table."""
from __future__ import annotations

from pathlib import Path
from typing import Container, Iterable

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


def residuals_table(residuals: Iterable[Residual], title: str, targets: Container[tuple[str, str]] = ()) -> Grid:
    """A table (:class:`twin.output.table.Grid`), one row per residual: consumer, stat, its role
    (``fit``: ``(consumer, stat)`` is in ``targets``, the numbers the fit matched; else ``held
    out``), measured and model (µs, 3 decimals), error (%, signed, 2 decimals)."""
    from twin.calibration.targets import FIT, HELD_OUT
    tb = Grid(title, ["consumer", "stat", "role", "measured", "model", "error"], keys=2)
    for r in residuals:
        tb.add_row(r.consumer, r.stat, FIT if (r.consumer, r.stat) in targets else HELD_OUT,
                   Num(r.measured_ns / 1000, ".3f", " µs"), Num(r.model_ns / 1000, ".3f", " µs"),
                   Num(r.error_pct, "+.2f", " %"))
    return tb


def leave_one_out_table(loo, title: str) -> Grid:
    """A table, one row per left-out number of :class:`twin.fitting.loo.LeaveOneOut` ``loo``:
    target consumer, stat, measured (µs), the in-sample fit's value and error (role ``fit``), the
    refit's prediction without the target and its error (role ``held out``), and why a prediction
    rests on the prior (a parameter no other target constrains)."""
    tb = Grid(title, ["target", "stat", "measured", "fit (in sample)", "err", "held out (predicted)", "err", "why"],
              keys=2)
    for r in loo.rows:
        tb.add_row(r.consumer, r.stat, Num(r.measured_ns / 1000, ".3f"), Num(r.in_sample_ns / 1000, ".3f"),
                   Num(r.in_sample_pct, "+.2f", " %"), Num(r.predicted_ns / 1000, ".3f"),
                   Num(r.error_pct, "+.2f", " %"), r.reason or "-")
    return tb


def loo_summary(loo) -> list[str]:
    """Lines under the leave-one-out table: what a held parameter is, then per statistic the largest
    |error| of the predictions, over all targets and over those the other targets determine (no
    reason in the row)."""
    out = [f"{loo.refits} refit(s), one per target, {len(loo.free)} free parameter(s); a parameter no other target "
           "constrains keeps the prior's value in that refit (its provenance says what it rests on)"]
    for stat in dict.fromkeys(r.stat for r in loo.rows):
        rows = [r for r in loo.rows if r.stat == stat]
        worst = max(rows, key=lambda r: abs(r.error_pct))
        line = f"{stat}: largest held-out error {worst.error_pct:+.2f} % ({worst.consumer})"
        clean = [r for r in rows if not r.reason]
        if len(clean) < len(rows):
            line += (f"; {max(abs(r.error_pct) for r in clean):.2f} % over the {len(clean)} target(s) the others "
                     "determine" if clean else "; no target is determined by the others alone")
        out.append(line)
    return out


def leave_one_out_document(loo, cal: str) -> dict:
    """leave_one_out.json: the calibration, its prior, the free parameters and the targets each
    constrains, one row per left-out number (ns, %)."""
    return {"calibration": cal, "prior": str(loo.prior_path), "refits": loo.refits, "free_parameters": loo.free,
            "constrains": loo.constrains,
            "rows": [{"consumer": r.consumer, "stat": r.stat, "measured_ns": r.measured_ns,
                      "in_sample_ns": r.in_sample_ns, "in_sample_error_pct": round(r.in_sample_pct, 3),
                      "predicted_ns": r.predicted_ns, "error_pct": round(r.error_pct, 3), "held_at_prior": r.held,
                      "underdetermined": None if r.short is None else
                      {"targets": r.short[0], "numbers": r.short[1], "free_parameters": r.short[2]},
                      "reason": r.reason} for r in loo.rows]}


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
