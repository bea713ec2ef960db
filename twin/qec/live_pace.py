"""A live decoder at the stream's pace: a decode placement whose consumer is a live shm (or cuda)
endpoint, driven by the paced C loop (:func:`twin.engine.paced.run_paced`, ``hb_paced``).

The requests are the workload's own frames (the stream's syndrome bytes, one request per shot),
the expected replies the direct decode of the same shots; the endpoint serves them with the
runtime library's C functions (``decode_rep3``, ``decode_steane7``: ``twin/runtime/c/qrt_functions.c``)
and every reply's bytes are kept: they are the live corrections, compared with the direct decode
like any placement's. The simulated prediction of the same placement (model ``sim`` on the same
device, the same cost model and seed) runs first: its request and reply paths place the live
device in the loop, and its stream (backlog, deadline misses, reaction) is printed beside the live
one (``DecodeRun.extra["simulated"]``).

Open loop, the requests leave at the stream's instants (period, gaps) mapped to the wall clock
into the live ring of ``slots`` requests (as many in flight as the simulated card's ring holds,
:class:`hw_bridge.paced.PacedFlow`'s window): a request whose instant passes while every slot
awaits its reply, or while the machine held the producer off its core, leaves late, is counted
and named (``bridge.late``), and its wait is its slot wait in the live stream's backlog
(:func:`twin.engine.paced._stream_result`). A closed loop is paced from each reply, one in flight.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from hw_bridge.paced import STAMPS
from twin.engine.paced import _images, _slot_bytes, paced_refusal, run_paced
from twin.exchange.encoding import get_encoding
from twin.qec.outcome import Outcome, reply_rows


def paced_applies(loop) -> str | None:
    """Why decode loop ``loop`` (:class:`twin.qec.loop._DecodeLoop`) of a live placement does not
    run at its pace, or None when it does. Raises ValueError when ``bridge.pace: true`` asks for
    the paced loop where it cannot run."""
    if loop.model != "live":
        return "not a live placement"
    if loop.engine == "event":
        return "engine event asked for"
    why = "a stream over several devices" if loop.count > 1 else paced_refusal(loop.specs[0])
    if why is None and loop.workload.requests_per_shot > 1:
        why = f"per: {loop.workload.per}: a request builds on the shot's earlier ones in one decoder"
    if why is not None and getattr(loop.bridge, "pace", None):
        raise ValueError(f"placement {loop.device!r}: bridge.pace: true: {why}")
    return why


class DecodeFrames:
    """The slot images of a decode stream for :func:`run_paced`: request ``i`` carries the
    workload's frame ``keys[i]`` under function ``fid``; its expected reply is ``direct[i]`` (uint8
    (requests, reply_bytes), the direct decode), both in encoding ``enc`` in slots of
    ``stride`` bytes."""

    def __init__(self, keys: list[bytes], direct: np.ndarray, fid: int, enc, stride: int):
        self.frames = np.frombuffer(b"".join(keys), np.uint8).reshape(len(keys), -1)
        self.direct = np.ascontiguousarray(direct, np.uint8)
        self.fid, self.enc, self.stride = fid, enc, stride

    def block(self, first: int, m: int):
        """Rounds first .. first + m - 1: (images, lengths, expected images, expected lengths)."""
        seqs = np.arange(first + 1, first + m + 1, dtype=np.uint32)
        img, ln = _images(self.enc, seqs, self.frames[first:first + m], self.fid, self.stride)
        exp, eln = _images(self.enc, seqs, self.direct[first:first + m], self.fid, self.stride)
        return img, ln, exp, eln


def run_paced_decode(loop, simulated):
    """Placement ``loop`` (live, :func:`paced_applies` None) at its pace, with ``simulated`` (the
    same placement's :class:`twin.qec.loop.DecodeRun` under model sim) as its simulated side.
    Returns the :class:`twin.qec.outcome.Outcome` (engine ``paced``; the live replies as the
    corrections, every one checked against the direct decode in C); a live failure or a stop is the
    outcome's ``stopped``, its result the whole rounds so far."""
    spec = loop.specs[0]
    enc = get_encoding(spec.consumer.encoding)
    stride = spec.slot_bytes or _slot_bytes(enc, spec.traffic.frame_bytes)
    frames = DecodeFrames(loop.keys, loop.direct, loop.fn.id, enc, stride)
    sim = replace(simulated.result, stats=dict(simulated.result.stats))
    sim.stats.pop("replies", None)
    stopped = None
    try:
        res = run_paced(spec, loop.progress, frames=frames, sim=sim, stream=True, keep_replies=True,
                        window=min(spec.slots, STAMPS))
    except BaseException as e:
        res = getattr(e, "partial", None)
        if res is None:
            raise
        stopped = e
    replies = res.stats.pop("replies")
    rb = loop.decoder.reply_bytes
    rows = [r[:rb].ljust(rb, b"\0") for r in replies]  # a wrong-length reply differs (the card counted it)
    out = Outcome(res, reply_rows(rows, rb), [], stopped=stopped, used="paced")  # type: ignore[arg-type]
    out.checked = len(res.t_in)
    return out


def live_block(run, cycle_ps: int | None, deadline_ps: int | None, on: str, slots: int | None,
               failure: BaseException | None = None) -> dict:
    """A paced live placement's ``live`` block of results.json: the endpoint (``backend``,
    ``endpoint``), the pace (:func:`twin.engine.paced.pace_summary`: late rounds counted and the first
    named, lateness, rounds per wall-second), and side by side ``measured`` (this run's requests)
    and ``simulated`` (the same placement under model sim, over the same requests): the stream's
    backlog, rho and throughput (:func:`twin.qec.streaming.stream_summary`), the reaction time and
    the deadline misses (over ``deadline_ps`` of the loop, ``on="loop"``, or of the card-boundary
    round trip, ``"rtt"``; None without a deadline); ``error``: the live failure that ended it
    (kind, round, detail) or None."""
    from twin.qec.streaming import request_table
    sim = run.extra["simulated"]
    m = len(run.result.t_in)
    live = run.result.stats["live"]

    def side(r, k: int) -> dict:
        res = r.result.head(k)
        table = {c: v[:k] for c, v in request_table(r).items()}
        return _side(res, table, cycle_ps, deadline_ps, on, slots)
    return {"backend": live["backend"], "endpoint": live["endpoint"], "pace": live["pace"],
            "measured": side(run, m), "simulated": side(sim, m),
            "error": None if failure is None else {"kind": getattr(failure, "kind", "stopped"),
                                                   "round": getattr(failure, "round", m + 1),
                                                   "detail": getattr(failure, "detail", str(failure))}}


def _side(res, table: dict, cycle_ps: int | None, deadline_ps: int | None, on: str, slots: int | None) -> dict:
    """One side of :func:`live_block` from a result and its request table."""
    from twin.qec.streaming import stream_summary
    st = stream_summary(table, cycle_ps, 1, 1, slots)
    lat = res.loop_ps if on == "loop" else res.rtt_ps
    return {"requests": len(res.t_in), "reaction": st["reaction"], "queue_wait": st["queue_wait"],
            "deadline_misses": None if deadline_ps is None else int((lat > deadline_ps).sum()),
            "backlog": st["backlog"], "rho": st["rho"], "service_ns_mean": st["service_ns_mean"],
            "throughput_per_cycle": st["throughput_per_cycle"]}
