"""The scenario fuzzer's long run: N mutants of the bundled scenarios (tests/scenario_mutations.py,
the same strategy as tests/test_fuzz_scenarios.py, random draws, no shrinking), each loaded with the
real loader under a 10 s limit; one accepted mutant in four also runs 50 rounds (shots) and its
results.json is checked for non-finite numbers.

Prints the counts: mutated, refused cleanly, accepted (and of those, run), tracebacks, hangs (a load
over 10 s or a run over 60 s), messages that are not one line naming the file, results.json with a
non-finite number; the slowest load; and the first few failures of each kind in full.

``--large``: instead, the load time of large inputs, to show it linear: ``twin run``'s loader on
a scenario whose ``faults.corrupt_piece.rounds`` lists 10^5 and 10^6 rounds, and ``read_gaps`` on
gaps files of 10^5 and 10^6 lines (all distinct values).

``--surfaces N``: instead, N mutants of each surface beside the scenario files
(tests/surface_mutations.py): stim circuits (``decode.circuit``), Q1ASM programs and live run
folders as ``twin calibrate --from-live`` / ``twin validate`` read them; counts per surface.

Run: ``PYTHONPATH=. python benchmarks/fuzz_scenarios.py [N]`` (default 1000; about 3 minutes per
1,000 on the 2-core development machine), ``... --large`` or ``... --surfaces N``. Exit status 1 if anything but
refused/accepted came out.
"""
from __future__ import annotations

import collections
import sys
import tempfile
import time
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, settings

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from scenario_mutations import BUNDLED, attempt, base_doc, cases, render  # noqa: E402


def main(n: int) -> int:
    """Run ``n`` mutants; print the counts; 0 when every one was refused cleanly or accepted."""
    counts: collections.Counter = collections.Counter()
    failures: dict[str, list[str]] = collections.defaultdict(list)
    slowest = (0.0, "")
    t0 = time.time()
    bases = {b: base_doc(b) for b in BUNDLED}

    @settings(max_examples=n, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(case=cases())
    def one(case):
        nonlocal slowest
        index, ops, run = case
        bundled = BUNDLED[index]
        with tempfile.TemporaryDirectory() as d:
            got = attempt(bundled, render(bases[bundled], ops), Path(d), run=run)
        counts["mutated"] += 1
        counts[got.kind] += 1
        counts["run"] += got.ran
        if got.seconds > slowest[0]:
            slowest = (got.seconds, f"{bundled.name} {ops!r:.200}")
        if got.kind not in ("refused", "accepted") and len(failures[got.kind]) < 3:
            failures[got.kind].append(f"{bundled.name} with {ops!r:.300}\n{got.detail}")
        if counts["mutated"] % 50 == 0:
            print(f"  {counts['mutated']:,} mutants, {time.time() - t0:.0f} s", file=sys.stderr, flush=True)

    one()
    print(f"mutated           {counts['mutated']:,}")
    print(f"refused cleanly   {counts['refused']:,}")
    print(f"accepted          {counts['accepted']:,} (ran {counts['run']:,} of them for 50 rounds)")
    print(f"tracebacks        {counts['traceback']:,}")
    print(f"hangs             {counts['hang']:,}")
    print(f"bad messages      {counts['bad_message']:,}")
    print(f"non-finite json   {counts['nonfinite']:,}")
    print(f"slowest load      {slowest[0]:.2f} s ({slowest[1]})")
    print(f"wall time         {time.time() - t0:.0f} s")
    for kind, items in failures.items():
        for text in items:
            print(f"\n--- {kind}: {text}")
    return 1 if sum(counts[k] for k in ("traceback", "hang", "bad_message", "nonfinite")) else 0


def large() -> int:
    """Print load times of 10^5- and 10^6-entry fault lists and gaps files, and their ratios."""
    import yaml

    from twin.scenario import load_scenario
    from twin.scenario.schema import read_gaps
    doc = base_doc(BUNDLED[[b.name for b in BUNDLED].index("faults_epyc7282.yaml")])
    with tempfile.TemporaryDirectory() as d:
        times = {}
        for n in (10**5, 10**6):
            doc["rounds"] = 2 * n
            doc["faults"]["corrupt_piece"]["rounds"] = list(range(1, n + 1))
            p = Path(d) / f"faults{n}.yaml"
            p.write_text(yaml.safe_dump(doc, sort_keys=False, default_flow_style=None, width=10**9))
            t = time.perf_counter()
            load_scenario(p)
            times["faults", n] = time.perf_counter() - t
            g = Path(d) / f"gaps{n}.txt"
            g.write_text("".join(f"{1 + i / 7:.6f} us\n" for i in range(n)))
            t = time.perf_counter()
            read_gaps(g)
            times["gaps", n] = time.perf_counter() - t
            print(f"{n:>9,} fault rounds: {times['faults', n]:6.2f} s ({p.stat().st_size / 2**20:.1f} MiB)   "
                  f"{n:>9,} gap lines: {times['gaps', n]:6.2f} s", flush=True)
    for what in ("faults", "gaps"):
        print(f"{what}: 10^6 / 10^5 = {times[what, 10**6] / times[what, 10**5]:.1f} (10 = linear)")
    return 0


def surfaces(n: int) -> int:
    """``n`` mutants of each surface beside the scenario files (tests/surface_mutations.py: stim
    circuits, Q1ASM programs, live run folders); print per surface the counts by outcome, the slowest
    and the first failures. 0 when every one was refused cleanly or accepted."""
    from surface_mutations import attempt_circuit, attempt_q1asm, attempt_run, circuit_cases, q1asm_cases, run_cases
    from test_validate import synthetic_run, truth_set
    bad = 0
    with tempfile.TemporaryDirectory() as base:
        live = synthetic_run(Path(base), "run", truth_set(Path(base)), rounds=400)

        def circuit(case):
            with tempfile.TemporaryDirectory() as d:
                return attempt_circuit(case, Path(d))

        def run_folder(case):
            with tempfile.TemporaryDirectory() as d:
                return attempt_run(live, case, Path(d))

        for name, strategy, attempt in (("stim circuits", circuit_cases(), circuit),
                                        ("Q1ASM programs", q1asm_cases(), attempt_q1asm),
                                        ("live run folders", run_cases(), run_folder)):
            bad += _surface(name, strategy, attempt, n)
    return 1 if bad else 0


def _surface(name: str, strategy, attempt, n: int) -> int:
    """``n`` draws of ``strategy`` through ``attempt``; print the counts; the number not refused or accepted."""
    counts: collections.Counter = collections.Counter()
    failures: list[str] = []
    slowest = 0.0
    t0 = time.time()

    @settings(max_examples=n, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(case=strategy)
    def one(case):
        nonlocal slowest
        t = time.time()
        got = attempt(case)
        if time.time() - t > 30:  # past the load limit: an attempt stuck where the alarm cannot reach
            got = type(got)("hang", f"{time.time() - t:.0f} s (the alarm could not stop it)", time.time() - t)
        counts[got.kind] += 1
        if sum(counts.values()) % 100 == 0:
            print(f"  {name}: {sum(counts.values()):,} mutants, {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
        slowest = max(slowest, got.seconds)
        if got.kind not in ("refused", "accepted") and len(failures) < 3:
            failures.append(f"{case!r:.300}\n{got.detail[-2000:]}")

    one()
    print(f"{name:17s} {sum(counts.values()):,} mutants: " + ", ".join(f"{k} {v:,}" for k, v in sorted(counts.items()))
          + f"; slowest {slowest:.2f} s; {time.time() - t0:.0f} s", flush=True)
    for text in failures:
        print(f"\n--- {name}: {text}")
    return sum(v for k, v in counts.items() if k not in ("refused", "accepted"))


if __name__ == "__main__":
    if sys.argv[1:] == ["--large"]:
        sys.exit(large())
    if sys.argv[1:2] == ["--surfaces"]:
        sys.exit(surfaces(int(float(sys.argv[2])) if len(sys.argv) > 2 else 1000))
    sys.exit(main(int(float(sys.argv[1])) if len(sys.argv) > 1 else 1000))
