"""Hostile inputs on every surface, each mutant in a child process of its own under a time and a
memory limit (issue 29's acceptance run): ``PYTHONPATH=. python benchmarks/hostile_inputs.py``.

The mutants are the test fuzzers' (random draws, no shrinking): scenario YAML keys and bytes
(tests/scenario_mutations.py), stim circuits, Q1ASM programs, live run folders read as ``twin
calibrate --from-live`` / ``twin validate`` read them (an accepted one is then fitted, one
generation), gaps files (tests/surface_mutations.py) and ``twin`` argument lists (tests/cli_fuzz.py).
Each runs in a forked child that first sets ``RLIMIT_AS`` (the memory limit) and is killed past
the time limit. Counted per surface: refused (one line that starts with the file it names, or
``twin: error:`` for the command line), accepted, and what counts against the twin: tracebacks,
signals (the child died of one: SIGSEGV, SIGABRT), hangs (killed at the limit), over-memory (a
MemoryError, or killed by the memory limit) and refusals with a bad message (more than one line,
or not naming the file).

Budgets by environment variable: ``TWIN_HOSTILE_N`` mutants in all (default 3000, shared over the
surfaces by :data:`WEIGHTS`), ``TWIN_HOSTILE_TIMEOUT_S`` (60), ``TWIN_HOSTILE_MEM_GB`` (2),
``TWIN_HOSTILE_SEED`` (the hypothesis seed, default 0), ``TWIN_HOSTILE_SURFACES`` (comma-separated
names, default all). Prints progress on stderr, the counts per surface and in all, and the first few
failures of each kind in full; exit status 1 if anything but refused/accepted came out.
"""
from __future__ import annotations

import collections
import os
import pickle
import resource
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # a thread pool per child would spend the memory limit
os.environ.setdefault("OMP_NUM_THREADS", "1")

N = int(float(os.environ.get("TWIN_HOSTILE_N", "3000")))
TIMEOUT_S = float(os.environ.get("TWIN_HOSTILE_TIMEOUT_S", "60"))
MEM_BYTES = int(float(os.environ.get("TWIN_HOSTILE_MEM_GB", "2")) * 2**30)
SEED = int(os.environ.get("TWIN_HOSTILE_SEED", "0"))
# share of the mutants per surface
WEIGHTS = {"scenario": 0.30, "circuit": 0.15, "q1asm": 0.15, "run_folder": 0.12, "gaps": 0.13, "cli": 0.15}
BAD = ("traceback", "signal", "hang", "over_memory", "bad_message")


def in_child(fn, *args) -> tuple[str, str, float]:
    """``fn(*args)`` (returning an Outcome-like ``(kind, detail, seconds)``) in a forked child under
    the memory limit, killed after :data:`TIMEOUT_S`; the child's own classification, or ``signal``,
    ``hang`` or ``over_memory`` from how it ended."""
    r, w = os.pipe()
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the child: limit, run, report, leave without cleanup handlers
        code = 0
        try:
            os.close(r)
            os.setpgid(0, 0)
            resource.setrlimit(resource.RLIMIT_AS, (MEM_BYTES, MEM_BYTES))
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            try:
                got = fn(*args)
                res = (got.kind, got.detail[-4000:], got.seconds)
            except MemoryError:
                res = ("over_memory", traceback.format_exc()[-4000:], time.monotonic() - t0)
            if res[0] == "traceback" and "MemoryError" in res[1]:
                res = ("over_memory", res[1], res[2])
            data = pickle.dumps(res)
            with os.fdopen(w, "wb") as f:
                f.write(data)
        except BaseException:  # noqa: BLE001 (the child must never return into the parent's code)
            code = 3
        finally:
            os._exit(code)
    os.close(w)
    chunks: list[bytes] = []
    killed = False
    import select
    while True:
        left = TIMEOUT_S - (time.monotonic() - t0)
        if left <= 0:
            killed = True
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            break
        ready, _, _ = select.select([r], [], [], min(left, 1.0))
        if ready:
            data = os.read(r, 1 << 16)
            if not data:
                break
            chunks.append(data)
    os.close(r)
    _, status = os.waitpid(pid, 0)
    dt = time.monotonic() - t0
    if killed:
        return "hang", f"killed after {TIMEOUT_S:g} s", dt
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        return ("over_memory" if sig == signal.SIGKILL else "signal"), f"died of {signal.Signals(sig).name}", dt
    try:
        return pickle.loads(b"".join(chunks))
    except Exception:  # noqa: BLE001 (no report: it died on its way out)
        return "traceback", f"the child exited {os.WEXITSTATUS(status)} without a result", dt


# -- the surfaces: (name, hypothesis strategy, attempt(case) run in the child) ------------------------
def surfaces(work: Path) -> list[tuple[str, object, object]]:
    from cli_fuzz import arguments, problem, run_one, sandbox
    from scenario_mutations import BUNDLED, Outcome, attempt, base_doc, cases, render
    from surface_mutations import (
        attempt_circuit,
        attempt_gaps,
        attempt_q1asm,
        attempt_run,
        circuit_cases,
        gaps_cases,
        q1asm_cases,
        run_cases,
    )
    from test_validate import synthetic_run, truth_set
    bases = {b: base_doc(b) for b in BUNDLED}
    cal = truth_set(work)
    live = synthetic_run(work, "run", cal, rounds=400)
    cli_home = work / "cli"
    cli_home.mkdir()
    where = sandbox(cli_home)

    def scenario(case):
        index, ops, run = case
        with tempfile.TemporaryDirectory() as d:
            return attempt(BUNDLED[index], render(bases[BUNDLED[index]], ops), Path(d), run=run)

    def circuit(case):
        with tempfile.TemporaryDirectory() as d:
            return attempt_circuit(case, Path(d), seconds=TIMEOUT_S)

    def run_folder(case):
        with tempfile.TemporaryDirectory() as d:
            got = attempt_run(live, case, Path(d), seconds=TIMEOUT_S)
            if got.kind != "accepted":
                return got
            # an accepted folder is fitted as `twin calibrate --from-live` would, one generation
            rc, out, err, s = _cli(run_one, ["calibrate", "--from-live", str(Path(d) / "run"), "--rounds", "200",
                                             "--maxiter", "1", "--popsize", "2", "--out", str(Path(d) / "fit.yaml")])
            why = problem(rc, out, err, 0.0)
            return got if why is None else Outcome(_kind(why), f"{why}: {err[-3000:]}", s)

    def gaps(case):
        with tempfile.TemporaryDirectory() as d:
            return attempt_gaps(case, Path(d), seconds=TIMEOUT_S)

    def cli(argv):
        os.chdir(cli_home)
        rc, out, err, s = _cli(run_one, argv)
        why = problem(rc, out, err, 0.0)
        if why is None:
            return Outcome("refused" if rc == 2 else "accepted", err[-300:], s)
        return Outcome(_kind(why), f"twin {argv!r}: {why}\n{err[-3000:]}", s)

    return [("scenario", cases(), scenario), ("circuit", circuit_cases(), circuit),
            ("q1asm", q1asm_cases(), lambda case: attempt_q1asm(case, seconds=TIMEOUT_S)),
            ("run_folder", run_cases(), run_folder), ("gaps", gaps_cases(), gaps),
            ("cli", arguments(where), cli)]


def _cli(run_one, argv):
    import io
    from contextlib import redirect_stderr, redirect_stdout
    with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
        return run_one(argv)


def _kind(why: str) -> str:
    """The counted kind of a command-line problem (tests/cli_fuzz.py's :func:`problem` words)."""
    if "traceback" in why:
        return "traceback"
    if why.startswith("took"):
        return "hang"
    return "bad_message"


def run_surface(name: str, strategy, attempt, n: int, counts: collections.Counter, failures: dict) -> None:
    """``n`` random draws of ``strategy``, each through ``attempt`` in a child of its own."""
    from hypothesis import HealthCheck, Phase, given, seed, settings
    t0 = time.time()
    done = 0

    @seed(SEED)
    @settings(max_examples=n, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(case=strategy)
    def one(case):
        nonlocal done
        kind, detail, seconds = in_child(attempt, case)
        counts[name, kind] += 1
        counts[name, "slowest"] = max(counts[name, "slowest"], int(seconds * 1000))
        done += 1
        if kind in BAD and len(failures[name, kind]) < 3:
            failures[name, kind].append(f"{case!r:.400}\n{detail[-2500:]}")
        if done % 25 == 0:
            bad = sum(counts[name, k] for k in BAD)
            print(f"  {name}: {done:,}/{n:,} mutants, {bad} against the twin, {time.time() - t0:.0f} s",
                  file=sys.stderr, flush=True)

    one()
    counts[name, "seconds"] = int(time.time() - t0)


def main() -> int:
    only = [s for s in os.environ.get("TWIN_HOSTILE_SURFACES", "").split(",") if s]
    counts: collections.Counter = collections.Counter()
    failures: dict = collections.defaultdict(list)
    t0 = time.time()
    with tempfile.TemporaryDirectory() as work:
        chosen = [s for s in surfaces(Path(work)) if not only or s[0] in only]
        total = sum(WEIGHTS[s[0]] for s in chosen)
        for name, strategy, attempt in chosen:
            n = max(1, round(N * WEIGHTS[name] / total))
            print(f"{name}: {n:,} mutants", file=sys.stderr, flush=True)
            run_surface(name, strategy, attempt, n, counts, failures)
    names = [s for s in WEIGHTS if (s, "seconds") in counts]
    cols = ["mutants", "refused", "accepted", *BAD]
    print(f"\n{'surface':<11} " + " ".join(f"{c:>11}" for c in cols) + f" {'slowest s':>9} {'wall s':>7}")
    grand: collections.Counter = collections.Counter()
    for s in names:
        row = {c: counts[s, c] for c in cols[1:]}
        row["mutants"] = sum(row.values())
        grand.update(row)
        print(f"{s:<11} " + " ".join(f"{row[c]:>11,}" for c in cols)
              + f" {counts[s, 'slowest'] / 1000:>9.2f} {counts[s, 'seconds']:>7,}")
    print(f"{'all':<11} " + " ".join(f"{grand[c]:>11,}" for c in cols) + f" {'':>9} {time.time() - t0:>7.0f}")
    print(f"limits: {TIMEOUT_S:g} s and {MEM_BYTES / 2**30:g} GiB of address space per mutant; seed {SEED}")
    for (s, kind), items in sorted(failures.items()):
        for text in items:
            print(f"\n--- {s} {kind}: {text}")
    return 1 if any(grand[k] for k in BAD) else 0


if __name__ == "__main__":
    sys.exit(main())
