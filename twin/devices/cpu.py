"""One CPU core polling its request queue in host memory."""
from __future__ import annotations

from twin.devices.consumer import ConsumerParams


def cpu_core(poll_period_ps: int, poll_cost_ps: int, service_ps: int, encoding: str,
             read_ps: int | None = None, piece_check_ps: int = 0, fence_ps: int = 0,
             poll_phase_ps: int | None = None) -> ConsumerParams:
    """Parameters of a CPU core that spins on its request slot.

    ``poll_period_ps``: one spin iteration; ``poll_cost_ps``: the load that misses after the
    card's write invalidated the line; a classic request needs one more dependent read of the
    payload (``read_ps``, default ``poll_cost_ps``); ``fence_ps``: the store fence before a
    classic ready word. Returns :class:`ConsumerParams` of kind ``"cpu"``.
    """
    return ConsumerParams(kind="cpu", poll_period_ps=poll_period_ps, poll_cost_ps=poll_cost_ps,
                          service_ps=service_ps, encoding=encoding,
                          read_ps=poll_cost_ps if read_ps is None else read_ps,
                          piece_check_ps=piece_check_ps, fence_ps=fence_ps, poll_phase_ps=poll_phase_ps)
