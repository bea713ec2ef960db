"""The parts of a topology (:func:`twin.engine.partition.place`) as Dask distributed tasks, one task a
part, with no synchronisation between them: parts share no lane, bridge, serving thread or stream.

Any part's work (a mesh's topology, a machine's pools: :mod:`twin.machine.parts`) runs as one task
of :func:`run_task` (:func:`run_tasks`), which gives it the heartbeat and the stop below.

Worker side, :func:`run_part`: the part's topology (:func:`twin.engine.partition.part_topology`: the
whole topology's poll and oscillator phases shipped with it, drawn in the parent) runs on
:func:`twin.engine.event.run_topology`, the one-process code path (the compiled core where the whole
topology would run there, else the simpy reference); a heartbeat thread logs the part's replies so
far on the run's Dask event topic every :data:`HEARTBEAT_S` and turns a stop sent to its worker
(:func:`stop_parts`) into the engine's stop request (:mod:`twin.engine.stop`): the part then returns
every flow's whole rounds so far, as a stopped process does.

Parent side, :func:`run_parts`: submits the parts, follows their heartbeats (progress), and ends a part
that fails: its task errs (its worker process died: Dask's ``KilledWorker``; an exception), no
heartbeat for ``timeout_s``, or a heartbeat from another worker (a scheduler that reran it). Then, or
on a stop asked for in this process, it stops the other parts and waits for them at most ``timeout_s``.
"""
from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable

from twin.engine.partition import Part, part_topology, whole_draws
from twin.engine.spec import LoopResult
from twin.engine.stop import Interrupted, clear_stop, request_stop, take_stop
from twin.engine.topology import Topology

HEARTBEAT_S = 0.25
"""Seconds between a part's heartbeats (its replies so far); a stop reaches its engine within this."""
POLL_S = 0.05
"""Seconds between the parent's looks at the parts."""

_STOPS: set[str] = set()  # in a worker process: the runs asked to stop (tokens)
_ONE_AT_A_TIME = threading.Lock()
"""Parts in one worker process (a worker of several threads, or several workers in one process) run one
after another: the engines keep per-process state (the stop request, a Python function's pending
exception in the compiled core's callbacks). A waiting part keeps beating."""


def topic(token: str) -> str:
    """The Dask event topic of run ``token``'s heartbeats."""
    return f"twin-parts-{token}"


async def stop_parts(token: str) -> None:
    """In a worker process (``Client.run``, on its event loop; a coroutine, so the parent need not wait
    for a worker that no longer answers): the parts of run ``token`` stop at their next check."""
    _STOPS.add(token)


@contextmanager
def _reference(on: bool):
    """The simpy reference for the block's topologies when ``on`` (as the whole topology would run)."""
    from twin.engine import event
    before = event.COMPILED
    event.COMPILED = before and not on
    try:
        yield
    finally:
        event.COMPILED = before


class _Beat(threading.Thread):
    """A part's heartbeat on its worker: every :data:`HEARTBEAT_S` its replies so far, and a stop
    sent to the run made the engine's stop request (again each beat until the part ends: another
    part in the same process may have taken the last one)."""

    def __init__(self, worker, token: str, index: int):
        super().__init__(daemon=True, name=f"twin-part-{index}-heartbeat")
        self.worker, self.token, self.done = worker, token, 0
        self.msg = {"part": index, "pid": os.getpid(), "worker": worker.address, "host": socket.gethostname()}
        self._end = threading.Event()

    def update(self, done: int) -> None:
        self.done = done

    def beat(self) -> None:
        if self.token in _STOPS:
            request_stop()
        self.worker.log_event(topic(self.token), {**self.msg, "done": self.done})

    def run(self) -> None:
        self.beat()
        while not self._end.wait(HEARTBEAT_S):
            self.beat()

    def finish(self) -> None:
        self._end.set()
        self.join()


def run_part(topo: Topology, token: str, index: int, reference: bool,
             finish: Callable[[list[LoopResult]], list] | None = None) -> dict:
    """A Dask task: run part ``index`` of run ``token`` (``topo``: its topology) on the one-process
    engine (``reference``: the simpy reference, as the whole topology would). Returns ``results``
    (one :class:`LoopResult` per flow, ``topo``'s order; with ``finish``, a picklable function of
    them, what it makes of them: what the parent needs, shipped instead of every round), ``done``
    (the flows' rounds completed), ``cpu_s`` (this thread's CPU seconds), ``wall_s`` (seconds from
    its turn to its end, ``finish`` included), ``finish_s`` (``finish``'s seconds) and ``stopped``
    (asked to stop: every flow's whole rounds so far)."""
    return run_task(_mesh_work, (topo, reference, finish), token, index)


def _mesh_work(arg: tuple[Topology, bool, Callable | None],
               progress: Callable[[int], None]) -> tuple[Any, int, bool, dict]:
    """A mesh part's work for :func:`run_task`: its topology on the one-process engine, then
    ``finish`` of its results (when given), timed (``finish_s``)."""
    topo, reference, finish = arg
    stopped = False
    results: list[LoopResult] | None
    with _reference(reference):
        try:
            results = run_topology_of(topo, progress)
        except Interrupted as e:
            results, stopped = e.results, True
    t = time.perf_counter()
    out = finish(results) if finish is not None and results is not None else results
    return out, sum(len(r.t_in) for r in results or []), stopped, {"finish_s": time.perf_counter() - t}


def run_topology_of(topo: Topology, progress: Callable[[int], None]) -> list[LoopResult]:
    """The one-process engine on ``topo`` (:func:`twin.engine.event.run_topology`)."""
    from twin.engine.event import run_topology
    return run_topology(topo, progress)


def run_task(work: Callable[[Any, Callable[[int], None]], tuple], arg: Any, token: str, index: int) -> dict:
    """A Dask task: part ``index`` of run ``token``, ``work(arg, progress)`` on this worker with a
    heartbeat (:class:`_Beat`: ``progress(done)`` sets what it reports; a stop sent to the run
    becomes the engines' stop request, :mod:`twin.engine.stop`). ``work`` returns (results, done,
    stopped) or (results, done, stopped, extra): the task returns them as ``results``, ``done``,
    ``stopped`` (and ``extra``'s keys) with ``cpu_s`` (this thread's CPU seconds from the part's turn:
    parts in one process run one after another) and ``wall_s`` (seconds from its turn to its end)."""
    from distributed import get_worker
    beat = _Beat(get_worker(), token, index)
    beat.start()
    cpu, wall = time.thread_time(), time.perf_counter()
    try:
        with _ONE_AT_A_TIME:
            cpu, wall = time.thread_time(), time.perf_counter()  # from its turn
            got = work(arg, beat.update)
    finally:
        beat.finish()
        clear_stop()
    results, done, stopped = got[:3]
    return {"results": results, "done": done, "cpu_s": time.thread_time() - cpu,
            "wall_s": time.perf_counter() - wall, "stopped": stopped, **(got[3] if len(got) > 3 else {})}


@dataclass
class PartRun:
    """One part under way and its outcome: the ``part``, its Dask ``future``, what its heartbeats
    said (``worker``, ``pid``, ``host``, ``done`` replies, ``beat`` the last one's monotonic instant),
    and at the end ``results`` (per flow, the part's order: :class:`LoopResult`, or what the run's
    ``finish`` made of them), ``cpu_s``, ``wall_s``, ``finish_s`` (:func:`run_part`'s), ``stopped``,
    or ``lost`` (why it gave nothing: one phrase)."""

    part: Any
    future: Any
    worker: str | None = None
    pid: int | None = None
    host: str | None = None
    done: int = 0
    beat: float | None = None
    moved: str | None = None
    results: Any = None
    cpu_s: float = 0.0
    wall_s: float = 0.0
    finish_s: float = 0.0
    stopped: bool = False
    lost: str | None = None

    def heard(self, msg: dict) -> None:
        """A heartbeat of this part."""
        if self.worker is None:
            self.worker, self.pid, self.host = msg["worker"], msg["pid"], msg["host"]
        elif msg["worker"] != self.worker:
            self.moved = msg["worker"]
        self.done = max(self.done, int(msg["done"]))
        self.beat = time.monotonic()

    def collect(self) -> None:
        """The finished task's outcome (its results, or why it has none)."""
        if self.future.status == "finished":
            out = self.future.result()
            self.results, self.cpu_s, self.stopped = out["results"], out["cpu_s"], out["stopped"]
            self.wall_s, self.finish_s, self.done = out["wall_s"], out.get("finish_s", 0.0), int(out["done"])
            return
        if self.future.status == "cancelled":
            self.lost = "its task was cancelled"
            return
        e = self.future.exception()
        from distributed import KilledWorker
        if isinstance(e, KilledWorker):
            self.lost = f"its worker process died ({self.worker or 'before its first heartbeat'})"
        else:
            self.lost = f"it failed: {type(e).__name__}: {(str(e).splitlines() or [''])[0][:200]}"

    def silent(self, now: float, timeout_s: float) -> str | None:
        """Why a part under way counts as lost now (no heartbeat for ``timeout_s``, rerun elsewhere), or None."""
        if self.moved:
            return f"its worker {self.worker} was lost and the scheduler reran it on {self.moved}"
        if self.beat is not None and now - self.beat > timeout_s:
            return f"no heartbeat from its worker ({self.worker}, pid {self.pid}) for {timeout_s:g} s"
        return None


def run_parts(client, topo: Topology, parts: list[Part], progress: Callable[[int], None] | None = None,
              timeout_s: float = 20.0, reference: bool = False,
              on_lost: Callable[[PartRun], None] | None = None,
              on_start: Callable[[PartRun], None] | None = None,
              finish: Callable[[list[LoopResult]], list] | None = None) -> list[PartRun]:
    """Run ``parts`` of ``topo`` as tasks on ``client``'s cluster (see the module docstring); returns
    one :class:`PartRun` per part, each with ``results`` (``finish``: :func:`run_part`'s) or
    ``lost``. ``progress(done)``: the
    replies of all parts so far, every :data:`POLL_S`. ``on_lost(run)``: called once for a part
    found lost while others run (the caller may end its process); ``on_start(run)``: once a part's
    first heartbeat names its worker (``worker``, ``host``, ``pid``). A stop asked for in this process
    (:func:`twin.engine.stop.request_stop`) stops every part; so does a lost part. Parts that do
    not answer a stop within ``timeout_s`` are lost too."""
    draws = whole_draws(topo)  # once (a draw a flow), not once a part
    work = [(p, _mesh_work, (part_topology(topo, p.flows, draws), reference, finish)) for p in parts]
    return run_tasks(client, work, progress, timeout_s, on_lost, on_start)


def run_tasks(client, work: list[tuple[Any, Callable, Any]], progress: Callable[[int], None] | None = None,
              timeout_s: float = 20.0, on_lost: Callable[[PartRun], None] | None = None,
              on_start: Callable[[PartRun], None] | None = None) -> list[PartRun]:
    """Run parts as Dask tasks of :func:`run_task`, followed as :func:`run_parts` describes: ``work``
    per part (its part, index ``i`` of the list as ``part.index``; its work function; its argument,
    shipped to the worker). Returns one :class:`PartRun` per part. ``progress(done)``: the parts'
    ``done`` summed (what each work function reports)."""
    token = uuid.uuid4().hex
    lock = threading.Lock()
    runs: list[PartRun] = []

    def heard(event) -> None:
        msg = event[1]
        with lock:
            runs[msg["part"]].heard(msg)

    client.subscribe_topic(topic(token), heard)
    try:
        for i, (part, fn, arg) in enumerate(work):
            fut = client.submit(run_task, fn, arg, token, i, pure=False, key=f"twin-part-{i}-{token}")
            runs.append(PartRun(part, fut))
        _follow(client, token, runs, lock, progress, timeout_s, on_lost, on_start)
    finally:
        client.unsubscribe_topic(topic(token))
    return runs


def _follow(client, token: str, runs: list[PartRun], lock, progress, timeout_s: float, on_lost,
            on_start) -> None:
    """Look at the parts every :data:`POLL_S` until each has an outcome (see :func:`run_parts`). The
    lock guards what the heartbeats write (the client's event loop thread); a result is fetched
    outside it (the fetch needs that thread)."""
    pending = list(runs)
    unheard = list(runs)
    stopping: float | None = None
    while pending:
        time.sleep(POLL_S)
        now = time.monotonic()
        with lock:
            heard = [r for r in unheard if r.worker is not None]
        for r in heard:
            unheard.remove(r)
            if on_start:
                on_start(r)
        for r in list(pending):
            if r.future.done():
                r.collect()
            else:
                with lock:
                    why = r.silent(now, timeout_s)
                if why is None and stopping is not None and now - stopping > timeout_s:
                    why = f"it did not stop within {timeout_s:g} s of the stop sent to it"
                if why:
                    r.lost = why
                    client.cancel([r.future])
                    if on_lost:
                        on_lost(r)
            if r.lost is not None or r.results is not None:
                pending.remove(r)
        if progress:
            with lock:
                done = sum(r.done for r in runs)
            progress(done)
        if pending and stopping is None and (any(r.lost for r in runs) or take_stop()):
            stopping = now
            _send_stop(client, token)


def _send_stop(client, token: str) -> None:
    """Stop run ``token``'s parts on every worker (a part may not have started yet); a worker that
    is gone or does not answer is left out (its part is lost or times out)."""
    try:
        client.run(stop_parts, token, wait=False, on_error="ignore")
    except Exception:  # the scheduler lost a worker while it broadcast (CommClosedError, OSError)
        pass


__all__ = ["HEARTBEAT_S", "PartRun", "run_part", "run_parts", "run_task", "run_tasks", "stop_parts", "topic"]
