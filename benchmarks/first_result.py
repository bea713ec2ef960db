"""Seconds to first result (issue 12): time to the first table of ``twin run``, the histogram figure,
the per-round file.

Prints, in one run:
1. ``twin run`` on the default scenario (scenarios/card_path_64b.yaml) at ``--rounds`` (1e5): the
   subprocess's wall time until the table's title line is on its stdout, and until it exits
   (``--no-plot --no-csv``: the table is the result); with ``--before TREE`` (a checkout of main,
   e.g. ``git archive main | tar -x -C /tmp/before``) the same command in that tree too;
2. the histogram figure (:func:`twin.report.plot_histograms`, histograms.png) of the faults scenario
   (scenarios/faults_epyc7282.yaml, its 20,000 rounds) and of the default scenario at ``--rounds``;
3. the per-round file for ``--file-rounds`` rows (3e6, split over the default scenario's five
   consumers): rounds.csv and rounds.parquet, each written through :class:`twin.output.files.RunFolder`.
Every line says the machine's load average when it was measured (the machine may be shared).

Usage: python benchmarks/first_result.py [--rounds 1e5] [--file-rounds 3e6] [--before TREE]
"""
from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TITLE = "round trip in µs"  # the table's title line (twin.report.print_table)


def load() -> str:
    """The 1-minute load average, as a string."""
    return f"load {os.getloadavg()[0]:.2f}"


def first_table(tree: Path, rounds: int, out: Path) -> tuple[float, float]:
    """(seconds until the table's title is on stdout, seconds until exit) of ``twin run`` in ``tree``."""
    env = dict(os.environ, PYTHONPATH=str(tree), COLUMNS="160")
    t0 = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-m", "twin", "run", "--rounds", str(rounds), "--out", str(out),
                          "--overwrite", "--quiet", "--no-plot", "--no-csv"], cwd=tree, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, encoding="utf-8")
    seen = None
    for line in p.stdout:
        if seen is None and TITLE in line:
            seen = time.perf_counter() - t0
    err = p.stderr.read()
    if p.wait() != 0 or seen is None:
        raise SystemExit(f"twin run in {tree} failed (exit {p.returncode}): {err.strip()}")
    return seen, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=float, default=1e5, help="rounds per consumer of the timed `twin run`")
    ap.add_argument("--file-rounds", type=float, default=3e6, help="rows of the per-round file, all consumers")
    ap.add_argument("--before", type=Path, help="a checkout of main to time `twin run` in too (the 'before')")
    ap.add_argument("--outputs-only", action="store_true", help="sections 2 and 3 only (how --before runs them)")
    args = ap.parse_args()
    rounds = int(args.rounds)
    if args.outputs_only:
        with tempfile.TemporaryDirectory() as tmp:
            outputs(Path(tmp), rounds, int(args.file_rounds), "")
        return
    print(f"machine: {platform.machine()} {os.cpu_count()} cores, python {platform.python_version()}; "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {load()}")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for name, tree in (("before", args.before), ("after", ROOT)):
            if tree is None:
                continue
            seen, total = first_table(tree.resolve(), rounds, tmp / name)
            print(f"twin run --rounds {rounds:,} ({name}): first table {seen:.2f} s, exit {total:.2f} s ({load()})")

        if args.before is not None:  # the figures and the CSV as main draws and writes them
            env = dict(os.environ, PYTHONPATH=str(args.before.resolve()))
            r = subprocess.run([sys.executable, __file__, "--outputs-only", "--rounds", str(rounds), "--file-rounds",
                                str(int(args.file_rounds))], cwd=args.before, env=env, text=True, capture_output=True)
            if r.returncode:
                raise SystemExit(f"outputs in {args.before} failed: {r.stderr.strip()}")
            print("".join(f"(before) {line}\n" for line in r.stdout.splitlines()), end="")
        outputs(tmp, rounds, int(args.file_rounds), "(after) " if args.before is not None else "")


def outputs(tmp: Path, rounds: int, file_rounds: int, tag: str) -> None:
    """Sections 2 and 3 with the ``twin`` on ``sys.path`` (the Parquet writer only where it has one)."""
    import twin.report as report
    from twin.output.files import RunFolder
    from twin.scenario import load_scenario
    from twin.study import run_study

    def timed(what: str, fn, folder_name: str) -> None:
        with RunFolder(tmp / folder_name, overwrite=True) as folder:
            t0 = time.perf_counter()
            fn(folder)
            dt = time.perf_counter() - t0
            folder.commit()
        print(f"{tag}{what}: {dt:.2f} s ({load()})", flush=True)

    root = Path(report.__file__).resolve().parents[1]
    t0 = time.perf_counter()
    import matplotlib.pyplot  # noqa: F401  (timed apart: every figure pays it once)
    print(f"{tag}import matplotlib.pyplot: {time.perf_counter() - t0:.2f} s ({load()})")
    for scenario, n in (("faults_epyc7282", None), ("card_path_64b", rounds)):
        study = run_study(load_scenario(root / "scenarios" / f"{scenario}.yaml"), rounds=n, verify_rounds=0)
        timed(f"histograms.png of {scenario}, {study.rounds:,} rounds x {len(study.runs)} consumers",
              lambda f, s=study: report.plot_histograms(s, f), f"h_{scenario}")
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
