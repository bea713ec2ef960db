"""The model registry: what may stand for a node of each kind, and what each model supports.

Every node of a topology has a ``model``: ``sim`` (the behavioural model), ``code`` (the C runtime
library working on the twin's bytes), ``rtl`` (Verilated RTL in co-simulation) or ``live`` (a real
device through :mod:`hw_bridge`). Each (node kind, model) pair is one :class:`Model` entry here: a
factory (imported only when a node of that model is built) and what it supports. The scenario
loader asks :func:`refusal` whether a node can stand where the scenario puts it and refuses at load
with the reason; the engine asks :func:`model_for` for the factory. Nothing else branches on model
names. The entries themselves are registered by :mod:`twin.nodes.models`; import the lookups from
there (it registers every model first).
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from twin.runtime.functions import Function

MODELS = ("sim", "code", "rtl", "live")


@dataclass(frozen=True)
class Situation:
    """Where a node is asked to stand (what the scenario loader knows at load time).

    device_kind: the consumer's device kind (cpu, gpu, fpga) or None for other kinds.
    path: "card" (pcie from a link card) or "roce" (ethernet, NIC, pcie).
    queue_pairs: request/reply queue pairs the node serves (flows routed through it).
    frame_bytes, function (a :class:`twin.runtime.functions.Function`), faults (names of the
    fault kinds the scenario injects on this node's flows), engine ("auto", "direct", "event"),
    study ("run", "mesh", "decode"), hosting (decode: the hosting mode), stages (devices the
    request passes: 2 when the consumer hands it to another device, :mod:`twin.devices.handoff`).
    """

    device_kind: str | None = None
    path: str = "card"
    queue_pairs: int = 1
    frame_bytes: int = 64
    function: Function | None = None
    faults: frozenset[str] = frozenset()
    engine: str = "auto"
    study: str = "run"
    hosting: str = "inline"
    stages: int = 1


def _stands_anywhere(situation: Situation) -> str | None:
    """A model's refusal when it states none: it can stand anywhere its kind can."""
    return None


def _serves_any(function: object) -> str | None:
    """A model's function refusal when it states none: it serves any function its kind can."""
    return None


@dataclass(frozen=True)
class Model:
    """One (node kind, model) pair.

    factory: ``"module:callable"`` building the node (imported on first use, so a scenario
    without RTL never imports the Verilator harness). summary: one line for ``twin components``.
    supports: what it can do, for ``twin components`` and the docs (encodings, functions,
    faults, engines, paths, queue pairs). refuse: ``(Situation) -> reason or None``: the
    physically true reason it cannot stand there. cannot_serve: ``(Function) -> reason or None``:
    why it cannot run that function (the part of ``refuse`` that is the function's: a loader names
    the function, not the model, for it).
    """

    kind: str
    name: str
    summary: str
    factory: str
    supports: dict = field(default_factory=dict)
    refuse: Callable[[Situation], str | None] = _stands_anywhere
    cannot_serve: Callable[[object], str | None] = _serves_any

    def build(self) -> Callable:
        """The factory callable."""
        mod, _, attr = self.factory.partition(":")
        return getattr(importlib.import_module(mod), attr)


_REGISTRY: dict[tuple[str, str], Model] = {}


def register(model: Model) -> Model:
    """Add a (kind, model) entry; raises ValueError if the pair is registered already."""
    key = (model.kind, model.name)
    if key in _REGISTRY:
        raise ValueError(f"model {model.name!r} for node kind {model.kind!r} is registered already")
    _REGISTRY[key] = model
    return model


def models_for(kind: str) -> list[Model]:
    """The models registered for node kind ``kind``, in registration order."""
    return [m for (k, _), m in _REGISTRY.items() if k == kind]


def model_for(kind: str, name: str) -> Model:
    """The entry of (``kind``, ``name``); raises KeyError with the models that kind has."""
    m = _REGISTRY.get((kind, name))
    if m is None:
        have = ", ".join(x.name for x in models_for(kind)) or "none"
        raise KeyError(f"model {name!r} does not stand for a {kind} (models of a {kind}: {have})")
    return m


def function_refusal(kind: str, name: str, function) -> str | None:
    """Why model ``name`` of a ``kind`` node cannot run ``function`` (a
    :class:`twin.runtime.functions.Function`), or None (it can, or the pair is not registered)."""
    m = _REGISTRY.get((kind, name))
    return None if m is None else m.cannot_serve(function)


def refusal(kind: str, name: str, situation: Situation) -> str | None:
    """Why model ``name`` cannot stand for a ``kind`` node in ``situation`` (None: it can)."""
    try:
        m = model_for(kind, name)
    except KeyError as e:
        return str(e).strip("'\"")
    return m.refuse(situation)
