"""What the engines gave for one decode stream (:class:`Outcome`) and its replies as rows
(:func:`reply_rows`): shared by the simulated placements (twin/qec/loop.py) and the paced live one
(twin/qec/live_pace.py)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from twin.engine.spec import LoopResult
from twin.engine.stop import Interrupted


def reply_rows(replies: list[bytes], reply_bytes: int) -> np.ndarray:
    """Replies as uint8 (len(replies), reply_bytes)."""
    if not replies:
        return np.zeros((0, reply_bytes), np.uint8)
    return np.frombuffer(b"".join(replies), np.uint8).reshape(len(replies), reply_bytes)


@dataclass
class Outcome:
    """What the engines gave for the stream: ``res`` (the :class:`LoopResult`), ``corr`` the replies
    (uint8 (requests, reply_bytes)), ``made`` the hosted consumers the event model built (flow
    order; their statistics), ``flow`` each request's flow (a stream over several devices),
    ``stopped`` the stop request that ended it, ``used`` the engines (``event``, ``direct``,
    ``direct+event``), ``checked`` the replies the card checked, ``served_wall`` the wall seconds
    the consumer spent decoding."""

    res: LoopResult
    corr: np.ndarray
    made: list
    flow: np.ndarray | None = None
    stopped: Interrupted | None = None
    used: str = "event"
    checked: int = 0
    served_wall: float = 0.0
