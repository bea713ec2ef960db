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

from dataclasses import replace
from typing import Callable

import numpy as np

from twin.engine.hops import Hops
from twin.engine.spec import LoopResult, LoopSpec
from twin.engine.stop import Interrupted, take_stop
from twin.exchange.encoding import get_encoding

Progress = Callable[[int], None]
LATE_NAMED = 20  # the late rounds a summary names (the first ones)


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


def run_paced(spec: LoopSpec, progress: Progress | None = None, chunk_rounds: int = 16_384) -> LoopResult:
    """Run live flow ``spec`` (:func:`paced_refusal` None) at its pace; the result's engine is
    ``paced``. Per-round statistics besides the round-by-round path's (``service_ns``, ``idle_ns``,
    ``idle_target_ns``): ``lateness_ns``, ``planned_ns``, ``device_in_ns`` / ``device_out_ns`` (the
    consumer's own clock; -1 where it has none) and ``stats["live"]["pace"]`` (:func:`pace_summary`).
    ``progress(n)`` and a stop request (:mod:`twin.engine.stop`) between calls of at most
    ``chunk_rounds`` rounds (and 50 ms). Raises :class:`hw_bridge.contract.LiveFailure` (a dead,
    hung or refused consumer) and :class:`Interrupted`, both with ``partial``: the whole rounds so far."""
    from hw_bridge.endpoint import BridgeSettings
    from hw_bridge.paced import PacedFlow, Pacing
    from twin.devices.isolation import check_isolation

    b = spec.bridge
    if not isinstance(b, BridgeSettings) or b.backend not in PACED_BACKENDS:
        raise ValueError(f"loop {spec.name!r}: the paced loop needs shm or cuda bridge settings")
    sim = _simulated(spec)
    h = _hops(sim)
    closed = spec.traffic.mode == "closed_loop"
    n = len(sim.t_send)
    at = np.zeros(n, np.int64)
    if closed:
        at[1:] = h.land[1:] - h.publish[:-1]
    else:
        at[:] = h.land - h.land[0]
    pins = [x for x in (b.cpu, b.producer_cpu) if x is not None]
    isolation = check_isolation(pins, cpu_consumer=b.backend == "shm")
    c = spec.consumer
    enc = get_encoding(c.encoding)
    slot_bytes = spec.slot_bytes or _slot_bytes(enc, spec.traffic.frame_bytes)
    ep = _endpoint(b, slot_bytes, spec.slots, enc.name)
    desc = ep.describe()
    flow = PacedFlow(ep, at, closed, Pacing(spin_ns=b.spin_ns, late_ns=b.late_ns, chunk=chunk_rounds))
    frames = _Frames(spec, enc, slot_bytes)
    failure: BaseException | None = None
    try:
        while flow.done < n:
            first = flow.done
            m = min(chunk_rounds, n - first)
            img, ln, exp, eln = frames.block(first, m)
            while flow.done < first + m:
                d = flow.done - first
                flow.step(img[d:], ln[d:], exp[d:], eln[d:])
                if flow.done < n and take_stop():
                    raise Interrupted(f"at round {flow.done} of {n}")
            if progress:
                progress(flow.done)
    except BaseException as e:  # a live failure or a stop: the rounds so far are kept
        failure = e
    stats = ep.close()
    res = _result(spec, sim, flow, stats, desc, isolation)
    if failure is not None:
        if hasattr(failure, "keeps_partial") or isinstance(failure, Interrupted):
            failure.partial = res  # type: ignore[attr-defined]
        raise failure
    return res


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
    ok = flow.bad[:m] == 0
    idle = np.full(m, -1, np.int64)
    idle[1:] = sent[1:] - seen[:-1]
    live = {"backend": getattr(spec.bridge, "backend", "shm"), "endpoint": desc, "rounds": m, "frozen_at_rounds": [],
            "isolation": isolation, "pace": pace_summary(flow), "endpoint_stats": ep_stats}
    stats = {**sim.stats, "mismatches": int((~ok).sum()), "live": live,
             "service_ns": seen - sent, "idle_ns": idle,
             "idle_target_ns": _idle_target(flow),
             "lateness_ns": flow.lateness_ns(), "planned_ns": flow.planned[:m].copy(),
             "device_in_ns": flow.dev_in[:m].copy(), "device_out_ns": flow.dev_out[:m].copy()}
    stats.pop("reply_digest", None)  # the simulated replies' digest, not the live ones'
    return LoopResult(spec.name, "paced", t_send, sim.t_in[:m] - sim.t_send[:m] + t_send,
                      sim.t_have[:m] - h.publish[:m] + pub, sim.t_back[:m] - h.publish[:m] + pub, ok, stats, hops)


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
