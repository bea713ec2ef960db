"""``twin run MESH --processes N`` / ``--cluster tcp://HOST:PORT``: the mesh's parts on Dask
(:mod:`twin.studies.mesh_parts`), the placement printed one line a part (predicted share of the
events), after the run each part's measured CPU share, and a lost part's one line."""
from __future__ import annotations

import argparse
import os
import sys
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from twin.engine.partition import Part, ranges
from twin.usage import UsageError

if TYPE_CHECKING:
    from rich.console import Console

    from twin.studies.mesh_parts import PartedMesh


def _flag(args: argparse.Namespace) -> str:
    return f"--processes {args.processes}" if args.processes is not None else f"--cluster {args.cluster}"


def part_label(part: Part) -> str:
    """``part K (components ...; flows ...)``: what a line about a part names."""
    return f"part {part.index} (components {ranges(part.components)}; flows {ranges(part.flows)})"


def placement_lines(parts: list[Part], comps: list[tuple[int, ...]], flag: str) -> list[str]:
    """The placement, one line a part: its components, flows, expected events (rounds) and predicted
    share; one line alone when every flow is in one component or one part was asked for."""
    total = sum(p.events for p in parts) or 1
    if len(parts) == 1:
        why = (f"the topology's {len(parts[0].flows)} flows form one component (they share lanes, a bridge, a "
               "consumer or a stream)" if len(comps) == 1 else f"{len(comps)} components, one part asked for")
        return [f"{flag}: one part: {why}; it runs in this process"]
    return [f"{part_label(p)}: {len(p.flows):,} flows, {p.events:,} rounds, predicted {100 * p.events / total:.1f} % "
            "of the events" for p in parts]


def started_line(run) -> str:
    """``part K: running on WORKER (host H, pid P)``: a part's first heartbeat (:class:`twin.engine.parts.PartRun`)."""
    return f"part {run.part.index}: running on {run.worker} (host {run.host}, pid {run.pid})"


def measured_lines(pm: PartedMesh) -> list[str]:
    """After the run, one line a part: its engine's CPU seconds and share of all parts' (measured)
    beside the predicted share (of the events); a lost part says so."""
    return share_lines([(p.index, f"part {p.index}", p.events) for p in pm.parts], pm.cpu_s, pm.lost)


def share_lines(parts: list[tuple[int, str, float]], cpu_s: list[float], lost: dict[int, str]) -> list[str]:
    """One line a part (``parts``: its index, label and expected work; ``cpu_s`` in the same order):
    its CPU seconds and share of all parts' (measured) beside its predicted share of the work, or
    why it was lost (``lost``: by index)."""
    total_w = sum(w for _, _, w in parts) or 1
    total_cpu = sum(cpu_s) or 1.0
    out = []
    for (i, label, w), cpu in zip(parts, cpu_s):
        pred = f"predicted {100 * w / total_w:.1f} %"
        if i in lost:
            out.append(f"{label}: lost ({lost[i]}), {pred}")
        else:
            out.append(f"{label}: CPU {cpu:.3f} s, measured {100 * cpu / total_cpu:.1f} % of the parts' CPU time, "
                       f"{pred}")
    return out


def print_measured(pm: PartedMesh, console: Console) -> None:
    """:func:`measured_lines` on ``console`` (nothing for a run in this process)."""
    if not pm.here:
        for line in measured_lines(pm):
            console.print(line, highlight=False, soft_wrap=True)


def lost_reason(pm: PartedMesh) -> str:
    """The manifest's ``partial_reason`` of a run that lost parts."""
    parts = {p.index: p for p in pm.parts}
    lost = "; ".join(f"{part_label(parts[k])} lost: {why}" for k, why in pm.lost.items())
    return f"{lost}; the other parts' whole rounds so far (their flows only)"


def lost_document(pm: PartedMesh) -> list[dict]:
    """results.json's ``parts_lost``: per lost part its index, components, flows (not in ``flows``)
    and why."""
    parts = {p.index: p for p in pm.parts}
    return [{"part": k, "components": list(parts[k].components), "flows": list(parts[k].flows), "reason": why}
            for k, why in pm.lost.items()]


def _refuse_live(loaded, flag: str) -> None:
    """A live node's session belongs to this process (its board is reached from this host)."""
    live = [n.name for n in loaded.scenario.nodes if getattr(n, "model", "sim") == "live"]
    if live:
        raise UsageError(f"{flag}: node {live[0]!r} is model live: its session is held by this process on this "
                         "host; run the mesh without --processes / --cluster")


def _end_local_worker(run) -> None:
    """A lost part's worker process, when it is this process's child (a local cluster's): ended, so
    that a hung worker does not outlive the run."""
    if run.pid is None:
        return
    try:
        import psutil
        proc = psutil.Process(run.pid)
        if proc.ppid() == os.getpid():
            proc.kill()
    except Exception:  # gone already, or not ours
        pass


def _client_of(args: argparse.Namespace, console: Console, quiet: bool) -> Callable:
    """The context manager giving the parts' Dask client (a local cluster of one worker a part, or the
    scheduler at ``--cluster``); a ClusterError becomes one usage line."""
    from twin.engine.cluster import ClusterError, connect, local_client

    @contextmanager
    def client_of(parts: list[Part]):
        with ExitStack() as stack:
            try:
                client = stack.enter_context(local_client(len(parts), getattr(args, "cluster_start", None))
                                             if args.processes is not None
                                             else connect(args.cluster))
            except ClusterError as e:
                raise UsageError(str(e)) from None
            if args.cluster is not None and not quiet:
                _cluster_notes(client, len(parts), console)
            yield client
    return client_of


def _cluster_notes(client, n: int, console: Console) -> None:
    """One line when the scheduler's workers would not run the parts side by side, one thread each."""
    workers = client.scheduler_info().get("workers", {})
    threads = sum(int(w.get("nthreads", 1)) for w in workers.values())
    if len(workers) < n:
        console.print(f"note: {n} parts on {len(workers)} workers: parts wait for a free worker", highlight=False)
    elif threads > len(workers):
        console.print("note: parts in one worker process run one after another, so a worker's extra threads add "
                      "nothing; start them with `dask worker --nthreads 1`", highlight=False)


def run_parted(args: argparse.Namespace, console: Console, loaded, seed: int, progress, describe, out: Path
               ) -> PartedMesh:
    """Run the mesh in parts (see the module docstring): the placement printed first, ``progress(done,
    total)``, ``describe(text)`` the bar's label; a lost part's line on stderr as soon as the run ends.
    Raises UsageError for a live node, no cluster, or every part lost."""
    from twin.scenario.compile import rtl_config
    from twin.studies.mesh_parts import PartsLost, run_mesh_parts
    from twin.studies.mesh_reduce import rounds_needed
    flag = _flag(args)
    _refuse_live(loaded, flag)
    n = args.processes if args.processes is not None else _cluster_size(args)

    def placed(parts: list[Part], comps) -> None:
        for line in placement_lines(parts, comps, flag):
            console.print(line, highlight=False, soft_wrap=True)
        describe(f"replies (all flows, {len(parts)} part{'s' * (len(parts) > 1)})")
    from twin.engine.cluster import PART_TIMEOUT_S
    try:
        pm = run_mesh_parts(loaded.scenario, loaded.params, n, _client_of(args, console, args.quiet),
                            rounds=args.rounds, seed=seed, progress=progress, placed=placed,
                            timeout_s=args.part_timeout or PART_TIMEOUT_S,
                            rtl_config=lambda node: rtl_config(loaded, node, None), on_lost=_end_local_worker,
                            on_start=lambda r: console.print(started_line(r), highlight=False, soft_wrap=True),
                            keep_rounds=rounds_needed(not args.no_csv, not args.no_plot) is not None)
    except PartsLost as e:
        parts = {p.index: p for p in e.parts}
        raise UsageError("every part was lost, nothing saved: " + "; ".join(
            f"{part_label(parts[k])}: {why}" for k, why in e.lost.items())) from None
    if pm.lost:
        parts = {p.index: p for p in pm.parts}
        done = sum(len(ft.t_in) for ft in pm.result.flows) if pm.result.reduced is None else \
            sum(r.rounds for r in pm.result.reduced)
        lost = "; ".join(f"{part_label(parts[k])} lost: {why}" for k, why in pm.lost.items())
        print(f"twin: error: {lost}; the other parts' {done:,} rounds are being saved in {out} (partial)",
              file=sys.stderr, flush=True)
    return pm


def _cluster_size(args: argparse.Namespace) -> int:
    """The parts for ``--cluster``: one per worker the scheduler has now (at least one)."""
    from twin.engine.cluster import ClusterError, connect
    try:
        with connect(args.cluster) as client:
            return max(1, len(client.scheduler_info().get("workers", {})))
    except ClusterError as e:
        raise UsageError(str(e)) from None


__all__ = ["run_parted", "placement_lines", "measured_lines", "share_lines", "print_measured", "lost_reason",
           "lost_document", "part_label"]
