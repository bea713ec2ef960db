"""The mesh's event model: several flows over shared links, link cards and consumers, moving bytes.

Each flow (:class:`twin.scenario.Flow`) has its own queue pair: a request queue in its consumer's
memory and a reply queue in its link card's memory, with the contract's encodings and sequence
words, exactly as on one loop. What flows share, they contend for:

* a link (one direction of an Aurora cable or a card's PCIe path to a consumer): a
  :class:`SharedLink` serialises every flow's writes on it in issue order, and keeps their
  landings in order (posted-write order per path);
* a link card: frames from every flow pass its bridge one after another;
* a consumer: one thread (one CPU core, one GPU persistent kernel, one FPGA engine) polls all its
  endpoint queues on one poll grid and serves one request at a time, in the order its polls see
  them (first come, first served). A request seen while the thread is busy waits; the thread,
  once free, polls again and takes it. That wait is the flow's queueing delay (``wait_ps``).

Arrivals: ``closed_loop`` (next request after the reply is back), ``open_loop`` (every
``period``) or ``poisson`` (exponential gaps of mean ``period`` from the flow's own random
stream), each on the controller's clock (the card's, or its own with a ppm offset and a random
phase). With Poisson arrivals into a consumer whose service time is fixed, the mean wait follows
the M/D/1 formula ``W = lambda D^2 / (2 (1 - rho))`` (``tests/test_mesh.py`` checks it).
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from twin.calibration.params import ParamSet
from twin.devices.consumer import ConsumerParams
from twin.devices.generator import payload_for
from twin.exchange.encoding import Encoding, get_encoding, slot_offset
from twin.kernel import Clock, JitterStream, Kernel, MemoryRegion, Poller
from twin.kernel.sim import stream_rng
from twin.mesh.topology import Route
from twin.runtime.functions import lookup
from twin.units import PS_PER_NS, time_ps


class SharedLink:
    """One direction of one link, shared by every flow routed over it.

    ``wire``: an :class:`~twin.links.aurora.Aurora64B66B` or :class:`~twin.links.pcie.PcieLink`
    (``serialise_ps``, ``latency_ps``); ``jitter``: the exponential extra delay per write.
    :meth:`plan` is :meth:`twin.kernel.PostedWritePath.plan` with the link state shared: a write
    starts when the link is free, and never lands before an earlier write on the link.
    Statistics: ``writes``, ``bytes``, ``busy_ps`` (time the link was serialising).
    """

    def __init__(self, name: str, wire, jitter: JitterStream):
        self.name = name
        self.wire = wire
        self.jitter = jitter
        self.free = 0
        self.last_land = 0
        self.writes = 0
        self.bytes = 0
        self.busy_ps = 0

    def plan(self, t_issue: int, nbytes: int) -> int:
        """Landing time (ps) of a write of ``nbytes`` issued at ``t_issue``; advances the state."""
        start = max(t_issue, self.free)
        ser = self.wire.serialise_ps(nbytes)
        self.free = start + ser
        self.busy_ps += ser
        land = max(start + ser + self.wire.latency_ps + self.jitter.next(), self.last_land)
        self.last_land = land
        self.writes += 1
        self.bytes += nbytes
        return land


@dataclass
class FlowTimes:
    """Per-request instants of one flow (int64 ps, in order): ``t_send`` (leaves the controller),
    ``t_in`` (enters the card, clock edge), ``t_seen`` (the consumer's poll would have seen it had
    the thread been idle: first poll at/after landing + cost), ``t_start`` (the thread took it),
    ``t_have`` (the card has read the reply), ``t_back`` (the reply is at the controller);
    ``ok`` the card's byte check."""

    t_send: np.ndarray
    t_in: np.ndarray
    t_seen: np.ndarray
    t_start: np.ndarray
    t_have: np.ndarray
    t_back: np.ndarray
    ok: np.ndarray

    @property
    def wait_ps(self) -> np.ndarray:
        """Queueing delay at the shared consumer per request."""
        return self.t_start - self.t_seen

    @property
    def rtt_ps(self) -> np.ndarray:
        """Card-boundary round trip per request."""
        return self.t_have - self.t_in

    @property
    def loop_ps(self) -> np.ndarray:
        """Controller-to-controller round trip per request."""
        return self.t_back - self.t_send


@dataclass
class MeshResult:
    """Every flow's times, its route, and the shared resources' statistics."""

    routes: list[Route]
    flows: list[FlowTimes]
    stats: dict = field(default_factory=dict)


class _Thread:
    """One consumer's serving thread: poll grid, busy-until, service times (ps)."""

    def __init__(self, name: str, p: ConsumerParams, enc: Encoding, frame: int, service_ps: int):
        self.name = name
        self.p = p
        self.enc = enc
        self.free = 0
        self.body = p.pre_service_ps(enc, frame) + service_ps
        self.served = 0
        self.busy_ps = 0


def _poisson_gaps(seed: int, name: str, mean_ps: int, n: int) -> list[int]:
    rng = stream_rng(seed, name)
    return np.rint(rng.exponential(mean_ps, size=n)).astype(np.int64).tolist()


def run_mesh(sc, params: ParamSet, rounds: int | None = None, seed: int | None = None,
             progress: Callable[[int, int], None] | None = None,
             service_ns: dict[str, float] | None = None) -> MeshResult:
    """Simulate every flow of mesh scenario ``sc`` under card-path parameter set ``params``.

    ``rounds`` overrides every flow's round count; ``seed`` the scenario's. ``service_ns`` overrides
    a consumer node's service time (the function body), e.g. for a decoder heavier than the echo.
    ``progress(done, total)`` is called every 10,000 replies. Raises ``ValueError`` when the event
    queue runs dry with requests outstanding (cannot happen for a valid mesh).
    """
    g = sc.graph()
    routes: list[Route] = g.graph["routes"]
    seed = sc.seed if seed is None else seed
    k = Kernel(seed)
    card_p = params.card.params()
    aur = params.aurora.link()
    links: dict[tuple[str, str], SharedLink] = {}
    threads: dict[str, _Thread] = {}
    phases: dict[str, int] = {}

    def link(a: str, b: str, wire, jitter_ps: int) -> SharedLink:
        if (a, b) not in links:
            links[(a, b)] = SharedLink(f"{a}->{b}", wire, JitterStream(seed, f"mesh.{a}->{b}", jitter_ps))
        return links[(a, b)]

    service_ns = service_ns or {}
    flows_out: list[FlowTimes] = []
    total = 0
    done = [0]
    bridge_free: dict[str, int] = {}
    starters = []
    for r in routes:
        f = sc.flows[r.flow]
        node = g.nodes[r.consumer]["node"]
        cm = params.consumers[node.device]
        cp = cm.params(None if sc.encoding == "default" else sc.encoding)
        enc = get_encoding(cp.encoding)
        frame = sc.frame_bytes
        if r.consumer not in threads:
            svc = cp.service_ps if r.consumer not in service_ns else int(round(service_ns[r.consumer] * PS_PER_NS))
            threads[r.consumer] = _Thread(r.consumer, cp, enc, frame, svc)
            phases[r.consumer] = int(stream_rng(seed, f"mesh.{r.consumer}.setup").integers(0, cp.poll_period_ps))
        th = threads[r.consumer]
        if th.enc.name != enc.name:
            raise ValueError(f"consumer {r.consumer!r}: every flow to one consumer uses its encoding")
        host = params.hosts[cm.host]
        pcie = host.link(cm.path)
        jit = int(round(host.path(cm.path).jitter_ns * PS_PER_NS))
        req_link = link(r.card, r.consumer, pcie, jit)
        rep_link = link(r.consumer, r.card, pcie, jit)
        gen_kind = g.edges[r.generator, r.card]["kind"]
        up = link(r.generator, r.card, aur, 0) if gen_kind == "aurora" else None
        down = link(r.card, r.generator, aur, 0) if gen_kind == "aurora" else None
        n = rounds or f.rounds or sc.rounds
        total += n
        starters.append(_Flow(k, r, f, n, seed, enc, frame, sc.slots, card_p, th, phases[r.consumer],
                              req_link, rep_link, up, down, bridge_free, done))
        flows_out.append(starters[-1].times)
    for s in starters:
        s.start()
    step = 10_000
    reported = 0
    while done[0] < total:
        if not k.env._queue:
            raise ValueError(f"mesh {sc.name!r}: event queue ran dry after {done[0]} of {total} replies")
        k.env.step()
        if progress and done[0] >= reported + step:
            reported = done[0]
            progress(reported, total)
    if progress:
        progress(total, total)
    end = max(int(ft.t_back.max()) for ft in flows_out) or 1
    stats = {"events": k.events,
             "links": {name[0] + "->" + name[1]: {"writes": l.writes, "bytes": l.bytes,
                                                  "utilisation": round(l.busy_ps / end, 6)} for name, l in links.items()},
             "consumers": {n: {"served": t.served, "utilisation": round(t.busy_ps / end, 6),
                               "service_ns": t.body / 1000} for n, t in threads.items()}}
    return MeshResult(routes, flows_out, stats)


class _Flow:
    """One flow's controller, card queue pair and consumer endpoint (internal to :func:`run_mesh`)."""

    def __init__(self, k: Kernel, r: Route, f, n: int, seed: int, enc: Encoding, frame: int, slots: int,
                 card_p, th: _Thread, phase: int, req_link: SharedLink, rep_link: SharedLink,
                 up: SharedLink | None, down: SharedLink | None, bridge_free: dict, done: list):
        self.k, self.r, self.n, self.enc, self.frame, self.slots = k, r, n, enc, frame, slots
        self.card_p, self.th, self.req_link, self.rep_link, self.up, self.down = card_p, th, req_link, rep_link, up, down
        self.bridge_free = bridge_free
        self.done = done
        self.fid = lookup(f.function).id
        self.fn = lookup(f.function).python
        self.slot_bytes = max(32, -(-enc.slot_bytes(frame) // 16) * 16)
        tag = f"mesh.flow{r.flow}"
        self.req_region = MemoryRegion(f"{r.consumer}.{tag}.requests", r.consumer, slots * self.slot_bytes)
        self.rep_region = MemoryRegion(f"{r.card}.{tag}.replies", r.card, slots * self.slot_bytes)
        p = th.p
        self.poller = Poller(k, self.req_region, p.poll_period_ps, phase, p.poll_cost_ps, name=f"{tag}.poll")
        self.card_poller = Poller(k, self.rep_region, card_p.reply_poll_period_ps, 0, 0, name=f"{tag}.card_poll")
        t = f.traffic
        rng = stream_rng(seed, tag + ".setup")
        clk_ps = time_ps(t.clock_period)
        self.period_ps = time_ps(t.period) if t.period else 0
        if t.clock == "card":
            self.clock = Clock(clk_ps)
        else:  # the controller's own oscillator: one phase per generator, shared by its flows
            phase = int(stream_rng(seed, f"mesh.{r.generator}.clock").integers(0, 10**7))
            self.clock = Clock(clk_ps, int(round(t.ppm * 1000)), phase)
        self.mode = t.mode
        self.gaps = _poisson_gaps(seed, tag + ".arrivals", self.period_ps, n) if t.mode == "poisson" else None
        self.salt = int(rng.integers(0, 2**63))
        z = lambda dt=np.int64: np.zeros(n, dt)  # noqa: E731
        self.times = FlowTimes(z(), z(), z(), z(), z(), z(), z(bool))
        self.sent = 0
        self.next_seen = 1   # the consumer endpoint's next sequence number
        self.outstanding: deque[tuple[int, bytes]] = deque()
        self.backlog: deque[tuple[int, bytes]] = deque()
        self.watching = False
        self.landed: dict[int, int] = {}

    # -- controller ------------------------------------------------------------------------
    def start(self) -> None:
        self._arm_consumer()
        self.k.at(self.clock.edge(0), self._send)

    def _send(self) -> None:
        self.sent += 1
        seq = self.sent
        now = self.k.now
        self.times.t_send[seq - 1] = now
        payload = payload_for(seq, self.frame, self.salt)
        arrive = now if self.up is None else self.up.plan(now, self.frame)
        self.k.at(self.card_p.edge(arrive), self._card_in, seq, payload)
        if self.sent < self.n and self.mode != "closed_loop":
            if self.mode == "open_loop":
                t = self.clock.edge(self.sent * (self.period_ps // self.clock.period_ps))
            else:
                t = self.clock.at_or_after(now + self.gaps[self.sent])
            self.k.at(max(t, now), self._send)

    # -- link card -------------------------------------------------------------------------
    def _card_in(self, seq: int, payload: bytes) -> None:
        now = self.k.now
        self.times.t_in[seq - 1] = now
        c = self.r.card
        start = max(now, self.bridge_free.get(c, 0))
        self.bridge_free[c] = start + self.card_p.bridge_ps(self.frame)
        ready = self.bridge_free[c] + self.card_p.engine_land_ps
        if len(self.outstanding) < self.slots:
            self._issue(seq, payload, ready)
        else:
            self.backlog.append((seq, payload))

    def _issue(self, seq: int, payload: bytes, t: int) -> None:
        self.outstanding.append((seq, payload))
        self.k.at(max(t, self.k.now), self._write, seq, payload)
        if not self.watching:
            self._watch()

    def _write(self, seq: int, payload: bytes) -> None:
        base = slot_offset(seq, self.slots, self.slot_bytes)
        last = 0
        for off, data in self.enc.writes(seq, payload, function=self.fid):
            land = self.req_link.plan(self.k.now, len(data))
            self.k.at(land, self.req_region.land, base + off, data)
            last = max(last, land)
        self.landed[seq] = last  # the request is complete in the queue from here

    def _watch(self) -> None:
        seq, _ = self.outstanding[0]
        base = slot_offset(seq, self.slots, self.slot_bytes)
        self.watching = True
        self.card_poller.arm(lambda: self.enc.ready(self.rep_region.buf, base, seq, self.slot_bytes),
                             lambda t: self.k.after(self.card_p.reply_read_ps, self._have, base))

    def _have(self, base: int) -> None:
        seq, payload = self.outstanding.popleft()
        got = self.enc.payload(self.rep_region.buf, base)
        h = self.enc.header(self.rep_region.buf, base)
        i = seq - 1
        self.times.ok[i] = got == self.fn(payload) and h.flags == 0
        now = self.k.now
        self.times.t_have[i] = now
        self.watching = False
        if self.backlog:
            bseq, bpayload = self.backlog.popleft()
            self._issue(bseq, bpayload, now)
        elif self.outstanding:
            self._watch()
        back = now if self.down is None else self.down.plan(now + self.card_p.reply_send_ps, self.frame)
        self.k.at(back, self._back, seq)

    def _back(self, seq: int) -> None:
        self.times.t_back[seq - 1] = self.k.now
        self.done[0] += 1
        if self.mode == "closed_loop" and self.sent < self.n:
            self.k.at(self.clock.at_or_after(self.k.now), self._send)

    # -- consumer endpoint -----------------------------------------------------------------
    def _arm_consumer(self) -> None:
        seq = self.next_seen
        if seq > self.n:
            return
        base = slot_offset(seq, self.slots, self.slot_bytes)
        self.poller.arm(lambda: self.enc.ready(self.req_region.buf, base, seq, self.slot_bytes),
                        lambda t: self._seen(seq, base, t))

    def _seen(self, seq: int, base: int, t: int) -> None:
        th, p = self.th, self.th.p
        if th.free <= t - p.poll_cost_ps:
            start = t
        else:  # the thread was busy: once free it polls again and takes this request
            start = self.poller.first_poll(th.free) + p.poll_cost_ps
        # an idle thread would have seen it at the first poll after it landed (this endpoint may have
        # been re-armed only after the thread served this flow's previous request)
        self.times.t_seen[seq - 1] = self.poller.first_poll(self.landed.pop(seq)) + p.poll_cost_ps
        self.times.t_start[seq - 1] = start
        t_reply = start + th.body
        t_free = t_reply if self.enc.per_piece else t_reply + p.fence_ps
        th.busy_ps += t_free - start + p.poll_cost_ps
        th.free = t_free
        th.served += 1
        self.next_seen = seq + 1
        self.k.at(t_reply, self._reply, seq, base)
        self.k.at(max(t_free, self.k.now), self._arm_consumer)

    def _reply(self, seq: int, base: int) -> None:
        h = self.enc.header(self.req_region.buf, base)
        fn = lookup(h.function).python
        writes = self.enc.writes(seq, fn(self.enc.payload(self.req_region.buf, base)), function=h.function)
        if self.enc.per_piece:
            self._post(base, writes)
        else:
            (o_data, data), word = writes
            self._post(base, [(o_data, data)])
            self.k.at(self.k.now + self.th.p.fence_ps, self._post, base, [word])

    def _post(self, base: int, writes) -> None:
        for off, data in writes:
            land = self.rep_link.plan(self.k.now, len(data))
            self.k.at(land, self.rep_region.land, base + off, data)

