"""The bridge contract: the types every live endpoint shares (:mod:`hw_bridge.endpoint`:
:class:`LiveEndpoint`, :class:`LiveFailure`, :class:`LiveReply`, :class:`BridgeSettings`, re-exported
here) and the one place that knows the backends by name: :func:`open_endpoint` makes an endpoint
of ``settings.backend`` and :func:`preflight` checks, before a run, that it can start here.

This module sits above the backends (:mod:`hw_bridge.shm`, :mod:`hw_bridge.cuda`,
:mod:`hw_bridge.udp`); they import :mod:`hw_bridge.endpoint`, never this module.
"""
from __future__ import annotations

from hw_bridge.endpoint import (
    FAILURE_KINDS,
    BridgeSettings,
    LiveEndpoint,
    LiveFailure,
    LiveReply,
)

__all__ = ["FAILURE_KINDS", "BridgeSettings", "LiveEndpoint", "LiveFailure", "LiveReply", "open_endpoint",
           "preflight"]


def preflight(settings: BridgeSettings) -> None:
    """Cheap checks that a session of ``settings`` can start here, made before a run shows any
    progress: the pinning cores (shm) and a usable GPU (cuda). Raises the :class:`LiveFailure`
    (kind ``error``) that :meth:`LiveEndpoint.open` would raise; the udp agent is checked by its
    handshake at open."""
    if settings.backend == "shm":
        from hw_bridge.shm import check_cores
        check_cores(settings)
    elif settings.backend == "cuda":
        from hw_bridge.cuda import GpuUnavailable, gpu_available
        ok, why = gpu_available(settings.device)
        if not ok:
            raise GpuUnavailable(why)


def open_endpoint(settings: BridgeSettings) -> LiveEndpoint:
    """A (not yet opened) endpoint of ``settings.backend``."""
    if settings.backend == "shm":
        from hw_bridge.shm import ShmEndpoint
        return ShmEndpoint(settings)
    if settings.backend == "cuda":
        from hw_bridge.cuda import CudaEndpoint
        return CudaEndpoint(settings)
    if settings.backend == "udp":
        from hw_bridge.udp import UdpEndpoint
        return UdpEndpoint(settings)
    raise ValueError(f"unknown bridge backend {settings.backend!r} (shm, cuda, udp)")
