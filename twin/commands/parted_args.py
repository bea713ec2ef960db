"""The options that run one study across processes, as ``twin run`` (a mesh) and ``twin machine`` take
them: ``--processes N``, ``--cluster tcp://HOST:PORT`` and ``--part-timeout SECONDS`` (:func:`add`),
whether a run asked for it (:func:`parted`) and the refusals both commands share (:func:`flag_of`,
:func:`require_engine`), each one line."""
from __future__ import annotations

import argparse

from twin.usage import UsageError


def _processes(text: str) -> int:
    """``--processes``: worker processes, 1 to :data:`twin.commands.sweep.MAX_WORKERS`."""
    from twin.commands.sweep import _workers
    return _workers(text)


def _dask_address(text: str) -> str:
    """``--cluster``: a Dask scheduler's address, checked as ``twin sweep --cluster`` checks it."""
    from twin.commands.sweep import _cluster
    return _cluster(text)


def _part_timeout(text: str) -> float:
    """``--part-timeout``: seconds, a number from 0.5 to 3600."""
    try:
        v = float(text) if text.isascii() else float("nan")
    except ValueError:
        v = float("nan")
    if not 0.5 <= v <= 3600:  # NaN fails too
        raise argparse.ArgumentTypeError(f"seconds from 0.5 to 3600: {text!r}")
    return v


def add(p: argparse.ArgumentParser, processes_help: str, cluster_help: str, saved: str) -> None:
    """The three options on ``p``, each command saying what is split (``processes_help``,
    ``cluster_help``) and what a lost part leaves saved (``saved``)."""
    from twin.engine.cluster import PART_TIMEOUT_S
    p.add_argument("--processes", type=_processes, metavar="N", help=processes_help)
    p.add_argument("--cluster", type=_dask_address, metavar="tcp://HOST:PORT", help=cluster_help)
    p.add_argument("--part-timeout", type=_part_timeout, default=None, metavar="SECONDS",
                   help="with --processes or --cluster: a part silent this long (no heartbeat, or no answer to "
                        f"a stop) counts as lost; {saved} (default {PART_TIMEOUT_S:g})")


def parted(args: argparse.Namespace) -> bool:
    """Whether the run is partitioned across processes (``--processes`` or ``--cluster``)."""
    return getattr(args, "processes", None) is not None or getattr(args, "cluster", None) is not None


def flag_of(args: argparse.Namespace, what: str) -> str | None:
    """The option that partitions the run (``--processes N`` or ``--cluster ADDRESS``), None for a run
    in one process; UsageError for both together, or ``--part-timeout`` without either (``what``:
    the run it would time, e.g. "a partitioned mesh run")."""
    processes, cluster = getattr(args, "processes", None), getattr(args, "cluster", None)
    if processes is not None and cluster is not None:
        raise UsageError(f"--processes {processes} and --cluster {cluster}: one or the other (a local cluster of N "
                         "worker processes, or an existing scheduler's workers)")
    if processes is None and cluster is None:
        if getattr(args, "part_timeout", None) is not None:
            raise UsageError(f"--part-timeout {args.part_timeout:g}: times the parts of {what}; "
                             "needs --processes N or --cluster tcp://HOST:PORT")
        return None
    return f"--processes {processes}" if processes is not None else f"--cluster {cluster}"


def require_engine(flag: str) -> None:
    """UsageError (naming ``flag``) where Dask distributed cannot be used here."""
    from twin.engine.cluster import available
    why = available()
    if why:
        raise UsageError(f"{flag}: {why}")


__all__ = ["add", "parted", "flag_of", "require_engine"]
