"""The machine study at utility scale: a whole ``twin machine`` process on the 1,000-logical-qubit
scenario (scenarios/machine_1000q_d15.yaml: d = 15, 10^4 cycles, ten pools of 192 decoders), its
CPU seconds (user + sys of the child, start-up included: ``os.wait4``) and peak RSS against issue
27's targets (<= 10 minutes whole process on this 2-core machine, <= 4 GB), in one run; then the
jobs per CPU-second the model handled and the machine figures it printed.

Usage: PYTHONPATH=. python benchmarks/machine_scale.py [--scenario NAME] [--cycles N]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET_S, TARGET_GB = 600.0, 4.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", default="machine_1000q_d15")
    ap.add_argument("--cycles", type=int, default=None)
    a = ap.parse_args()
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "twin")], check=False)
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "twin", "machine", a.scenario, "--out", f"{tmp}/out", "--no-plot"]
        if a.cycles:
            cmd += ["--cycles", str(a.cycles)]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        p = subprocess.Popen(cmd, env=env, cwd=ROOT)
        _, status, ru = os.wait4(p.pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            print(f"twin machine failed ({status})", file=sys.stderr)
            return 1
        cpu = ru.ru_utime + ru.ru_stime
        rss_gb = ru.ru_maxrss * 1024 / 2**30
        doc = json.loads(Path(f"{tmp}/out/results.json").read_text())
    jobs = sum(p["jobs"] for p in doc["pools"])
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python "
          f"{platform.python_version()}, load average {os.getloadavg()[0]:.2f}")
    print(f"{doc['scenario']}: {doc['patches']:,} patches, d={doc['distance']}, {doc['cycles']:,} cycles, "
          f"{jobs:,} decode jobs")
    print(f"whole process: {cpu:.1f} CPU s (target <= {TARGET_S:.0f}: {'met' if cpu <= TARGET_S else 'NOT met'}, "
          f"{TARGET_S / cpu:.1f}x under), peak RSS {rss_gb:.2f} GB (target <= {TARGET_GB:g}: "
          f"{'met' if rss_gb <= TARGET_GB else 'NOT met'}); {jobs / cpu:,.0f} jobs per CPU-second")
    lc, tg = doc["logical_clock"], doc["t_gates"]
    print(f"logical clock {lc['effective_step_ns']:,} ns per step (ideal {lc['ideal_step_ns']:,}); T gates "
          f"{tg['count']:,}, reaction p50 {tg['reaction']['p50_ns']:,} ns, p99 {tg['reaction']['p99_ns']:,} ns; "
          f"decoders needed {sum(p['decoders_needed'] for p in doc['pools']):,} of "
          f"{sum(p['decoders'] for p in doc['pools']):,}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
