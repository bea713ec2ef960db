"""A decode study's statistics in sinter's CSV, so ``sinter plot`` (and ``sinter combine``) read them.

One row per placement, written with sinter's own ``sinter.TaskStats.to_csv_line`` under
``sinter.CSV_HEADER`` (columns ``shots, errors, discards, seconds, decoder, strong_id,
json_metadata, custom_counts``):

- shots: the study's shots; errors: shots whose loop correction leaves a logical error (the loop's,
  not the direct decode's; they are equal whenever ``identical_corrections`` is every request);
  discards: 0 (the twin postselects nothing).
- seconds: the decoder's compute time the cost model gave all of the placement's requests (the sum,
  in simulated seconds), not this machine's wall clock, so the file is byte-identical for a seed.
- decoder: ``decode.decoder`` (``function:<spec>`` for a user function).
- json_metadata: the workload (code or circuit file, d, rounds, p, noise, per), the placement
  (calibration, device, kind, mode, model) and the loop's round-trip latency (``rtt_p50_ns``,
  ``rtt_p99_ns``; ``loop_p50_ns``, ``loop_p99_ns`` with ``control: aurora``; ``reaction_p50_ns``,
  ``reaction_p99_ns`` where the results give a reaction time), so
  ``--x_func m.p --group_func m.device`` or ``--y_func m.rtt_p99_ns`` work.
- strong_id: sha256 of the circuit's text, the decoder and json_metadata (sinter's role for it:
  rows with the same id are the same task and ``sinter combine`` adds them).
- custom_counts: ``identical_corrections``, ``card_mismatches``, ``deadline_misses`` (when a
  deadline is set), ``requests``.
"""
from __future__ import annotations

import collections
import hashlib
import json
from pathlib import Path


def task_stats(study) -> list:
    """The study's rows as ``sinter.TaskStats``, one per placement (module docstring)."""
    import sinter
    doc = study.document
    w, dec = doc["workload"], doc["decoder"]
    decoder = f"function:{dec['function']}" if dec["kind"] == "function" else dec["kind"]
    rows = []
    for s, run in zip(doc["placements"], study.runs):
        meta = {"code": w["code"], "circuit": w.get("circuit"), "d": w["distance"], "rounds": w["rounds"],
                "p": w["p"], "noise": w["noise"], "per": "round" if run.workload.per == "round" else "shot",
                "calibration": doc["calibration"], "device": s["device"], "kind": s["kind"], "mode": s["mode"],
                "model": s.get("model", "sim"), "rtt_p50_ns": s["rtt"]["p50_ns"], "rtt_p99_ns": s["rtt"]["p99_ns"]}
        if "loop" in s:
            meta.update(loop_p50_ns=s["loop"]["p50_ns"], loop_p99_ns=s["loop"]["p99_ns"])
        if "reaction" in s:  # the stream report's reaction time (last syndrome round -> correction), when given
            meta.update(reaction_p50_ns=s["reaction"]["p50_ns"], reaction_p99_ns=s["reaction"]["p99_ns"])
        counts = collections.Counter({"identical_corrections": s["identical_corrections"],
                                      "card_mismatches": s["card_mismatches"], "requests": s["requests"]})
        if "deadline_misses" in s:
            counts["deadline_misses"] = s["deadline_misses"]
        ident = hashlib.sha256(json.dumps({"circuit": str(run.workload.circuit), "decoder": decoder,
                                           "json_metadata": meta}, sort_keys=True).encode()).hexdigest()
        rows.append(sinter.TaskStats(strong_id=ident, decoder=decoder, json_metadata=meta, shots=s["shots"],
                                     errors=s["logical_errors"]["loop"], discards=0,
                                     seconds=float(run.compute_ps.sum()) / 1e12, custom_counts=counts))
    return rows


def write_stats_csv(study, path: Path) -> Path:
    """Write :func:`task_stats` to ``path`` under ``sinter.CSV_HEADER``; returns ``path``."""
    import sinter
    path.write_text(sinter.CSV_HEADER + "\n" + "".join(t.to_csv_line() + "\n" for t in task_stats(study)))
    return path
