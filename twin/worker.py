"""What a Dask worker of a partitioned run loads before its first part: the engine, the compiled core
and the studies' part functions, so the first part does not pay their import (0.6 s and more in a
fresh process) inside its timed turn, and gives its C allocator a top pad (:func:`roomy_heap`).

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


M_TOP_PAD = -2
"""glibc's ``mallopt`` parameter of the heap's top pad (``<malloc.h>``)."""
TOP_PAD_BYTES = 64 * 2**20
"""The free memory a worker's heap keeps at its top when it grows or gives memory back (bytes)."""
PADDED = False
"""Whether :func:`roomy_heap` set this process's top pad."""


def roomy_heap() -> bool:
    """Make the C allocator (glibc's ``malloc``) of this process keep :data:`TOP_PAD_BYTES` free at the
    top of each heap when it grows or trims it (``mallopt(M_TOP_PAD)``, as ``MALLOC_TOP_PAD_`` in the
    environment would); True when set, False where the C library is not glibc (nothing done).

    Why: Dask's nanny starts its workers with ``MALLOC_TRIM_THRESHOLD_=65536`` (its default
    ``distributed.nanny.pre-spawn-environ``), so a heap is given back to the kernel whenever 64 KiB
    of its top are free and page-faulted back at the next allocations; a part's statistics make many
    short-lived numpy arrays a flow. Measured 2026-12-04 on the 2-core VM (shared, load 2-5), half of
    the 10,008-node mesh of benchmarks/partition_scale.py at 1,000 rounds a flow (2,224 flows):
    statistics 5.4 CPU-s in one plain process, 21.1 CPU-s (15.5 of them system) with
    ``MALLOC_TRIM_THRESHOLD_=65536``; the 2-part run of the whole mesh on a local cluster 36-41 s wall
    (parts 17-25 CPU-s each, up to 3.6 M page faults a worker), with a 64 MiB top pad 18-20 s (parts
    7-10 CPU-s, 0.16-1.1 M faults); BENCHMARKS.md has the table. About 64 MiB more memory a heap."""
    import platform
    import sys
    if sys.platform != "linux" or platform.libc_ver()[0] != "glibc":
        return False
    import ctypes
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    global PADDED
    PADDED = bool(mallopt(M_TOP_PAD, TOP_PAD_BYTES))
    return PADDED


def dask_setup(worker) -> None:
    """Dask's preload hook: :func:`roomy_heap` and :func:`warm` as the worker starts."""
    roomy_heap()
    warm()


__all__ = ["PADDED", "TOP_PAD_BYTES", "roomy_heap", "warm", "dask_setup"]
