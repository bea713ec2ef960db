"""``twin sweep SCENARIO --param PATH=V1,V2,...``: a what-if grid (the library: :mod:`twin.studies.sweep`),
a table and sweep.csv, sweep.json, sweep.png."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from twin.commands.common import (
    UsageError,
    _count,
    _file_name,
    _seed,
    add_allow_code,
    add_figure_format,
    add_overwrite,
    check_out_folder,
    run_folder,
)
from twin.commands.interrupt import EXIT, interrupted_before_any, interrupted_line, interruptible

if TYPE_CHECKING:
    from rich.console import Console

MAX_WORKERS = 256  # processes on one machine: more is a typo (and on Linux each one is forked at once)


def _workers(text: str) -> int:
    """``--workers``: a whole number from 1 to :data:`MAX_WORKERS`."""
    n = _count(text)
    if n > MAX_WORKERS:
        raise argparse.ArgumentTypeError(f"at most {MAX_WORKERS} worker processes: {text!r}")
    return n


def _cluster(text: str) -> str:
    """``--cluster``: a Dask distributed scheduler's address, ``tcp://HOST:PORT`` (a host name or
    address and a port from 1 to 65535; the one scheme the sweep's client is set up for: TLS needs
    certificates, UCX a build with it)."""
    from urllib.parse import urlsplit
    shown = text if len(text) <= 80 else text[:77] + "..."
    try:
        u = urlsplit(text)
        port = u.port
    except ValueError:
        port, u = None, None
    if u is None or u.scheme != "tcp" or not u.hostname or port is None or not 1 <= port <= 65535 \
            or u.path or u.query or u.fragment or u.username or u.password:
        raise argparse.ArgumentTypeError(f"a Dask scheduler's address, tcp://HOST:PORT (port 1 to 65535): {shown!r}")
    return text


def register(sub) -> None:
    """Add the ``sweep`` subcommand to the ``twin`` parser's subparsers."""
    s = sub.add_parser("sweep", help="run a scenario over a grid of parameter values; table and plot of p50/p90/p99")
    s.add_argument("scenario", type=_file_name, help="scenario YAML")
    s.add_argument("--param", action="append", required=True, metavar="PATH=V1,V2,...",
                   help="a swept parameter: scenario key (frame_bytes, traffic.period) or params.<key of the "
                        "parameter set>; values V1,V2,... or a range START:STOP:STEP; repeat for a grid")
    s.add_argument("--rounds", type=_count, help="rounds per point (default: the scenario's)")
    s.add_argument("--seed", type=_seed, help="base seed (default: the scenario's); each point derives its own")
    s.add_argument("--workers", type=_workers, help=f"local worker processes, 1 to {MAX_WORKERS} (default: CPU count; "
                   "never more than there are points)")
    s.add_argument("--cluster", type=_cluster, metavar="tcp://HOST:PORT",
                   help="run the points on this Dask distributed scheduler")
    s.add_argument("--out", help="output folder (default runs/<scenario name>/sweep)")
    s.add_argument("--measure", choices=("rtt", "loop"), default="rtt",
                   help="what the table and plot show: rtt (card/FPGA-boundary round trip, default) or loop "
                        "(controller to controller: adds an external control system's link)")
    s.add_argument("--quiet", action="store_true", help="no progress bar")
    add_figure_format(s, "sweep")
    add_overwrite(s)
    add_allow_code(s)
    s.set_defaults(handler=cmd_sweep, stops_at_a_round=True)  # its own signal handlers (interruptible)


def cmd_sweep(args: argparse.Namespace, console: Console) -> int:
    """``twin sweep``: returns 0, or 2 with one ``twin: error:`` line for a bad ``--param``, or 130
    when a SIGINT or SIGTERM stopped it (:mod:`twin.commands.interrupt`: the points completed are
    written, sweep.json ``"partial": true``; the points under way are abandoned)."""
    with interruptible():
        return _sweep(args, console)


def _sweep(args: argparse.Namespace, console: Console) -> int:
    from twin.commands.common import scenario_arg
    from twin.scenario import load_scenario
    from twin.studies.sweep import SWEEP_FILES  # run_sweep looked up per call
    loaded = load_scenario(scenario_arg(args.scenario, ""))
    out = check_out_folder(args.out or Path("runs") / loaded.scenario.name / "sweep")  # before the points run
    folder = run_folder(args, out, loaded.scenario.seed if args.seed is None else args.seed).check(SWEEP_FILES)
    with folder:  # a refusal, an error or a second Ctrl-C before the commit leaves the folder as it was
        return _points(args, console, loaded, out, folder)


LOCKED_AXES = {  # what a swept size or rate does to a closed loop locked to its consumer's poll
    "frame_bytes": "the round trip moves only when the added transfer time crosses a whole poll period",
    "traffic.gap": "round trip + gap stays a whole number of poll periods (the gap comes out of the wait "
                   "for the next poll)",
}


def locked_warnings(loaded, axes) -> list[str]:
    """One line per swept size or rate (:data:`LOCKED_AXES`) whose result a closed loop with a fixed
    gap hides: each request leaves when the previous reply is back, so a polling consumer's loop locks to
    its poll (every request is noticed at the same phase) and the cycle is a whole number of poll
    periods; a change that does not cross one reads flat (the MI355X's 3.036 µs from 64 to 1,024 B,
    polling every 337.15 ns). Only consumers polling slower than ten of the generator's clock cycles
    are named (a CPU's 10 ns poll hides nothing a table shows). Random gaps (``traffic.gaps``) or open
    loop sample every phase. Empty when nothing is hidden."""
    t = loaded.scenario.traffic
    if t.mode != "closed_loop" or t.gaps is not None or any(a.path.startswith("traffic.") and
                                                             a.path not in LOCKED_AXES for a in axes):
        return []
    consumers = getattr(loaded.params, "consumers", {})
    polls = []
    for node in loaded.scenario.consumers():
        c = consumers.get(node.device)
        period = getattr(c, "poll_period_ns", None)
        if period is not None and period * 1000 >= 10 * t.clock_period:
            polls.append(f"{node.name} (polls every {period:g} ns)")
    if not polls:
        return []
    return [f"--param {a.path}: a closed loop with a fixed gap locks to the poll of {', '.join(polls)}: "
            f"{LOCKED_AXES[a.path]}, so the swept values may read flat (random gaps, traffic.gaps, or open "
            "loop sample every phase)" for a in axes if a.path in LOCKED_AXES]


def _points(args: argparse.Namespace, console: Console, loaded, out: Path, folder) -> int:
    """Run the sweep's points, write and commit its files in ``folder``, print its table; the exit code."""
    from twin.engine.stop import Interrupted
    from twin.output.progress import progress_bar
    from twin.studies.sweep import SweepError, grid, parse_param, run_sweep, write_outputs
    try:
        axes = [parse_param(p) for p in args.param]
        if len({a.path for a in axes}) != len(axes):
            raise SweepError("--param: a path named twice")
        points = grid(axes)
        for line in locked_warnings(loaded, axes):  # before the points run: what the table cannot show
            console.print(f"[yellow]warning: {line}[/yellow]", soft_wrap=True, markup=True, highlight=False)
        with progress_bar(console, quiet=args.quiet) as bar:
            task = bar.add_task(f"sweep ({'dask ' + args.cluster if args.cluster else 'local'})", total=len(points))
            stopped = None
            try:
                rows = run_sweep(args.scenario, axes, args.rounds, args.seed, args.workers, args.cluster,
                                 progress=lambda d, t: bar.update(task, completed=d))
            except Interrupted as e:
                stopped, rows = e, e.partial
    except SweepError as e:  # one line, exit 2, as for any bad command-line value
        raise UsageError(str(e)) from None
    if stopped is not None and not rows:
        print(interrupted_before_any(len(points), "point"), file=sys.stderr)
        return EXIT
    pre = "loop_" if args.measure == "loop" else ""
    if pre and any(pre + "p50_ns" not in r for r in rows):
        print("twin: error: --measure loop: the scenario has no external control system (no loop beyond "
              "the card boundary)", file=sys.stderr)
        return 2
    write_outputs(rows, axes, folder, loaded.scenario.name, args.measure,
                  None if stopped is None else {"points": stopped.points_done,
                                                "points_requested": stopped.points_requested})
    if stopped is not None:
        folder.mark_partial(f"interrupted at point {stopped.points_done} of {stopped.points_requested}")
    written = folder.commit()
    from twin.output.table import Grid, Num
    tb = Grid(f"{loaded.scenario.name}: sweep, {len(points)} points, {'controller loop' if pre else 'round trip'} (µs)",
              [*(a.path for a in axes), "consumer", "p50", "p90", "p99", "mean"], keys=len(axes) + 1)
    for r in rows:
        tb.add_row(*[str(r[a.path]) for a in axes], r["consumer"],
                   *[Num(r[pre + k] / 1000) for k in ("p50_ns", "p90_ns", "p99_ns", "mean_ns")])
    tb.print(console)
    console.print("wrote " + ", ".join(map(str, written)) + f" ({out / 'manifest.json'} lists them)")
    if stopped is not None:
        print(interrupted_line(stopped.points_done, stopped.points_requested, out, "point"), file=sys.stderr)
        return EXIT
    return 0
