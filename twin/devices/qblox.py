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

Ports: the frames it sends (:class:`twin.devices.generator.TrafficParams`, open loop at the
program's round period). Statistics: ``period_ns``, ``first_publish_ns``, ``syndrome_bits``.
Programs whose rounds are not equally spaced are refused (the loop engines take a period).
"""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from twin.config import Located
from twin.devices.generator import MAX_DRIFT_PPB_PER_S, MAX_PPM, TrafficParams
from twin.devices.q1asm import Q1AsmError, run_cluster
from twin.units import PS_PER_NS


class QbloxSequencer(BaseModel):
    """One Q1 sequencer: its name, Q1ASM program and acquisitions per round."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    name: str = Field(min_length=1)
    program: str = Field(min_length=1)
    measurements_per_round: int = Field(gt=0)


class QbloxCluster(BaseModel):
    """A Qblox Cluster control system (see module docstring for every parameter)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    device: str = "Qblox Cluster"
    sequencers: list[QbloxSequencer] = Field(min_length=1)
    result_latency_ns: float = Field(0.0, ge=0, le=1e6)  # ns; 1 ms bounds any real path
    trigger_network_ns: float = Field(0.0, ge=0, le=1e6)
    bits_per_measurement: int = Field(1, gt=0)
    clock: Literal["independent", "card"] = "independent"
    ppm: float = Field(0.0, ge=-MAX_PPM, le=MAX_PPM)
    drift_ppb_per_s: float = Field(0.0, ge=-MAX_DRIFT_PPB_PER_S, le=MAX_DRIFT_PPB_PER_S)

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
        except Q1AsmError as e:
            raise Located(("sequencers",), "<program>", str(e)) from None
        return self

    def publish_ns(self) -> list[int]:
        """Each round's publish instant in ns of the cluster's time, from its programs: the latest
        sequencer's last acquisition of the round, plus its duration, ``result_latency_ns`` and
        ``trigger_network_ns``. Raises :class:`Q1AsmError` for a bad program or when sequencers
        complete different numbers of rounds (acquisitions not a multiple of measurements_per_round
        count as an error too)."""
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
        return [int(round(max(col) + extra)) for col in zip(*ends)]

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
        return TrafficParams(mode="open_loop", rounds=rounds, frame_bytes=frame_bytes,
                             syndrome_bits=self.syndrome_bits() if carry_syndrome else 0,
                             period_ps=self.period_ns() * PS_PER_NS, clock=self.clock, clock_ps=PS_PER_NS,
                             ppm=self.ppm if self.clock == "independent" else 0.0,
                             drift_ppb_per_s=self.drift_ppb_per_s if self.clock == "independent" else 0.0,
                             offset_ps=first * PS_PER_NS if self.clock == "independent" else 0)
