"""What a Dask worker of a partitioned run loads before its first part: the engine, the compiled core
and the studies' part functions, so the first part does not pay their import (0.6 s and more in a
fresh process) inside its timed turn.

A Dask preload (``dask_setup``): a local cluster's workers load it (:func:`twin.engine.cluster.local_client`);
workers of an existing cluster with ``dask worker tcp://HOST:PORT --nthreads 1 --preload twin.worker``.
"""
from __future__ import annotations


def warm() -> str | None:
    """Import what a mesh part and a machine part run (:mod:`twin.engine.parts`, the event engine and
    its compiled core, :mod:`twin.studies.mesh_reduce`, :mod:`twin.machine.parts` and its model) and
    load the compiled core; returns why the core is not there (the parts then run on the simpy
    reference, as this process would), or None."""
    import twin.engine.compiled  # noqa: F401
    import twin.engine.event  # noqa: F401
    import twin.engine.parts  # noqa: F401
    import twin.machine.engine  # noqa: F401
    import twin.machine.parts  # noqa: F401
    import twin.studies.mesh_reduce  # noqa: F401
    from twin.engine.native import CoreUnavailable, core
    try:
        core()
    except CoreUnavailable as e:
        return str(e)
    return None


def dask_setup(worker) -> None:
    """Dask's preload hook: :func:`warm` as the worker starts."""
    warm()


__all__ = ["warm", "dask_setup"]
