"""``twin machine SCENARIO --processes N`` / ``--cluster tcp://HOST:PORT``: the machine's parts on Dask
(:mod:`twin.machine.parts`), on the cluster helpers ``twin run MESH --processes`` uses
(:mod:`twin.commands.run_parts`, :mod:`twin.engine.cluster`): the placement printed one line a part
(its pools, patches, expected decoder load and predicted share), each part's worker as it starts,
after the run each part's measured CPU share beside the predicted one, and a lost part's one line.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from twin.engine.partition import ranges
from twin.usage import UsageError

if TYPE_CHECKING:
    from rich.console import Console

    from twin.machine.parts import MachinePart, PartedMachine

PART_LOST_EXIT = 3
"""Exit code of a partitioned machine run that lost a part (as ``twin run``'s): the other parts' pools
are saved, partial."""


def add_parted_options(d: argparse.ArgumentParser) -> None:
    """``--processes``, ``--cluster`` and ``--part-timeout``, as ``twin run`` has them."""
    from twin.commands import parted_args
    parted_args.add(d, "run the machine's independent pools (no merge joins a patch of one to a patch of another) "
                       "on a local Dask cluster of N worker processes, grouped into N parts balanced by expected "
                       "decoder load; the same files as one process (needs twin[cluster])",
                    "run the machine's parts (as --processes, one part per worker) on this Dask scheduler",
                    "the other parts' pools are saved, partial")


def check_options(args: argparse.Namespace) -> None:
    """Refuse ``--processes`` with ``--cluster``, ``--part-timeout`` alone, and either without Dask (one line)."""
    from twin.commands.parted_args import flag_of, require_engine
    flag = flag_of(args, "a partitioned machine run")
    if flag is not None:
        require_engine(flag)


def part_label(part: MachinePart, names: list[str]) -> str:
    """``part K (pools a-b)``: what a line about a part names (pool names, their indices' runs when many)."""
    shown = ", ".join(names[p] for p in part.pools) if len(part.pools) <= 4 else f"pools {ranges(part.pools)}"
    return f"part {part.index} ({shown})"


def placement_lines(parts: list[MachinePart], comps: list[tuple[int, ...]], names: list[str], flag: str) -> list[str]:
    """The placement, one line a part (its pools, patches, expected decoder load and predicted share);
    one line alone when the pools form one component or one part was asked for."""
    total = sum(p.load for p in parts) or 1
    if len(parts) == 1:
        why = (f"the machine's {len(names)} pool{'s' * (len(names) > 1)} form one component (merges join patches "
               "of different pools; such pools run in one process)" if len(comps) == 1
               else f"{len(comps)} independent components, one part asked for")
        return [f"{flag}: one part: {why}; it runs in this process"]
    return [f"{part_label(p, names)}: {p.patches:,} patches, expected decoder load {p.load / 1e9:,.1f} ms, "
            f"predicted {100 * p.load / total:.1f} % of the load" for p in parts]


def measured_lines(pm: PartedMachine, names: list[str]) -> list[str]:
    """After the run, one line a part: its CPU seconds and share of all parts' (measured) beside the
    predicted share of the decoder load; a lost part says so."""
    from twin.commands.run_parts import share_lines
    return share_lines([(p.index, part_label(p, names), p.load) for p in pm.parts], pm.cpu_s, pm.lost)


def lost_document(pm: PartedMachine, names: list[str]) -> list[dict]:
    """results.json's ``parts_lost``: per lost part its index, pools (names; not in ``pools``) and why."""
    parts = {p.index: p for p in pm.parts}
    return [{"part": k, "pools": [names[i] for i in parts[k].pools], "reason": why} for k, why in pm.lost.items()]


def lost_reason(pm: PartedMachine, names: list[str]) -> str:
    """The manifest's ``partial_reason`` of a run that lost parts."""
    parts = {p.index: p for p in pm.parts}
    lost = "; ".join(f"{part_label(parts[k], names)} lost: {why}" for k, why in pm.lost.items())
    return f"{lost}; the other parts' pools (their jobs so far)"


def runner(args: argparse.Namespace, console: Console, describe: Callable[[str], None], progress,
           out: Path, kept: list) -> Callable:
    """The ``parted`` function :func:`twin.machine.study.run_machine` takes: the machine in parts on
    the local cluster or the scheduler (:func:`twin.commands.run_parts._client_of`), the placement
    printed first; the :class:`twin.machine.parts.PartedMachine` appended to ``kept``; a lost part's
    line on stderr as soon as the run ends. Raises UsageError for no cluster or every part lost."""
    from twin.commands.parted_args import flag_of
    from twin.commands.run_parts import _client_of, _cluster_size, _end_local_worker, started_line
    from twin.engine.cluster import PART_TIMEOUT_S
    from twin.machine.parts import PartsLost, run_machine_parts
    flag = flag_of(args, "a partitioned machine run") or ""

    def run(m, cost, pools, seed):
        names = [p[0] for p in pools]
        n = args.processes if args.processes is not None else _cluster_size(args)

        def placed(parts, comps) -> None:
            for line in placement_lines(parts, comps, names, flag):
                console.print(line, highlight=False, soft_wrap=True)
            describe(f"ticks (all pools, {len(parts)} part{'s' * (len(parts) > 1)})")
        try:
            pm = run_machine_parts(m, cost, pools, seed, n, _client_of(args, console, args.quiet), progress, placed,
                                   args.part_timeout or PART_TIMEOUT_S, _end_local_worker,
                                   lambda r: console.print(started_line(r), highlight=False, soft_wrap=True))
        except PartsLost as e:
            parts = {p.index: p for p in e.parts}
            raise UsageError("every part was lost, nothing saved: " + "; ".join(
                f"{part_label(parts[k], names)}: {why}" for k, why in e.lost.items())) from None
        if pm.lost:
            parts = {p.index: p for p in pm.parts}
            lost = "; ".join(f"{part_label(parts[k], names)} lost: {why}" for k, why in pm.lost.items())
            print(f"twin: error: {lost}; the other parts' pools ({len(pm.run.pools)} of {len(names)}) are being "
                  f"saved in {out} (partial)", file=sys.stderr, flush=True)
        kept.append((pm, names))
        return pm
    return run


def finish(kept: list, doc: dict, folder, console: Console) -> int:
    """After a partitioned run: the measured lines, a lost part in the document and the manifest;
    returns the exit code (0, or :data:`PART_LOST_EXIT`)."""
    if not kept:
        return 0
    pm, names = kept[0]
    if not pm.here:
        for line in measured_lines(pm, names):
            console.print(line, highlight=False, soft_wrap=True)
    if not pm.lost:
        return 0
    doc["partial"] = True
    doc["parts_lost"] = lost_document(pm, names)
    folder.mark_partial(lost_reason(pm, names))
    return PART_LOST_EXIT


__all__ = ["add_parted_options", "check_options", "runner", "finish", "placement_lines", "measured_lines"]
