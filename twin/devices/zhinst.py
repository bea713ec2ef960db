"""A Zurich Instruments QCCS as the control system (node kind ``zhinst_qccs``): the PQSC's start
trigger begins each QEC round, the quantum analyzer integrates the readout, the syndrome leaves
for the link card across the Aurora cable, and the correction that comes back is measured against
the feedback latency QCCS reaches on its own native path (Zurich Instruments' published model,
the PyPI package ``zhinst-timing-models``, MIT).

This module is the whole kind: its parameters (:class:`QccsParams`, a scenario node's ``params:``
block), its declaration (``twin components zhinst_qccs``), its node (:class:`ZhinstQccs`, a
:class:`twin.nodes.protocol.ControlNode`) and its factory (:func:`build_node`); its registration is
one ``register(Model(...))`` in :mod:`twin.nodes.models`.

The physics, each step labelled *published* (the source says so) or *assumption* (why):

1. **Rounds start on the QCCS's own trigger clock.** Round ``r`` (0-based) starts at edge
   ``r * period_ns / 4 ns`` of the sequencer clock: the PQSC sends a ZSync start trigger every
   ``period_ns`` (the PQSC's trigger holdoff; *published*: "a minimum value and a granularity of
   100 ns", zhinst-toolkit, ``PQSC.arm(holdoff=...)``), or with ``trigger_source: internal`` the
   SHFQC's own trigger (*assumption*: the same 100 ns grid). The sequencers run at 250 MHz
   (*published*: "sequencer clock cycles (250 MHz or 4 ns steps)", Zurich Instruments'
   zhinst-toolkit feedback examples). ``clock: independent`` (default): the QCCS runs from its
   own reference, a random phase against the link card drawn from the run's seed and a frequency
   offset ``ppm`` (*assumption*: the PQSC is not locked to the link card's oscillator, as a Qblox
   cluster is not); ``clock: card``: phase-locked to the card, for comparison.
2. **The syndrome request leaves when the readout completes.** ``samples`` is the number of
   samples from the trigger to the completion of the integration (the wait before ``startQA``,
   the integration delay and length) at 2.0 GSa/s (*published*: the model's ``samples``
   argument, "the number of samples from the trigger to the completion of the integration",
   ``SAMPLE_FREQUENCY = 2.0e9`` in ``zhinst.timing_models.common``). The request leaves at
   ``trigger + samples x 500 ps + result_latency_ns``; ``result_latency_ns`` is the result's way
   from the integration unit onto the Aurora cable (*assumption*: no published figure; 0 unless
   the scenario gives it). Durations inside a round are on the nominal time scale
   (*assumption*: at ``ppm`` offset they differ by ppm x duration, 10 ps for 1 us at 10 ppm).
   The frames are those of :func:`twin.devices.generator.payload_for` (or the workload's).
3. **The native path is the comparison.** With time-based feedback the generator's sequencer
   plays a conditional pulse (``executeTableEntry(ZSYNC_DATA_PQSC_DECODER, latency)``) at a fixed
   number of sequencer cycles after the start trigger; the earliest that works on QCCS's own path
   (QA -> ZSync -> PQSC register bank -> forwarded, or through the PQSC's decoder -> ZSync -> the
   generator) is the model's ``QCCSFeedbackModel(get_feedback_system_description(generator,
   analyzer, pqsc_mode, trigger_source, feedback_path, automatic_triggerdelays))
   .get_latency(samples)`` cycles (*published*, version :data:`MODEL_VERSION`), x 4 ns: the
   native feedback latency ``native_ps``. ``feedback``: ``decoder`` (the PQSC's decoder),
   ``register_forward`` (the readout register forwarded as is) or ``internal`` (an SHFQC's own
   QA -> SG path, no PQSC). The model's numbers on the ZSync paths are the same for an SHFQA and
   an SHFQC analyzer and for an SHFSG and an SHFQC generator (*published*: one branch each in
   ``get_feedback_system_description``): the analyzer is not a parameter (SHFQC for
   ``feedback: internal``, else SHFQA) and an SHFQC generator on a ZSync path is refused (write
   SHFSG), so that every key changes the outcome.
4. **The external decoding loop.** The reply comes back across the cable to the QCCS at
   ``t_back``; ``reply_latency_ns`` more takes the correction to the generator's sequencer
   (*assumption*: no published figure for the link-to-ZSync hop; 0 unless given). The loop's
   reaction time of round ``r`` is ``t_back + reply_latency - trigger_r``, compared with
   ``native_ps``. The conditional pulse reads its correction ``feedback_delay_cycles`` sequencer
   cycles after the trigger (none: at the native latency, the earliest QCCS's own path allows); a
   round whose correction is not there by then plays on the previous one: it is late
   (*published*: time-based feedback reads at its fixed time, "prone to errors" if the data is not
   there; the trigger-based alternative is not modelled). The control side does not wait: the
   next trigger comes ``period_ns`` later whatever the replies do (open loop).

Statistics (:meth:`ZhinstQccs.stats`): the control program's section with ``stall_ps`` (zero:
time-based feedback never stalls), ``period_ps`` (the gaps between triggers),
``nominal_period_ps`` and ``feedback``: ``native_ps``, ``read_ps``, per round ``reaction_ps``
(int64) and ``late`` (bool); results.json's ``program.feedback`` summarises them
(:func:`twin.output.program.program_summary`).
"""
from __future__ import annotations

from functools import cached_property
from importlib.metadata import version
from typing import TYPE_CHECKING, Callable, Literal

import numpy as np
from pydantic import Field, model_validator

from twin.config import Located
from twin.config.strict import Strict
from twin.devices.generator import MAX_PPM, TrafficParams, payload_for
from twin.kernel import Clock, Kernel
from twin.nodes.declare import NodeKind, P, Port, Stat, param_fields
from twin.nodes.protocol import NoTrace, ProgramStats
from twin.units import PS_PER_NS

MODEL_PACKAGE = "zhinst-timing-models"
MODEL_VERSION = version(MODEL_PACKAGE)
SEQUENCER_CLOCK_PS = 4000  # 250 MHz ("sequencer clock cycles (250 MHz or 4 ns steps)", zhinst-toolkit examples)
SAMPLE_PS = 500  # 2.0 GSa/s (zhinst.timing_models.common.SAMPLE_FREQUENCY)
TRIGGER_GRID_NS = 100  # the PQSC's holdoff: "a minimum value and a granularity of 100 ns" (zhinst-toolkit)
MIN_SAMPLES = 20  # zhinst.timing_models: "samples_until_integration_complete must be at least 20"


class QccsParams(Strict):
    """A QCCS control system (a scenario node's ``params:``; module docstring for each)."""

    samples: int = Field(ge=MIN_SAMPLES, le=2**24, strict=True)
    period_ns: int = Field(ge=TRIGGER_GRID_NS, le=10**9, strict=True)
    generator: Literal["SHFSG", "HDAWG", "SHFQC"] = "SHFSG"
    feedback: Literal["decoder", "register_forward", "internal"] = "decoder"
    trigger_source: Literal["zsync", "internal"] = "zsync"
    automatic_triggerdelays: bool = True
    result_latency_ns: float = Field(0.0, ge=0, le=1e6)
    reply_latency_ns: float = Field(0.0, ge=0, le=1e6)
    feedback_delay_cycles: int | None = Field(None, ge=1, le=2**24, strict=True)
    clock: Literal["independent", "card"] = "independent"
    ppm: float = Field(0.0, ge=-MAX_PPM, le=MAX_PPM)

    @model_validator(mode="after")
    def _consistent(self):
        if self.period_ns % TRIGGER_GRID_NS:
            raise Located(("period_ns",), self.period_ns, f"the trigger period is a whole number of {TRIGGER_GRID_NS} "
                          "ns (the PQSC's holdoff granularity)")
        if self.clock == "card" and self.ppm:
            raise Located(("ppm",), self.ppm, "applies only to an independent clock (clock: independent)")
        if self.generator == "SHFQC" and self.feedback != "internal":
            raise Located(("generator",), self.generator, f"on the PQSC path ({self.feedback}) the published model "
                          "times an SHFQC's signal generator exactly as an SHFSG's: write SHFSG (or feedback: "
                          "internal, the SHFQC's own path)")
        if self.trigger_source == "internal" and self.feedback != "internal":
            raise Located(("trigger_source",), self.trigger_source, "the SHFQC's internal trigger serves its internal "
                          f"feedback only; the PQSC path ({self.feedback}) starts on the PQSC's ZSync trigger")
        try:
            native = self.native_cycles
        except ValueError as e:  # the package's own refusal of the combination
            raise Located(("generator",), self.generator, f"{MODEL_PACKAGE}: {e}") from None
        period_ps = self.period_ns * PS_PER_NS
        if self.samples * SAMPLE_PS + self.result_latency_ns * PS_PER_NS >= period_ps:
            raise Located(("samples",), self.samples, f"the readout ({self.samples} samples at 2 GSa/s, then "
                          f"result_latency_ns) does not end before the next trigger {self.period_ns} ns later")
        read = self.feedback_delay_cycles or native
        if read * SEQUENCER_CLOCK_PS >= period_ps:
            raise Located(("feedback_delay_cycles",) if self.feedback_delay_cycles else ("period_ns",),
                          self.feedback_delay_cycles or self.period_ns, f"the conditional pulse reads its correction "
                          f"{read} cycles ({read * 4} ns) after the trigger, not before the next trigger "
                          f"{self.period_ns} ns later")
        return self

    @cached_property
    def native_cycles(self) -> int:
        """The native feedback latency in sequencer cycles (4 ns): the published model's for this
        configuration and ``samples``. Raises ValueError where the package refuses the combination."""
        from zhinst.timing_models import (
            FeedbackPath,
            PQSCMode,
            QAType,
            QCCSFeedbackModel,
            SGType,
            TriggerSource,
            get_feedback_system_description,
        )
        internal = self.feedback == "internal"
        desc = get_feedback_system_description(
            generator_type=SGType[self.generator], analyzer_type=QAType.SHFQC if internal else QAType.SHFQA,
            pqsc_mode=None if internal else PQSCMode[self.feedback.upper()],
            trigger_source=TriggerSource[self.trigger_source.upper()],
            feedback_path=FeedbackPath.INTERNAL if internal else FeedbackPath.ZSYNC,
            automatic_triggerdelays=self.automatic_triggerdelays)
        return int(QCCSFeedbackModel(desc).get_latency(self.samples))

    @property
    def readout_ps(self) -> int:
        """Trigger -> the request leaves: the integration's samples at 2 GSa/s, then ``result_latency_ns``."""
        return self.samples * SAMPLE_PS + int(round(self.result_latency_ns * PS_PER_NS))

    @property
    def read_ps(self) -> int:
        """Trigger -> the conditional pulse reads its correction (``feedback_delay_cycles``, or the native latency)."""
        return (self.feedback_delay_cycles or self.native_cycles) * SEQUENCER_CLOCK_PS

    def traffic(self, rounds: int, frame_bytes: int) -> TrafficParams:
        """The flow's traffic: one request per round at ``period_ns``, on the sequencer clock (the
        node times its sends itself: :class:`ZhinstQccs`)."""
        return TrafficParams(mode="open_loop", rounds=rounds, frame_bytes=frame_bytes,
                             period_ps=self.period_ns * PS_PER_NS, clock=self.clock, clock_ps=SEQUENCER_CLOCK_PS,
                             ppm=self.ppm if self.clock == "independent" else 0.0)

    def describe(self) -> dict:
        """results.json's ``traffic`` block for this control side."""
        return {"mode": "open_loop", "clock": self.clock, "period_ns": self.period_ns, "ppm": self.ppm,
                "control": f"Zurich Instruments QCCS, {self.generator} (aurora)",
                "native_feedback": {"model": f"{MODEL_PACKAGE} {MODEL_VERSION}", "path": self.feedback,
                                    "samples": self.samples, "cycles": self.native_cycles,
                                    "ns": self.native_cycles * SEQUENCER_CLOCK_PS / PS_PER_NS}}

    def check_scenario(self, sc, index: int) -> None:
        """Refuse a run scenario this control side cannot stand in (``index``: its node's). Raises
        :class:`Located` naming the key."""
        where = ("nodes", index, "params")
        if sc.flows:
            raise Located(("flows",), "[...]", "a QCCS control system sends one stream of rounds: no flows")
        if sc.qblox is not None:
            raise Located(("qblox",), sc.qblox.device, "the control side is the QCCS node; a Qblox cluster is another")
        if "traffic" in sc.model_fields_set:
            raise Located(("traffic",), "<set>", f"the QCCS's rounds come from its trigger ({where[-1]}.period_ns); "
                          "leave traffic out")
        if not sc.external_control():
            raise Located(("nodes", index, "kind"), "zhinst_qccs", "a QCCS reaches the link card across a cable: "
                          "join it by an aurora link")
        if sc.faults is not None and sc.faults.drop_frame is not None:
            raise Located(("faults", "drop_frame"), "{...}", "a resent frame needs closed-loop traffic; the QCCS's "
                          "rounds are open loop on its trigger")


class ZhinstQccs(NoTrace):
    """The QCCS on the timeline (a :class:`twin.nodes.protocol.ControlNode`; module docstring).

    Ports: ``send(seq, payload)`` at each round's request instant; :meth:`reply` when a reply is back.
    """

    def __init__(self, kernel: Kernel, params: QccsParams, traffic: TrafficParams, clock: Clock,
                 send: Callable[[int, bytes], None], salt: int, payloads: Callable[[int], bytes] | None = None):
        self.kernel, self.p, self.traffic, self.clock = kernel, params, traffic, clock
        self.send, self.salt, self.payloads = send, salt, payloads
        self.cycles = traffic.period_ps // SEQUENCER_CLOCK_PS  # sequencer cycles per round
        self.readout = params.readout_ps
        n = traffic.rounds
        self.t_trigger = np.zeros(n, np.int64)
        self.t_back = np.zeros(n, np.int64)
        self.sent = 0
        self.received = 0

    def setup(self) -> None:
        """Schedule round 1's request (trigger at the sequencer clock's edge 0)."""
        self._schedule(0)

    def _schedule(self, r: int) -> None:
        t = self.clock.edge(r * self.cycles)
        self.t_trigger[r] = t
        self.kernel.at(t + self.readout, self._send)

    def _send(self) -> None:
        self.sent += 1
        seq = self.sent
        tr = self.traffic
        payload = self.payloads(seq) if self.payloads is not None else payload_for(seq, tr.frame_bytes, self.salt)
        self.send(seq, payload)
        if seq < tr.rounds:
            self._schedule(seq)

    def reply(self, seq: int, payload: bytes | None = None) -> None:
        """Reply ``seq`` is back at the QCCS end of the cable (now)."""
        self.received += 1
        self.t_back[seq - 1] = self.kernel.now

    def stats(self) -> dict:
        """The control program's section (module docstring), over the rounds whose replies are back."""
        n = self.received
        reaction = self.t_back[:n] + int(round(self.p.reply_latency_ns * PS_PER_NS)) - self.t_trigger[:n]
        return {"stall_ps": np.zeros(n, np.int64), "stall_total_ps": 0,
                "period_ps": np.diff(self.t_trigger[:self.sent]), "nominal_period_ps": self.traffic.period_ps,
                "feedback": {"native_ps": self.p.native_cycles * SEQUENCER_CLOCK_PS, "read_ps": self.p.read_ps,
                             "reaction_ps": reaction, "late": reaction > self.p.read_ps}}

    def finish(self) -> ProgramStats:
        """Requests sent, replies received and the program's section (:meth:`stats`)."""
        return ProgramStats(self.sent, self.received, self.stats())


def build_node(ctx) -> ZhinstQccs:
    """The registered factory: the QCCS of one flow from its :class:`twin.engine.event.NodeContext`
    (``ctx.spec.control.params``: its :class:`QccsParams`)."""
    tr = ctx.spec.traffic
    return ZhinstQccs(ctx.kernel, ctx.spec.control.params, tr, tr.make_clock(ctx.gen_phase_ps), ctx.send, ctx.salt,
                      ctx.workload.payloads)


ZI = f"{MODEL_PACKAGE} {MODEL_VERSION} (Zurich Instruments, MIT)"
_PARAMS = {
    "samples": P("sample", f"{ZI}: get_latency(samples), samples from the trigger to the completion of the "
                 "integration at 2.0 GSa/s", "trigger -> readout integration complete (wait before startQA, "
                 "integration delay and length)", "scenario nodes[].params.samples"),
    "period_ns": P("ns", "zhinst-toolkit PQSC.arm: holdoff with a minimum and a 100 ns granularity",
                   "the start trigger's period: one QEC round", "scenario nodes[].params.period_ns"),
    "generator": P("", f"{ZI}: SGType", "the signal generator playing the conditional pulse: SHFSG, HDAWG (SHFQC: "
                   "feedback internal)", "scenario nodes[].params.generator"),
    "feedback": P("", f"{ZI}: PQSCMode and FeedbackPath", "the native path: decoder (the PQSC's), register_forward "
                  "or internal (an SHFQC's QA -> SG)", "scenario nodes[].params.feedback"),
    "trigger_source": P("", f"{ZI}: TriggerSource", "zsync (the PQSC) or internal (an SHFQC, internal feedback)",
                        "scenario nodes[].params.trigger_source"),
    "automatic_triggerdelays": P("", f"{ZI}: get_feedback_system_description(automatic_triggerdelays)",
                                 "the instruments' automatic output alignment (adds trigger delays)",
                                 "scenario nodes[].params.automatic_triggerdelays"),
    "result_latency_ns": P("ns", "assumption: no published figure for the result's way onto the Aurora cable",
                           "integration complete -> the request on the cable",
                           "scenario nodes[].params.result_latency_ns"),
    "reply_latency_ns": P("ns", "assumption: no published figure for the link-to-ZSync hop", "reply back at the "
                          "QCCS -> the correction at the generator's sequencer",
                          "scenario nodes[].params.reply_latency_ns"),
    "feedback_delay_cycles": P("cycle", f"{ZI}: time-based feedback reads at a fixed latency after the trigger; "
                               "none: the model's (the earliest QCCS's own path allows)", "trigger -> the conditional "
                               "pulse reads its correction, in 4 ns sequencer cycles",
                               "scenario nodes[].params.feedback_delay_cycles"),
    "clock": P("", "assumption: the QCCS runs from its own reference, not locked to the link card",
               "independent (random phase, ppm) or card (phase-locked)", "scenario nodes[].params.clock"),
    "ppm": P("ppm", "assumption: 0 (an ideal oscillator)", "independent clock: frequency offset",
             "scenario nodes[].params.ppm"),
}

KIND = NodeKind(
    "zhinst_qccs",
    "A Zurich Instruments QCCS (PQSC + SHFQA/SHFQC/SHFSG/HDAWG) as the control system: rounds start on its "
    "trigger clock, each round's syndrome leaves when the readout integration completes, and the loop's reaction "
    "time is measured against the native feedback latency of Zurich Instruments' published model "
    "(twin.devices.zhinst).",
    params=param_fields("twin.devices.zhinst:QccsParams", _PARAMS),
    ports=(Port("send", "out", "each round's request towards the link card across the Aurora cable"),
           Port("reply", "in", "a reply is back at the QCCS end of the cable")),
    stats=(Stat("sent", "", "requests sent"), Stat("received", "", "replies received"),
           Stat("program.feedback.native_ns", "ns", "the native feedback latency (the published model's cycles x "
                "4 ns)"),
           Stat("program.feedback.read_at_ns", "ns", "trigger -> the conditional pulse reads its correction"),
           Stat("program.feedback.reaction_ns", "ns", "per round: trigger -> the correction at the generator "
                "(mean, p50, p99, max) and its excess over the native latency"),
           Stat("program.feedback.late_rounds", "", "rounds whose correction came after the read: the pulse played "
                "on the previous one")),
    place="generator", settings="twin.devices.zhinst:QccsParams",
)
"""The declaration of kind ``zhinst_qccs`` (declared by :mod:`twin.nodes.kinds` with the built-in kinds, after them)."""


if TYPE_CHECKING:  # mypy checks that the node satisfies the protocol (twin/nodes/protocol.py)
    from twin.nodes.protocol import ControlNode
    _zhinstqccs: type[ControlNode] = ZhinstQccs
