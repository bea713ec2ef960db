"""Live measurement sweeps through ``twin run``: duty cycle (the idle gap between requests) and
frame size / function, for a live consumer (shm or cuda), each point one ``twin run`` of a scenario
derived from a bundled live scenario, stored as calibration data.

Each point's folder holds what ``twin run`` wrote (results.json, live_rounds.npz: per round the
card-boundary round trip, the live service time and the idle time before it, target and measured)
and the scenario it ran (scenario.yaml, calibration path absolute). sweep.json at the top states
the machine, the date, the command, the isolation (the cores pinned, their thread siblings, the
load and the busiest processes before and after) and each point's p50/p99 (live service alone,
card-boundary round trip, idle time measured and targeted) and its ``twin run`` command;
README.md says the same in words and one table (``--readme DIR`` writes it again from DIR/sweep.json,
with ``--note`` added under the machine line).

Sweeps (``--sweep``):

- ``duty``: back to back (closed loop, no gap), then open loop at 10 us, 100 us, 1 ms and 10 ms
  periods, then exponential (Poisson) gaps of mean 10 us, 100 us and 1 ms; ``--rounds`` each, the 10 ms
  and 1 ms-mean points at most ``--rounds-slow``;
- ``duty_closed``: the same in closed loop, the gap counted from each reply (``gap``, or
  exponential ``gaps``), so a slow or stalled round cannot queue the next ones (a loaded machine);
- ``size``: closed loop, echo at 64, 256 and 1,024 B frames, and the sum32 function at 64 B.

The live device idles as long as simulated time says (twin/devices/live.py); the host's own time
between rounds (the simulation in Python) is the floor, so a gap below it is the floor: the
measured idle column says what each point really had.

Passes (``--passes N``, N >= 2): the machine's level wanders over seconds to minutes (docs/live.md,
"Random gaps against fixed ones"), so one ``twin run`` per point, minutes apart, compares the
machine at two moments as much as two points. With passes each point's rounds are split into N
``twin run``s, run in round-robin order (pass 0 of every point, then pass 1 of every point, ...),
each into ``<point>/pass_KK/`` with ``--seed`` the scenario's seed + K (each pass its own gap
draws). A point's R rounds make passes of R // N, the remainder one more each in the first passes
(R = 1,003, N = 4: 251, 251, 251, 250), so every round asked for is run. ``<point>/passes.json``
(twin.output.live.read_passes: folder, pass, position in that order, seed, start time, seconds,
command) is rewritten after each pass, so a stopped sweep leaves its finished passes usable (a pass
that did not finish leaves its folder unlisted: move it out). ``twin calibrate --from-live`` and
``twin validate`` take ``<point>/`` as one run, its passes' rounds pooled
(twin.fitting.live_runs.read_live_rounds); sweep.json and the README give the pooled percentiles
and each point's pass-to-pass spread (clean round-trip p50 of each pass).

Usage: PYTHONPATH=. python benchmarks/live_sweep.py --backend shm --sweep duty --out DIR
       [--rounds 20000] [--rounds-slow 2000] [--passes N] [--cpu C --producer-cpu P] [--label NAME]
``--cpu`` / ``--producer-cpu``: the shm consumer's and the producer's cores (the cuda backend pins
the whole twin process to ``--producer-cpu``). Default: no pinning.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parent.parent
BASE = {"shm": ROOT / "scenarios" / "live_cpu_shm.yaml", "cuda": ROOT / "scenarios" / "live_gpu_cuda.yaml"}


def points(sweep: str, rounds: int, slow: int) -> list[tuple[str, dict, int, int, str]]:
    """(label, traffic block, rounds, frame bytes, function) per point of a sweep."""
    closed = {"mode": "closed_loop", "clock": "card"}
    if sweep == "duty":
        out = [("back_to_back", closed, rounds, 64, "echo")]
        for label, period, n in (("period_10us", "10 us", rounds), ("period_100us", "100 us", rounds),
                                 ("period_1ms", "1 ms", rounds), ("period_10ms", "10 ms", min(rounds, slow))):
            out.append((label, {"mode": "open_loop", "clock": "card", "period": period}, n, 64, "echo"))
        for label, mean, n in (("exp_10us", "10 us", rounds), ("exp_100us", "100 us", rounds),
                               ("exp_1ms", "1 ms", min(rounds, 5 * slow))):
            out.append((label, {"mode": "open_loop", "clock": "card",
                                "gaps": {"distribution": "exponential", "mean": mean}}, n, 64, "echo"))
        return out
    if sweep == "duty_closed":  # the idle time after each reply, whatever the service took (no backlog)
        out = [("back_to_back", closed, rounds, 64, "echo")]
        for label, gap, n in (("gap_10us", "10 us", rounds), ("gap_100us", "100 us", rounds),
                              ("gap_1ms", "1 ms", rounds), ("gap_10ms", "10 ms", min(rounds, slow))):
            out.append((label, {**closed, "gap": gap}, n, 64, "echo"))
        for label, mean, n in (("exp_100us", "100 us", rounds), ("exp_1ms", "1 ms", min(rounds, 5 * slow))):
            out.append((label, {**closed, "gaps": {"distribution": "exponential", "mean": mean}}, n, 64, "echo"))
        return out
    if sweep == "size":
        return [(f"echo_{b}B", closed, rounds, b, "echo") for b in (64, 256, 1024)] + \
               [("sum32_64B", closed, rounds, 64, "sum32")]
    raise SystemExit(f"live_sweep: --sweep {sweep}: duty, duty_closed or size")


def scenario(backend: str, label: str, traffic: dict, frame: int, function: str, bridge: dict) -> dict:
    """The bundled live scenario of ``backend`` with this point's traffic, frame and function."""
    base = BASE[backend]
    sc = yaml.safe_load(base.read_text())
    sc["name"] = f"{sc['name']}_{label}"
    sc["description"] = f"{sc['description']} ({label})"
    sc["calibration"] = str((base.parent / sc["calibration"]).resolve())
    sc["traffic"], sc["frame_bytes"], sc["function"] = traffic, frame, function
    for node in sc["nodes"]:
        if node.get("model") == "live":
            node["bridge"] = {**node["bridge"], **bridge}
    return sc


def isolation(cpus: list[int]) -> dict:
    """What else the machine was doing: cores, load, the busiest other processes (ps)."""
    out = {"cores_online": os.cpu_count(), "load_average": [round(x, 2) for x in os.getloadavg()],
           "pinned": cpus}
    try:
        ps = subprocess.run(["ps", "-eo", "pcpu,comm", "--sort=-pcpu"], capture_output=True, text=True, timeout=5)
        out["busiest_processes"] = [ln.strip() for ln in ps.stdout.splitlines()[1:6]]
    except (OSError, subprocess.SubprocessError):
        pass
    siblings = {}
    for c in cpus:
        f = Path(f"/sys/devices/system/cpu/cpu{c}/topology/thread_siblings_list")
        if f.is_file():
            siblings[c] = f.read_text().strip()
    out["thread_siblings"] = siblings
    return out


def machine() -> dict:
    """CPU model, kernel, Python, and the GPU (nvidia-smi) where there is one."""
    m = {"host": platform.node(), "kernel": platform.release(), "python": platform.python_version(),
         "cpu": platform.processor() or platform.machine()}
    try:
        for ln in Path("/proc/cpuinfo").read_text().splitlines():
            if ln.startswith("model name"):
                m["cpu"] = ln.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.sm,clocks.mem",
                              "--format=csv,noheader"], capture_output=True, text=True, timeout=10)
        if smi.returncode == 0:
            m["gpu"] = smi.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return m


def summarize(folder: Path) -> dict:
    """p50/p99 of a point's live service, card-boundary round trip and measured idle (ns), from one
    run or from its passes pooled (twin.fitting.live_runs.read_live_rounds); for passes also
    ``pass_p50_ns``: each pass's clean round-trip p50 (ns), in pass order, and ``clean_rtt_p50_ns``:
    the pooled clean round trip's (stalled rounds and those queued behind them left out)."""
    from twin.fitting.live_runs import read_live_rounds
    doc, res, arr, passes = read_live_rounds(folder)
    idle = arr["idle_ns"][arr["idle_ns"] >= 0] if "idle_ns" in arr else np.zeros(0)
    target = []
    for run in ([folder / p["folder"] for p in passes] or [folder]):  # the simulated idle asked for
        with np.load(run / "live_rounds.npz") as d:
            target.append(d[f"{res['node']}.idle_target_ns"][1:])
    q = lambda a: [float(x) for x in np.percentile(a, [50, 99])] if len(a) else [float("nan")] * 2  # noqa: E731
    out = {"rounds": res["rounds"], "mismatches": res["mismatches"], "service_ns": q(arr["service_ns"]),
           "rtt_ns": q(arr["rtt_ps"] / 1000), "idle_ns": q(idle), "idle_target_ns": q(np.concatenate(target))}
    if passes:
        out["pass_p50_ns"] = [r["p50_ns"] for r in res["live"]["passes"]]
        out["clean_rtt_p50_ns"] = res["live"]["clean"]["round_trip"]["p50_ns"]
    return out


def schedule(labels: list[str], passes: int) -> list[tuple[int, str]]:
    """The order of the ``twin run``s of a sweep in passes: (pass, point label), round robin: pass 0
    of every point in ``labels``' order, then pass 1 of every point, and so on."""
    return [(k, label) for k in range(passes) for label in labels]


def pass_rounds(rounds: int, passes: int) -> list[int]:
    """Each pass's rounds when a point's ``rounds`` are split into ``passes``: ``rounds // passes``,
    the remainder one more each in the first passes (they sum to ``rounds``)."""
    return [rounds // passes + (k < rounds % passes) for k in range(passes)]


def readme(meta: dict, note: str = "") -> str:
    """README.md of a sweep folder from its sweep.json ``meta``."""
    m, iso = meta["machine"], meta["isolation_before"]
    pinned = ", ".join(str(c) for c in iso["pinned"]) or "none"
    title = meta["label"] or f"{meta['backend']} {meta['sweep']}"
    lines = [f"# {title}: live {meta['backend']} {meta['sweep']} sweep",
             "", f"Measured {meta['date']} by `{meta['command']}` (benchmarks/live_sweep.py): one `twin run` per "
             + ("pass" if meta.get("passes", 1) > 1 else "point") + ", each folder holding its results.json, "
             "live_rounds.npz (per round: `<node>.rtt_ps`, "
             "`.service_ns`, `.idle_ns`, `.idle_target_ns`, `.t_in_ps`, `.t_have_ps`), manifest.json and the "
             "scenario it ran (scenario.yaml; results.json's `scenario_file` is where it lay when it ran).", "",
             f"Machine: {m.get('cpu', '?')}, {iso['cores_online']} cores, kernel {m.get('kernel', '?')}, Python "
             f"{m.get('python', '?')}" + (f"; GPU {m['gpu']}" if m.get("gpu") else "") + ".",
             f"Isolation: pinned cores {pinned} (thread siblings {iso.get('thread_siblings', {})}); load average "
             f"{iso['load_average']} before, {meta['isolation_after']['load_average']} after.",
             *([note] if note else []), "",
             "Idle: the live device's time from its previous reply seen to this request's first byte written "
             "(measured), and the simulated idle time it was asked for (target); a target below the host's own "
             "time between rounds (the simulation in Python) cannot be met.", "",
             *([f"Passes: {meta['passes']} per point, round robin (benchmarks/live_sweep.py --passes): each "
                "point's folder holds passes.json and one `twin run` folder per pass (pass_KK/); the table's "
                "percentiles are of the passes' rounds pooled (what `twin calibrate --from-live` and `twin "
                "validate` read); pass p50 spread: the lowest and highest pass's clean round-trip p50, and their "
                "difference as % of the pooled clean p50.", ""] if meta.get("passes", 1) > 1 else []),
             "| point | traffic | frame | function | rounds | service p50 | service p99 | round trip p50 | "
             "round trip p99 | idle p50 (target) |" + (" pass p50 spread |" if meta.get("passes", 1) > 1 else ""),
             "|---|---|---:|---|---:|---:|---:|---:|---:|---:|" + ("---:|" if meta.get("passes", 1) > 1 else "")]
    us = lambda ns: f"{ns / 1000:.3f} µs"  # noqa: E731
    for p in meta["points"]:
        t = p["traffic"]
        tr = ("closed loop" + (f", gap {t['gap']}" if t.get("gap") else "") if t["mode"] == "closed_loop" else
              f"open loop, period {t['period']}" if "period" in t else "open loop")
        if "gaps" in t:
            tr += f", {t['gaps']['distribution']} gaps mean {t['gaps']['mean']}"
        lines.append(f"| {p['label']} | {tr} | {p['frame_bytes']} B | {p['function']} | {p['rounds']:,} | "
                     f"{us(p['service_ns'][0])} | {us(p['service_ns'][1])} | {us(p['rtt_ns'][0])} | "
                     f"{us(p['rtt_ns'][1])} | {us(p['idle_ns'][0])} ({us(p['idle_target_ns'][0])}) |"
                     + (f" {us(min(p['pass_p50_ns']))}..{us(max(p['pass_p50_ns']))} "
                        f"({100 * (max(p['pass_p50_ns']) - min(p['pass_p50_ns'])) / p['clean_rtt_p50_ns']:.1f} %) |"
                        if p.get("pass_p50_ns") else ""))
    return "\n".join(lines) + "\n"


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (no usage block)
        print(f"live_sweep: error: {message} (--help)", file=sys.stderr)
        raise SystemExit(2)


def _positive(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a whole number >= 1")
    return n


def parser() -> argparse.ArgumentParser:
    """The command line (module docstring)."""
    doc = __doc__.split("\n\n")
    ap = _Parser(
        description=" ".join(doc[0].split()),
        epilog="Each point's folder, sweep.json and README.md, the sweeps and passes: benchmarks/live_sweep.py's "
               "docstring and docs/live.md.")
    ap.add_argument("--backend", choices=sorted(BASE), help="the live consumer: shm (a host process) or cuda (a GPU)")
    ap.add_argument("--sweep", choices=["duty", "duty_closed", "size"],
                    help="duty: back to back, open-loop periods and exponential gaps; duty_closed: the same gaps "
                         "counted from each reply; size: 64/256/1,024 B echo and sum32")
    ap.add_argument("--out", type=Path, metavar="DIR", help="the sweep's folder: one folder per point, sweep.json, "
                                                            "README.md")
    ap.add_argument("--readme", type=Path, metavar="DIR", help="write DIR/README.md from DIR/sweep.json and stop")
    ap.add_argument("--note", default="", metavar="TEXT", help="a line added under the README's machine line")
    ap.add_argument("--rounds", type=_positive, metavar="R", default=20_000, help="rounds per point (default 20000)")
    ap.add_argument("--rounds-slow", type=_positive, metavar="R", default=2_000,
                    help="at most this many at the 10 ms period (5x this at exponential 1 ms gaps; default 2000)")
    ap.add_argument("--cpu", type=int, metavar="CORE", help="the shm consumer's core (default: not pinned)")
    ap.add_argument("--producer-cpu", type=int, metavar="CORE",
                    help="the producer's core (cuda: the whole twin process; default: not pinned)")
    ap.add_argument("--label", default="", metavar="NAME",
                    help="the sweep's title in README.md (default: backend and sweep)")
    ap.add_argument("--passes", type=_positive, default=1, metavar="N",
                    help="split each point into N `twin run`s, run round robin over the points; a point's R rounds "
                         "make passes of R // N, the remainder one more each in the first passes (every pass at "
                         "least 100)")
    ap.add_argument("--only", nargs="+", default=None, metavar="LABEL",
                    help="run only these points (at least one label of --sweep's points)")
    return ap


def main(argv=None) -> int:
    ap = parser()
    a = ap.parse_args(argv)
    if a.readme:
        (a.readme / "README.md").write_text(readme(json.loads((a.readme / "sweep.json").read_text()), a.note))
        return 0
    if not (a.backend and a.sweep and a.out):
        ap.error("--backend, --sweep and --out are needed (or --readme DIR)")
    bridge = {}
    if a.backend == "shm":
        bridge = {k: v for k, v in (("cpu", a.cpu), ("producer_cpu", a.producer_cpu)) if v is not None}
    pts = _chosen_points(ap, a)
    a.out.mkdir(parents=True, exist_ok=True)
    before = isolation([c for c in (a.cpu, a.producer_cpu) if c is not None])
    pre = None
    if a.backend == "cuda" and a.producer_cpu is not None:
        pre = lambda c=a.producer_cpu: os.sched_setaffinity(0, {c})  # noqa: E731
    done: dict[str, list[dict]] = {label: [] for label in pts}
    seconds: dict[str, float] = dict.fromkeys(pts, 0.0)
    for position, (k, label) in enumerate(schedule(list(pts), a.passes)):
        _run_pass(a, pts[label], k, position, bridge, pre, done[label], seconds)
    rows = [_point_row(a, label, p, done[label], seconds[label]) for label, p in pts.items()]
    args = argv if argv is not None else sys.argv[1:]
    meta = {"label": a.label, "backend": a.backend, "sweep": a.sweep, "passes": a.passes,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "machine": machine(), "isolation_before": before,
            "isolation_after": isolation([c for c in (a.cpu, a.producer_cpu) if c is not None]),
            "command": shlex.join(["python", "benchmarks/live_sweep.py", *args]),
            "points": rows}
    (a.out / "sweep.json").write_text(json.dumps(meta, indent=2) + "\n")
    (a.out / "README.md").write_text(readme(meta, a.note))
    print(json.dumps({k: meta[k] for k in ("date", "machine", "isolation_before")}, indent=1))
    return 0


def _chosen_points(ap: argparse.ArgumentParser, a: argparse.Namespace) -> dict[str, tuple]:
    """The points to run (label -> :func:`points`' tuple, in the sweep's order: ``--only``'s), every
    one with enough rounds for a run and for each pass, and the ``--cpu``/``--producer-cpu`` cores
    ones this process may use; a bad choice ends the command (``ap.error``) before anything runs."""
    every = points(a.sweep, a.rounds, a.rounds_slow)
    unknown = [x for x in a.only or [] if x not in {p[0] for p in every}]
    if unknown:
        ap.error(f"--only {' '.join(unknown)}: not a point of --sweep {a.sweep} ({', '.join(p[0] for p in every)})")
    pts = {p[0]: p for p in every if a.only is None or p[0] in a.only}
    for label, _, n, _, _ in pts.values():  # a run's live summary fits its service: 100 rounds at least
        if a.passes > 1 and n // a.passes < 100:
            ap.error(f"--passes {a.passes}: {label} has {n:,} rounds, {n // a.passes} a pass (a run needs >= 100)")
        if n < 100:
            ap.error(f"--rounds/--rounds-slow: {label} would have {n:,} rounds (a run needs >= 100)")
    if a.only is not None and len(set(a.only)) < len(a.only):
        ap.error("--only " + " ".join(a.only) + ": a point named twice (each point runs once)")
    if a.backend == "shm":  # the cores exist here before anything is measured
        here = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set(range(os.cpu_count() or 1))
        for flag, core in (("--cpu", a.cpu), ("--producer-cpu", a.producer_cpu)):
            if core is not None and core not in here:
                ap.error(f"{flag} {core}: not a core this process may use ({', '.join(map(str, sorted(here)))})")
    return pts


def _run_pass(a: argparse.Namespace, pt: tuple, k: int, position: int, bridge: dict, pre, done: list[dict],
              seconds: dict[str, float]) -> None:
    """Pass ``k`` of point ``pt`` (the whole point without ``--passes``), ``position``-th ``twin run``
    of the sweep: its scenario written (pass 0), the run into the point's folder (or its
    ``pass_KK``), its wall time added to ``seconds``; with passes its entry appended to ``done``
    and the point's passes.json rewritten. A failed run ends the sweep (SystemExit)."""
    label, traffic, n, frame, fn = pt
    point = a.out / label
    point.mkdir(exist_ok=True)
    sc = scenario(a.backend, label, traffic, frame, fn, bridge)
    if k == 0:
        (point / "scenario.yaml").write_text(yaml.safe_dump(sc, sort_keys=False))
    folder = point if a.passes == 1 else point / f"pass_{k:02d}"
    rounds = n if a.passes == 1 else pass_rounds(n, a.passes)[k]
    seed = int(sc.get("seed", 0)) + k
    cmd = [sys.executable, "-m", "twin", "run", str(point / "scenario.yaml"), "--rounds", str(rounds), "--out",
           str(folder), "--overwrite", "--no-plot", "--no-rounds", "--quiet"]
    if a.passes > 1:
        cmd += ["--seed", str(seed)]
    t = time.monotonic()
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    print(f"# {label}" + (f" pass {k}" if a.passes > 1 else "") + f": {rounds:,} rounds, {frame} B {fn}, "
          f"traffic {traffic}", file=sys.stderr, flush=True)
    r = subprocess.run(cmd, cwd=ROOT, preexec_fn=pre, capture_output=True, text=True)
    if r.returncode != 0:
        print(r.stdout[-2000:], r.stderr[-2000:], file=sys.stderr)
        raise SystemExit(f"live_sweep: {label}" + (f" pass {k}" if a.passes > 1 else "")
                         + f": twin run exited {r.returncode}" + (
                             f"; {folder} is not in {point / 'passes.json'}: move it out before using the point"
                             if a.passes > 1 and folder.exists() else ""))
    seconds[label] += time.monotonic() - t
    if a.passes > 1:
        done.append({"folder": folder.name, "pass": k, "position": position, "seed": seed,
                     "started_utc": started, "seconds": round(time.monotonic() - t, 2),
                     "command": shlex.join(["twin", *cmd[3:]])})
        (point / "passes.json").write_text(json.dumps({"schema": "twin.passes/1", "point": label,
                                                       "passes": done}, indent=1) + "\n")


def _point_row(a: argparse.Namespace, label: str, pt: tuple, done: list[dict], seconds: float) -> dict:
    """A point's row of sweep.json (:func:`summarize` of its folder, with its label, wall time, frame,
    function, traffic and command), printed as one line."""
    _, traffic, n, frame, fn = pt
    s = summarize(a.out / label)
    s.update(label=label, seconds=round(seconds, 1), frame_bytes=frame, function=fn, traffic=traffic,
             command=done[0]["command"] if done else shlex.join(
                 ["twin", "run", str(a.out / label / "scenario.yaml"), "--rounds", str(n), "--out",
                  str(a.out / label), "--overwrite", "--no-plot", "--no-rounds", "--quiet"]))
    spread = (f"  pass p50 {min(s['pass_p50_ns']):.0f}..{max(s['pass_p50_ns']):.0f}"
              if s.get("pass_p50_ns") else "")
    print(f"{label:<14} svc p50 {s['service_ns'][0]:>9.0f} p99 {s['service_ns'][1]:>10.0f}  rtt p50 "
          f"{s['rtt_ns'][0]:>9.0f} p99 {s['rtt_ns'][1]:>10.0f}  idle p50 {s['idle_ns'][0]:>11.0f} "
          f"(target {s['idle_target_ns'][0]:.0f}) ns{spread}  {s['seconds']} s", flush=True)
    return s


if __name__ == "__main__":
    sys.exit(main())
