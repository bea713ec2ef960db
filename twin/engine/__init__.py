"""One QEC loop (control -> link card -> consumer -> back): its resolved specification, the full
event model, and the direct engine (the same arithmetic without an event queue)."""
from twin.engine.spec import LoopSpec, LoopResult
from twin.engine.event import run_event
from twin.engine.direct import run_direct, DirectNotApplicable
from twin.engine.build import loop_spec

__all__ = ["LoopSpec", "LoopResult", "run_event", "run_direct", "DirectNotApplicable", "loop_spec"]
