"""Whole ``twin run`` processes against the engine alone: CPU seconds (user + sys of the child, start-up
included, ``os.wait4``'s resource usage) and peak RSS (``ru_maxrss``), in one run.

Cases (the default scenario, card_path_64b, 5 consumers, unless said):

- ``direct``: ``twin run --engine direct --rounds 2e6 --no-rounds --no-plot`` (target >= 5 M rounds per
  CPU-second counting 5 x 2e6 rounds, issue 25);
- ``event``: ``twin run --engine event --rounds 2e5 --no-rounds --no-plot`` (target >= 1 M);
- ``long`` (``--long``): ``twin run scenarios/nvqlink_h200.yaml --engine direct --rounds 1e8 --no-rounds
  --no-plot`` (one consumer; target <= 1 GB peak RSS);
- ``gb200`` (``--case gb200``): ``twin run scenarios/nvqlink_gb200.yaml --engine event --rounds 2e5
  --no-rounds --no-plot`` (5 consumers, one of them a two-stage consumer: a hand-off over NVLink-C2C;
  no target: the before/after of the compiled core's hand-off).

Beside each, the engine alone in a fresh process of its own: the same flows compiled, then only
:func:`twin.engine.direct.run_direct` / :func:`twin.engine.event.run_event` timed by
``time.process_time`` (its pages first touched there too, as in the whole run). Prints rounds per
CPU-second of both and the ratio end-to-end / engine (of rounds per CPU-second: 1.0 means the rest of
the process costs nothing; issue 25 asks >= 0.7).

``--before CHECKOUT`` runs the same processes with ``PYTHONPATH=CHECKOUT`` too (a checkout of main,
its compiled extensions in place), so before and after come from one run on one machine. The load
average is printed at the start and after each case.

Usage: PYTHONPATH=. python benchmarks/process_speed.py [--long] [--case NAME ...] [--before CHECKOUT] [--repeat N]
"""
from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CASES = {  # name: (scenario, engine, rounds, consumers)
    "direct": ("scenarios/card_path_64b.yaml", "direct", 2_000_000, 5),
    "event": ("scenarios/card_path_64b.yaml", "event", 200_000, 5),
    "long": ("scenarios/nvqlink_h200.yaml", "direct", 100_000_000, 1),
    "gb200": ("scenarios/nvqlink_gb200.yaml", "event", 200_000, 5),
}
TARGET = {"direct": 5e6, "event": 1e6}

ENGINE_ALONE = """
import sys, time
from twin.scenario import load_scenario
from twin.scenario.compile import compile_scenario
from twin.engine.direct import run_direct
from twin.engine.event import run_event
loaded = load_scenario(sys.argv[1])
topo = compile_scenario(loaded, int(sys.argv[3]), loaded.scenario.seed)
run = run_direct if sys.argv[2] == "direct" else run_event
cpu = 0.0
for flow in topo.flows:
    t = time.process_time()
    res = run(flow.spec)
    cpu += time.process_time() - t
    del res
print(cpu)
"""


def child(argv: list[str], pythonpath: Path) -> tuple[float, int, str]:
    """Run ``argv`` as a child with ``pythonpath`` first on ``PYTHONPATH`` (the rest kept: the libraries of
    an environment installed with ``--target``); (its CPU seconds user + sys, peak RSS in bytes, stdout)."""
    rest = os.environ.get("PYTHONPATH", "")
    env = dict(os.environ, PYTHONPATH=str(pythonpath) + (os.pathsep + rest if rest else ""), COLUMNS="200")
    with tempfile.TemporaryFile("w+") as out:
        p = subprocess.Popen(argv, cwd=pythonpath, env=env, stdout=out, stderr=subprocess.STDOUT)
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read()
    if p.returncode:
        raise SystemExit(f"{' '.join(argv)} failed (rc {p.returncode}):\n{text[-2000:]}")
    return ru.ru_utime + ru.ru_stime, ru.ru_maxrss * 1024, text


def case(name: str, checkout: Path, repeat: int) -> dict:
    """One case's whole process (best of ``repeat``: a shared machine's noise is one-sided) and engine alone."""
    scenario, engine, rounds, consumers = CASES[name]
    total = rounds * consumers
    best = None
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as tmp:
            cpu, rss, _ = child([sys.executable, "-m", "twin", "run", scenario, "--engine", engine, "--rounds",
                                 str(rounds), "--no-rounds", "--no-plot", "--quiet", "--out", f"{tmp}/o"], checkout)
        best = (cpu, rss) if best is None or cpu < best[0] else best
    assert best is not None
    row = {"case": name, "rounds": total, "cpu_s": best[0], "rss": best[1], "rate": total / best[0]}
    if name != "long":  # the engine alone keeps every round: 1e8 would not fit; the whole run's rate is enough
        eng = min(float(child([sys.executable, "-c", ENGINE_ALONE, scenario, engine, str(rounds)], checkout)[2])
                  for _ in range(repeat))
        row |= {"engine_cpu_s": eng, "engine_rate": total / eng, "ratio": eng / best[0]}
    return row


def show(label: str, r: dict) -> None:
    line = (f"{label:8s} {r['case']:7s} {r['rounds']:>12,} rounds  whole {r['cpu_s']:7.2f} CPU-s "
            f"{r['rate'] / 1e6:6.2f} M rounds/CPU-s  peak RSS {r['rss'] / 2**20:7.0f} MiB")
    if "engine_rate" in r:
        line += (f"  engine {r['engine_cpu_s']:6.2f} CPU-s {r['engine_rate'] / 1e6:6.2f} M/CPU-s"
                 f"  end-to-end/engine {r['ratio']:.2f}")
    if r["case"] in TARGET:
        met = r["rate"] >= TARGET[r["case"]]
        line += f"  target >= {TARGET[r['case']] / 1e6:.0f} M: {'met' if met else 'NOT met'}"
    elif r["case"] == "long":
        line += f"  target <= 1 GiB RSS: {'met' if r['rss'] <= 2**30 else 'NOT met'}"
    print(line, flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--long", action="store_true", help="also the 1e8-round one-consumer run (about 20 s)")
    ap.add_argument("--before", type=Path, help="a checkout to run the same processes from (e.g. main)")
    ap.add_argument("--repeat", type=int, default=2, help="runs of each, the best kept (default 2)")
    ap.add_argument("--case", action="append", choices=sorted(CASES), help="run only these cases (repeatable)")
    args = ap.parse_args()
    print(f"{platform.node()} {platform.machine()} {os.cpu_count()} CPUs, Python {platform.python_version()}, "
          f"load average {_load()} at the start")
    names = args.case or ["direct", "event"] + (["long"] if args.long else [])
    for name in names:
        if args.before is not None:  # (a checkout from before 2026-12-02 keeps every round: 1e8 need 16 GB there)
            show("before", case(name, args.before.resolve(), args.repeat))
        show("after", case(name, ROOT, args.repeat))
        print(f"         load average {_load()}", flush=True)


def _load() -> str:
    """The machine's 1, 5 and 15 minute load averages (a shared machine's other work inflates CPU seconds)."""
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


if __name__ == "__main__":
    main()
