"""A decode study's statistics in sinter's CSV, so ``sinter plot`` (and ``sinter combine``) read them.

One row per placement, written with sinter's own ``sinter.TaskStats.to_csv_line`` under
``sinter.CSV_HEADER`` (columns ``shots, errors, discards, seconds, decoder, strong_id,
json_metadata, custom_counts``):

- shots: the study's shots; errors: shots whose loop correction leaves a logical error (the loop's,
  not the direct decode's; they are equal whenever ``identical_corrections`` is every request);
  discards: 0 (the twin postselects nothing).
- seconds: the wall-clock seconds this machine spent decoding the placement's requests in the loop
  (the consumer's batched decode: ``run_decode``'s ``decode_wall_s``), sinter's meaning of the
  column, so ``sinter combine`` adds the seconds of two runs as it adds their shots. It is the one
  column that is not the same bytes for a seed (results.json keeps no wall clock at all).
- decoder: ``decode.decoder`` (``function:<spec>`` for a user function).
- json_metadata: what defines the task, and nothing that depends on its outcome: the workload
  (code or circuit file, d, rounds, p, noise, per; a windowed stream's window: kind, commit, buffer,
  rounds) and the placement (calibration, device, kind,
  mode, model, ``workers``, ``order``, ``dispatch``: 1, in_order and None for a placement without a
  pool; the decoder's
  ``cost`` model: how, base_ns, per_event_ns; ``deadline_ns``, None without one); the same keys
  whatever the control side (on the card or ``control: aurora``). ``--x_func m.p --group_func
  m.device`` work. The latencies are outcomes: they are results.json's (per placement ``rtt``,
  ``loop``, ``reaction``), joined to a row by the placement's ``device`` and ``mode``.
- strong_id: sha256 of the circuit's text, the decoder and json_metadata (sinter's role for it:
  rows with the same id are the same task and ``sinter combine`` adds them): two seeds of one task
  share it, so ``sinter combine`` of their stats.csv gives one row per task with the shots added.
- custom_counts: ``identical_corrections``, ``card_mismatches``, ``deadline_misses`` (when a
  deadline is set), ``requests`` (counts: they add up across runs as sinter adds them).
"""
from __future__ import annotations

import collections
import hashlib
import json


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
                "model": s.get("model", "sim")}
        if w.get("window"):  # the window defines the task: two windowings of one circuit are two tasks
            meta["window"] = {k: w["window"][k] for k in ("kind", "commit", "buffer", "rounds")}
        meta.update(workers=s.get("workers", 1), order=s.get("order", "in_order"), dispatch=s.get("dispatch"))
        meta["cost"] = {k: s["cost"][k] for k in ("how", "base_ns", "per_event_ns") if k in s["cost"]}
        meta["deadline_ns"] = doc.get("deadline_ns")  # what deadline_misses counts against
        counts = collections.Counter({"identical_corrections": s["identical_corrections"],
                                      "card_mismatches": s["card_mismatches"], "requests": s["requests"]})
        if "deadline_misses" in s:
            counts["deadline_misses"] = s["deadline_misses"]
        ident = hashlib.sha256(json.dumps({"circuit": str(run.workload.circuit), "decoder": decoder,
                                           "json_metadata": meta}, sort_keys=True).encode()).hexdigest()
        rows.append(sinter.TaskStats(strong_id=ident, decoder=decoder, json_metadata=meta, shots=s["shots"],
                                     errors=s["logical_errors"]["loop"], discards=0,
                                     seconds=float(run.decode_wall_s), custom_counts=counts))
    return rows


def stats_csv(study) -> str:
    """The text of ``stats.csv``: :func:`task_stats` under ``sinter.CSV_HEADER``."""
    import sinter
    return sinter.CSV_HEADER + "\n" + "".join(t.to_csv_line() + "\n" for t in task_stats(study))
