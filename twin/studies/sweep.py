"""``twin sweep SCENARIO --param PATH=V1,V2,...``: what-if sweeps over a grid of parameter values.

A ``PATH`` names a scenario key (``frame_bytes``, ``slots``, ``traffic.period``, ``traffic.gap``)
or, with the prefix ``params.``, a key of the scenario's parameter set
(``params.consumers.mi210.poll_period_ns``, ``params.hosts.epyc7282.pcie.generation``,
``params.hosts.epyc7282.pcie.lanes``, ``params.aurora.lanes``, ``params.nic.rx_ns``,
``params.ethernet.switch_latency_ns``). Values are a comma list (``64,256,1024``; each read as
YAML, so ``5 us`` stays a string and ``3`` a number) or a range ``START:STOP:STEP`` (numbers, STOP
included when on the grid). Several ``--param`` make a grid (their Cartesian product).

Every point runs the whole scenario (each consumer's loop, or a mesh's flows) with the direct
engine where it applies, in parallel worker processes (:mod:`multiprocessing`) or on a Dask
distributed cluster (``--cluster tcp://HOST:PORT``). Asked to stop (:mod:`twin.engine.stop`), a
sweep keeps the points completed and abandons the rest (workers ignore SIGINT; the parent ends
them). Each point's seed is derived from the
scenario's seed and the point's values alone (:func:`point_seed`), so a point gives the same
numbers wherever and in whatever order it runs. Output folder (default ``runs/<name>/sweep``):
``sweep.csv`` and ``sweep.json`` (one row per point and consumer: values, p50/p90/p99/mean in ns,
and for a mesh the mean queueing delay) and ``sweep.png`` (p50/p90/p99 against the first
parameter, one colour per consumer).
"""
from __future__ import annotations

import csv
import itertools
import json
import os
import signal
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from twin.config import ConfigError, load_yaml
from twin.engine.stop import Interrupted, take_stop


class SweepError(ValueError):
    """A ``--param`` that cannot be used (names the option and the value)."""


class SweepInterrupted(Interrupted):
    """A sweep stopped early (:func:`run_sweep`): ``partial`` the rows of the ``points_done`` points
    completed (grid order) of the ``points_requested``."""

    def __init__(self, rows: list[dict], points_done: int, points_requested: int):
        super().__init__(f"after {points_done} of {points_requested} points")
        self.partial = rows
        self.points_done = points_done
        self.points_requested = points_requested


@dataclass(frozen=True)
class Axis:
    """One swept parameter: its dotted ``path`` and its ``values`` in order."""

    path: str
    values: tuple


def _number(text: str):
    v = yaml.safe_load(text)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise SweepError(f"not a number: {text!r}")
    return v


def parse_param(text: str) -> Axis:
    """Read ``PATH=V1,V2,...`` or ``PATH=START:STOP:STEP``. Raises :class:`SweepError`."""
    if "=" not in text:
        raise SweepError(f"--param {text!r}: expected PATH=V1,V2,... or PATH=START:STOP:STEP")
    path, spec = (s.strip() for s in text.split("=", 1))
    if not path or not spec:
        raise SweepError(f"--param {text!r}: empty path or values")
    if ":" in spec and "," not in spec and spec.count(":") == 2:
        try:
            start, stop, step = (_number(s) for s in spec.split(":"))
        except SweepError as e:
            raise SweepError(f"--param {text!r}: {e}") from None
        if step <= 0 or stop < start:
            raise SweepError(f"--param {text!r}: a range needs START <= STOP and STEP > 0")
        n = int(np.floor((stop - start) / step + 1e-9)) + 1
        if n > 10_000:
            raise SweepError(f"--param {text!r}: {n} points; at most 10,000")
        vals = [start + i * step for i in range(n)]
        if all(isinstance(x, int) for x in (start, step)):
            vals = [int(v) for v in vals]
        else:
            vals = [round(float(v), 12) for v in vals]
        return _distinct(text, Axis(path, tuple(vals)))
    listed = tuple(yaml.safe_load(s.strip()) for s in spec.split(",") if s.strip())
    if not listed:
        raise SweepError(f"--param {text!r}: no values")
    return _distinct(text, Axis(path, listed))


def _distinct(text: str, axis: Axis) -> Axis:
    """``axis`` if no value is in it twice (a point run twice adds nothing: 5,000 copies of one value
    would run 5,000 times for one result); else :class:`SweepError` naming the first repeated value
    and how often it is given. ``64`` and ``64.0`` are one value."""
    counts: dict = {}
    given: dict = {}
    first = None
    for v in axis.values:
        key = (float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else
               json.dumps(v, sort_keys=True, default=str))
        counts[key] = counts.get(key, 0) + 1
        given.setdefault(key, v)
        if counts[key] == 2 and first is None:
            first = (key, given[key])
    if first is not None:
        shown = text if len(text) <= 80 else text[:77] + "..."
        raise SweepError(f"--param {shown!r}: the value {first[1]!r} is given {counts[first[0]]:,} times "
                         f"({len(axis.values):,} values, {len(counts):,} distinct): each point runs once; list "
                         "each value once")
    return axis


def grid(axes: list[Axis]) -> list[dict]:
    """Every point of the grid, first axis slowest: a list of ``{path: value}``."""
    return [dict(zip([a.path for a in axes], combo)) for combo in itertools.product(*[a.values for a in axes])]


def point_seed(seed: int, point: dict) -> int:
    """The seed of one point: from the scenario's seed and the point's values only (a 63-bit
    integer from a SeedSequence over the seed and the CRC-32 of the point's canonical JSON)."""
    key = json.dumps(point, sort_keys=True, default=str).encode()
    return int(np.random.SeedSequence([int(seed), zlib.crc32(key)]).generate_state(2, np.uint64)[0] >> 1)


def _set(doc: dict, dotted: str, value, what: str) -> None:
    parts = dotted.split(".")
    cur = doc
    for part in parts[:-1]:
        if not isinstance(cur, dict) or part not in cur or not isinstance(cur[part], dict):
            if isinstance(cur, dict) and part not in cur and what == "scenario":
                cur[part] = {}
            else:
                raise SweepError(f"--param {dotted}: no such {what} key")
        cur = cur[part]
    cur[parts[-1]] = value


def load_point(scenario_path: str, point: dict):
    """The scenario with the point's values applied, validated: a :class:`LoadedScenario`.

    Raises :class:`SweepError` naming the ``--param`` and value that is not valid."""
    from twin.scenario import LoadedScenario, load_scenario

    path = Path(scenario_path)
    loaded = load_scenario(path)  # the unswept scenario must load
    doc = load_yaml(path)
    if not isinstance(doc, dict):  # load_scenario read it as a mapping just above
        raise SweepError(f"{path}: the scenario is not a mapping")
    sc_vals = {k: v for k, v in point.items() if not k.startswith("params.")}
    par_vals = {k[len("params."):]: v for k, v in point.items() if k.startswith("params.")}
    for k, v in sc_vals.items():
        _set(doc, k, v, "scenario")
    if sc_vals:  # loaded whole, as twin run loads a file: a swept calibration, measured or gaps file is read
        try:
            loaded = load_scenario(path, data=doc)
        except ConfigError as e:
            values = ", ".join(f"{k}={v!r}" for k, v in sc_vals.items())
            raise SweepError(f"--param {values}: {e.key or e.file}: {e.problem}") from None
    params = loaded.params
    if par_vals:
        for k in par_vals:
            try:
                params.get(k)
            except (KeyError, AttributeError):
                raise SweepError(f"--param params.{k}: no such key in parameter set {params.name!r}") from None
        try:
            params = params.with_values(par_vals)
        except Exception as e:  # pydantic ValidationError: the value is out of range
            first = e.errors()[0]["msg"] if hasattr(e, "errors") else str(e)
            values = ", ".join(f"params.{k}={v!r}" for k, v in par_vals.items())
            raise SweepError(f"--param {values}: {first}") from None
    return LoadedScenario(path, loaded.scenario, params, loaded.measured_path, loaded.calibration_path,
                          loaded.code)


def run_point(scenario_path: str, point: dict, rounds: int | None, seed: int | None) -> list[dict]:
    """Run one point; returns one row per consumer (loop) or flow (mesh): the point's values,
    ``consumer``, ``seed``, ``rounds``, ``p50_ns``/``p90_ns``/``p99_ns``/``p999_ns``/``mean_ns``
    of the round trip (card or FPGA boundary), with an external control system the same five for the
    controller-to-controller loop (``loop_p50_ns``, ...), and for a mesh ``wait_mean_ns``. Pure function of its
    arguments (worker-safe)."""
    from twin.stats import summary_ns
    from twin.studies.run import run_study

    loaded = load_point(scenario_path, point)
    sc = loaded.scenario
    s = point_seed(sc.seed if seed is None else seed, point)
    rows = []
    if sc.flows:
        from twin.studies.mesh import run_mesh
        res = run_mesh(sc, loaded.params, rounds=rounds, seed=s)
        for r, ft in zip(res.routes, res.flows):
            rows.append({**point, "consumer": f"flow{r.flow}:{r.consumer}", "seed": s, "rounds": int(len(ft.t_in)),
                         **summary_ns(ft.rtt_ps), "wait_mean_ns": round(float(ft.wait_ps.mean()) / 1000, 3)})
        return rows
    study = run_study(loaded, rounds=rounds, seed=s, engine="auto", verify_rounds=0)
    if study.failures:  # stopped early (a live failure, a stop request): no whole point
        raise study.failures[0]
    for run in study.runs:
        rows.append({**point, "consumer": run.node, "seed": s, "rounds": study.rounds,
                     **{k: run.summary[k] for k in ("p50_ns", "p90_ns", "p99_ns", "p999_ns", "mean_ns")},
                     **{f"loop_{k}": v for k, v in run.summary.get("loop", {}).items()}})
    return rows


def run_sweep(scenario_path: str | Path, axes: list[Axis], rounds: int | None = None, seed: int | None = None,
              workers: int | None = None, cluster: str | None = None, progress=None) -> list[dict]:
    """Run every point of the grid; returns the rows of every point, in grid order.

    ``workers``: local worker processes (default: CPU count, at most the number of points; 1 runs
    in this process). ``cluster``: a Dask distributed scheduler address (``tcp://HOST:PORT``); the
    workers there need this package importable. ``progress(done, total)`` after each point.
    Raises :class:`SweepError` for a point that does not validate (checked before anything runs),
    and :class:`SweepInterrupted` (an :class:`twin.engine.stop.Interrupted`) when asked to stop
    (:func:`twin.engine.stop.request_stop`): its ``partial`` is then the rows of the points completed
    (grid order), ``points_done`` of ``points_requested``; points under way are abandoned."""
    scenario_path = str(Path(scenario_path).resolve())
    points = grid(axes)
    for p in points:
        load_point(scenario_path, p)  # fail before running anything
    results: dict[int, list[dict]] = {}
    if cluster:
        stopped = _run_on_cluster(cluster, scenario_path, points, rounds, seed, results, progress)
    else:
        n = min(workers or os.cpu_count() or 1, len(points))  # never more processes than points
        if n <= 1:
            stopped = _run_here(scenario_path, points, rounds, seed, results, progress)
        else:
            stopped = _run_in_pool(n, scenario_path, points, rounds, seed, results, progress)
    rows = [row for i in range(len(points)) if i in results for row in results[i]]
    if stopped:
        raise SweepInterrupted(rows, len(results), len(points))
    return rows


# The three ways :func:`run_sweep` runs its points: each fills ``results`` (point index -> rows) as
# points complete, calls ``progress(done, total)`` after each, and returns whether it was asked to stop.

def _run_on_cluster(cluster: str, scenario_path: str, points: list[dict], rounds, seed, results: dict,
                    progress) -> bool:
    """On a Dask distributed scheduler at ``cluster`` (:func:`twin.engine.cluster.connect`: SweepError,
    one line, where none answers); a stop request cancels the rest."""
    from twin.engine.cluster import ClusterError, connect
    try:
        with connect(cluster) as client:
            return _points_on(client, scenario_path, points, rounds, seed, results, progress)
    except ClusterError as e:
        raise SweepError(str(e)) from None


def _points_on(client, scenario_path: str, points: list[dict], rounds, seed, results: dict, progress) -> bool:
    """Every point as a task of ``client``'s cluster, results kept by index as they complete;
    whether a stop request cancelled the rest."""
    from distributed import as_completed as dask_completed
    done = 0
    futs = {client.submit(run_point, scenario_path, p, rounds, seed, pure=False,
                          key=f"twin-sweep-{i}-{point_seed(0, p)}"): i
            for i, p in enumerate(points)}
    for fut in dask_completed(list(futs)):
        results[futs[fut]] = fut.result()
        done += 1
        if progress:
            progress(done, len(points))
        if take_stop():  # between points: the rest cancelled
            client.cancel(list(futs))
            return True
    return False


def _run_here(scenario_path: str, points: list[dict], rounds, seed, results: dict, progress) -> bool:
    """In this process, in grid order; a point stopped part way is abandoned."""
    for i, p in enumerate(points):
        try:
            results[i] = run_point(scenario_path, p, rounds, seed)
        except Interrupted:  # this point stopped part way: abandoned
            return True
        if progress:
            progress(i + 1, len(points))
        if i + 1 < len(points) and take_stop():  # between points
            return True
    return False


def _run_in_pool(n: int, scenario_path: str, points: list[dict], rounds, seed, results: dict, progress) -> bool:
    """On ``n`` local worker processes; a stop request ends the points under way."""
    import multiprocessing
    ctx = multiprocessing.get_context()
    # the workers start with SIGINT and SIGTERM blocked (held, not lost, in this process) until
    # they have set their own handlers: none runs a handler it was forked with
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        pool = ctx.Pool(n, initializer=_worker_signals)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
    done = 0
    with pool:
        it = pool.imap_unordered(_run_indexed, [(i, scenario_path, p, rounds, seed)
                                                for i, p in enumerate(points)])
        while done < len(points):
            if take_stop():  # leaving the block terminates the workers: the points under way
                return True
            try:
                i, rows = it.next(timeout=0.1)
            except multiprocessing.TimeoutError:
                continue
            results[i] = rows
            done += 1
            if progress:
                progress(done, len(points))
    return False

def _worker_signals() -> None:
    """A worker ignores Ctrl-C (the terminal's SIGINT reaches the whole process group: the parent
    decides) and ends on SIGTERM (how the parent ends the points under way), whatever handlers it
    was forked with; then it takes the signals the parent held while forking it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})  # blocked by the parent


def _run_indexed(args: tuple) -> tuple[int, list[dict]]:
    """``run_point`` of a worker: ``(index, scenario_path, point, rounds, seed)`` -> (index, rows)."""
    i, *rest = args
    return i, run_point(*rest)


SWEEP_FILES = ("sweep.csv", "sweep.json", "sweep.png")


def write_outputs(rows: list[dict], axes: list[Axis], folder, title: str, measure: str = "rtt",
                  partial: dict | None = None) -> list[Path]:
    """Stage sweep.csv, sweep.json and sweep.png (``measure``: ``rtt`` or ``loop``) in ``folder``
    (a :class:`twin.output.files.RunFolder`; the caller commits). ``partial``: a stopped sweep's
    ``{"points": done, "points_requested": n}``, written into sweep.json with ``"partial": true``.
    Returns their paths."""
    cols = list(rows[0])

    def write_csv(f) -> None:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        w.writerows(rows)
    return [folder.write(SWEEP_FILES[0], write_csv),
            folder.write_json(SWEEP_FILES[1], {"schema": "twin.sweep/1", "scenario": title,
                                               "axes": [{"path": a.path, "values": list(a.values)} for a in axes],
                                               "rows": rows, **({"partial": True, **partial} if partial else {})},
                              default=str),
            plot(rows, axes, folder, title, measure)]


def plot(rows: list[dict], axes: list[Axis], folder, title: str, measure: str = "rtt",
         name: str = SWEEP_FILES[2]) -> Path:
    """p50 (solid), p90 (dashed), p99 (dotted) of ``measure`` (``rtt``: the card/FPGA-boundary round
    trip; ``loop``: controller to controller) against the first axis; one colour per consumer and
    value of the other axes."""
    pre = "loop_" if measure == "loop" else ""
    from twin.output.figure import new_figure

    x_path = axes[0].path
    others = [a.path for a in axes[1:]]
    series: dict[tuple, list[dict]] = {}
    for r in rows:
        series.setdefault((r["consumer"],) + tuple(r[o] for o in others), []).append(r)
    numeric = all(isinstance(v, (int, float)) for v in axes[0].values)
    fig = new_figure(10, 5)
    ax = fig.subplots()
    from twin.output.figure import series_styles
    for (key, rs), (colour, marker) in zip(series.items(), series_styles(len(series))):  # no colour twice
        xs = [r[x_path] for r in rs] if numeric else list(range(len(rs)))
        label = key[0] + "".join(f", {o.removeprefix('params.')}={v}" for o, v in zip(others, key[1:]))
        for stat, ls in (("p50_ns", "-"), ("p90_ns", "--"), ("p99_ns", ":")):
            ax.plot(xs, [r[pre + stat] / 1000 for r in rs], ls, color=colour, marker=marker, ms=3,
                    label=label if stat == "p50_ns" else None)
    if not numeric:
        ax.set_xticks(range(len(axes[0].values)), [str(v) for v in axes[0].values])
    ax.set_xlabel(x_path)
    ax.set_ylabel("controller-to-controller loop (µs)" if pre else "round trip (µs)")
    ax.set_title(f"{title}: p50 (solid), p90 (dashed), p99 (dotted) against {x_path}", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    fig.tight_layout()
    return folder.savefig(name, fig)


__all__ = ["Axis", "SweepError", "parse_param", "grid", "point_seed", "run_point", "run_sweep", "write_outputs",
           "SWEEP_FILES"]
