"""The CLI fuzzer at length: ``python benchmarks/fuzz_cli.py [--examples N] [--in-process]``.

The argument lists of tests/cli_fuzz.py (every ``twin`` subcommand: flags, bad values, missing
files, folders as files, huge numbers, unicode, empty strings), each run as ``python -m twin`` in
its own process (``--in-process``: in this one, faster, after one untimed warm-up run) in a scratch
folder, with a 10 s limit (the child's CPU time in its own process, the wall clock in this one).
Prints every argument list that ended in a traceback, an exit code other than 0-3, a last stderr
line that is not twin's, or more than 10 s, and a count per subcommand; exits 1 if any did.
"""
from __future__ import annotations

import argparse
import collections
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # this checkout's twin, and the fuzzer's strategies

from cli_fuzz import arguments, problem, run_one, sandbox, warm_up  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402


def in_subprocess(argv: list[str], cwd: Path, limit_s: float) -> tuple[int, str, str, float]:
    """Run ``python -m twin argv`` in ``cwd``; the seconds returned are the child's CPU time (user +
    system: on a shared, loaded machine the wall clock measures the neighbours), or the wall time
    when it ran past ``limit_s`` + 20 s and was killed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    try:
        r = subprocess.run([sys.executable, "-m", "twin", *argv], cwd=cwd, capture_output=True, text=True,
                           timeout=limit_s + 20, env={**os.environ, "PYTHONPATH": str(ROOT)})
    except subprocess.TimeoutExpired:
        return 0, "", "", time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.returncode, r.stdout, r.stderr, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=600, help="argument lists to try (default 600)")
    ap.add_argument("--in-process", action="store_true", help="run each in this process (faster, less isolated)")
    ap.add_argument("--seed", type=int, default=0, help="hypothesis seed (default 0)")
    ap.add_argument("--verbose", action="store_true", help="print each argument list before running it")
    args = ap.parse_args()
    bad: list[tuple[list[str], str, str]] = []
    per = collections.Counter()
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        os.chdir(cwd)
        where = sandbox(cwd)
        if args.in_process:
            warm_up()
        t0 = time.monotonic()

        @settings(max_examples=args.examples, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(arguments(where))
        def one(argv):
            if args.verbose:
                print(f"twin {argv!r}", flush=True)
            rc, out, err, s = run_one(argv) if args.in_process else in_subprocess(argv, cwd, 10.0)
            per[argv[0] if argv else ""] += 1
            what = problem(rc, out, err, s)
            if what:
                bad.append((argv, what, err[-1500:]))
                print(f"PROBLEM twin {argv!r}: {what}\n{err[-1500:]}", flush=True)
            if sum(per.values()) % 50 == 0:
                print(f"{sum(per.values())} argument lists, {len(bad)} problems, {time.monotonic() - t0:.0f} s",
                      flush=True)

        import hypothesis
        hypothesis.seed(args.seed)(one)()
    print(f"{sum(per.values())} argument lists in {time.monotonic() - t0:.0f} s: "
          + ", ".join(f"{k or '(none)'} {v}" for k, v in sorted(per.items())) + f"; {len(bad)} problems")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
