"""One QEC loop (control -> link card -> consumer -> back): its resolved specification, the full
event model, and the direct engine (the same arithmetic without an event queue)."""
from twin.engine.build import loop_spec
from twin.engine.direct import DirectNotApplicable, run_direct
from twin.engine.event import run_event
from twin.engine.spec import LoopResult, LoopSpec

__all__ = ["LoopSpec", "LoopResult", "run_event", "run_direct", "DirectNotApplicable", "loop_spec"]
