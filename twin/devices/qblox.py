"""A Qblox Cluster as the control system: Q1 sequencers run the experiment on the cluster's own clock
and publish each QEC round's syndrome measurements towards the link.

Seed amd-qblox-exchange-runtime.txt: "the Cluster, a modular rack of synchronized control and
readout modules whose Q1 sequencers run the experiment, linked by the LINQ feedback network and
kept in lockstep by SYNQ", and, for the measured histograms, "the Qblox Cluster runs later in this
post, across a cable from an independent clock, spread smoothly instead".

Parameters (a scenario's ``qblox:`` section, :class:`QbloxCluster`):

* ``sequencers``: each a ``name``, its Q1ASM ``program`` and ``measurements_per_round`` (the
  acquisitions that make up its share of one round's syndrome). The program's timing comes from
  :mod:`twin.devices.q1asm`; a round's syndrome is complete when every sequencer's last acquisition
  of that round has integrated (its ``acquire`` duration).
* ``result_latency_ns``: from the end of an acquisition to its result leaving the readout module.
* ``trigger_network_ns``: the intra-stack feedback network (LINQ) carrying results to the module
  that drives the link: a parameterised latency.
* ``bits_per_measurement``: syndrome bits per acquisition (1: one bit per ancilla).
* ``clock``: ``independent`` (the cluster's own 10 MHz reference: a random phase against the link
  card drawn from the run's seed, a frequency offset ``ppm`` and a slow drift ``drift_ppb_per_s``),
  or ``card`` (phase-locked to the link card; for comparison).

* ``feedback``: how a reply reaches the programs (:class:`QbloxFeedback`), for programs that
  ``wait_trigger`` or ``set_cond`` (refused for programs that do neither).

Ports: the frames it sends (:class:`twin.devices.generator.TrafficParams`, open loop at the
program's round period). Statistics: ``period_ns``, ``first_publish_ns``, ``syndrome_bits``.
Programs whose rounds are not equally spaced are refused (the loop engines take a period).

A cluster whose programs listen (``wait_trigger``, ``set_cond``) is not open-loop traffic: its
sequencers are interpreted while the loop runs (:class:`ListeningCluster`, the event engine's
generator for it; the direct engine refuses it). Each reply back at the cluster is put on the
trigger network by the module that drives the link: on the network's next time-grid point (and
not before the network is free), a trigger on ``answer_address`` when the reply's answer bit is
1, then one on ``ready_address`` (one trigger at a time, ``spacing_ns`` apart); every sequencer
receives each ``latency_ns`` after it is sent. A program waits for the reply with
``wait_trigger ready_address,d`` and branches on the answer with ``set_cond 1,mask,op,else``
over ``answer_address`` (:mod:`twin.devices.q1asm`). Its rounds then take what the loop makes
them take: the program's stall is time on the sequencers' clock. Statistics (``stats()``):
stall per round and in total, the effective round period, conditional instructions run and
skipped against the answers.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import numpy as np
from pydantic import Field, PrivateAttr, model_validator

from twin.config import Located
from twin.config.strict import Strict
from twin.devices.generator import MAX_DRIFT_PPB_PER_S, MAX_PPM, TrafficGenerator, TrafficParams
from twin.devices.q1asm import Q1AsmError, Sequencer, Triggers, run_cluster
from twin.units import PS_PER_NS

# The trigger network, Qblox documentation ("Feedback Trigger Handling",
# docs.qblox.com/en/main/products/architecture/sequencers/trigger_handling.html): "Once a trigger is sent
# from any source, all sequencers will receive it simultaneously 212 ns later. Only one trigger may be
# sent over the backplane at once. After 252 ns, the network is ready for another trigger." Its time grid
# (docs.qblox.com/en/v0.10.0/documentation/feedback.html): "The trigger network operates on a 28ns
# timegrid ... started/aligned during module synchronization using the wait_sync instruction ...
# triggers are sent on the nearest timegrid point in the future."
TRIGGER_LATENCY_NS = 212
TRIGGER_SPACING_NS = 252
TRIGGER_GRID_NS = 28


class QbloxSequencer(Strict):
    """One Q1 sequencer: its name, Q1ASM program and acquisitions per round."""

    name: str = Field(min_length=1)
    program: str = Field(min_length=1)
    measurements_per_round: int = Field(gt=0)


class QbloxFeedback(Strict):
    """How a reply reaches the cluster's programs over the trigger network (module docstring).

    ``answer_bit``: which bit of the reply is the decoder's answer (bit ``i`` is bit ``i % 8`` of
    byte ``i // 8``, the contract's little-endian bit order: a decode study's correction of
    observable ``i``); ``answer_address`` / ``ready_address``: the trigger addresses (1..15) of
    the answer (sent only when the bit is 1) and of the reply's arrival (always, after the
    answer); ``latency_ns``, ``spacing_ns``, ``grid_ns``: the network's (Qblox's published
    212 ns, 252 ns, 28 ns).
    """

    answer_bit: int = Field(0, ge=0, le=8 * 65_536 - 1)
    answer_address: int = Field(1, ge=1, le=15)
    ready_address: int = Field(2, ge=1, le=15)
    latency_ns: int = Field(TRIGGER_LATENCY_NS, ge=0, le=10**6)
    spacing_ns: int = Field(TRIGGER_SPACING_NS, ge=1, le=10**6)
    grid_ns: int = Field(TRIGGER_GRID_NS, ge=1, le=10**6)

    @model_validator(mode="after")
    def _addresses(self):
        if self.answer_address == self.ready_address:
            raise Located(("ready_address",), self.ready_address, "the answer and the reply's arrival need two "
                          "trigger addresses (answer_address is the same)")
        return self


class QbloxCluster(Strict):
    """A Qblox Cluster control system (see module docstring for every parameter)."""

    device: str = "Qblox Cluster"
    sequencers: list[QbloxSequencer] = Field(min_length=1)
    result_latency_ns: float = Field(0.0, ge=0, le=1e6)  # ns; 1 ms bounds any real path
    trigger_network_ns: float = Field(0.0, ge=0, le=1e6)
    bits_per_measurement: int = Field(1, gt=0)
    clock: Literal["independent", "card"] = "independent"
    ppm: float = Field(0.0, ge=-MAX_PPM, le=MAX_PPM)
    drift_ppb_per_s: float = Field(0.0, ge=-MAX_DRIFT_PPB_PER_S, le=MAX_DRIFT_PPB_PER_S)
    feedback: QbloxFeedback | None = None  # how replies reach programs that listen (None: the defaults)
    _publish: list[int] | None = PrivateAttr(None)  # publish_ns(), computed once

    @model_validator(mode="after")
    def _programs(self):
        names = [s.name for s in self.sequencers]
        for i, n in enumerate(names):
            if names.index(n) != i:
                raise Located(("sequencers", i, "name"), n, "sequencer name used twice")
        if self.clock == "card" and (self.ppm or self.drift_ppb_per_s):
            raise Located(("clock",), self.clock, "ppm and drift apply only to an independent clock")
        try:
            self.publish_ns()
            seqs = [Sequencer(s.name, s.program) for s in self.sequencers]
        except Q1AsmError as e:
            raise Located(("sequencers",), "<program>", str(e)) from None
        if self.feedback is not None and not any(q.listens() for q in seqs):
            raise Located(("feedback",), "{...}", "the programs neither wait_trigger nor set_cond: no reply reaches "
                          "them (add them, or leave feedback out)")
        fb = self.fb()
        for i, q in enumerate(seqs):
            ops = {ins.op: ins for ins in q.instrs}
            if "set_cond" in ops and "set_latch_en" not in ops:
                raise Located(("sequencers", i, "program"), "<program>", f"line {ops['set_cond'].line}: set_cond "
                              "with no set_latch_en 1: the trigger counters never count, the condition never changes")
            for ins in q.instrs:
                if ins.op == "wait_trigger" and ins.args and ins.args[0] != str(fb.ready_address):
                    raise Located(("sequencers", i, "program"), "<program>", f"line {ins.line}: wait_trigger "
                                  f"{ins.args[0]}: the replies arrive on address {fb.ready_address} "
                                  "(feedback.ready_address); no trigger ever comes on another")
        return self

    def fb(self) -> QbloxFeedback:
        """The feedback settings (the defaults when the block is left out)."""
        return self.feedback or QbloxFeedback()

    def listens(self) -> bool:
        """Whether any program waits for a reply or branches on its answer."""
        return any(Sequencer(s.name, s.program).listens() for s in self.sequencers)

    def publish_ns(self) -> list[int]:
        """Each round's publish instant in ns of the cluster's time, from its programs: the latest
        sequencer's last acquisition of the round, plus its duration, ``result_latency_ns`` and
        ``trigger_network_ns``. Raises :class:`Q1AsmError` for a bad program or when sequencers
        complete different numbers of rounds (acquisitions not a multiple of measurements_per_round
        count as an error too)."""
        if self._publish is not None:
            return list(self._publish)
        tls = run_cluster({s.name: s.program for s in self.sequencers})
        ends: list[list[int]] = []
        for s in self.sequencers:
            tl = tls[s.name]
            m = s.measurements_per_round
            if not tl.acquisitions:
                raise Q1AsmError(f"sequencer {s.name!r}: the program acquires nothing")
            if len(tl.acquisitions) % m:
                raise Q1AsmError(f"sequencer {s.name!r}: {len(tl.acquisitions)} acquisitions are not whole rounds "
                                 f"of {m}")
            ends.append([tl.acquisitions[k] + tl.durations[k] for k in range(m - 1, len(tl.acquisitions), m)])
        counts = {len(e) for e in ends}
        if len(counts) != 1:
            raise Q1AsmError("sequencers complete different numbers of rounds: "
                             + ", ".join(f"{s.name} {len(e)}" for s, e in zip(self.sequencers, ends)))
        extra = self.result_latency_ns + self.trigger_network_ns
        self._publish = [int(round(max(col) + extra)) for col in zip(*ends)]
        return list(self._publish)

    def period_ns(self) -> int:
        """The program's round period in ns. Raises :class:`Q1AsmError` with fewer than two rounds or
        unequal spacing."""
        t = self.publish_ns()
        if len(t) < 2:
            raise Q1AsmError("the programs publish fewer than two rounds: no round period to repeat")
        gaps = {b - a for a, b in zip(t, t[1:])}
        if len(gaps) != 1:
            raise Q1AsmError(f"rounds are not equally spaced (gaps {sorted(gaps)} ns); the loop engines need "
                             "a round period")
        return gaps.pop()

    def syndrome_bits(self) -> int:
        """Syndrome bits per round over all sequencers."""
        return sum(s.measurements_per_round for s in self.sequencers) * self.bits_per_measurement

    def traffic(self, rounds: int, frame_bytes: int, carry_syndrome: bool = True) -> TrafficParams:
        """The cluster's frames as open-loop traffic: one per round at the program's period, on a
        1 ns timing grid (Q1 durations are whole ns), first at the first publish instant. With
        ``carry_syndrome`` each frame's leading :meth:`syndrome_bits` are the round's acquisition
        results and the rest is zero padding; without, the workload fills the frames."""
        first = self.publish_ns()[0]
        listens = self.listens()
        if listens and rounds > len(self.publish_ns()):
            raise ValueError(f"the programs publish {len(self.publish_ns())} rounds and wait for replies: they run "
                             f"their own rounds, fewer than the {rounds} asked for (raise their loop counts)")
        return TrafficParams(mode="open_loop", rounds=rounds, frame_bytes=frame_bytes,
                             syndrome_bits=self.syndrome_bits() if carry_syndrome else 0,
                             period_ps=self.period_ns() * PS_PER_NS, clock=self.clock, clock_ps=PS_PER_NS,
                             ppm=self.ppm if self.clock == "independent" else 0.0,
                             drift_ppb_per_s=self.drift_ppb_per_s if self.clock == "independent" else 0.0,
                             offset_ps=first * PS_PER_NS if self.clock == "independent" and not listens else 0,
                             feedback=self if listens else None)

    def generator(self, kernel, params: TrafficParams, clock, send, salt: int, payloads=None, gaps_ps=None):
        """The event engine's generator for listening programs (:class:`ListeningCluster`)."""
        return ListeningCluster(kernel, params, clock, send, salt, payloads, self)


class ListeningCluster(TrafficGenerator):
    """The cluster's sequencers interpreted while the loop runs: each round's request leaves at its
    publish instant (as :meth:`QbloxCluster.publish_ns` computes it, now with the waits the
    replies impose), each reply goes onto the trigger network (module docstring), and a sequencer
    blocked on it resumes when its trigger arrives. Cluster time (integer ns from the programs'
    start) maps to the kernel's through the cluster's ``clock`` (1 ns edges): ``clock.edge(t_ns)``.

    Ports as :class:`TrafficGenerator` (``setup``; ``reply(seq, payload)`` with the reply's
    bytes). Raises RuntimeError when the programs stop before the run's rounds are published or
    wait for a trigger no reply will send. Statistics: :meth:`stats`.
    """

    def __init__(self, kernel, params: TrafficParams, clock, send, salt: int, payloads, cluster: QbloxCluster):
        super().__init__(kernel, params, clock, send, salt, payloads)
        self.cluster, self.fb = cluster, cluster.fb()
        self.seqs = [Sequencer(s.name, s.program) for s in cluster.sequencers]
        self.m = [s.measurements_per_round for s in cluster.sequencers]
        self.board = Triggers()
        self.extra = cluster.result_latency_ns + cluster.trigger_network_ns
        self.published: list[int] = []  # ns, per round
        self.sync0: int | None = None  # the trigger network's grid starts at the first wait_sync
        self.net_free = 0  # ns: the network is free for the next trigger
        self.wakes: set[int] = set()
        self.answers: list[int] = []  # per reply, in arrival order: its answer bit
        self.reply_seqs: list[int] = []

    def setup(self) -> None:
        """Run the programs as far as they go before any reply."""
        self._advance()

    def _now_ns(self) -> int:
        return self.clock.index_at_or_after(self.kernel.now)

    def _advance(self) -> None:
        """Run every sequencer until it waits for what the board does not know yet; line up
        ``wait_sync``; publish the rounds now complete; wake up later where a condition needs the
        board known further."""
        self.board.known_ns = self._now_ns() + self.fb.latency_ns - 1  # any later reply's trigger arrives later
        seqs = self.seqs
        progress = True
        while progress:
            progress = False
            for q in seqs:
                if not q.done and (q.blocked is None or self._unblocked(q)):
                    if q.run(self.board) == "sync":
                        q.blocked = ("sync", 0)
                    progress = True
            live = [q for q in seqs if not q.done]
            syncing = [q for q in live if q.blocked == ("sync", 0)]
            if syncing and len(syncing) < len(seqs) and len(live) < len(seqs):
                raise RuntimeError(f"sequencer {syncing[0].name!r} waits at wait_sync while another stopped")
            if syncing and len(syncing) == len(live):
                t_sync = max(q.t for q in live)
                if self.sync0 is None:
                    self.sync0 = t_sync + live[0].sync_duration
                for q in live:
                    q.resume_after_sync(t_sync)
                    q.blocked = None
                progress = True
        self._publish()
        for q in seqs:
            if not q.done and q.blocked is not None and q.blocked[0] == "time":
                t = q.blocked[1] - self.fb.latency_ns + 1  # the board is known to q's instant from then on
                at = self.clock.edge(max(0, t))
                if at > self.kernel.now and at not in self.wakes:
                    self.wakes.add(at)
                    self.kernel.at(at, self._wake, at)
        if all(q.done for q in seqs) and self.sent + len(self._pending) < self.p.rounds:
            raise RuntimeError(f"the programs stopped after {len(self.published)} rounds, {self.p.rounds} asked for")

    def _unblocked(self, q: Sequencer) -> bool:
        """Whether ``q`` can go on now (the board has what it waited for)."""
        what, x = q.blocked
        if what == "trigger":
            return q.taken[x] < len(self.board.arrivals[x])
        if what == "time":
            return x <= self.board.known_ns
        return False  # at wait_sync: lined up in _advance

    def _wake(self, at: int) -> None:
        self.wakes.discard(at)
        self._advance()

    @property
    def _pending(self) -> list[int]:
        return self.published[self.sent:]

    def _publish(self) -> None:
        """Schedule the send of every round whose acquisitions every sequencer has made."""
        rounds = min(len(q.tl.acquisitions) // m for q, m in zip(self.seqs, self.m))
        for r in range(len(self.published), min(rounds, self.p.rounds)):
            end = max(q.tl.acquisitions[(r + 1) * m - 1] + q.tl.durations[(r + 1) * m - 1]
                      for q, m in zip(self.seqs, self.m))
            t = int(round(end + self.extra))
            self.published.append(t)
            at = self.clock.edge(t)
            if at < self.kernel.now:
                raise RuntimeError(f"round {r + 1} published at {t} ns, before now")
            self.kernel.at(at, self._send_next)

    def reply(self, seq: int, payload: bytes | None = None) -> None:
        """A reply is back at the cluster (now): its answer (from ``payload``, its bytes; none: 0) and
        its arrival go onto the network."""
        payload = payload or b""
        self.received += 1
        fb = self.fb
        byte, bit = divmod(fb.answer_bit, 8)
        answer = (payload[byte] >> bit) & 1 if byte < len(payload) else 0
        self.answers.append(answer)
        self.reply_seqs.append(seq)
        t = self._now_ns()
        g0 = self.sync0 or 0
        t = g0 + -(-(t - g0) // fb.grid_ns) * fb.grid_ns if t > g0 else g0
        t = max(t, self.net_free)
        if answer:
            self.board.add(fb.answer_address, t + fb.latency_ns, seq)
            t += fb.spacing_ns
        self.board.add(fb.ready_address, t + fb.latency_ns, seq)
        self.net_free = t + fb.spacing_ns
        self._advance()

    def stats(self) -> dict:
        """The program's statistics, in ps of the cluster's clock (its ns x 1000): ``stall_ps`` (per
        reply waited for, in arrival order: the longest stall over the sequencers' ``wait_trigger``
        that took it; int64 array), ``stall_total_ps``, ``period_ps`` (the gaps between the rounds'
        publish instants: the effective cycle time, one fewer than the rounds sent),
        ``nominal_period_ps`` (the programs' period with every reply there at once), ``conditional``
        (instructions under ``set_cond``: ``ran``, ``skipped``; ``ran_by_reply``: per reply, whether
        an instruction after its ``wait_trigger`` ran; ``answers``: the replies' answer bits) and
        ``reply_seqs`` (the replies' sequence numbers in arrival order)."""
        self.board.known_ns = 1 << 62  # the run is over: no trigger comes any more; the programs go on to
        for q in self.seqs:  # their next wait (the conditional instructions after the last reply run)
            if not q.done and q.blocked is not None and q.blocked[0] == "time":
                q.run(self.board)
        n = len(self.answers)
        stall = np.zeros(n, np.int64)
        ran = np.zeros(n, bool)
        cond_run = cond_skip = 0
        for q in self.seqs:
            for k, st in enumerate(q.tl.stall_ns()[:n]):
                stall[k] = max(stall[k], st)
            for _, _, did, w in q.tl.conditional:
                cond_run += did
                cond_skip += not did
                if did and 1 <= w <= n:
                    ran[w - 1] = True
        pub = np.asarray(self.published[:self.sent], np.int64)
        return {"stall_ps": stall * PS_PER_NS, "stall_total_ps": int(stall.sum()) * PS_PER_NS,
                "period_ps": np.diff(pub) * PS_PER_NS, "nominal_period_ps": self.cluster.period_ns() * PS_PER_NS,
                "conditional": {"ran": int(cond_run), "skipped": int(cond_skip), "ran_by_reply": ran,
                                "answers": np.asarray(self.answers, np.int64)},
                "reply_seqs": np.asarray(self.reply_seqs, np.int64)}


if TYPE_CHECKING:  # mypy checks that these satisfy the node protocol (twin/nodes/protocol.py)
    from twin.nodes.protocol import ControlNode
    _listeningcluster: type[ControlNode] = ListeningCluster
