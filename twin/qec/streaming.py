"""A decode run read as a stream: per-request record, backlog, throughput and reaction time.

The reaction time is the field's headline latency: from a request's last syndrome round measured
(the control system sends it) to its correction available at the control system. Throughput and
latency are reported apart: a decoder slower than the cycle has a finite throughput (requests it
starts per cycle) and a reaction time that grows without bound; the backlog is the requests
waiting anywhere (sent, not yet started by a decoder: in the card's backlog, on the wire, in the
consumer's queue), not the card's free slots. Its growth per cycle is held against the load
``rho = S / (N T_a)`` (S: a decoder's mean occupancy per request, N decoders, T_a: the mean time
between requests): ``max(0, 1 - 1 / rho) * T / T_a`` requests per QEC cycle ``T``. N is the decoders
that can work at once: ``min(workers, slots)``, the card's ring holding ``slots`` requests per device
(a worker beyond them never has a request to take: :func:`slot_bound_warnings`). A slot is held for
a request's whole way through the consumer (request write, service, reply), longer than S: where the
slots bind, the measured growth can exceed the expected one, which is then a lower bound.
"""
from __future__ import annotations

import numpy as np

from twin.stats import summary_ns


def request_table(run) -> dict[str, np.ndarray]:
    """Every request of a decode run, columns of int64 (ps unless named otherwise), request order:

    device (the device's name, str: a stream shared over devices names each flow,
    :func:`twin.engine.share.flow_names`), device_index (its position in the placement's devices),
    request (1-based), shot, index (request within its shot), arrival_ps (the request's last
    syndrome round measured: the control system sends it), card_in_ps (it enters the link card),
    ready_ps (an idle decoder could have started its body), start_ps (a decoder started it),
    end_ps (its body ended), correction_ps (the correction is back at the control system),
    decoder_ps (the decoder's compute time, cost model), service_ps (how long the request kept its
    decoder from the next one: :class:`twin.qec.hosting.Hosted`'s ``decode_busy``),
    queue_wait_ps (waiting for a free slot in the card, then start - ready: for a decoder),
    reaction_ps (correction - arrival: the reaction time). A consumer that keeps its inside to
    itself (RTL, live) gives the serving thread's take and reply for start, end and service, and
    its first poll after the landing for ready."""
    res, x = run.result, run.extra
    n = len(res.t_in)
    g = run.workload.requests_per_shot
    h = res.hops
    start = x.get("decode_start_ps", h.start)
    ready = x.get("decode_ready_ps", h.seen)
    end = x.get("decode_end_ps", h.reply)
    busy = x.get("decode_busy_ps", end - start)
    sw = res.stats.get("slot_wait_ps")
    slot_wait = np.asarray(sw, np.int64)[:n] if sw is not None and len(sw) >= n else 0
    i = np.arange(n, dtype=np.int64)
    idx = np.asarray(x["device_index"], np.int64) if "device_index" in x else np.zeros(n, np.int64)
    names = np.asarray(x.get("devices", [run.device]), dtype=object)
    return {"device": names[idx], "device_index": idx,
            "request": i + 1, "shot": i // g, "index": i % g, "arrival_ps": res.t_send, "card_in_ps": res.t_in,
            "ready_ps": ready, "start_ps": start, "end_ps": end, "correction_ps": res.t_back,
            "decoder_ps": np.asarray(run.compute_ps[:n], np.int64), "service_ps": busy,
            "queue_wait_ps": start - ready + slot_wait,
            "reaction_ps": res.t_back - res.t_send}


def backlog(arrival_ps: np.ndarray, start_ps: np.ndarray, t_ps: np.ndarray) -> np.ndarray:
    """Requests waiting anywhere at each instant of ``t_ps`` (int64): sent by the control system
    (arrival <= t) and not yet started by a decoder (start > t). Not the free slots: a request in the
    card's backlog, on the wire, in the consumer's queue or held by a busy thread counts alike."""
    a = np.sort(arrival_ps)
    s = np.sort(start_ps)
    return np.searchsorted(a, t_ps, side="right") - np.searchsorted(s, t_ps, side="right")




def busy_workers(workers: int, slots: int | None) -> int:
    """The decoders of one device that can work at once: ``workers``, bounded by the card's ``slots``
    (its ring holds that many requests of the device; None: no bound)."""
    return workers if slots is None else max(1, min(workers, slots))


def slot_bound_warnings(path, sc) -> list[str]:
    """One line per placement of decode scenario ``sc`` (from file ``path``) whose ``workers`` exceed
    the card's ``slots``, naming the file, the key and both numbers: the ring holds ``slots`` requests,
    so ``workers - slots`` decoders never work and rho counts ``slots`` decoders. Empty when none."""
    out = []
    for i, pl in enumerate(sc.decode.placements):
        if pl.workers > sc.slots:
            idle, held = pl.workers - sc.slots, "1 request" if sc.slots == 1 else f"{sc.slots} requests"
            never = "worker never works" if idle == 1 else "workers never work"
            out.append(f"{path}: decode.placements[{i}].workers: {pl.workers} > slots: {sc.slots}: the card's ring "
                       f"holds {held} per device, so {idle} {never}; rho and the expected backlog growth count "
                       f"{sc.slots} (raise slots, or lower workers)")
    return out


def stream_summary(table: dict[str, np.ndarray], cycle_ps: int | None, workers: int = 1, devices: int = 1,
                   slots: int | None = None) -> dict:
    """Throughput, backlog and reaction time of one run's :func:`request_table`.

    cycle_ps: the QEC cycle (the open-loop traffic's period; None in closed loop: rates are then
    per mean time between requests). Returns (ns, requests, per cycle): ``cycle_ns``,
    ``arrivals_per_cycle`` (requests sent per cycle), ``service_ns_mean`` (S: a decoder's mean body
    occupancy per request, ``service_ps``), ``workers`` (per device, as asked), ``busy_workers`` (N:
    :func:`busy_workers` of ``workers`` and the card's ``slots``; only when the slots bound it),
    ``devices`` (K sharing the stream, when more than one), ``rho`` (S / (K N T_a)), ``throughput_per_cycle`` (requests
    started per cycle, first to last start), ``backlog`` {``max``, ``end`` (at the last arrival),
    ``growth_per_cycle`` (least-squares slope of the backlog at the arrivals), ``expected_growth_per_cycle``
    (``max(0, 1 - 1/rho)`` times the arrivals per cycle)}, ``growth_agrees_with_rho`` (the two within
    5 % of the larger of the expected growth and the arrivals per cycle), ``queue_wait`` and
    ``reaction`` (percentiles, ns).
    """
    a, s = table["arrival_ps"], table["start_ps"]
    n = len(a)
    span = int(a.max() - a.min()) if n > 1 else 0
    ta = span / (n - 1) if n > 1 else 0.0  # mean time between requests
    unit = cycle_ps or ta or 1.0
    S = float(table["service_ps"].mean()) if n else 0.0
    busy = busy_workers(workers, slots)
    rho = S / (devices * busy * ta) if ta else None
    q = backlog(a, s, np.sort(a))
    growth = float(np.polyfit((np.sort(a) - a.min()) / unit, q, 1)[0]) if n > 2 and span else 0.0
    starts = np.sort(s)
    thr = (n - 1) / ((starts[-1] - starts[0]) / unit) if n > 1 and starts[-1] > starts[0] else None
    per_cycle = unit / ta if ta else None
    expected = round(max(0.0, 1 - 1 / rho) * per_cycle, 6) if rho and per_cycle else None
    agrees = None if expected is None else bool(abs(growth - expected) <= 0.05 * max(expected, per_cycle))
    return {"cycle_ns": cycle_ps / 1000 if cycle_ps else None, "workers": workers,
            **({"busy_workers": busy} if busy != workers else {}),
            **({"devices": devices} if devices > 1 else {}),
            "arrivals_per_cycle": round(per_cycle, 6) if per_cycle else None,
            "service_ns_mean": round(S / 1000, 3), "rho": round(rho, 6) if rho is not None else None,
            "throughput_per_cycle": round(thr, 6) if thr else None, "growth_agrees_with_rho": agrees,
            "backlog": {"max": int(q.max()) if n else 0, "end": int(q[-1]) if n else 0,
                        "growth_per_cycle": round(growth, 6),
                        "expected_growth_per_cycle": expected},
            "queue_wait": summary_ns(table["queue_wait_ps"]), "reaction": summary_ns(table["reaction_ps"])}


def device_summaries(run, table: dict[str, np.ndarray], cycle_ps: int | None, workers: int = 1,
                     slots: int | None = None) -> list[dict]:
    """Each device's part of a stream shared over devices (``run.extra["devices"]``): its name,
    requests, the card's mismatches on its queue pair, and :func:`stream_summary` of its rows
    (reaction, backlog and growth per cycle against its own ``rho = S / (N T_a)``, its T_a being K
    cycles under round robin)."""
    out = []
    flows = run.result.stats.get("flows", [])
    for k, name in enumerate(run.extra["devices"]):
        m = table["device_index"] == k
        st = stream_summary({c: v[m] for c, v in table.items()}, cycle_ps, workers, slots=slots)
        out.append({"device": name, "requests": int(m.sum()),
                    "card_mismatches": int(flows[k].get("mismatches", 0)) if k < len(flows) else None,
                    "card_backlog_max": int(flows[k].get("backlog_max", 0)) if k < len(flows) else None,
                    **{key: st[key] for key in ("arrivals_per_cycle", "service_ns_mean", "rho", "backlog",
                                                "reaction", "queue_wait")}})
    return out


CSV_COLUMNS = ("request", "shot", "index", "arrival_ps", "card_in_ps", "ready_ps", "start_ps", "end_ps",
               "correction_ps", "decoder_ps", "service_ps", "queue_wait_ps", "reaction_ps")
