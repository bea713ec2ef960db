"""What the compiled core computes: the spec features it knows, and the one-line reason it refuses
the rest (the run then stays on the Python engines, never silently different).

The gate is explicit and mechanical. :data:`COMPUTED` lists, for each parameter dataclass of a
:class:`~twin.engine.spec.LoopSpec`, the fields the compiled core (twin/engine/c/core.c) computes.
:func:`uncomputed` walks the spec's dataclasses: a field that is not listed and differs from its
default (a behaviour added to a device after the core was written: a link kind, a program that
waits on replies) is a reason, e.g. ``traffic.feedback = ... is not computed by the compiled core``.
A hand-off to a second device is computed by the event core (:func:`handoff_refusals`; the direct
engine refuses it, :attr:`twin.engine.spec.LoopSpec.event_only`). A consumer's idle cost, service
modes, ``idle_mix`` and host runtime are computed
(:mod:`twin.engine.service_core` packs them), as is its pre-processing per measurement (part of
the constant body both core paths take from :meth:`ConsumerParams.pre_service_ps`). A field the
core computes only for some values is checked by :func:`refusal` (faults, the function:
:func:`function_refusals`, a drifting clock, ...). Node models say whether
the core stands for them through the registry: ``"compiled"`` in their ``supports["engines"]``
(:mod:`twin.nodes.models`).
"""
from __future__ import annotations

import dataclasses
import functools

from twin.nodes.models import model_for
from twin.runtime.functions import REGISTRY

COMPUTED = {
    "LoopSpec": {"name", "card", "consumer", "traffic", "request_link", "reply_link", "jitter_ps", "aurora", "slots",
                 "seed", "faults", "function", "model", "slot_bytes", "card_model", "rtl", "bridge", "handoff"},
    "HandoffSpec": {"to", "stage", "wire", "jitter_ps", "link"},
    "ConsumerParams": {"kind", "poll_period_ps", "poll_cost_ps", "service_ps", "encoding", "read_ps", "piece_check_ps",
                       "fence_ps", "poll_phase_ps", "preprocess_ps_per_measurement", "idle", "modes", "idle_mix",
                       "host_runtime"},
    "LinkCardParams": {"clock_ps", "bridge_bits", "engine_land_ps", "reply_read_ps", "reply_send_ps",
                       "reply_poll_period_ps"},
    "TrafficParams": {"mode", "rounds", "frame_bytes", "period_ps", "clock", "clock_ps", "ppm", "gap_ps",
                      "drift_ppb_per_s", "offset_ps", "in_flight", "gaps", "syndrome_bits", "share"},
}
"""Per parameter dataclass, the fields the compiled core computes (any value, unless
:func:`refusal` says otherwise). Wires (links) are reduced to latency, serialisation and tail per
write size by their own methods, so any wire is computed."""


def uncomputed(obj, where: str = "") -> list[str]:
    """The fields of dataclass ``obj`` (recursively, for the classes of :data:`COMPUTED`) that the
    compiled core does not compute and that differ from their defaults, as ``"path = value"``."""
    out: list[str] = []
    known = _known(obj)
    if known is None or not dataclasses.is_dataclass(obj):
        return out
    for f in dataclasses.fields(obj):
        v = getattr(obj, f.name)
        path = f"{where}{f.name}"
        if f.name not in known:
            default = f.default if f.default is not dataclasses.MISSING else (
                f.default_factory() if f.default_factory is not dataclasses.MISSING else dataclasses.MISSING)
            if default is dataclasses.MISSING or v != default:
                out.append(f"{path} = {v!r}")
        elif _known(v) is not None:
            out.extend(uncomputed(v, path + "."))
    return out


def _known(obj: object) -> set[str] | None:
    """The computed fields of ``obj``'s class: of the first class in its MRO named in :data:`COMPUTED`
    (a subclass adding a field is still walked, and its new field is a reason)."""
    return _known_of(type(obj))  # type: ignore[arg-type]  # a class is Hashable: mypy issue 11470


@functools.cache
def _known_of(cls: type) -> set[str] | None:
    """:func:`_known` of an instance of ``cls``, looked up once per class (a spec's walk asks it of
    every field value, a mesh's set-up of every flow)."""
    return next((COMPUTED[c.__name__] for c in cls.__mro__ if c.__name__ in COMPUTED), None)


def computes(kind: str, model: str) -> bool:
    """Whether the compiled core stands for a ``kind`` node of ``model`` (the registry's
    ``supports["engines"]`` lists ``compiled``)."""
    return "compiled" in model_for(kind, model).supports.get("engines", ())


def fault_refusals(spec) -> list[str]:
    """The faults of ``spec`` (:class:`twin.faults.FaultPlan`) the compiled event core does not inject
    as the simpy reference does, one reason each. It injects corrupt_piece (either path), stall and
    host_freeze windows, the card's reply timeout, and drop_frame with any number of requests in flight
    (a resent frame enters the card's backlog behind later rounds, as the reference's deque)."""
    fp, tr = spec.faults, spec.traffic
    if fp.drop_rounds and tr.mode != "closed_loop":
        return ["drop_frame faults need closed-loop traffic (the simpy reference refuses them)"]
    return []


def handoff_refusals(spec) -> list[str]:
    """Why the compiled event core does not run the hand-off of ``spec`` (:mod:`twin.devices.handoff`) as
    the simpy reference does, one reason each (none without a hand-off). It runs the two-stage consumer
    of the sim model: stage 1 reads and pre-processes each request on the node's thread and posts it
    over the hand-off's wire (any wire, any jitter), stage 2 polls the hand-off queue on its own grid
    and thread and runs the flow's function at its constant body. Refused, as the reference refuses
    them: faults (they act on one-stage consumers) and a host runtime on stage 1; and a serving stage
    whose service varies or has a host runtime (the reference draws none for it)."""
    ho = spec.handoff
    if ho is None:
        return []
    why = []
    if spec.faults.active:
        why.append(f"fault injection acts on one-stage consumers; this one hands its requests to {ho.to}")
    if spec.consumer.host_runtime is not None:
        why.append(f"a host runtime runs in one device; this consumer hands its requests to {ho.to}")
    if ho.stage.varies or ho.stage.host_runtime is not None:
        why.append(f"the serving stage {ho.to}'s idle cost, service modes or host runtime are the simpy reference's")
    return why


def function_refusals(spec) -> list[str]:
    """Why the compiled event core does not run the function of ``spec`` (one reason, or none). It runs
    the echo and every function of the runtime library with C code (:func:`twin.runtime.functions.has_c_code`:
    twin/runtime/c/qrt_functions.c, linked into the core) on a frame it accepts, and a function written in
    Python only (a user's, a QEC decoder's) called back from the core through the runtime's function
    signature (:mod:`twin.runtime.callback`) at the consumer's service and the card's check of each reply.
    Refused, with the physical reason: an unregistered id (no node can answer it) and a frame shorter
    than the function's input (it fails; the reference answers ``function_failed``)."""
    if spec.function == 0:
        return []
    fn = REGISTRY.get(spec.function)
    if fn is None:
        return [f"function {spec.function} is not registered"]
    if spec.traffic.frame_bytes < fn.min_payload:
        return [f"function {fn.name} fails on a {spec.traffic.frame_bytes}-byte frame (the simpy reference's)"]
    return []


def refusal(spec, *, direct: bool = False) -> str | None:
    """Why the compiled core does not compute loop ``spec`` (one line), or None. ``direct``: the
    question is for the compiled direct path (whose other limits :func:`twin.engine.direct.run_direct`
    already checked), else for the compiled event core."""
    why = [f"{u} is not computed by the compiled core" for u in uncomputed(spec)]
    if not direct:
        for what, kind, name in (("consumer", "consumer", spec.model), ("link card", "link_card", spec.card_model)):
            if not computes(kind, name):
                why.append(f"the {what} is model {name}")
        why.extend(fault_refusals(spec))
        why.extend(function_refusals(spec))
        why.extend(handoff_refusals(spec))
        if spec.traffic.share is not None:
            why.append("a share of a stream is the simpy reference's")
    tr = spec.traffic
    if tr.clock == "independent" and tr.drift_ppb_per_s:
        why.append("a drifting clock's edges are exact big integers in Python")
    return "; ".join(why) or None
