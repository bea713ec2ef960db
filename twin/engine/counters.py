"""What every engine computes alike for a flow, whichever runs it (the simpy reference,
:mod:`twin.engine.event`, or the compiled core, :mod:`twin.engine.compiled`): its queues' slot size
and its statistics."""
from __future__ import annotations

from twin.engine.spec import LoopSpec
from twin.exchange.encoding import get_encoding


def slot_bytes_of(spec: LoopSpec) -> int:
    """The slot size of ``spec``'s queues: whole 16-byte pieces holding a message (at least 32),
    or ``spec.slot_bytes``. Raises ValueError for a fixed size that is not a multiple of 16 or
    does not hold a message."""
    enc = get_encoding(spec.consumer.encoding)
    frame = spec.traffic.frame_bytes
    need = max(32, -(-enc.slot_bytes(frame) // 16) * 16)
    if spec.slot_bytes is None:
        return need
    if spec.slot_bytes < need or spec.slot_bytes % 16:
        raise ValueError(f"loop {spec.name!r}: slot_bytes {spec.slot_bytes} must be a multiple of 16 and hold "
                         f"a {frame}-byte {enc.name} message ({need} bytes)")
    return spec.slot_bytes


def flow_stats(fp, kind: str, n: int, now: int, mismatches: int, backlog_max: int, consumer_polls: int, card_polls: int,
               posted_writes: int, phase: int, digest: str, dropped: dict, reply_timeouts: int,
               corrupted_requests: int | None) -> dict:
    """One flow's statistics as every engine reports them (the simpy reference and the compiled
    core, :mod:`twin.engine.compiled`): the card's and consumer's counters, the faults injected
    (``fp``: the flow's :class:`twin.faults.FaultPlan`, counted up to round ``n`` and instant
    ``now``: the flow's own end, its last reply back, not the whole run's; a host freeze only where
    it stops the consumer, a host thread: ``kind`` cpu) and detected; ``faults.not_reached`` (only
    when some are): the planned faults the flow did not reach (:func:`not_reached`)."""
    missed = not_reached(fp, n, now)
    return {"mismatches": mismatches, "backlog_max": backlog_max, "consumer_polls": consumer_polls,
            "card_polls": card_polls, "posted_writes": posted_writes, "poll_phase_ps": phase, "reply_digest": digest,
            "faults": {"injected": {"corrupt_piece": sum(1 for r in fp.corrupt_rounds if r <= n),
                                    "drop_frame": dropped["frames"],
                                    "stall": sum(1 for s, _ in fp.stalls if s < now),
                                    **({"host_freeze": sum(1 for s, _ in fp.host_freezes if s < now)
                                        if kind == "cpu" else 0} if fp.host_freezes else {})},
                       "detected": {"mismatches": mismatches, "resent_frames": dropped["resent"],
                                    "reply_timeouts": reply_timeouts,
                                    **({"mismatches_from_corrupted_requests": corrupted_requests}
                                       if corrupted_requests is not None else {})},
                       **({"not_reached": missed} if missed else {})}}


def not_reached(fp, n: int, now: int) -> dict:
    """The faults of ``fp`` (a :class:`twin.faults.FaultPlan`) that a run of ``n`` rounds ending at
    instant ``now`` (ps) did not reach, by the rule :func:`flow_stats` counts the injected ones by:
    ``corrupt_piece`` / ``drop_frame``: the rounds (ascending) past round ``n``; ``stall`` /
    ``host_freeze``: the indices (0-based, scenario order) of the windows that start at or after
    ``now``. Kinds with none are left out; ``{}`` when every fault was reached."""
    out = {"corrupt_piece": sorted(r for r in fp.corrupt_rounds if r > n),
           "drop_frame": sorted(r for r in fp.drop_rounds if r > n),
           "stall": [i for i, (s, _) in enumerate(fp.stalls) if s >= now],
           "host_freeze": [i for i, (s, _) in enumerate(fp.host_freezes) if s >= now]}
    return {k: v for k, v in out.items() if v}
