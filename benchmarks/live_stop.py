"""Signals at length: ``PYTHONPATH=. python benchmarks/live_stop.py [--repeat 10] [--decode] [--before CHECKOUT]``.

1. A stop during a live failure, ``--repeat`` times (tests/live_stop.py: a real ``twin run`` of a live
   shm consumer; after 2,000 requests served the consumer is SIGSTOPped (hang) or SIGKILLed (die),
   then SIGINT or SIGTERM reaches the twin inside its 2 s wait for the next reply). Prints each
   repetition (the rounds saved, the round the line names, seconds from the signal to the live
   verdict, the end of the wait, and to the twin's exit, the files written) and the count of
   repetitions whose completed rounds were saved, as a live failure's partial run, with both lines
   right; exits 1 unless every one passed.
2. ``--decode``: a windowed decode (scenarios/decode_stream_window.yaml, ``--shots 20000 --no-plot``)
   stopped by SIGINT while its first placement's direct windowed decode (160,000 windows) runs, three
   times: seconds from the signal to the stop's line and to the exit. With ``--before CHECKOUT`` the
   same against another checkout's twin (the code before the fix), in one run.

The moment to signal in (2): the run folder's lock appears (``OUT/.twin-lock``, taken inside the
command's signal handling: a progress marker), then the child spends ``--decode-cpu`` CPU seconds
more (the study's start-up: sampling, PyMatching on every shot, the window decoder), so the signal
lands in the direct windowed decode (seconds of it at 20,000 shots).
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from live_stop import stop_during_live_failure  # noqa: E402

CASES = [("hang", signal.SIGINT), ("die", signal.SIGTERM), ("hang", signal.SIGTERM), ("die", signal.SIGINT)]


def live(repeat: int) -> bool:
    """Part 1; True when every repetition passed."""
    ok = 0
    for i in range(repeat):
        how, sig = CASES[i % len(CASES)]
        with tempfile.TemporaryDirectory() as d:
            o = stop_during_live_failure(Path(d), how, sig)
        ok += o.ok
        print(f"  {i + 1:2d}: {how:4s} {signal.Signals(sig).name:7s} "
              + (f"saved {o.done:,} rounds, the line names round {o.failed_at:,}; signal -> verdict "
                 f"{o.verdict_s:.2f} s (timeout 2 s), -> exit {o.wait_s:.2f} s"
                 if o.ok else f"FAILED ({o.why}): exit {o.returncode}\n{o.stderr}"), flush=True)
    print(f"stop during a live failure: {ok}/{repeat} saved the completed rounds")
    return ok == repeat


def _cpu_s(pid: int) -> float:
    f = Path(f"/proc/{pid}/stat").read_text()
    utime, stime = f[f.rindex(")") + 2:].split()[11:13]
    return (int(utime) + int(stime)) / os.sysconf("SC_CLK_TCK")


def decode_stop(checkout: Path, cpu_s: float) -> tuple[float, float, str]:
    """One windowed decode stopped once the child has spent ``cpu_s`` CPU seconds after taking its
    folder's lock: (signal -> the stop's line on stderr, signal -> exit, the line)."""
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "out"
        scenario = ROOT / "scenarios" / "decode_stream_window.yaml"
        p = subprocess.Popen([sys.executable, "-m", "twin", "decode", str(scenario), "--shots", "20000", "--out",
                              str(out), "--quiet", "--no-plot"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=checkout,
                             env={**os.environ, "PYTHONPATH": str(checkout)})
        while not (out / ".twin-lock").exists():
            time.sleep(0.01)
        base = _cpu_s(p.pid)
        while _cpu_s(p.pid) < base + cpu_s:
            time.sleep(0.01)
        p.send_signal(signal.SIGINT)
        t = time.monotonic()
        line = p.stderr.readline()
        to_line = time.monotonic() - t
        p.communicate()
        return to_line, time.monotonic() - t, line.strip()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--decode", action="store_true")
    ap.add_argument("--decode-cpu", type=float, default=2.5,
                    help="CPU seconds after the lock before the signal (default 2.5: the study's start-up)")
    ap.add_argument("--before", type=Path, help="another checkout (the code before), for --decode")
    a = ap.parse_args()
    print(f"{os.uname().nodename}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    good = live(a.repeat) if a.repeat else True
    if a.decode:
        for name, where in [("this checkout", ROOT)] + ([("before", a.before)] if a.before else []):
            for _ in range(3):
                to_line, to_exit, line = decode_stop(where, a.decode_cpu)
                print(f"windowed decode, {name}: signal -> line {to_line:.2f} s, -> exit {to_exit:.2f} s: {line}",
                      flush=True)
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
