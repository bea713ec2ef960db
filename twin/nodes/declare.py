"""Node kinds declare themselves: parameters, ports and statistics, in code.

The way SST elements declare themselves with their ELI macros, every node kind (control system,
link card, consumer, NIC, switch) and every wire kind (aurora, pcie, ethernet) is one
:class:`NodeKind` registered here with :func:`declare`. The built-in declarations live in
:mod:`twin.nodes.kinds`, loaded on the first lookup; a kind added later lives in its own device
module with its node class and factory (e.g. :mod:`twin.devices.zhinst`: its ``KIND``), declared by
two lines at the end of :mod:`twin.nodes.kinds`, after the built-in kinds. ``twin components``
prints them (:mod:`twin.nodes.listing`) and ``docs/components.md`` is generated from them.

This module does no I/O and imports no device module: the declarations (which read their defaults
from the devices' dataclasses) are imported only when :func:`kinds` or :func:`kind` is first called.
"""
from __future__ import annotations

import dataclasses
import importlib
import inspect
from dataclasses import dataclass
from typing import NamedTuple

LISTING_FORMATS = ("text", "markdown", "json")  # twin components --format (twin.nodes.listing.render)

DIRECTIONS = ("in", "out", "memory")
ROLES = ("node", "link")


class _Required:
    """The default of a parameter that has none: the scenario or calibration must give it."""

    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "required"

    def __reduce__(self):
        return (_Required, ())


REQUIRED = _Required()


@dataclass(frozen=True)
class Param:
    """One parameter of a node kind.

    name: the parameter's name; a dotted name (``hosting.chain_trigger_ps``) is a field of a
        nested parameter group, the last part the field's name.
    unit: the unit the code holds it in (``ps`` inside the engines; ``ns`` or a quantity string
        where the calibration file takes it so), or ``""`` for choices, counts and flags.
    default: the code's default (:data:`REQUIRED` where there is none).
    source: where the number comes from: ``"<seed file>: <what it says>"`` for a measured number,
        ``"fitted: <file>"`` for a fitted one, ``"assumption"`` (with why) where the code assumes.
    doc: one line.
    of: ``"module:Class"``, the dataclass or settings model whose field this is (``""``: none).
    key: where a scenario or a calibration file sets it (e.g. ``calibration card.engine_land_ns``).
    """

    name: str
    unit: str
    default: object
    source: str
    doc: str
    of: str = ""
    key: str = ""

    @property
    def field(self) -> str:
        """The field name in ``of`` (the last part of a dotted name)."""
        return self.name.rsplit(".", 1)[-1]


@dataclass(frozen=True)
class Port:
    """One port: ``direction`` "in" (takes frames or calls), "out" (posts writes or calls out) or
    "memory" (a memory region of the node that others post writes into)."""

    name: str
    direction: str
    doc: str

    def __post_init__(self):
        if self.direction not in DIRECTIONS:
            raise ValueError(f"port {self.name!r}: direction must be one of {', '.join(DIRECTIONS)}, "
                             f"got {self.direction!r}")


@dataclass(frozen=True)
class Stat:
    """One statistic the code reports: ``name`` as the code (or results.json) spells it."""

    name: str
    unit: str
    doc: str


PLACES = ("generator", "link_card", "consumer", "nic", "switch")  # where a node stands in a scenario's topology


@dataclass(frozen=True)
class NodeKind:
    """A node kind (``role`` "node": it has registered models) or a wire kind (``role`` "link").

    place: where a node of this kind stands in a scenario's topology, one of :data:`PLACES`
        (``generator``: the control side; ``""``: the kind's own name, which must be one).
    settings: ``"module:Class"`` of the pydantic model a scenario node's ``params:`` block is
        validated into (``""``: the kind takes no ``params:`` block; its parameters come from the
        calibration and the scenario's other keys).
    """

    name: str
    doc: str
    params: tuple[Param, ...] = ()
    ports: tuple[Port, ...] = ()
    stats: tuple[Stat, ...] = ()
    role: str = "node"
    place: str = ""
    settings: str = ""

    def __post_init__(self):
        if self.role not in ROLES:
            raise ValueError(f"kind {self.name!r}: role must be one of {', '.join(ROLES)}, got {self.role!r}")
        for what, items in (("parameter", self.params), ("port", self.ports), ("statistic", self.stats)):
            names = [x.name for x in items]
            dup = sorted({n for n in names if names.count(n) > 1})
            if dup:
                raise ValueError(f"kind {self.name!r} declares the {what} {', '.join(dup)} twice")
        if self.role == "node" and self.where not in PLACES:
            raise ValueError(f"kind {self.name!r}: place must be one of {', '.join(PLACES)}, got {self.where!r}")

    @property
    def where(self) -> str:
        """The place a node of this kind takes in a topology (:attr:`place`, or the kind's name)."""
        return self.place or self.name

    def settings_class(self) -> type | None:
        """The pydantic model of a node's ``params:`` block (:attr:`settings`), or None."""
        if not self.settings:
            return None
        mod, _, attr = self.settings.partition(":")
        return getattr(importlib.import_module(mod), attr)

    def param(self, name: str) -> Param:
        """The parameter ``name``; raises KeyError naming the kind's parameters."""
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(f"{self.name} has no parameter {name!r} (parameters: {', '.join(p.name for p in self.params)})")


_KINDS: dict[str, NodeKind] = {}


def declare(kind: NodeKind) -> NodeKind:
    """Register ``kind``; raises ValueError if a kind of that name is declared already."""
    if kind.name in _KINDS:
        raise ValueError(f"node kind {kind.name!r} is declared already")
    _KINDS[kind.name] = kind
    return kind


def kinds(role: str | None = None) -> list[NodeKind]:
    """Every declared kind in declaration order (only those of ``role`` "node" or "link" if given)."""
    return [k for k in _KINDS.values() if role is None or k.role == role]


def kind(name: str) -> NodeKind:
    """The declared kind ``name``; raises KeyError naming the known kinds."""
    k = _KINDS.get(name)
    if k is None:
        raise KeyError(f"no node kind {name!r} (known kinds: {', '.join(_KINDS)})")
    return k


# -- declaring a kind's parameters from its code (used by twin.nodes.kinds and any kind in its own module) --

class P(NamedTuple):
    """What a declaration says of one field: unit, source, one line, and where it is set."""

    unit: str
    source: str
    doc: str
    key: str = ""


def _cls(of: str) -> type:
    mod, _, attr = of.partition(":")
    return getattr(importlib.import_module(mod), attr)


def code_defaults(of: str) -> dict[str, object]:
    """The fields of ``of`` (``"module:Class"``: a dataclass, a pydantic model, or any other class's
    keyword arguments) and their defaults in the code, in the code's order (:data:`REQUIRED`
    where a field has none)."""
    cls = _cls(of)
    if dataclasses.is_dataclass(cls):
        out = {}
        for f in dataclasses.fields(cls):
            if f.default is not dataclasses.MISSING:
                out[f.name] = f.default
            elif f.default_factory is not dataclasses.MISSING:
                out[f.name] = f.default_factory()
            else:
                out[f.name] = REQUIRED
        return out
    if hasattr(cls, "model_fields"):  # a pydantic settings model (a calibration file's section)
        return {n: (REQUIRED if f.is_required() else f.get_default(call_default_factory=True))
                for n, f in cls.model_fields.items()}
    sig = inspect.signature(cls)  # the constructor's parameters (its __init__'s, without self)
    return {n: p.default for n, p in sig.parameters.items() if p.kind is inspect.Parameter.KEYWORD_ONLY
            or p.default is not inspect.Parameter.empty}


def param_fields(of: str, spec: dict[str, P], prefix: str = "", partial: bool = False) -> tuple[Param, ...]:
    """Params for the fields of ``of`` named in ``spec``, defaults read from the code, in the code's
    order. Raises ValueError if ``spec`` names a field ``of`` does not have or (unless ``partial``)
    leaves one out."""
    have = code_defaults(of)
    extra = [n for n in spec if n not in have]
    missing = [] if partial else [n for n in have if n not in spec]
    if extra or missing:
        raise ValueError(f"declarations of {of} do not match its fields: "
                         + "; ".join(x for x in (f"not fields: {', '.join(extra)}" if extra else "",
                                                 f"not declared: {', '.join(missing)}" if missing else "") if x))
    return tuple(Param(prefix + n, spec[n].unit, have[n], spec[n].source, spec[n].doc, of, spec[n].key)
                 for n in have if n in spec)
