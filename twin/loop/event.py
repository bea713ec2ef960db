"""The full event model of one loop: real bytes in memory regions, posted writes, pollers."""
from __future__ import annotations

from typing import Callable

import numpy as np

from twin.devices.consumer import PollingConsumer
from twin.runtime.functions import REGISTRY, lookup
from twin.devices.generator import TrafficGenerator
from twin.devices.linkcard import LinkCard
from twin.exchange.encoding import get_encoding
from twin.kernel import JitterStream, Kernel, MemoryRegion, PostedWritePath
from twin.loop.spec import LoopResult, LoopSpec

Progress = Callable[[int], None]


def python_functions(fid: int):
    """The ``sim`` model's function for an id (``None`` if unknown)."""
    f = REGISTRY.get(fid)
    return f.python if f else None


def run_event(spec: LoopSpec, progress: Progress | None = None, chunk_rounds: int = 10_000, *,
              payloads: Callable[[int], bytes] | None = None, reference: Callable[[bytes], bytes] | None = None,
              consumer_factory: Callable[..., PollingConsumer] | None = None,
              keep_replies: bool = False) -> LoopResult:
    """Simulate ``spec`` with the full event model and return every round's timestamps.

    Nodes meet only in memory: the card's engine posts the request's bytes into the consumer's
    request queue, the consumer's poller sees them once the sequence word (or every piece) has
    landed, and the reply comes back the same way into the card's own reply queue, where the
    card checks it byte for byte against the echo. ``progress(n)`` is called with the number of
    rounds completed so far, every ``chunk_rounds``.

    Hooks for workloads (:mod:`twin.qec`): ``payloads(seq)`` supplies request payloads (default:
    the generator's counter words); ``reference(payload)`` is what the card checks each reply
    against (default: the function's Python implementation); ``consumer_factory`` builds the
    consumer with :class:`PollingConsumer`'s arguments (e.g. a hosting mode); ``keep_replies``
    returns every reply payload in ``result.stats["replies"]`` (list of bytes, round order).
    """
    k = Kernel(spec.seed)
    tr = spec.traffic
    enc = get_encoding(spec.consumer.encoding)
    frame = tr.frame_bytes
    slot_bytes = max(32, -(-enc.slot_bytes(frame) // 16) * 16)  # whole 16-byte pieces, as the contract wants
    if spec.slot_bytes is not None:  # a fixed slot size (e.g. the RoCE path's 64-byte slots)
        if spec.slot_bytes < slot_bytes or spec.slot_bytes % 16:
            raise ValueError(f"loop {spec.name!r}: slot_bytes {spec.slot_bytes} must be a multiple of 16 and hold "
                             f"a {frame}-byte {enc.name} message ({slot_bytes} bytes)")
        slot_bytes = spec.slot_bytes
    phase, gen_phase, salt = spec.draws()

    req_region = MemoryRegion(f"{spec.name}.request_queue", spec.name, spec.slots * slot_bytes)
    rep_region = MemoryRegion("card.reply_queue", "card", spec.slots * slot_bytes)
    req_path = PostedWritePath(k, "card->" + spec.name, spec.request_link, req_region,
                               JitterStream(spec.seed, spec.stream("pcie.request"), spec.jitter_ps))
    rep_path = PostedWritePath(k, spec.name + "->card", spec.reply_link, rep_region,
                               JitterStream(spec.seed, spec.stream("pcie.reply"), spec.jitter_ps))
    fp = spec.faults
    if fp.drop_rounds and tr.mode != "closed_loop":
        raise ValueError(f"loop {spec.name!r}: drop_frame faults need closed-loop traffic")
    rtl_cfg = None
    if "rtl" in (spec.model, spec.card_model):
        from twin.rtl import loop as rtl_loop
        rtl_cfg = spec.rtl or rtl_loop.RtlConfig()
        if fp.active:
            raise ValueError(f"loop {spec.name!r}: fault injection is not available with model rtl")
    if spec.model == "rtl":
        consumer = rtl_loop.rtl_consumer(spec, k, enc, req_region, rep_path, slot_bytes, phase, rtl_cfg)
    else:
        if spec.model == "code":
            from twin.runtime.code_consumer import NativeConsumer as consumer_class
        elif spec.model == "sim":
            consumer_class = PollingConsumer
        elif spec.model == "live":
            from functools import partial

            from hw_bridge.node import LiveConsumer
            consumer_class = partial(LiveConsumer, bridge=spec.bridge, host_freezes=fp.host_freezes)
        else:
            raise ValueError(f"loop {spec.name!r}: model {spec.model!r} is not available (sim, code, rtl, live)")
        if consumer_factory is not None:
            consumer_class = consumer_factory
        consumer = consumer_class(k, spec.name, spec.consumer.with_phase(phase), enc, req_region, rep_path,
                                  spec.slots, slot_bytes, frame, python_functions,
                                  tamper=fp.tamper("reply", enc.per_piece), stalls=fp.consumer_stalls(spec.consumer.kind))

    n = tr.rounds
    t_send = np.zeros(n, np.int64)
    t_in = np.zeros(n, np.int64)
    t_have = np.zeros(n, np.int64)
    t_back = np.zeros(n, np.int64)
    ok = np.zeros(n, bool)
    aur = spec.aurora
    tx_free = [0, 0]  # Aurora: control->card, card->control (frames serialise back to back)

    def over_aurora(direction: int, t: int, nbytes: int) -> int:
        start = max(t, tx_free[direction])
        tx_free[direction] = start + aur.serialise_ps(nbytes)
        return tx_free[direction] + aur.latency_ps

    def on_reply(seq: int, tin: int, thave: int, good: bool) -> None:
        i = seq - 1
        t_in[i] = tin
        t_have[i] = thave
        ok[i] = good
        back = thave if aur is None else over_aurora(1, thave + spec.card.reply_send_ps, frame)
        t_back[i] = back
        k.at(back, gen.reply, seq)
        if rtl_cfg is not None and seq == rtl_cfg.trace_last:
            for node in (card, consumer):
                getattr(node, "trace", lambda on: None)(False)

    if spec.card_model == "rtl":
        card = rtl_loop.rtl_card(spec, k, enc, req_path, rep_region, slot_bytes,
                                 reference or lookup(spec.function).python, on_reply, rtl_cfg)
    else:
        card = LinkCard(k, spec.card, enc, req_path, rep_region, spec.slots, slot_bytes, frame,
                        reference or lookup(spec.function).python, on_reply,
                        tamper=fp.tamper("request", enc.per_piece), timeout_ps=fp.timeout_ps, function=spec.function,
                        keep_replies=keep_replies)
    dropped = {"frames": 0, "resent": 0}

    def deliver(seq: int, payload: bytes) -> None:
        arrive = k.now if aur is None else over_aurora(0, k.now, len(payload))
        k.at(spec.card.edge(arrive), card.submit, seq, payload)

    def resend(seq: int, payload: bytes) -> None:
        dropped["resent"] += 1
        deliver(seq, payload)

    def send(seq: int, payload: bytes) -> None:
        t_send[seq - 1] = k.now
        if rtl_cfg is not None and seq == rtl_cfg.trace_first:
            for node in (card, consumer):
                getattr(node, "trace", lambda on: None)(True)
        if seq in fp.drop_rounds:
            dropped["frames"] += 1  # lost on the link; the control side resends after its timeout
            k.at(k.now + fp.timeout_ps, resend, seq, payload)
            return
        deliver(seq, payload)

    gen = TrafficGenerator(k, tr, tr.make_clock(gen_phase), send, salt, payloads)
    try:
        consumer.start()
        gen.start()
        while gen.received < n:
            target = min(n, gen.received + chunk_rounds)
            while gen.received < target:
                if not k.env._queue:
                    raise RuntimeError(f"loop {spec.name!r}: event queue ran dry after {gen.received} of {n} rounds")
                k.env.step()
            if progress:
                progress(gen.received)
    except Exception as e:
        if getattr(e, "keeps_partial", False):  # a live endpoint failed: keep the rounds completed so far
            m = int(gen.received)
            e.partial = LoopResult(spec.name, "event", t_send[:m], t_in[:m], t_have[:m], t_back[:m], ok[:m],
                                   {"mismatches": int((~ok[:m]).sum()), "backlog_max": card.backlog_max,
                                    **({"live": consumer.live_stats(), "service_ns": consumer.service_array()[:m]}
                                       if hasattr(consumer, "live_stats") else {})})
        raise
    finally:
        if hasattr(consumer, "close") and hasattr(consumer, "live_stats"):
            consumer.close()
    stats = {"events": k.events, "mismatches": card.mismatches, "backlog_max": card.backlog_max,
             "consumer_polls": consumer.poller.polls, "card_polls": card.poller.polls,
             "posted_writes": req_path.writes + rep_path.writes, "poll_phase_ps": phase,
             "reply_digest": card.reply_digest.hexdigest(),
             "faults": {"injected": {"corrupt_piece": sum(1 for r in fp.corrupt_rounds if r <= n),
                                     "drop_frame": dropped["frames"],
                                     "stall": sum(1 for s, _ in fp.stalls if s < k.now),
                                     **({"host_freeze": sum(1 for s, _ in fp.host_freezes if s < k.now)}
                                        if fp.host_freezes else {})},
                        "detected": {"mismatches": card.mismatches, "resent_frames": dropped["resent"],
                                     "reply_timeouts": card.reply_timeouts}}}
    if keep_replies:
        stats["replies"] = card.kept_replies
    if rtl_cfg is not None:
        stats["rtl"] = {name: {"cycles": node.cycles, "evaluated": node.evaluated, "steps": node.steps}
                        for name, node in (("card", card), (spec.name, consumer)) if hasattr(node, "evaluated")}
        if spec.card_model == "rtl":
            stats["rtl"]["card"]["errors"] = card.errors()
        for node in (card, consumer):
            getattr(node, "close", lambda: None)()
    if hasattr(consumer, "live_stats"):
        stats["live"] = consumer.live_stats()
        stats["live"]["endpoint_stats"] = consumer.close()
        stats["service_ns"] = consumer.service_array()
    return LoopResult(spec.name, "event", t_send, t_in, t_have, t_back, ok, stats)
