"""Model ``live``: a consumer node of the simulated loop answered by a live device.

The simulated world produces every request as usual (generator, link, link card, PCIe posted
writes into the consumer's request region). The moment request ``seq`` has wholly landed there
(its sequence word, or every piece), :class:`LiveHosting` hands the slot's exact bytes to its
live endpoint (:mod:`hw_bridge.contract`), which answers through its own queues. The measured
service time (request's first byte written on the live side -> reply seen complete there),
converted to integer picoseconds, advances simulated time; the live reply's bytes are then
carried to the card as posted writes in the contract's order (classic: header fields and
payload, then the ready word; per-piece: one burst), where the card checks them against the
reference answer like any other reply. So the live device's notice, read, compute and publish
replace the simulated consumer's poll, service and fence; the card path stays simulated.

Duty cycle: the live device idles as long as the simulated one would. Before request ``seq`` the
endpoint waits (wall clock, CLOCK_MONOTONIC) until the previous round's reply was seen plus the
simulated idle time of the consumer's thread (from its last reply published to this request taken),
so the traffic's gaps and periods reach the live device. The host's own time between two rounds
(the simulation in Python, tens of µs) is the floor: a shorter simulated idle time is not waited
for. Both the target and the idle time the device actually had are kept per round.

Host freeze (``host_freezes`` windows of simulated time): at the first request that lands inside a
window, an endpoint with a ``freeze`` method (the ``shm`` backend) is stopped (SIGSTOP) for the
window's length in wall-clock time and resumed (SIGCONT); the producer keeps sending.
"""
from __future__ import annotations

import numpy as np

from hw_bridge.contract import BridgeSettings, LiveFailure, open_endpoint
from twin.devices.consumer import EachLanding, HostingPart, PollingConsumer, make_endpoint


class LiveHosting(HostingPart):
    """The hosting part of model ``live``: consumer ``c``'s requests answered and timed by a live
    endpoint (the device hosts its function as it is built, and its measured time is the service).

    ``bridge`` (:class:`BridgeSettings`), ``host_freezes`` ((start_ps, end_ps) windows). The
    endpoint's session is opened here and closed by :meth:`shutdown`. Raises :class:`LiveFailure`
    from the endpoint (dead, hung, wrong), with the round. Statistics: ``service_ns`` (per round),
    ``endpoint_stats`` after :meth:`shutdown`; :meth:`sections` for the consumer's record.
    """

    keeps_partial = True  # a live device's failure ends a measurement: the rounds so far are kept

    def __init__(self, c: PollingConsumer, bridge: BridgeSettings, host_freezes: tuple[tuple[int, int], ...] = ()):
        super().__init__(c)
        from twin.devices.isolation import check_isolation
        pins = [x for x in (bridge.cpu, bridge.producer_cpu) if x is not None] if bridge.backend == "shm" else []
        # checked before the session starts; the warnings go with the live table and results.json
        # (stderr stays one line per failure)
        self.isolation = (check_isolation(pins, cpu_consumer=bridge.backend == "shm")
                          if bridge.backend in ("shm", "cuda") else None)
        self.endpoint = open_endpoint(bridge)
        self.endpoint.open(c.slot_bytes, c.slots, c.enc.name)
        self.description = self.endpoint.describe()
        self._freezes = sorted(host_freezes)
        self._had_freezes = bool(host_freezes)
        self._freeze = getattr(self.endpoint, "freeze", None)  # a backend with a consumer process to stop (shm)
        self.frozen_rounds: list[int] = []
        self.service_ns: list[int] = []
        self.idle_target_ns: list[int] = []
        self._free_ps: int | None = None  # simulated instant the thread last went idle (its reply published)
        self.endpoint_stats: dict = {}
        self._closed = False

    def describe(self) -> str:
        """The endpoint's one-line description."""
        return self.description

    def serve(self, seq: int, base: int, at: int) -> None:
        """Hand request ``seq``'s slot image to the endpoint (after the simulated idle time and any
        host freeze it lands in); its measured service time advances simulated time."""
        c = self.c
        buf = c.requests.buf
        h = c.enc.header(buf, base)
        image = bytes(buf[base:base + min(c.slot_bytes, c.enc.slot_bytes(h.length))])
        now = at
        while self._freezes and self._freezes[0][0] <= now:
            start, end = self._freezes.pop(0)
            if now < end and self._freeze is not None:
                self._freeze((end - start) / 1e12)
                self.frozen_rounds.append(seq)
        idle_ns = 0 if self._free_ps is None else max(0, now - self._free_ps) // 1000
        self.idle_target_ns.append(idle_ns)
        rep = self.endpoint.exchange(seq, image, idle_ns)
        got = c.enc.header(bytearray(rep.data), 0)
        if got.seq != seq:
            raise LiveFailure("wrong", seq, f"reply carries sequence {got.seq}", self.endpoint.backend)
        self.service_ns.append(rep.service_ns)
        writes = [(0, rep.data)] if c.enc.per_piece else [(4, rep.data[4:]), (0, rep.data[:4])]
        if c.tamper:
            writes = c.tamper(seq, writes)
        t = now + rep.service_ns * 1000
        c.kernel.at(t, c._post, seq, base, writes)
        self._free_ps = t
        c._done(seq, at, t, t, t)

    def shutdown(self) -> None:
        """End the live session (once); its counters stay in ``endpoint_stats``."""
        if not self._closed:
            self._closed = True
            self.endpoint_stats = self.endpoint.close()

    def live_stats(self) -> dict:
        """Counters for results.json: backend, description, rounds, freezes, and (shm, cuda) the
        machine's isolation before the run (:func:`twin.devices.isolation.check_isolation`)."""
        out = {"backend": self.endpoint.backend, "endpoint": self.description,
               "rounds": len(self.service_ns), "frozen_at_rounds": list(self.frozen_rounds)}
        if self.isolation is not None:
            out["isolation"] = self.isolation
        if self._had_freezes and self._freeze is None:
            out["host_freeze"] = f"not applied: the {self.endpoint.backend} backend has no consumer process to stop"
        return out

    def round_arrays(self) -> dict[str, np.ndarray]:
        """Per completed round, int64 ns: ``service_ns`` (request written -> reply seen),
        ``idle_target_ns`` (the simulated idle time before it, waited for on the wall clock) and
        ``idle_ns`` (the idle time the live device had: the previous reply seen -> this request's
        first byte written; -1 for the first round)."""
        t0, t1 = self.endpoint.timestamps()
        idle = np.full(len(t0), -1, np.int64)
        idle[1:] = t0[1:] - t1[:-1]
        n = len(self.service_ns)
        return {"service_ns": np.asarray(self.service_ns, np.int64),
                "idle_target_ns": np.asarray(self.idle_target_ns[:n], np.int64), "idle_ns": idle[:n]}

    def sections(self) -> dict:
        """The consumer record's ``live``, ``endpoint`` (after shutdown) and ``rounds``."""
        return {"live": self.live_stats(), "endpoint": self.endpoint_stats, "rounds": self.round_arrays()}


def build_endpoint(ctx) -> PollingConsumer:
    """Model ``live`` of a consumer (registered in :mod:`twin.nodes.models`): a consumer whose poller
    part observes each landing at once (:class:`EachLanding`: the live device notices its own
    requests) and whose hosting part is the live endpoint, with the flow's bridge settings and
    host-freeze windows. Raises ValueError without bridge settings."""
    if ctx.spec.bridge is None:
        raise ValueError(f"consumer {ctx.name!r}: model live needs bridge settings")
    bridge, freezes = ctx.spec.bridge, ctx.spec.faults.host_freezes
    return make_endpoint(ctx, poll=EachLanding(ctx.kernel, ctx.req_region, f"{ctx.name}.observe"),
                         hosting=lambda c: LiveHosting(c, bridge, freezes))
