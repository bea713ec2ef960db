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
3. histograms.png (:func:`twin.report.plot_histograms`) of the faults scenario
   (scenarios/faults_epyc7282.yaml) and of the default scenario at ``--figure-rounds`` rounds per
   consumer (default: the faults scenario's own 20,000 and 1e5) beside the simulation that made
   them, CPU seconds both (``time.process_time``: the machine may be shared), "figures never take
   longer than the simulation";
4. the per-round file for ``--file-rounds`` rows (3e6, split over the default scenario's five
   consumers): rounds.parquet (the default) and rounds.csv, each written through
   :class:`twin.output.files.RunFolder` (fsynced).
Every line says the machine's load average when it was measured.

Usage: python benchmarks/first_result.py [--rounds 1e4,1e5] [--figure-rounds 3e6] [--file-rounds 3e6]
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
# both trees have); prints one JSON line on stderr at the first table.
DRIVER = r"""
import json, sys, time
marks = {"start": time.time(), "start_cpu": time.process_time()}
import twin.commands, twin.report, twin.scenario, twin.study
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
timed(twin.study, "run_one", "engine")
timed(twin.study, "_summary", "summaries")
table = twin.report.print_table
def first(*a, **k):
    t, c = time.time(), time.process_time()
    table(*a, **k)
    spent["table"] += time.time() - t
    cpu["table"] += time.process_time() - c
    if "first" not in marks:
        marks["first"] = time.time()
        marks["cpu"] = time.process_time()  # the process's CPU seconds, interpreter start included
        heavy = [m for m in HEAVY if m in sys.modules]
        print("PARTS " + json.dumps({"marks": marks, "spent": dict(spent), "cpu": dict(cpu), "heavy": heavy,
                                      "modules": len(sys.modules)}), file=sys.stderr, flush=True)
twin.report.print_table = first
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
    ap.add_argument("--figure-rounds", type=float, default=None,
                    help="rounds per consumer for section 3 (default: faults' own, default scenario 1e5)")
    ap.add_argument("--file-rounds", type=float, default=3e6, help="rows of the per-round file, all consumers")
    ap.add_argument("--before", type=Path, help="a checkout of main to time the same in (the 'before')")
    ap.add_argument("--outputs-only", action="store_true", help="sections 3 and 4 only (how --before runs them)")
    ap.add_argument("--first-only", action="store_true", help="sections 1 and 2 only")
    args = ap.parse_args()
    rounds = [int(float(x)) for x in args.rounds.split(",")]
    fig_rounds = None if args.figure_rounds is None else int(args.figure_rounds)
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
            if fig_rounds is not None:
                cmd += ["--figure-rounds", str(fig_rounds)]
            r = subprocess.run(cmd, cwd=args.before, env=_env(args.before.resolve()), text=True, capture_output=True)
            if r.returncode:
                raise SystemExit(f"outputs in {args.before} failed: {r.stderr.strip()}")
            print("".join(f"(before) {line}\n" for line in r.stdout.splitlines()), end="")
        outputs(tmp, fig_rounds, int(args.file_rounds), "(after) " if args.before is not None else "")


def outputs(tmp: Path, fig_rounds: int | None, file_rounds: int, tag: str) -> None:
    """Sections 3 and 4 with the ``twin`` on ``sys.path`` (each writer it has)."""
    import twin.report as report
    from twin.output.files import RunFolder
    from twin.scenario import load_scenario
    from twin.study import run_study

    def timed(what: str, fn, folder_name: str, against: float | None = None) -> None:
        with RunFolder(tmp / folder_name, overwrite=True) as folder:
            c0, t0 = time.process_time(), time.perf_counter()
            fn(folder)
            cpu, wall = time.process_time() - c0, time.perf_counter() - t0
            folder.commit()
        vs = f"; simulation {against:.1f} CPU s, figure / simulation {cpu / against:.3f}" if against else ""
        print(f"{tag}{what}: {cpu:.2f} CPU s, {wall:.2f} s wall{vs} ({load()})", flush=True)

    root = Path(report.__file__).resolve().parents[1]
    t0 = time.perf_counter()
    import matplotlib.pyplot  # noqa: F401  (timed apart: every figure pays it once)
    print(f"{tag}import matplotlib.pyplot: {time.perf_counter() - t0:.2f} s ({load()})")
    for scenario, n in (("faults_epyc7282", fig_rounds), ("card_path_64b", fig_rounds or 100_000)):
        c0 = time.process_time()
        study = run_study(load_scenario(root / "scenarios" / f"{scenario}.yaml"), rounds=n, verify_rounds=0)
        sim = time.process_time() - c0
        timed(f"histograms.png of {scenario}, {study.rounds:,} rounds x {len(study.runs)} consumers",
              lambda f, s=study: report.plot_histograms(s, f), f"h_{scenario}", sim)
        del study
    loaded = load_scenario(root / "scenarios" / "card_path_64b.yaml")
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
