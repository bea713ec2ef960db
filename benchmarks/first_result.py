"""Seconds to first result (issue 12): start-up, time to the first table of ``twin run`` and its
parts, the histogram figures against the simulation, the per-round file.

Prints, in one run:
1. start-up: wall time of ``python -c pass`` and of ``twin run --help`` (best of three each; the
   latter imports the parser alone: no numpy, pydantic or engine);
2. ``twin run`` on the default scenario (scenarios/card_path_64b.yaml) at each ``--rounds`` (1e4 and
   1e5), one subprocess each (``--quiet --no-plot --no-rounds``: the table is the result), its time to
   the first table cut into parts measured in that same process: python (interpreter start),
   imports (the twin's command, scenario, study and report modules and what they import), load
   (reading and checking the scenario), engine (the direct engine's rounds), summaries (results.json's
   per-consumer numbers), table (printing it), other (the rest: the command's own imports, parameter
   sets, specs, progress bars); the exit time (the event model's check done after the table); and
   which heavy modules are loaded at the first table. With ``--before TREE`` (a checkout of main, e.g.
   ``git archive main | tar -x -C /tmp/before`` plus the runtime ``.so``) the same in that tree;
3. "figures never take longer than the simulation" (docs/decisions.md says what the simulation is):
   histograms.png (:func:`twin.reports.run.plot_histograms`) of the faults scenario
   (scenarios/faults_epyc7282.yaml, one consumer) and of the default scenario (five) at each of
   ``--figure-rounds`` rounds per consumer (default: each scenario's own rounds, 1e5 and 1e6), each
   case in a process of its own (:func:`figure_case`: the figure is that process's first, as in
   ``twin run``), CPU seconds (``time.process_time``: the machine may be shared) of: the figure's
   first drawing and the median of three later ones (matplotlib's import timed apart, once per
   process); the engine alone (``run_study`` with no event-model check, median of three after one
   not counted); ``twin run``'s simulation as a user runs it (``run_study`` at its default
   ``verify_rounds``: the engine, then the event model's check of the first 10,000 rounds of each
   consumer; median of three); then, per scenario, the crossover (:func:`crossover`): the rounds
   per consumer from which the figure's first drawing is cheaper than the engine alone, found by
   measuring (doubling the rounds until it is, then three bisections, one process each);
4. the per-round file for ``--file-rounds`` rows (3e6, split over the default scenario's five
   consumers): rounds.parquet (the default) and rounds.csv, each written through
   :class:`twin.output.files.RunFolder` (fsynced).
Every line says the machine's load average when it was measured.

Usage: python benchmarks/first_result.py [--rounds 1e4,1e5] [--figure-rounds own,1e5,1e6] [--file-rounds 3e6]
[--before TREE] [--first-only | --outputs-only]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("numpy", "pydantic", "networkx", "simpy", "scipy", "matplotlib", "pyarrow", "stim", "pymatching", "sinter")

# Runs `twin run` in this process with the first table's parts timed (wrappers around the functions
# both trees have); prints one JSON line on stderr at the first table: the terminal's preview above the
# event model's check bar where the tree has one (twin.commands.run._preview), else the printed table.
DRIVER = r"""
import json, sys, time
marks = {"start": time.time(), "start_cpu": time.process_time()}
import twin.commands, twin.reports.run, twin.scenario, twin.studies.run
marks["imports"], marks["imports_cpu"] = time.time(), time.process_time()
spent = {"load": 0.0, "engine": 0.0, "summaries": 0.0, "table": 0.0}
cpu = dict.fromkeys(spent, 0.0)
def timed(mod, name, key):
    f = getattr(mod, name, None)
    if f is None:
        return
    def w(*a, **k):
        t, c = time.time(), time.process_time()
        try:
            return f(*a, **k)
        finally:
            spent[key] += time.time() - t
            cpu[key] += time.process_time() - c
    setattr(mod, name, w)
timed(twin.scenario, "load_scenario", "load")
timed(twin.studies.run, "run_one", "engine")
timed(twin.studies.run, "_summary", "summaries")
import twin.commands.run as run_command
table = twin.reports.run.print_table
def first(*a, **k):
    t, c = time.time(), time.process_time()
    table(*a, **k)
    spent["table"] += time.time() - t
    cpu["table"] += time.process_time() - c
    shown()
def preview(so_far, check, console, quiet):  # a terminal's first table: above the check's bar
    t, c = time.time(), time.process_time()
    twin.reports.run.headline_table(so_far).renderables(console)
    spent["table"] += time.time() - t
    cpu["table"] += time.process_time() - c
    shown()
def shown():
    if "first" not in marks:
        marks["first"] = time.time()
        marks["cpu"] = time.process_time()  # the process's CPU seconds, interpreter start included
        heavy = [m for m in HEAVY if m in sys.modules]
        print("PARTS " + json.dumps({"marks": marks, "spent": dict(spent), "cpu": dict(cpu), "heavy": heavy,
                                      "modules": len(sys.modules)}), file=sys.stderr, flush=True)
if hasattr(run_command, "_preview"):  # the table first shows as the preview (on a terminal; built here)
    run_command._preview = preview
else:  # a tree that prints the table itself before the check
    twin.reports.run.print_table = first
sys.exit(twin.commands.main(sys.argv[1:]))
""".replace("HEAVY", repr(HEAVY))


def load() -> str:
    """The 1-minute load average, as a string."""
    return f"load {os.getloadavg()[0]:.2f}"


def _env(tree: Path) -> dict:
    return dict(os.environ, PYTHONPATH=str(tree), COLUMNS="160")


def best_wall(cmd: list[str], tree: Path, times: int = 3) -> tuple[float, float]:
    """The shortest wall time and the shortest CPU time (user + system) of ``times`` runs of ``cmd``
    in ``tree`` (exit status 0 required)."""
    import resource
    best, best_cpu = float("inf"), float("inf")
    for _ in range(times):
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(cmd, cwd=tree, env=_env(tree), check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        best = min(best, time.perf_counter() - t0)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        best_cpu = min(best_cpu, r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
    return best, best_cpu


def first_table(tree: Path, rounds: int, out: Path) -> dict:
    """``twin run --rounds N`` in ``tree`` through :data:`DRIVER`: seconds from the process start to
    the first table (``first``), its parts (``parts``: name -> s), the exit (``exit``), the heavy
    modules loaded at the first table."""
    t0 = time.time()
    r = subprocess.run([sys.executable, "-c", DRIVER, "run", "--rounds", str(rounds), "--out", str(out),
                        "--overwrite", "--quiet", "--no-plot", "--no-csv"], cwd=tree, env=_env(tree),
                       capture_output=True, text=True, encoding="utf-8")
    end = time.time()
    line = next((ln for ln in r.stderr.splitlines() if ln.startswith("PARTS ")), None)
    if r.returncode or line is None:
        raise SystemExit(f"twin run in {tree} failed (exit {r.returncode}): {r.stderr.strip()[-2000:]}")
    doc = json.loads(line[6:])
    m, s, c = doc["marks"], doc["spent"], doc["cpu"]
    parts = {"python": m["start"] - t0, "imports": m["imports"] - m["start"], **s}
    parts["other"] = (m["first"] - t0) - sum(parts.values())
    cpu = {"python": m["start_cpu"], "imports": m["imports_cpu"] - m["start_cpu"], **c}
    cpu["other"] = m["cpu"] - sum(cpu.values())
    return {"first": m["first"] - t0, "cpu": m["cpu"], "parts": parts, "cpu_parts": cpu, "exit": end - t0,
            "heavy": doc["heavy"],
            "modules": doc["modules"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", default="1e4,1e5", help="rounds per consumer of the timed `twin run`s (a list)")
    ap.add_argument("--figure-rounds", default="own,1e5,1e6",
                    help="rounds per consumer of section 3's cases (a list; own: the scenario's own rounds)")
    ap.add_argument("--file-rounds", type=float, default=3e6, help="rows of the per-round file, all consumers")
    ap.add_argument("--before", type=Path, help="a checkout of main to time the same in (the 'before')")
    ap.add_argument("--outputs-only", action="store_true", help="sections 3 and 4 only (how --before runs them)")
    ap.add_argument("--first-only", action="store_true", help="sections 1 and 2 only")
    ap.add_argument("--figure-case", help=argparse.SUPPRESS)  # SCENARIO:ROUNDS, one JSON line (figure_case)
    args = ap.parse_args()
    if args.figure_case:
        name, n = args.figure_case.split(":")
        print("CASE " + json.dumps(figure_case(name, int(n) if n else None)))
        return
    rounds = [int(float(x)) for x in args.rounds.split(",")]
    fig_rounds = [None if x == "own" else int(float(x)) for x in args.figure_rounds.split(",")]
    if args.outputs_only:
        with tempfile.TemporaryDirectory() as tmp:
            outputs(Path(tmp), fig_rounds, int(args.file_rounds), "")
        return
    print(f"machine: {platform.machine()} {os.cpu_count()} cores, python {platform.python_version()}; "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {load()}")
    trees = [(n, t.resolve()) for n, t in (("before", args.before), ("after", ROOT)) if t is not None]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for name, tree in trees:
            py, py_cpu = best_wall([sys.executable, "-c", "pass"], tree)
            helps, helps_cpu = best_wall([sys.executable, "-m", "twin", "run", "--help"], tree)
            print(f"({name}) python -c pass {py:.2f} s ({py_cpu:.2f} CPU s); twin run --help {helps:.2f} s "
                  f"({helps_cpu:.2f} CPU s) (best of 3; {load()})")
        for n in rounds:
            for name, tree in trees:
                r = first_table(tree, n, tmp / name)
                parts = " + ".join(f"{k} {v:.2f}" for k, v in r["parts"].items())
                cpus = " + ".join(f"{k} {v:.2f}" for k, v in r["cpu_parts"].items())
                print(f"({name}) twin run --rounds {n:,}: first table {r['first']:.2f} s wall = {parts}; "
                      f"{r['cpu']:.2f} CPU s = {cpus}; exit "
                      f"{r['exit']:.2f} s; loaded at the table: {', '.join(r['heavy'])} ({r['modules']} modules; "
                      f"{load()})", flush=True)
        if args.first_only:
            return
        if args.before is not None:  # the figures and the files as main draws and writes them
            cmd = [sys.executable, __file__, "--outputs-only", "--file-rounds", str(int(args.file_rounds))]
            cmd += ["--figure-rounds", args.figure_rounds]
            r = subprocess.run(cmd, cwd=args.before, env=_env(args.before.resolve()), text=True, capture_output=True)
            if r.returncode:
                raise SystemExit(f"outputs in {args.before} failed: {r.stderr.strip()}")
            print("".join(f"(before) {line}\n" for line in r.stdout.splitlines()), end="")
        outputs(tmp, fig_rounds, int(args.file_rounds), "(after) " if args.before is not None else "")


def figure_case(scenario: str, rounds: int | None) -> dict:
    """Section 3's measures for ``scenario`` (bundled, by name) at ``rounds`` per consumer (None: its
    own), in this process, CPU seconds: ``cold`` (the first ``run_study`` in the process, no check),
    ``engine`` (the median of three more), ``whole`` (``run_study`` at its default ``verify_rounds``,
    ``twin run``'s; median of three), ``import`` (matplotlib's figure, Agg canvas, patches and
    ticker), ``first`` (the process's first histograms.png: :func:`twin.reports.run.plot_histograms` into
    a :class:`twin.output.files.RunFolder`; whatever else the tree's figure imports is in it),
    ``later`` (median of three more); ``rounds`` per consumer and ``panels``."""
    import statistics

    import twin.reports.run as report
    from twin.output.files import RunFolder
    from twin.scenario import load_scenario
    from twin.studies.run import run_study

    def cpu(fn) -> tuple[float, object]:
        c0 = time.process_time()
        r = fn()
        return time.process_time() - c0, r

    loaded = load_scenario(Path(report.__file__).resolve().parents[1] / "scenarios" / f"{scenario}.yaml")
    cold, study = cpu(lambda: run_study(loaded, rounds=rounds, verify_rounds=0))
    engine, whole = [], []
    for _ in range(3):
        engine.append(cpu(lambda: run_study(loaded, rounds=rounds, verify_rounds=0))[0])
        whole.append(cpu(lambda: run_study(loaded, rounds=rounds))[0])
    def import_matplotlib() -> None:
        import matplotlib.backends.backend_agg
        import matplotlib.figure
        import matplotlib.patches
        import matplotlib.ticker  # noqa: F401

    imported, _ = cpu(import_matplotlib)
    figures = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(4):
            with RunFolder(Path(tmp) / str(i), overwrite=True) as folder:
                figures.append(cpu(lambda f=folder: report.plot_histograms(study, f))[0])
                folder.commit()
    return {"rounds": study.rounds, "panels": len(study.runs), "cold": cold, "engine": statistics.median(engine),
            "whole": statistics.median(whole), "import": imported, "first": figures[0],
            "later": statistics.median(figures[1:])}


def _case(scenario: str, rounds: int | None, cache: dict) -> dict:
    """:func:`figure_case` in a process of its own (this script, the same ``sys.path``), kept in ``cache``."""
    key = (scenario, rounds)
    if key not in cache:
        r = subprocess.run([sys.executable, __file__, "--figure-case", f"{scenario}:{rounds or ''}"],
                           capture_output=True, text=True, encoding="utf-8")
        line = next((ln for ln in r.stdout.splitlines() if ln.startswith("CASE ")), None)
        if r.returncode or line is None:
            raise SystemExit(f"figure case {scenario}:{rounds} failed (exit {r.returncode}): "
                             f"{r.stderr.strip()[-2000:]}")
        case = json.loads(line[5:])
        cache[key] = cache[(scenario, case["rounds"])] = case
    return cache[key]


def crossover(scenario: str, start: int, cache: dict, most: int = 16_000_000) -> tuple:
    """The rounds per consumer from which ``scenario``'s figure (first drawing) costs less CPU than
    its engine alone, measured: from ``start``, double the rounds until it does (at most ``most``),
    then bisect the bracket three times (geometric middle, to 1,000 rounds); one process per point
    (:func:`_case`). Returns ``((rounds, figure / engine) above, (rounds, figure / engine) below)``
    around the crossover; an end is None where it was not reached (cheaper already at ``start``,
    or still dearer at ``most``)."""
    def ratio(n: int) -> tuple[int, float]:
        c = _case(scenario, n, cache)
        return n, c["first"] / c["engine"]

    lo = ratio(start)
    if lo[1] < 1:
        return None, lo
    hi = None
    while hi is None and lo[0] < most:
        r = ratio(min(most, lo[0] * 2))
        lo, hi = (r, None) if r[1] >= 1 else (lo, r)
    if hi is None:
        return lo, None
    for _ in range(3):
        mid = int(round((lo[0] * hi[0]) ** 0.5, -3))
        if mid in (lo[0], hi[0]):
            break
        r = ratio(mid)
        lo, hi = (r, hi) if r[1] >= 1 else (lo, r)
    return lo, hi


def outputs(tmp: Path, fig_rounds: list[int | None], file_rounds: int, tag: str) -> None:
    """Sections 3 and 4 with the ``twin`` on ``sys.path`` (each writer it has)."""
    import twin.reports.run as report
    from twin.output.files import RunFolder
    from twin.scenario import load_scenario
    from twin.studies.run import run_study

    def timed(what: str, fn, folder_name: str) -> None:
        with RunFolder(tmp / folder_name, overwrite=True) as folder:
            c0, t0 = time.process_time(), time.perf_counter()
            fn(folder)
            cpu, wall = time.process_time() - c0, time.perf_counter() - t0
            folder.commit()
        print(f"{tag}{what}: {cpu:.2f} CPU s, {wall:.2f} s wall ({load()})", flush=True)

    cache: dict = {}
    for scenario in ("faults_epyc7282", "card_path_64b"):
        said = set()
        for n in fig_rounds:
            c = _case(scenario, n, cache)
            if c["rounds"] in said:  # "own" is one of the others
                continue
            said.add(c["rounds"])
            print(f"{tag}histograms.png of {scenario}, {c['rounds']:,} rounds x {c['panels']} consumer(s): figure "
                  f"{c['first']:.3f} CPU s (first in its process; later ones {c['later']:.3f}; matplotlib's import "
                  f"{c['import']:.2f} before it); engine alone {c['engine']:.3f} (first in the process "
                  f"{c['cold']:.3f}), figure / engine {c['first'] / c['engine']:.2f}; twin run's simulation (engine "
                  f"+ event-model check) {c['whole']:.3f}, figure / simulation {c['first'] / c['whole']:.2f} "
                  f"({load()})", flush=True)
        lo, hi = crossover(scenario, _case(scenario, fig_rounds[0], cache)["rounds"], cache)
        said = [f"{r[0]:,} rounds per consumer: figure / engine {r[1]:.2f}" for r in (lo, hi) if r is not None]
        print(f"{tag}crossover of {scenario}: the figure is cheaper than the engine alone " + (
            f"from between {said[0]} and {said[1]}" if lo and hi else f"already at {said[0]}" if hi else
            f"at none up to {said[0]}") + f" ({load()})", flush=True)
    loaded = load_scenario(Path(report.__file__).resolve().parents[1] / "scenarios" / "card_path_64b.yaml")
    per = file_rounds // len(loaded.scenario.consumers())
    study = run_study(loaded, rounds=per, engine="direct")
    rows = per * len(study.runs)
    files = [tmp / "csv" / "rounds.csv"]
    if hasattr(report, "write_rounds_parquet"):
        timed(f"rounds.parquet, {rows:,} rows", lambda f: report.write_rounds_parquet(study, f), "parquet")
        files.insert(0, tmp / "parquet" / "rounds.parquet")
    timed(f"rounds.csv, {rows:,} rows", lambda f: report.write_rounds_csv(study, f), "csv")
    print(tag + "sizes: " + ", ".join(f"{p.name} {p.stat().st_size / 1e6:.0f} MB" for p in files))


if __name__ == "__main__":
    main()
