"""One QEC loop (control -> link card -> consumer -> back): its resolved specification, the full
event model, and the direct engine (the same arithmetic without an event queue)."""
from twin.loop.spec import LoopSpec, LoopResult
from twin.loop.event import run_event
from twin.loop.direct import run_direct, DirectNotApplicable
from twin.loop.build import loop_spec

__all__ = ["LoopSpec", "LoopResult", "run_event", "run_direct", "DirectNotApplicable", "loop_spec"]
