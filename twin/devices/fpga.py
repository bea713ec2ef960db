"""Exchange logic in an FPGA (the Alveo V80 consumer)."""
from __future__ import annotations

from twin.devices.consumer import ConsumerParams


def fpga_logic(clock_ps: int, answer_ps: int, encoding: str = "classic",
               poll_phase_ps: int | None = None) -> ConsumerParams:
    """Parameters of consumer logic that checks its request queue every clock cycle.

    ``clock_ps``: the logic's clock period (polls once a cycle, no cost beyond it);
    ``answer_ps``: from seeing a request to issuing its reply (the seeds measured 28 ns on the
    V80, amd-qblox-exchange-runtime.txt). The reply relies on PCIe posted-write order, so there
    is no fence. Returns :class:`ConsumerParams` of kind ``"fpga"``.
    """
    return ConsumerParams(kind="fpga", poll_period_ps=clock_ps, poll_cost_ps=0, service_ps=answer_ps,
                          encoding=encoding, read_ps=0, piece_check_ps=0, fence_ps=0, poll_phase_ps=poll_phase_ps)
