"""The decoder registry: a name -> how to build that decoder for a circuit or detector error model.

Every entry builds a :class:`twin.qec.decoders.base.Decoder` (the one interface: bit-packed
detection events in, bit-packed observable flips out) from ``model`` (a ``stim.Circuit`` or a
``stim.DetectorErrorModel``). ``decode.decoder:`` in a scenario names an entry, or
``sinter:pkg.module:Class`` for any ``sinter.Decoder`` subclass (instantiated without arguments).
A new decoder is one :func:`register` call::

    @register("mydec", kind="mydec", requires="mypkg", doc="what it is")
    def _mydec(model, name, **kw):
        return SinterDecoder(mypkg.SinterDecoder(), model, name, kind="mydec")

``kind`` is the decoder's key in the cost model (:data:`twin.qec.cost.MODEL_NS`); a kind with no
entry there needs ``decode.cost.fixed`` or ``how: host_timed``.
"""
from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Callable

import stim

from twin.qec.decoders.base import Decoder


@dataclass(frozen=True)
class Entry:
    """A registered decoder. name: what ``decode.decoder`` says; kind: the cost-model key;
    build: ``(model, name, **kw) -> Decoder``; requires: the Python package it imports (refused at
    load with its name when missing); doc: one line for listings."""

    name: str
    kind: str
    build: Callable[..., Decoder]
    requires: str | None = None
    doc: str = ""


REGISTRY: dict[str, Entry] = {}
SINTER_PREFIX = "sinter:"


def register(name: str, kind: str | None = None, requires: str | None = None, doc: str = ""):
    """Decorator: register ``build(model, name, **kw) -> Decoder`` under ``name``. Raises
    ValueError for a name already taken or one with the ``sinter:`` prefix."""
    def deco(build: Callable[..., Decoder]):
        if name in REGISTRY or name.startswith(SINTER_PREFIX):
            raise ValueError(f"decoder {name!r} is already registered or reserved")
        REGISTRY[name] = Entry(name, kind or name, build, requires, doc)
        return build
    return deco


def names() -> list[str]:
    """The registered names, in registration order, then the ``sinter:pkg.module:Class`` form."""
    return list(REGISTRY) + [f"{SINTER_PREFIX}pkg.module:Class"]


def kind_of(spec: str) -> str:
    """The cost-model kind of ``spec`` (``sinter`` for a ``sinter:`` spec). Raises KeyError."""
    return "sinter" if spec.startswith(SINTER_PREFIX) else REGISTRY[spec].kind


def unavailable(spec: str) -> str | None:
    """Why ``spec`` cannot be built here (one line), or None: not a registered name (the line lists
    them), or a package the entry needs is not installed."""
    if spec.startswith(SINTER_PREFIX):
        rest = spec[len(SINTER_PREFIX):]
        mod, _, cls = rest.partition(":")
        return None if mod and cls else "expected 'sinter:package.module:Class'"
    e = REGISTRY.get(spec)
    if e is None:
        return f"not a registered decoder (registered: {', '.join(names())})"
    if e.requires and importlib.util.find_spec(e.requires) is None:
        return f"needs the Python package {e.requires!r}, which is not installed (pip install {e.requires})"
    return None


def build(spec: str, model: stim.Circuit | stim.DetectorErrorModel, name: str = "", **kw) -> Decoder:
    """The decoder ``spec`` names, built for ``model``. ``kw`` go to the entry (``fn`` for
    ``function``; ``inner``, the ``sinter.Decoder`` instance, for a ``sinter:`` spec).
    Raises ValueError naming what is wrong (:func:`unavailable`, or the entry's own error)."""
    why = unavailable(spec)
    if why:
        raise ValueError(f"decoder {spec!r}: {why}")
    if spec.startswith(SINTER_PREFIX):
        from twin.qec.decoders.sinter_adapter import SinterDecoder
        return SinterDecoder(kw["inner"], model, name or spec, kind="sinter")
    return REGISTRY[spec].build(model, name or spec, **kw)


def _dem(model, decompose: bool) -> stim.DetectorErrorModel:
    if isinstance(model, stim.DetectorErrorModel):
        return model
    return model.detector_error_model(decompose_errors=decompose)


@register("lookup", doc="exact maximum-likelihood table from the detector error model (D <= 20)")
def _lookup(model, name, **kw):
    from twin.qec.decoders.lookup import LookupDecoder
    from twin.qec.lookup import from_dem
    return LookupDecoder(from_dem(_dem(model, False), name))


@register("matching", requires="pymatching", doc="PyMatching on the decomposed detector error model")
def _matching(model, name, **kw):
    from twin.qec.decoders.matching import MatchingDecoder
    return MatchingDecoder(model, name)


@register("union_find", doc="weighted union-find with peeling on the decomposed detector error model's graph")
def _union_find(model, name, **kw):
    from twin.qec.decoders.union_find import UnionFindDecoder
    from twin.qec.dem_graph import DemGraph
    from twin.qec.union_find import from_dem_graph
    return UnionFindDecoder(from_dem_graph(DemGraph(model)), name)


@register("function", doc="the user's function: decode.function 'pkg.module:callable' or 'lib.so:symbol'")
def _function(model, name, fn=None, **kw):
    from twin.qec.decoders.function import FunctionDecoder
    if fn is None:
        raise ValueError("decoder 'function' needs the function (decode.function)")
    dem = _dem(model, False)
    return FunctionDecoder(fn, dem.num_detectors, dem.num_observables, name=name)


@register("bposd", requires="stimbposd", doc="BP+OSD (ldpc's BpOsdDecoder through stimbposd, its defaults)")
def _bposd(model, name, **kw):
    from stimbposd import SinterDecoder_BPOSD

    from twin.qec.decoders.sinter_adapter import SinterDecoder
    return SinterDecoder(SinterDecoder_BPOSD(), model, name, kind="bposd")


@register("tesseract", requires="tesseract_decoder", doc="Tesseract search decoder (tesseract-decoder, defaults)")
def _tesseract(model, name, **kw):
    from tesseract_decoder import TesseractSinterDecoder

    from twin.qec.decoders.sinter_adapter import SinterDecoder
    return SinterDecoder(TesseractSinterDecoder(), model, name, kind="tesseract")


@register("relay_bp", requires="relay_bp", doc="Relay-BP (IBM's relay-bp core, its sinter wrapper's defaults)")
def _relay_bp(model, name, **kw):
    from twin.qec.decoders.relay import RelayBPDecoder
    return RelayBPDecoder(model, name)
