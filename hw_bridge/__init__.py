"""Live devices standing where simulated nodes stood (``model: live``).

Empty in this version: scenarios accept only ``model: sim`` and reject ``live`` with a clear
error. The bridge contract and its backends arrive with the hardware-in-the-loop work.
"""
