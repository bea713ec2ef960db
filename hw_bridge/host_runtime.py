"""A dispatcher-queue-worker real-time decoding host, measured live (``c/hb_host_runtime.c``).

:func:`run_point` runs the C harness once (one wake mode, one gap after each reply) and returns its
per-request stamps, every reply checked against the Python twin of the decoder
(:mod:`twin.runtime.functions`); :func:`stage_times` cuts them into the host's stages;
:func:`measure` runs a grid of (wake, gap) points and returns the measured file's document
(schema ``twin.host_runtime/1``, read back by :mod:`twin.devices.host_runtime`).

Stages (ns, per request; the C file's header defines the stamps): ``ring`` (the producer's post ->
the dispatcher's poll claimed it), ``enqueue`` (claimed -> pushed to the worker queue), ``wake``
(pushed -> the worker has it: its spin or its futex wait returned; the wake call included),
``decode`` (read, lookup, reply appended), ``handback`` (pushed back -> the dispatcher popped it),
``publish`` (``qrt_complete``), ``reply`` (published -> the producer saw it). ``idle``: how long
the worker waited for this request (its previous hand-back push -> this request's enqueue).
Errors: :class:`hw_bridge.build.BuildError` without a compiler; RuntimeError (one line) when the
harness fails or a reply is wrong.
"""
from __future__ import annotations

import base64
import os
import platform
import subprocess
import tempfile
import time
import zlib
from pathlib import Path
from typing import Callable

import numpy as np

from hw_bridge.build import HERE, build
from twin.runtime.functions import lookup
from twin.runtime.native import C_DIR as RUNTIME_C

SCHEMA = "twin.host_runtime/1"
WAKES = ("spin", "block")
FUNCS = {"rep3": "decode_rep3", "steane7": "decode_steane7"}
STAGES = ("ring", "enqueue", "wake", "decode", "handback", "publish", "reply")
SAMPLED = ("enqueue", "wake", "decode", "handback", "publish")
"""The stages whose per-request times the file keeps (compressed), in this column order."""
QUANTILES = (50, 90, 99, 99.9)
DEFAULT_GAPS_NS = (0, 10_000, 100_000, 1_000_000)


def harness_program() -> Path:
    """Path of the built harness executable (cached by its sources' hash)."""
    return build("hb_host_runtime", [HERE / "hb_host_runtime.c", RUNTIME_C / "qrt_functions.c"], shared=False,
                 extra=["-pthread"])


def run_point(wake: str, func: str, n: int, gap_ns: int, *, warmup: int = 500, seed: int = 1,
              cores: tuple[int, int, int] | None = None) -> tuple[np.ndarray, int]:
    """Run the harness: ``n`` timed requests (after ``warmup``), ``gap_ns`` after each reply;
    ``cores``: (producer, dispatcher, worker) to pin, or None. Returns (records int64 (n, 10):
    t0..t7 ns, syndrome, reply byte; the timer's cost per read, ns). Raises RuntimeError when the
    harness fails or any reply differs from the decoder's Python twin."""
    if wake not in WAKES or func not in FUNCS:
        raise ValueError(f"wake must be one of {WAKES} and func one of {tuple(FUNCS)}, got {wake!r}, {func!r}")
    prog = harness_program()
    fd, out = tempfile.mkstemp(prefix="hb_host_runtime-", suffix=".bin")
    os.close(fd)
    try:
        argv = [str(prog), wake, func, str(n), str(warmup), str(int(gap_ns)), str(seed), out]
        if cores is not None:
            argv += [str(c) for c in cores]
        limit = 600.0 + n * gap_ns * 1e-9 * 4
        try:
            res = subprocess.run(argv, capture_output=True, text=True, timeout=limit)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"hb_host_runtime {wake} {func}: {n} requests took over {limit:.0f} s") from None
        if res.returncode != 0 or not res.stdout.startswith("ok "):
            raise RuntimeError(f"hb_host_runtime {wake} {func} failed: {(res.stderr or res.stdout).strip()}")
        rec = np.fromfile(out, "<i8").reshape(n, 10)
    finally:
        os.unlink(out)
    check_replies(rec, func)
    return rec, int(res.stdout.split()[3])


def check_replies(rec: np.ndarray, func: str) -> None:
    """Raise RuntimeError unless every record's reply byte is what the decoder's Python twin answers
    to its syndrome (one byte, little-endian). The decoders must be registered (``import
    twin.qec.functions``, as benchmarks/host_runtime.py does; KeyError otherwise)."""
    fn = lookup(FUNCS[func]).python
    table = {s: fn(bytes([s]))[0] for s in range(256)}
    want = np.array([table[int(s)] for s in rec[:, 8]], np.int64)
    bad = np.flatnonzero(rec[:, 9] != want)
    if len(bad):
        i = int(bad[0])
        raise RuntimeError(f"hb_host_runtime {func}: {len(bad)} wrong replies (request {i}: syndrome {rec[i, 8]}, "
                           f"reply {rec[i, 9]}, want {want[i]})")


def stage_times(rec: np.ndarray) -> dict[str, np.ndarray]:
    """Per-request stage durations (ns, int64) of harness records (see the module docstring), and
    ``idle`` (the first request's: -1, it had no previous hand-back)."""
    t = rec[:, :8]
    out = {name: t[:, k + 1] - t[:, k] for k, name in enumerate(STAGES)}
    idle = np.full(len(rec), -1, np.int64)
    idle[1:] = t[1:, 2] - t[:-1, 4]
    out["idle"] = idle
    return out


def quantiles(x: np.ndarray) -> dict:
    """``{p50, p90, p99, p99.9, mean, max}`` of ``x`` (ns), rounded to 0.1 ns."""
    q = np.percentile(x, QUANTILES)
    d = {f"p{p:g}": round(float(v), 1) for p, v in zip(QUANTILES, q)}
    return d | {"mean": round(float(x.mean()), 1), "max": float(x.max())}


def encode_sample(st: dict[str, np.ndarray]) -> dict:
    """The per-request times of :data:`SAMPLED` (request order), each column <u4 ns (clipped at
    2^32 - 1), concatenated, zlib level 9, base64."""
    cols = [np.clip(st[k], 0, 2**32 - 1).astype("<u4") for k in SAMPLED]
    raw = b"".join(c.tobytes() for c in cols)
    return {"rows": int(len(cols[0])), "columns": list(SAMPLED),
            "encoding": "zlib+base64: per column <u4 ns, request order, columns concatenated",
            "data": base64.b64encode(zlib.compress(raw, 9)).decode("ascii")}


def point_doc(wake: str, gap_ns: int, rec: np.ndarray, timer_ns: int) -> dict:
    """One (wake, gap) point of the measured file: its requests, the timer's cost, each stage's and
    the idle time's quantiles, the gap the producer really waited, and the sample."""
    st = stage_times(rec)
    gaps = rec[1:, 0] - rec[:-1, 7]
    return {"wake": wake, "gap_ns": int(gap_ns), "requests": int(len(rec)), "timer_ns": timer_ns,
            "gap_measured_ns": quantiles(gaps) if len(gaps) else None,
            "idle_ns": quantiles(st["idle"][1:]) if len(rec) > 1 else None,
            "stages_ns": {k: quantiles(st[k]) for k in STAGES},
            "host_ns": quantiles(st["enqueue"] + st["wake"] + st["handback"]),
            "sample": encode_sample(st)}


def machine_doc() -> dict:
    """The machine the harness runs on: cpu model, logical cpus, kernel, Python, load averages."""
    cpu = ""
    try:
        cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                    if ln.startswith("model name")), "")
    except OSError:
        pass
    return {"cpu": cpu or platform.processor(), "logical_cpus": os.cpu_count(), "kernel": platform.release(),
            "os": platform.platform(), "python": platform.python_version(),
            "load_average_1_5_15": [round(x, 2) for x in os.getloadavg()]}


PROTOCOL = ("closed loop, one request in flight: a producer thread posts a random syndrome into the request ring "
            "(qrt_post), a dispatcher thread polls the ring (qrt_next, spinning) and enqueues the descriptor to a "
            "worker queue (qrt_dq), the worker waits (spin: a pause loop on the queue; block: FUTEX_WAIT on its "
            "tail word, the dispatcher calling FUTEX_WAKE after each push), decodes with the C lookup decoder "
            "(qrt_fn_decode_*), hands the descriptor back (qrt_dq), the dispatcher publishes the reply "
            "(qrt_complete); the producer sees it (qrt_peek, sched_yield between looks) and waits the gap "
            "(spun under 20 us, clock_nanosleep to the instant above). CLOCK_MONOTONIC stamps at every "
            "boundary (hw_bridge/c/hb_host_runtime.c); every reply checked against the decoder's Python twin; "
            "warm-up requests dropped.")


def measure(func: str = "rep3", wakes=WAKES, gaps_ns=DEFAULT_GAPS_NS, n: int = 5000, *, warmup: int = 500,
            seed: int = 1, cores: tuple[int, int, int] | None = None, conditions: str = "",
            requests: dict[str, int] | None = None, progress: Callable[[str], None] | None = None) -> dict:
    """The measured file's document: machine, date, protocol, and one point per (wake, gap);
    ``n`` requests per point (``requests``: per wake mode instead)."""
    before = [round(x, 2) for x in os.getloadavg()]
    points = []
    for wake in wakes:
        k = (requests or {}).get(wake, n)
        for gap in gaps_ns:
            if progress:
                progress(f"{wake} wake, gap {gap} ns: {k} requests")
            rec, timer = run_point(wake, func, k, gap, warmup=warmup, seed=seed, cores=cores)
            points.append(point_doc(wake, gap, rec, timer))
    mach = machine_doc() | {"load_average_1_5_15_before": before}
    return {"schema": SCHEMA, "decoder": FUNCS[func], "machine": mach,
            "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "cores": None if cores is None else {"producer": cores[0], "dispatcher": cores[1], "worker": cores[2]},
            "conditions": conditions, "protocol": PROTOCOL, "warmup": warmup, "seed": seed,
            "stages": {"ring": "producer's post -> dispatcher claimed it (the twin's own poll stage)",
                       "enqueue": "dispatcher claimed it -> pushed to the worker queue",
                       "wake": "pushed -> the worker has it (its spin or futex wait returned; the wake call included)",
                       "decode": "worker: read, lookup, reply appended",
                       "handback": "worker pushed it back -> the dispatcher popped it",
                       "publish": "qrt_complete (the twin's reply write)",
                       "reply": "published -> the producer saw it"},
            "points": points}


def markdown_table(doc: dict) -> str:
    """The measured points as a markdown table: p50 / p99 (ns) of the host's stages per point."""
    head = ("| wake | gap | idle p50 | enqueue p50/p99 | wake p50/p99 | decode p50/p99 | hand-back p50/p99 "
            "| host p50/p99 |")
    lines = [head, "|" + "---|" * 8]
    for p in doc["points"]:
        s = p["stages_ns"]

        def pp(d):
            return f"{d['p50']:.0f} / {d['p99']:.0f}"
        idle = p["idle_ns"]["p50"] if p["idle_ns"] else float("nan")
        lines.append(f"| {p['wake']} | {p['gap_ns'] / 1000:g} µs | {idle / 1000:.1f} µs | {pp(s['enqueue'])} | "
                     f"{pp(s['wake'])} | {pp(s['decode'])} | {pp(s['handback'])} | {pp(p['host_ns'])} |")
    return "\n".join(lines)
