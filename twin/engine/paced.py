"""A live consumer at the loop's own pace: the flow's simulated side and the live device advance
together in C (``hb_paced``, :mod:`hw_bridge.paced`), no Python between rounds.

The simulated side is the flow with the node's ``sim`` model, on the direct engine (the event model
where the direct engine does not compute the flow): it gives every round's request path (sent ->
landed in the consumer's memory), reply path (published -> back at the control side), control-side
delay and traffic gap, with the run's own jitter draws. The live device takes the consumer's
place: its requests are written at their simulated landing instants mapped to wall time
(CLOCK_MONOTONIC), so it sees the simulated gaps:

- closed loop: request ``k`` lands ``land[k] - publish[k - 1]`` of simulated time after the device
  published its reply to ``k - 1`` (reply path + control side + gap + request path); that reply's
  instant is the one the device's reply was seen at, so its measured service advances the loop;
- open loop: request ``k`` lands at ``land[k] - land[0]`` after round 0's, whatever the device did.

Each round's lateness (sent - planned, ns) is recorded; a round later than ``bridge.late`` (default
1 µs) is counted and named (:func:`pace_summary`). The live flow's own timeline is the wall clock of
the producer, placed at the simulated first landing: request ``k`` lands at ``land[0] + (sent[k] -
sent[0])``, its reply is published at ``land[0] + (seen[k] - sent[0])`` (a late round lands late
there too), and the simulated paths before and after it are the sim model's (so ``t_send`` of a
closed loop's round ``k`` follows the previous ``t_back`` by the control side's own delay plus the
round's lateness).

A flow the paced loop does not run (:func:`paced_refusal`) stays on the round-by-round path of
:mod:`twin.devices.live` (the event model).
"""
from __future__ import annotations

import functools
import os
from dataclasses import replace
from typing import Callable

import numpy as np

from twin.engine.hops import Hops
from twin.engine.spec import LoopResult, LoopSpec
from twin.engine.stop import Interrupted, stop_requested, take_stop
from twin.exchange.encoding import get_encoding

Progress = Callable[[int], None]
LATE_NAMED = 20  # the late rounds a summary names (the first ones)


BLOCK_BYTES = 64 << 20  # a windowed flow's slot images in one block up to this (each of requests, replies)
PACED_BACKENDS = ("shm", "cuda")
"""The backends whose producer side is the C loop (:class:`hw_bridge.producer.CProducerEndpoint`)."""


def paced_refusal(spec: LoopSpec) -> str | None:
    """Why the paced loop does not run live flow ``spec`` (then the round-by-round path does), or
    None. ``bridge.pace: false`` asks for the round-by-round path."""
    from hw_bridge.endpoint import BridgeSettings
    b = spec.bridge
    tr = spec.traffic
    if not isinstance(b, BridgeSettings) or spec.model != "live":
        return "not a live consumer"
    if b.pace is False:
        return "bridge.pace is false"
    if b.backend not in PACED_BACKENDS:
        return f"the {b.backend} backend runs round by round (the paced C loop runs on shm and cuda)"
    if spec.faults.host_freezes:
        return "faults.host_freeze stops the consumer process between rounds: the round-by-round path does that"
    if spec.faults.active:
        return "the card path's faults (corrupt_piece, drop_frame, stall) are the event model's"
    if tr.mode == "closed_loop" and tr.in_flight > 1:
        return f"traffic.in_flight {tr.in_flight}: the paced loop keeps one request in flight"
    if tr.listens or tr.share is not None:
        return "the control side's sends depend on the replies or on other flows: the event model runs them"
    if spec.handoff is not None:
        return "a two-stage consumer: the event model runs it"
    return None


def run_paced(spec: LoopSpec, progress: Progress | None = None, chunk_rounds: int = 16_384, *,
              frames=None, sim: LoopResult | None = None, stream: bool = False,
              keep_replies: bool = False, window: int = 1) -> LoopResult:
    """Run live flow ``spec`` (:func:`paced_refusal` None) at its pace; the result's engine is
    ``paced``. Per-round statistics besides the round-by-round path's (``service_ns``, ``idle_ns``,
    ``idle_target_ns``): ``lateness_ns``, ``planned_ns``, ``device_in_ns`` / ``device_out_ns`` (the
    consumer's own clock; -1 where it has none) and ``stats["live"]["pace"]`` (:func:`pace_summary`).
    ``progress(n)`` and a stop request (:mod:`twin.engine.stop`) are taken while the C loop runs
    (:func:`_drive`: a block of rounds per C call, at least ``chunk_rounds``). Raises
    :class:`hw_bridge.contract.LiveFailure` (a dead, hung or refused consumer) and
    :class:`Interrupted`, both with ``partial``: the whole rounds so far.

    frames: what the control side sends, an object with ``block(first, m)`` -> (request images,
    lengths, expected reply images, lengths) of rounds first .. first + m - 1 as :class:`_Frames`
    (default: the flow's own payloads and its function's reference answers). sim: the simulated
    side (default: the flow with the node's sim model, :func:`_simulated`). stream: an open-loop
    stream's view (:func:`_stream_result`: requests planned at their unqueued landing, the control
    side's send instants kept, a late round's wait counted as a wait for the one slot in flight).
    keep_replies: ``stats["replies"]``, each completed round's reply payload as the device wrote it.
    window: an open loop's requests in flight at most (:class:`hw_bridge.paced.PacedFlow`; 1: each
    waits for the reply to the one before)."""
    from hw_bridge.endpoint import BridgeSettings
    from hw_bridge.paced import PacedFlow, Pacing
    from twin.devices.isolation import check_isolation

    b = spec.bridge
    if not isinstance(b, BridgeSettings) or b.backend not in PACED_BACKENDS:
        raise ValueError(f"loop {spec.name!r}: the paced loop needs shm or cuda bridge settings")
    sim = sim if sim is not None else _simulated(spec)
    closed = spec.traffic.mode == "closed_loop"
    stream = stream and not closed
    at = _plan(sim, closed, stream)
    pins = [x for x in (b.cpu, b.producer_cpu) if x is not None]
    isolation = check_isolation(pins, cpu_consumer=b.backend == "shm")
    enc = get_encoding(spec.consumer.encoding)
    slot_bytes = spec.slot_bytes or _slot_bytes(enc, spec.traffic.frame_bytes)
    ep = _endpoint(b, slot_bytes, spec.slots, enc.name)
    desc = ep.describe()
    try:
        flow = PacedFlow(ep, at, closed, Pacing(spin_ns=b.spin_ns, late_ns=b.late_ns, chunk=chunk_rounds),
                         window=1 if closed else window)
    except ValueError:
        ep.close()
        raise
    replies: list[bytes] | None = [] if keep_replies else None
    failure = _drive(flow, frames if frames is not None else _Frames(spec, enc, slot_bytes), chunk_rounds,
                     progress, replies, enc)
    stats = ep.close()
    res = (_stream_result if stream else _result)(spec, sim, flow, stats, desc, isolation)
    if replies is not None:
        res.stats["replies"] = replies[:flow.done]
    if failure is not None:
        if hasattr(failure, "keeps_partial") or isinstance(failure, Interrupted):
            failure.partial = res
        raise failure
    return res


def _plan(sim: LoopResult, closed: bool, stream: bool) -> np.ndarray:
    """The paced plan (ps, one per round) of simulated flow ``sim``: closed loop the time from
    the device's previous reply to the request landed; open loop the landing instant after round
    0's; ``stream``: the landing the request would have had without waiting for a free slot (the
    simulated card's slot wait taken off: the live flow's own waits are its own), never earlier
    than the one before."""
    h = _hops(sim)
    at = np.zeros(len(sim.t_send), np.int64)
    if closed:
        at[1:] = h.land[1:] - h.publish[:-1]
        return at
    land = np.asarray(h.land, np.int64)
    if stream:
        w = sim.stats.get("slot_wait_ps")
        if w is not None and len(w) >= len(land):
            land = land - np.asarray(w, np.int64)[:len(land)]
        land = np.maximum.accumulate(land)
    return land - land[0] if len(land) else at


def _drive(flow, frames, chunk_rounds: int, progress: Progress | None, replies: list[bytes] | None, enc):
    """Run ``flow`` to its end in blocks (``frames.block``: the whole flow where its slot images fit
    :data:`BLOCK_BYTES`, else as many rounds as fit, at least ``chunk_rounds``), each block in ONE C
    call watched from this thread (:func:`_watched`: progress and a stop request while it runs), so no
    Python runs between the rounds of a block; ``replies`` (a list, or None) gets each completed
    round's reply payload (taken once the flow ended). Returns the exception that ended it early (a
    live failure or a stop), or None."""
    n = flow.n
    # a window's requests stay in flight within a block, not across blocks
    block = min(n, max(chunk_rounds, BLOCK_BYTES // max(1, flow.ep.slot_bytes)))
    kept: list[tuple[np.ndarray, int]] = []  # each block's reply images and its first round
    try:
        while flow.done < n:
            first = flow.done
            m = min(block, n - first)
            img, ln, exp, eln = frames.block(first, m)
            rep = None if replies is None else np.zeros_like(img)
            if rep is not None:
                kept.append((rep, first))
            while flow.done < first + m:
                d = flow.done - first
                args = (img[d:], ln[d:], exp[d:], eln[d:], None if rep is None else rep[d:])
                _watched(flow, functools.partial(flow.step, *args, whole=True), progress)
                if progress:
                    progress(flow.done)
            if flow.done < n and take_stop():
                raise Interrupted(f"at round {flow.done} of {n}")
    except BaseException as e:  # a live failure or a stop: the rounds so far are kept
        return e
    finally:
        for rep, first in kept:
            if replies is not None:
                replies.extend(_payloads(enc, rep[:max(0, min(len(rep), flow.done - first))]))
    return None


WATCH_S = 0.05
"""How often (s) the thread watching a running paced call shows progress and looks for a stop."""


def _watched(flow, call: Callable[[], int], progress: Progress | None) -> None:
    """Run ``call`` (one whole-block :meth:`PacedFlow.step`, a ctypes call that releases the GIL) on a
    thread of its own while this thread, moved off the flow's pinned cores where it can be, shows
    ``progress`` every :data:`WATCH_S` and passes a stop request (Ctrl-C, :func:`stop_requested`) to
    the C loop through the endpoint's stop word: the loop ends at a round boundary, the reply it waits
    for still awaited up to the timeout (a hung consumer is named as before). Raises what the call
    raised (the stop request left for the command to report beside it), or :class:`Interrupted` (the
    request taken) when the call ended early on it."""
    import threading

    out: list[BaseException] = []

    def go() -> None:
        try:
            call()
        except BaseException as e:  # raised on the watching thread below
            out.append(e)

    worker = threading.Thread(target=go, name="twin-paced", daemon=True)
    worker.start()
    restore = _off_pinned_cores(flow.ep)
    asked = False
    try:
        while worker.is_alive():
            worker.join(WATCH_S)
            if not worker.is_alive():
                break
            if progress:
                progress(flow.done)
            if not asked and stop_requested():
                asked = flow.stop()
    finally:
        if worker.is_alive():  # this thread is leaving (an exception here): the loop stops at a round
            flow.stop()
        worker.join()
        flow.clear_stop()
        if restore is not None:
            os.sched_setaffinity(0, restore)
    if out:
        raise out[0]
    if flow.done < flow.n and take_stop():
        raise Interrupted(f"at round {flow.done} of {flow.n}")


def _off_pinned_cores(ep) -> set[int] | None:
    """Move this (watching) thread off endpoint ``ep``'s producer and consumer cores, onto the others
    this process had before the endpoint pinned it (``ep._affinity``), so its wake-ups do not take the
    spinning producer's core; returns the cores to restore, or None where it stayed (no affinity
    calls, nothing pinned, or no other core)."""
    if not hasattr(os, "sched_getaffinity"):
        return None
    now = os.sched_getaffinity(0)
    pinned = {c for c in (ep.settings.cpu, ep.settings.producer_cpu) if c is not None}
    others = (getattr(ep, "_affinity", None) or now) - pinned
    if not pinned or not others or now == others:
        return None
    try:
        os.sched_setaffinity(0, others)
    except OSError:
        return None
    return now


def _payloads(enc, rep: np.ndarray) -> list[bytes]:
    """The payloads of reply slot images ``rep`` (m, stride) in the contract's encoding: classic
    replies of one length sliced at once, the rest one by one (:meth:`Encoding.payload`)."""
    if not len(rep):
        return []
    if not enc.per_piece:
        ln = rep[:, 6].astype(np.int64) | rep[:, 7].astype(np.int64) << 8
        k = int(ln[0])
        if (ln == k).all() and 16 + k <= rep.shape[1]:
            flat = np.ascontiguousarray(rep[:, 16:16 + k]).tobytes()
            return [flat[i:i + k] for i in range(0, len(flat), k)] if k else [b""] * len(rep)
    return [enc.payload(bytearray(r.tobytes()), 0) for r in rep]


def _endpoint(b, slot_bytes: int, slots: int, encoding: str):
    """The opened endpoint of bridge settings ``b``: the shm consumer stamping its rounds on its own
    clock, or the cuda persistent kernel (no stamps: the device's clock is not the host's)."""
    if b.backend == "shm":
        from hw_bridge.shm import ShmEndpoint
        shm = ShmEndpoint(b)
        shm.open(slot_bytes, slots, encoding, stamps=True)
        return shm
    from hw_bridge.cuda import CudaEndpoint
    gpu = CudaEndpoint(b)
    gpu.open(slot_bytes, slots, encoding)
    return gpu


def _simulated(spec: LoopSpec) -> LoopResult:
    """The flow with the node's sim model, every round (direct engine, else the event model)."""
    from twin.engine.direct import DirectNotApplicable, run_direct
    from twin.engine.event import run_event
    sim_spec = replace(spec, model="sim", bridge=None)
    try:
        return run_direct(sim_spec)
    except DirectNotApplicable:
        return run_event(sim_spec)


def _hops(res: LoopResult) -> Hops:
    """A result's hops (every engine records them; AssertionError otherwise)."""
    if res.hops is None:
        raise AssertionError(f"loop {res.name!r}: the {res.engine} engine kept no hops")
    return res.hops


def _slot_bytes(enc, frame: int) -> int:
    """The slot a frame of ``frame`` bytes needs (16-byte multiple), as the consumer's queues."""
    return -(-enc.slot_bytes(frame) // 16) * 16


class _Frames:
    """Request and expected reply slot images of a flow's rounds: the control side's payloads
    (:func:`twin.devices.generator.payload_for` with the run's salt) and the function's reference
    answers, in the contract's encoding (status OK)."""

    def __init__(self, spec: LoopSpec, enc, slot_bytes: int):
        from twin.runtime.functions import lookup
        self.enc, self.stride = enc, slot_bytes
        self.frame, self.bits = spec.traffic.frame_bytes, spec.traffic.syndrome_bits
        self.fid = spec.function
        self.ref = lookup(spec.function).python
        self.salt = spec.draws()[2]

    def _payloads(self, first: int, m: int) -> np.ndarray:
        """(m, frame) uint8: the payloads of sequence numbers first + 1 .. first + m."""
        from twin.devices.generator import payload_for
        if self.bits:
            return np.frombuffer(b"".join(payload_for(first + 1 + i, self.frame, self.salt, self.bits)
                                          for i in range(m)), np.uint8).reshape(m, self.frame)
        seq = np.arange(first + 1, first + m + 1, dtype=np.uint64)
        words = (seq * np.uint64(0x9E3779B97F4A7C15)) ^ np.uint64(self.salt)
        w = words.astype("<u8").view(np.uint8).reshape(m, 8)
        return np.tile(w, (1, -(-self.frame // 8)))[:, :self.frame]

    def block(self, first: int, m: int):
        """Rounds first .. first + m - 1: (images, lengths, expected images, expected lengths)."""
        p = self._payloads(first, m)
        seqs = np.arange(first + 1, first + m + 1, dtype=np.uint32)
        img, ln = _images(self.enc, seqs, p, self.fid, self.stride)
        if self.fid == 0:
            return img, ln, img, ln
        rows = [self.ref(bytes(r)) for r in p]
        width = max(len(r) for r in rows)
        rp = np.zeros((m, width), np.uint8)
        for i, r in enumerate(rows):
            rp[i, :len(r)] = np.frombuffer(r, np.uint8)
        if len({len(r) for r in rows}) == 1:
            exp, eln = _images(self.enc, seqs, rp, self.fid, self.stride)
            return img, ln, exp, eln
        exp = np.zeros_like(img)
        eln = np.zeros(m, np.uint32)
        for i, r in enumerate(rows):
            e, el = _images(self.enc, seqs[i:i + 1], rp[i:i + 1, :len(r)], self.fid, self.stride)
            exp[i], eln[i] = e[0], el[0]
        return img, ln, exp, eln


def _images(enc, seqs: np.ndarray, payloads: np.ndarray, fid: int, stride: int) -> tuple[np.ndarray, np.ndarray]:
    """(m, stride) uint8 slot images of messages ``seqs`` (u32) with ``payloads`` (m, k) and
    function ``fid``, flags 0, as :meth:`twin.exchange.encoding.Encoding.writes` lays them out (the
    sequence word included); and their byte counts. ValueError when a message does not fit."""
    m, k = payloads.shape
    nbytes = enc.slot_bytes(k)
    if nbytes > stride:
        raise ValueError(f"a message of {k} payload bytes takes {nbytes} bytes, the slot holds {stride}")
    out = np.zeros((m, stride), np.uint8)
    head = np.zeros((m, 16), np.uint8)
    head[:, 0:4] = seqs.astype("<u4").view(np.uint8).reshape(m, 4)
    head[:, 4:6] = np.frombuffer(np.uint16(fid).astype("<u2").tobytes(), np.uint8)
    head[:, 6:8] = np.frombuffer(np.uint16(k).astype("<u2").tobytes(), np.uint8)
    out[:, :16] = head
    if not enc.per_piece:
        out[:, 16:16 + k] = payloads
    else:
        pieces = -(-k // 12)
        padded = np.zeros((m, pieces * 12), np.uint8)
        padded[:, :k] = payloads
        body = out[:, 16:16 + 16 * pieces].reshape(m, pieces, 16)
        body[:, :, 0:4] = head[:, None, 0:4]
        body[:, :, 4:16] = padded.reshape(m, pieces, 12)
    return out, np.full(m, nbytes, np.uint32)


def _result(spec: LoopSpec, sim: LoopResult, flow, ep_stats: dict, desc: str, isolation) -> LoopResult:
    """The live flow's result over its completed rounds (the module docstring's timeline)."""
    m = flow.done
    h = _hops(sim)
    sent, seen = flow.sent[:m], flow.seen[:m]
    land0 = int(h.land[0]) if len(h.land) else 0
    base = int(sent[0]) if m else 0
    land = land0 + (sent - base) * 1000
    pub = land0 + (seen - base) * 1000
    d_req = h.land[:m] - sim.t_send[:m]
    t_send = land - d_req
    after = pub - h.publish[:m]
    hops = Hops(issue=t_send + (h.issue[:m] - sim.t_send[:m]), land=land, seen=land, start=pub, reply=pub,
                publish=pub, rland=h.rland[:m] + after)
    return LoopResult(spec.name, "paced", t_send, sim.t_in[:m] - sim.t_send[:m] + t_send,
                      sim.t_have[:m] - h.publish[:m] + pub, sim.t_back[:m] - h.publish[:m] + pub,
                      flow.bad[:m] == 0, _live_stats(spec, sim, flow, ep_stats, desc, isolation), hops)


def _stream_result(spec: LoopSpec, sim: LoopResult, flow, ep_stats: dict, desc: str, isolation) -> LoopResult:
    """An open-loop stream's live result over its completed rounds. Wall instants map to simulated
    time by round 0's plan: ``w -> L0 + (w - planned[0])``, L0 the simulated unqueued landing of
    round 0 (:func:`_plan`). The control side sends at its own instants (the simulated ``t_send``,
    ``t_in``: the stream's arrivals, whatever the device did); the request lands when the producer
    wrote it (a late round waited for a free slot of the live ring, its window, or for the producer's
    core: that wait is its slot wait, ``stats["slot_wait_ps"]``); the device starts it when it
    saw it landed and ends it when it published its reply (its own clock, where it stamps; else
    landed and seen: ``seen`` is the landing, the device's notice and its queue behind the requests
    before it being ``start - seen``); the reply is published when the producer saw it, and the simulated reply
    path carries it back (``t_have``, ``t_back``)."""
    m = flow.done
    h = _hops(sim)
    land0 = int(_plan_origin(sim))
    base = int(flow.planned[0]) if m else 0

    def wall(ns: np.ndarray) -> np.ndarray:
        return land0 + (ns - base) * 1000
    land, pub = wall(flow.sent[:m]), wall(flow.seen[:m])
    din, dout = flow.dev_in[:m], flow.dev_out[:m]
    start = np.clip(np.where(din >= 0, wall(din), land), land, pub)
    end = np.clip(np.where(dout >= 0, wall(dout), pub), start, pub)
    wait = np.maximum(0, flow.sent[:m] - flow.planned[:m]) * 1000
    issue = land - (h.land[:m] - h.issue[:m])
    after = pub - h.publish[:m]
    hops = Hops(issue=issue, land=land, seen=land, start=start, reply=end, publish=pub, rland=h.rland[:m] + after,
                ready=issue - wait)
    stats = _live_stats(spec, sim, flow, ep_stats, desc, isolation)
    stats["slot_wait_ps"] = wait
    return LoopResult(spec.name, "paced", sim.t_send[:m].copy(), sim.t_in[:m].copy(), sim.t_have[:m] + after,
                      sim.t_back[:m] + after, flow.bad[:m] == 0, stats, hops)


def _plan_origin(sim: LoopResult) -> int:
    """Round 0's simulated unqueued landing (ps): the instant the stream plan starts from."""
    h = _hops(sim)
    if not len(h.land):
        return 0
    w = sim.stats.get("slot_wait_ps")
    return int(h.land[0]) - (int(w[0]) if w is not None and len(w) else 0)


def _live_stats(spec: LoopSpec, sim: LoopResult, flow, ep_stats: dict, desc: str, isolation) -> dict:
    """A live flow's statistics over its completed rounds: the simulated side's (its reply digest
    left out), the card's mismatches (replies that differ from the reference), ``live`` (backend,
    endpoint, rounds, isolation, :func:`pace_summary`, the endpoint's own) and the per-round arrays."""
    m = flow.done
    sent, seen = flow.sent[:m], flow.seen[:m]
    idle = np.full(m, -1, np.int64)
    idle[1:] = sent[1:] - seen[:-1]
    live = {"backend": getattr(spec.bridge, "backend", "shm"), "endpoint": desc, "rounds": m, "frozen_at_rounds": [],
            "isolation": isolation, "pace": pace_summary(flow), "endpoint_stats": ep_stats}
    stats = {**sim.stats, "mismatches": int(flow.bad[:m].astype(bool).sum()), "live": live,
             "service_ns": seen - sent, "idle_ns": idle,
             "idle_target_ns": _idle_target(flow),
             "lateness_ns": flow.lateness_ns(), "planned_ns": flow.planned[:m].copy(),
             "device_in_ns": flow.dev_in[:m].copy(), "device_out_ns": flow.dev_out[:m].copy()}
    stats.pop("reply_digest", None)  # the simulated replies' digest, not the live ones'
    stats.pop("replies", None)  # the simulated replies, not the live ones
    return stats


def _idle_target(flow) -> np.ndarray:
    """Per completed round, the idle time the device was to have before it (ns): closed loop the
    simulated time from its previous reply to this request (as hb_paced rounds it); open loop the
    previous reply seen -> this request's instant (0 when the instant had passed); 0 for round 1."""
    m = flow.done
    if flow.closed:
        return (flow.at_ps[:m] + 500) // 1000
    out = np.zeros(m, np.int64)
    out[1:] = np.maximum(0, flow.planned[1:m] - flow.seen[:m - 1])
    return out


def pace_summary(flow) -> dict:
    """A paced flow's pacing record: ``paced`` True, ``closed``, ``late_threshold_ns``, ``spin_ns``,
    ``late_rounds`` (sent more than the threshold after their instant) and ``late_first`` (the first
    :data:`LATE_NAMED` of them, 1-based rounds), ``lateness`` (percentiles, ns, over the rounds),
    ``device_gap_error`` (the gap the consumer saw on its own clock minus the simulated one:
    percentiles of its absolute value, ns; None without stamps) and ``rounds_per_s`` (rounds over
    the wall time from the first request to the last reply)."""
    from twin.stats import summary_ns
    m = flow.done
    late = flow.lateness_ns()
    over = np.nonzero(late > flow.pacing.late_ns)[0]
    seen, sim = flow.device_gaps_ns()
    err = np.abs(seen - sim)
    wall = (flow.seen[m - 1] - flow.sent[0]) if m else 0
    return {"paced": True, "closed": flow.closed, "late_threshold_ns": flow.pacing.late_ns,
            "spin_ns": flow.pacing.spin_ns, "late_rounds": int(len(over)),
            "late_first": [int(i) + 1 for i in over[:LATE_NAMED]],
            "lateness": summary_ns(late * 1000) if m else None,
            "device_gap_error": summary_ns(err * 1000) if len(err) else None,
            "rounds_per_s": round(m / (wall / 1e9), 1) if wall > 0 else None}
