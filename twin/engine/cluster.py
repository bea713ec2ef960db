"""The Dask distributed cluster a partitioned run (:mod:`twin.engine.parts`) runs its parts on: a local
one of N worker processes (:func:`local_client`) or an existing scheduler (:func:`connect`).

A local cluster's worker processes leave the terminal's signals to this process: they start with
SIGINT and SIGTERM blocked (the mask a child inherits) and, once up, move into their own process
group (:func:`dask_setup`, the workers' Dask preload) before taking signals again, so a Ctrl-C at the
terminal (sent to the whole foreground group) reaches this process only, which stops the parts at
a round boundary (:func:`twin.engine.parts.run_parts`). Its scheduler gives up on a task whose worker
died at the first death (``allowed-failures`` 0: a killed worker ends its part at once, Dask's
``KilledWorker``, instead of rerunning the part from its first round elsewhere).
"""
from __future__ import annotations

import logging
import os
import signal
import threading
import time
from contextlib import contextmanager
from typing import Any, Iterator

PART_TIMEOUT_S = 20.0
"""Seconds a part of a partitioned run may stay silent (no heartbeat, no answer to a stop) before it
counts as lost (the default of ``--part-timeout``)."""

HELD = {signal.SIGINT, signal.SIGTERM}



class ClusterError(RuntimeError):
    """No cluster to run on (one line: the address or option and why)."""


def available() -> str | None:
    """Why a partitioned run cannot start here (Dask distributed not installed), or None."""
    try:
        import distributed  # noqa: F401
    except ImportError:
        return "needs Dask distributed, not installed here (pip install 'twin[cluster]')"
    return None


def dask_setup(worker) -> None:
    """The preload of a local cluster's worker (Dask calls it as the worker starts, on its event loop
    in the process's main thread): its own process group, then SIGINT and SIGTERM taken again (held
    since the process started, :func:`local_client`)."""
    try:
        os.setpgid(0, 0)
    except OSError:  # already a group leader
        pass
    signal.pthread_sigmask(signal.SIG_UNBLOCK, HELD)


def _new_local(n: int):
    """A new :class:`distributed.LocalCluster` of ``n`` worker processes as :func:`local_client` starts it,
    SIGINT and SIGTERM held in this thread meanwhile (inherited by the cluster's loop thread and its
    children: :func:`dask_setup` takes them again in each worker)."""
    import dask
    from distributed import LocalCluster
    held = signal.pthread_sigmask(signal.SIG_BLOCK, HELD)
    try:
        with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
            return LocalCluster(n_workers=n, threads_per_worker=1, processes=True, host="127.0.0.1",
                                protocol="tcp", dashboard_address=None, silence_logs=logging.CRITICAL,
                                memory_limit=0, preload=[__name__, "twin.worker"],
                                scheduler_kwargs={"dashboard_address": ":0"})
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


class Starting:
    """A local cluster of ``n`` worker processes (:func:`_new_local`) starting in a background thread
    from the moment this is made, so that it starts while the caller does other work (``twin run
    --processes N`` loads the scenario meanwhile); :func:`local_client` takes it, :meth:`close` ends
    it when nothing did. ``seconds``: how long the start took (after :meth:`take`)."""

    def __init__(self, n: int):
        self.n, self.taken, self.seconds = n, False, 0.0
        self.cluster: Any = None
        self.error: Exception | None = None
        self._closing: threading.Thread | None = None
        self._thread = threading.Thread(target=self._start, daemon=True, name="twin-cluster-start")
        self._thread.start()

    def _start(self) -> None:
        t = time.perf_counter()
        try:
            self.cluster = _new_local(self.n)
        except Exception as e:  # handed to take()
            self.error = e
        self.seconds = time.perf_counter() - t

    def take(self):
        """The started cluster (waiting for its start); its start's exception raised here."""
        self._thread.join()
        if self.error is not None:
            raise self.error
        self.taken = True
        return self.cluster

    def release(self) -> None:
        """The taker is done with the cluster: it closes in a background thread (its workers' graceful
        exit, 0.4-1 s, while the caller assembles and writes its results); :meth:`close` waits for it."""
        self._closing = threading.Thread(target=self.cluster.close, daemon=True, name="twin-cluster-close")
        self._closing.start()

    def close(self) -> None:
        """End the cluster: close it unless :meth:`take` handed it on (waiting for its start to end
        first), or wait for its :meth:`release`."""
        self._thread.join()
        if self._closing is not None:
            self._closing.join()
        elif self.cluster is not None and not self.taken:
            self.cluster.close()


@contextmanager
def starting(n: int | None) -> Iterator[Starting | None]:
    """A :class:`Starting` local cluster of ``n`` workers for the block (None for ``n`` None, or without
    Dask: :func:`local_client` then says why), closed after it unless taken."""
    start = Starting(n) if n is not None and available() is None else None
    try:
        yield start
    finally:
        if start is not None:
            start.close()


@contextmanager
def local_client(n: int, start: Starting | None = None) -> Iterator:
    """A :class:`distributed.Client` on a new :class:`distributed.LocalCluster` of ``n`` worker
    processes of one thread each (127.0.0.1, TCP, no dashboard, no memory limit: a part keeps its
    rounds as one process does; the scheduler's HTTP server, which starts without a dashboard too, on
    a free port, not Dask's default 8787, which another cluster on the host may hold; each worker
    preloading :mod:`twin.worker`, the engine), closed after the block; ``start``: the cluster already
    starting (:class:`Starting`, of at least ``n`` workers: the extra ones stay idle) instead of a new
    one, closed in the background after the block (:meth:`Starting.release`). ClusterError when Dask is
    not installed."""
    why = available()
    if why:
        raise ClusterError(f"--processes {n}: {why}")
    from distributed import Client
    early = start if start is not None and start.n >= n else None
    cluster = early.take() if early is not None else _new_local(n)
    try:
        with Client(cluster) as client:
            yield client
    finally:
        if early is not None:
            early.release()  # closed in the background, waited for at the end of starting()
        else:
            cluster.close()


@contextmanager
def connect(address: str) -> Iterator:
    """A :class:`distributed.Client` of the scheduler at ``address`` (``tcp://HOST:PORT``), closed
    after the block. ClusterError (one line) when Dask is not installed or nothing there answers as
    a Dask scheduler within 20 s."""
    why = available()
    if why:
        raise ClusterError(f"--cluster {address}: {why}")
    from distributed import Client
    try:
        client = Client(address, timeout="20s")
    except Exception as e:  # no scheduler there (OSError, TimeoutError), or a server that does not speak Dask
        raise ClusterError(f"--cluster {address}: cannot connect to a Dask scheduler there ({type(e).__name__}: "
                           f"{(str(e).splitlines() or [''])[0][:160]})") from None
    with client:
        yield client


__all__ = ["ClusterError", "Starting", "available", "starting", "local_client", "connect", "dask_setup"]
