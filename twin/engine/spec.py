"""A fully resolved loop: every parameter in integer picoseconds, ready to simulate."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from twin.devices.consumer import ConsumerParams
from twin.devices.generator import TrafficParams
from twin.devices.linkcard import LinkCardParams
from twin.engine.hops import Hops
from twin.faults import FaultPlan
from twin.kernel.posted import Wire
from twin.kernel.sim import stream_rng
from twin.links.aurora import Aurora64B66B

if TYPE_CHECKING:
    from twin.devices.handoff import HandoffSpec


@dataclass(frozen=True)
class Control:
    """The control side of a loop: its node ``kind`` and ``model`` (the registry's factory builds
    it, :mod:`twin.nodes.models`) and ``params``, its own parameters when its kind declares a
    ``params:`` block (e.g. a :class:`twin.devices.zhinst.QccsParams`; None: the traffic is all)."""

    kind: str = "generator"
    model: str = "sim"
    params: object = None


@dataclass(frozen=True)
class LoopSpec:
    """One loop: a generator, the link card, one consumer, and the links between them.

    name: the consumer's name (e.g. ``"mi210"``); also names the loop's random streams.
    card, consumer, traffic: device parameters.
    request_link / reply_link: the paths card -> consumer memory and consumer -> card memory (any
        :class:`twin.kernel.posted.Wire`: PCIe, or a RoCE v2 path, :mod:`twin.calibration.roce`).
    jitter_ps: scale of the exponential extra delay on every posted write (per host path).
    aurora: the serial link from an external control system, or ``None`` when the generator
        sits on the link card (the seeds' measurement setup).
    slots: request/reply queue depth.
    seed: run seed.
    faults: faults to inject (:class:`twin.faults.FaultPlan`; none by default).
    function: the function id every request names (0: the built-in echo; see
        :mod:`twin.runtime.functions`).
    model: what stands for the consumer: "sim" (Python behaviour), "code" (the C runtime library
        on the twin's bytes; the timing model is the same for both), "rtl" (the V80 logic in
        Verilog, cycle by cycle; twin.rtl) or "live" (a live device through ``hw_bridge``: its
        measured service times advance simulated time).
    card_model: what stands for the link card's engine: "sim" or "rtl".
    rtl: RTL options (a :class:`twin.rtl.loop.RtlConfig`: user function core, waveforms) or None.
    slot_bytes: fixed slot size of both queues in bytes (a multiple of 16 that holds a message), or
        ``None`` for the smallest whole number of 16-byte pieces that does (at least 32).
    bridge: for model "live", the :class:`hw_bridge.contract.BridgeSettings`; else None.
    handoff: a second stage (:class:`twin.devices.handoff.HandoffSpec`): the consumer receives each
        request and hands it to another device through a second queue pair in memory; None: one stage.
    control: the control side's node kind, model and own parameters (:class:`Control`; default the
        generator of ``traffic``).
    """

    name: str
    card: LinkCardParams
    consumer: ConsumerParams
    traffic: TrafficParams
    request_link: Wire
    reply_link: Wire
    jitter_ps: int
    aurora: Aurora64B66B | None = None
    slots: int = 16
    seed: int = 0
    faults: FaultPlan = FaultPlan()
    function: int = 0
    model: str = "sim"
    slot_bytes: int | None = None
    card_model: str = "sim"
    rtl: object = None
    bridge: object | None = None
    handoff: HandoffSpec | None = None
    control: Control = Control()

    @property
    def event_only(self) -> str | None:
        """Why only an event engine (the simpy reference, or the compiled event core where
        :func:`twin.engine.features.refusal` allows) runs this loop, or None: the direct engine
        refuses such a loop, a behaviour its recurrence does not compute (a hand-off to a second
        device, :mod:`twin.devices.handoff`)."""
        if self.handoff is not None:
            return (f"the request is handed from {self.name} to {self.handoff.to} through a second queue pair "
                    "(a two-stage consumer): the event model runs it")
        return None

    def stream(self, what: str) -> str:
        """Name of one of this loop's random streams."""
        return f"{self.name}.{what}"

    def draws(self) -> tuple[int, int, int]:
        """Per-run random constants: (consumer poll phase, generator clock phase, payload salt)."""
        rng = stream_rng(self.seed, self.stream("setup"))
        phase = int(rng.integers(0, self.consumer.poll_period_ps))
        t = self.traffic
        span = t.period_ps if t.mode == "open_loop" and t.period_ps else t.clock_ps
        gen_phase = int(rng.integers(0, max(1, span))) if self.traffic.clock == "independent" else 0
        salt = int(rng.integers(0, 2**63))
        if self.consumer.poll_phase_ps is not None:
            phase = self.consumer.poll_phase_ps
        return phase, gen_phase, salt


@dataclass
class LoopResult:
    """Per-round timestamps of one loop (int64 picoseconds, one entry per round, in order).

    t_send: request leaves the generator; t_in: request enters the link card (card clock edge);
    t_have: the card has the reply (read out of its memory, checked); t_back: reply is back at
    the generator. ``ok``: the card's check of each reply against the reference answer.
    ``stats``: counters from the devices (``mismatches``, ``backlog_max``, ``events``, ...).
    ``hops``: every round's instants at each hop inside the card boundary (:class:`Hops`).
    """

    name: str
    engine: str
    t_send: np.ndarray
    t_in: np.ndarray
    t_have: np.ndarray
    t_back: np.ndarray
    ok: np.ndarray
    stats: dict = field(default_factory=dict)
    hops: Hops | None = None  # per-round instants inside the card boundary (twin.engine.hops)

    @property
    def rtt_ps(self) -> np.ndarray:
        """Card-boundary round trip per round: request enters the card -> card has the reply."""
        return self.t_have - self.t_in

    @property
    def loop_ps(self) -> np.ndarray:
        """Generator-to-generator round trip per round (equals ``rtt_ps`` plus the link, if any)."""
        return self.t_back - self.t_send

    @property
    def mismatches(self) -> int:
        """Replies the card found wrong."""
        return int((~self.ok).sum())

    def head(self, m: int) -> "LoopResult":
        """The first ``m`` rounds (same name, engine and stats; hops cut too)."""
        return LoopResult(self.name, self.engine, self.t_send[:m], self.t_in[:m], self.t_have[:m], self.t_back[:m],
                          self.ok[:m], dict(self.stats), None if self.hops is None else self.hops.head(m))
