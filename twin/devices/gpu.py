"""A GPU persistent kernel polling its request queue in device memory."""
from __future__ import annotations

from twin.devices.consumer import ConsumerParams


def gpu_persistent_kernel(poll_period_ps: int, service_ps: int, encoding: str, fence_ps: int,
                          piece_check_ps: int = 0, poll_phase_ps: int | None = None) -> ConsumerParams:
    """Parameters of a persistent kernel that polls with dependent system-scope loads.

    Each poll is one load whose answer arrives when the next poll is issued, so the cost of a
    poll equals its period (``poll_period_ps``). A classic request needs one more load of the
    payload (one more period); a classic reply issues a release fence (``fence_ps``) before its
    ready word. Returns :class:`ConsumerParams` of kind ``"gpu"``.
    """
    return ConsumerParams(kind="gpu", poll_period_ps=poll_period_ps, poll_cost_ps=poll_period_ps,
                          service_ps=service_ps, encoding=encoding, read_ps=poll_period_ps,
                          piece_check_ps=piece_check_ps, fence_ps=fence_ps, poll_phase_ps=poll_phase_ps)
