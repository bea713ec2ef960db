"""The node protocol: what every node of a topology is to an engine, whatever its kind and model.

A node lives the way an SST component does:

1. **configure**: the factory its model registered (:mod:`twin.nodes.models`) builds it from its
   :class:`twin.engine.event.NodeContext` (the declared parameters in the flow's spec, its memory
   regions and posted-write paths, its shared serving thread or bridge);
2. **set up its ports**: :meth:`Node.setup` arms its pollers or schedules its first events (the
   control side's first request);
3. **handle the events it subscribes to**: a link card's :meth:`CardNode.submit` (a request enters
   it), a control side's :meth:`ControlNode.reply` (a reply is back), a consumer's landings in its
   request queue through its poller part;
4. **finish** with its statistics: :meth:`finish` returns a typed, frozen record
   (:class:`CardStats`, :class:`ConsumerStats`, :class:`ProgramStats`);
5. **shut down** on a stop: :meth:`Node.shutdown` releases what it holds outside the timeline (a
   live endpoint's session, a Verilated model); idempotent, called by the engine on success,
   failure and Ctrl-C alike, before :meth:`finish` (a record stays readable after it).

What an engine may ask besides: :meth:`Node.trace` (waveforms for a window of rounds: RTL nodes;
a no-op elsewhere), a consumer's per-round arrays (:attr:`ConsumerStats.rounds`) and whether its
rounds so far are kept when the run fails (:attr:`ConsumerNode.keeps_partial`: a live device's
failure is a measurement's end, not a bug). Nothing else: an engine never probes a node's
attributes, so a new node kind or model is one class that satisfies these protocols plus its
registration.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, runtime_checkable

import numpy as np


@dataclass(frozen=True, eq=False)
class RtlCounters:
    """A Verilated node's counters: ``cycles`` (edges on the timeline, idle ones skipped included),
    ``evaluated`` (edges the model was clocked), ``steps`` (calls into the model); ``errors`` (the
    RTL card's error counters by name, or None for a node without them)."""

    cycles: int
    evaluated: int
    steps: int
    errors: dict[str, int] | None = None

    def to_dict(self) -> dict:
        """The counters as results.json has them (``errors`` only where the node has them)."""
        out: dict = {"cycles": self.cycles, "evaluated": self.evaluated, "steps": self.steps}
        if self.errors is not None:
            out["errors"] = dict(self.errors)
        return out


@dataclass(frozen=True, eq=False)
class CardStats:
    """A link card's statistics for one queue pair at the end of a run.

    mismatches: replies not equal to the reference answer (or not status ok); backlog_max: most
    requests waiting for a free slot at once; polls: polls of the reply queue (RTL: edges on the
    timeline); reply_digest: SHA-256 hex digest over every reply read (sequence, status, payload);
    reply_timeouts: replies not had within the flow's timeout; corrupted_requests: mismatches
    whose request did not sit in the consumer's memory as sent (None: a card that cannot tell);
    slot_wait_ps: per request, in issue order, its wait for a free slot (int64 ps; None: a card
    that does not time it); replies: every reply payload by sequence number (None unless the flow
    keeps them); rtl: the Verilated card's counters (None for the behavioural card).
    """

    mismatches: int
    backlog_max: int
    polls: int
    reply_digest: str
    reply_timeouts: int
    corrupted_requests: int | None = None
    slot_wait_ps: np.ndarray | None = None
    replies: list[bytes] | None = None
    rtl: RtlCounters | None = None


@dataclass(frozen=True, eq=False)
class ConsumerStats:
    """A consumer's statistics for one queue pair at the end of a run.

    polls: polls of its request queue (a live device: the landings it observed; RTL: edges on the
    timeline); served: requests answered; rtl: the Verilated logic's counters (None otherwise);
    live: a live endpoint's section for results.json (backend, description, rounds, freezes,
    isolation; None otherwise); endpoint: the live endpoint's own counters after shutdown (None
    otherwise); rounds: per-round arrays by name (a live device: ``service_ns``,
    ``idle_target_ns``, ``idle_ns``, int64, one per completed round; empty otherwise).
    """

    polls: int
    served: int
    rtl: RtlCounters | None = None
    live: dict | None = None
    endpoint: dict | None = None
    rounds: dict[str, np.ndarray] = field(default_factory=dict)


@dataclass(frozen=True, eq=False)
class ProgramStats:
    """A control side's statistics: ``sent`` and ``received`` requests, and ``program``: a control
    program's own section when it waits on replies (stalls, period: :func:`twin.devices.generator
    .program_stats`, :meth:`twin.devices.qblox.ListeningCluster.stats`), else ``{}``."""

    sent: int
    received: int
    program: dict = field(default_factory=dict)


@runtime_checkable
class Node(Protocol):
    """The lifecycle every node has (module docstring)."""

    def setup(self) -> None:
        """Set up its ports: arm its pollers, schedule its first events (at the kernel's now)."""

    def trace(self, on: bool) -> None:
        """Dump waveforms from now on (``on``) or stop; a node without waveforms ignores it."""

    def shutdown(self) -> None:
        """Release what it holds outside the timeline; idempotent; its statistics stay readable."""


@runtime_checkable
class ConsumerNode(Node, Protocol):
    """A consumer of one queue pair: polls its request queue, answers into the card's reply queue."""

    @property
    def keeps_partial(self) -> bool:
        """Whether a failed run keeps this node's rounds completed so far (a live device)."""

    def finish(self) -> ConsumerStats:
        """Its statistics (callable after :meth:`shutdown`, and more than once)."""


@runtime_checkable
class CardNode(Node, Protocol):
    """A link card's engine for one queue pair: takes requests, checks replies."""

    def submit(self, seq: int, payload: bytes) -> None:
        """Request ``seq`` enters the card now (a card clock edge)."""

    def kept_reply(self, seq: int) -> bytes:
        """Reply ``seq``'s payload as the card read it (a flow that keeps its replies)."""

    def finish(self) -> CardStats:
        """Its statistics (callable after :meth:`shutdown`, and more than once)."""


@runtime_checkable
class ControlNode(Node, Protocol):
    """A control side (a traffic generator, a control program): sends requests, takes replies."""

    @property
    def received(self) -> int:
        """Replies back so far."""

    def reply(self, seq: int, payload: bytes | None = None) -> None:
        """Reply ``seq`` is back now; ``payload``: its bytes (a program that reads them)."""

    def finish(self) -> ProgramStats:
        """Its statistics; called once, at the end of the run."""


NodeFactory = Callable[[Any], Node]
"""What a model registers (:class:`twin.nodes.registry.Model` ``factory``): a
:class:`twin.engine.event.NodeContext` -> node (imports point down: the engine imports this module)."""


def keeps_partial(failure: BaseException) -> bool:
    """Whether ``failure`` ends a run whose rounds so far are kept (a live endpoint's
    :class:`hw_bridge.contract.LiveFailure`, an interruption): the exception class says so."""
    return any(bool(c.__dict__.get("keeps_partial", False)) for c in type(failure).__mro__)


class NoTrace:
    """Mix-in for a node without waveforms or anything to release: :meth:`trace` and
    :meth:`shutdown` do nothing."""

    def trace(self, on: bool) -> None:
        """No waveforms."""

    def shutdown(self) -> None:
        """Nothing to release."""


__all__ = ["CardNode", "CardStats", "ConsumerNode", "ConsumerStats", "ControlNode", "Node", "NodeFactory",
           "NoTrace", "ProgramStats", "RtlCounters", "keeps_partial"]
