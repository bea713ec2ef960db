"""Pick the engine for a loop."""
from __future__ import annotations

from twin.loop.direct import DirectNotApplicable, run_direct
from twin.loop.event import run_event
from twin.loop.spec import LoopResult, LoopSpec


def run_loop(spec: LoopSpec, engine: str = "auto", progress=None) -> LoopResult:
    """Run one loop. ``engine``: "event" (full model, byte checks), "direct" (same timestamps,
    no bytes; raises :class:`DirectNotApplicable` under backlog) or "auto" (direct, falling back
    to the event model when it does not apply)."""
    if engine == "event":
        return run_event(spec, progress)
    if engine == "direct":
        return run_direct(spec, progress)
    if engine != "auto":
        raise ValueError(f"unknown engine {engine!r} (use auto, direct or event)")
    try:
        return run_direct(spec, progress)
    except DirectNotApplicable:
        return run_event(spec, progress)
