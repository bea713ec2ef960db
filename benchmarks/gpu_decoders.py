"""The GPU decoders measured in the live persistent kernel (issue 30, item 3): the echo, the lookup
decoders ``decode_rep3`` and ``decode_steane7`` and the union-find ``decode_uf_surface3``, each served by
the runtime's C function in hw_bridge's cuda kernel (hw_bridge/c/hb_cuda_kernel.cu, built by
hw_bridge.cuda), their round trip over the echo's; writes the measurement file
``twin.qec.gpu_cost`` reads (``calibrations/measured/gpu_decoders/``).

Protocol: one kernel per repeat (queues in pinned mapped host memory, 16 slots, classic encoding,
64-byte frames), the functions interleaved within it (echo, rep3, steane7, uf) as one ``hb_batch``
C loop each (one request in flight, back to back: write the slot, publish its sequence word, spin on
the reply's, compare with the reference reply byte for byte; CLOCK_MONOTONIC around each round),
``--warmup`` rounds dropped per batch. A decoder's requests carry syndromes sampled from its own
circuit (stim, fixed seeds): half at the bundled circuit's p (rep-3 one round, Steane-7 two rounds,
surface d=3 three rounds, p = 1e-3), half at ``--stress`` times it, shuffled; the echo carries the
union-find's payloads. Every reply is the Python reference's (:mod:`twin.qec.lookup`,
:mod:`twin.qec.union_find`); a wrong one stops the run.

Per function and repeat: the round trip's p50 and p99 (ns). Over the echo (the file's
``over_echo_p50_ns`` / ``over_echo_p99_ns``): the mean over repeats of (the function's percentile on
the requests at the bundled p) - (the echo's, same repeat). ``per_event_ns``: the least-squares slope
of the median round trip by detection events (events with >= 500 requests, weighted by count), 0
where fewer than two such counts; ``events_mean`` / ``events_p50``: the mean and the median events of the
requests at the bundled p (the over-echo p50 is the median request's: twin.qec.gpu_cost anchors the slope at
``events_p50``).
Without an NVIDIA GPU, CuPy and nvcc it prints why and exits 0 (nothing measured). ``--backend shm``
runs the same protocol on the shm consumer (a CPU core; for checking the script, not a GPU figure).

Usage: PYTHONPATH=. python benchmarks/gpu_decoders.py [--rounds 100000] [--repeats 3] [--out FILE.yaml]
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

SLOTS = 16
FRAME = 64
FUNCTIONS = ("echo", "decode_rep3", "decode_steane7", "decode_uf_surface3")
CIRCUITS = {"decode_rep3": ("rep", 3, 1, 1e-3), "decode_steane7": ("steane", 3, 2, 1e-3),
            "decode_uf_surface3": ("surface", 3, 3, 1e-3)}


def syndromes(fn: str, n: int, stress: float, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(payloads uint8 (n, FRAME), detection events int (n,), at the bundled p: bool (n,)) for ``fn``."""
    from twin.qec.codes import memory_circuit
    code, d, r, p = CIRCUITS["decode_uf_surface3" if fn == "echo" else fn]
    half = n // 2
    rows = [memory_circuit(code, d, r, q).compile_detector_sampler(seed=seed + k).sample(m, bit_packed=True)
            for k, (q, m) in enumerate(((p, half), (min(0.5, p * stress), n - half)))]
    det = np.concatenate(rows)
    base = np.arange(n) < half
    order = np.random.default_rng(seed).permutation(n)
    det, base = det[order], base[order]
    payload = np.zeros((n, FRAME), np.uint8)
    payload[:, :det.shape[1]] = det
    events = np.unpackbits(det, axis=1).sum(axis=1)
    return payload, events, base


def images(enc, fn: str, first: int, payload: np.ndarray):
    """Request and expected reply slot images of sequence numbers first.. (the reference's replies)."""
    from twin.engine.paced import _images
    from twin.runtime.functions import lookup
    f = lookup(fn)
    slot = -(-enc.slot_bytes(FRAME) // 16) * 16
    seqs = np.arange(first, first + len(payload), dtype=np.uint32)
    img, ln = _images(enc, seqs, payload, f.id, slot)
    if f.id == 0:
        return img, ln, img.copy(), ln.copy()
    rep = np.array([np.frombuffer(f.python(bytes(r)), np.uint8) for r in payload])
    exp, eln = _images(enc, seqs, rep, f.id, slot)
    return img, ln, exp, eln


def endpoint(backend: str):
    from hw_bridge.endpoint import BridgeSettings
    if backend == "cuda":
        from hw_bridge.cuda import CudaEndpoint
        return CudaEndpoint(BridgeSettings("cuda", timeout_ns=2_000_000_000))
    from hw_bridge.shm import ShmEndpoint
    cpus = (0, 1) if (os.cpu_count() or 1) >= 2 else (None, None)
    return ShmEndpoint(BridgeSettings("shm", timeout_ns=2_000_000_000, cpu=cpus[1], producer_cpu=cpus[0]))


def one_repeat(backend: str, work: dict, warmup: int) -> dict[str, np.ndarray]:
    """One kernel (or consumer), every function's batch in turn: round trips (ns) after the warmup."""
    from twin.exchange.encoding import get_encoding
    enc = get_encoding("classic")
    ep = endpoint(backend)
    slot = -(-enc.slot_bytes(FRAME) // 16) * 16
    ep.open(slot, SLOTS, "classic")
    out = {}
    try:
        seq = 1
        for fn in FUNCTIONS:
            payload = work[fn][0]
            img, ln, exp, eln = images(enc, fn, seq, payload)
            t0, t1, bad = ep.batch(img, ln, exp, eln, first_seq=seq)
            if bad.any():
                raise SystemExit(f"gpu_decoders: {fn}: {int(bad.sum())} replies differ from the reference")
            out[fn] = (t1 - t0)[warmup:]
            seq += len(payload)
    finally:
        ep.close()
    return out


def slope(rt: np.ndarray, events: np.ndarray, min_count: int = 500) -> float:
    """Least-squares slope (ns per event) of the median round trip by events, weighted by count."""
    ks = [k for k in np.unique(events) if (events == k).sum() >= min_count]
    if len(ks) < 2:
        return 0.0
    x = np.array(ks, float)
    y = np.array([np.median(rt[events == k]) for k in ks])
    w = np.sqrt(np.array([(events == k).sum() for k in ks], float))
    A = np.stack([np.ones_like(x), x], axis=1) * w[:, None]
    return float(np.linalg.lstsq(A, y * w, rcond=None)[0][1])


def summarise(runs: list[dict], work: dict, warmup: int) -> dict:
    """The measurement file's numbers from the repeats (module docstring)."""
    doc: dict = {"round_trip_p50_ns": {}, "round_trip_p99_ns": {}, "over_echo_p50_ns": {}, "over_echo_p99_ns": {},
                 "per_event_ns": {}, "events_mean": {}, "events_p50": {}}
    for fn in FUNCTIONS:
        _, events, base = work[fn]
        ev, bs = events[warmup:], base[warmup:]
        doc["round_trip_p50_ns"][fn] = [float(np.percentile(r[fn][bs], 50)) for r in runs]
        doc["round_trip_p99_ns"][fn] = [float(np.percentile(r[fn][bs], 99)) for r in runs]
        if fn == "echo":
            continue
        for q in (50, 99):
            d = [np.percentile(r[fn][bs], q) - np.percentile(r["echo"][work["echo"][2][warmup:]], q) for r in runs]
            doc[f"over_echo_p{q}_ns"][fn] = round(float(np.mean(d)), 1)
        doc["per_event_ns"][fn] = round(slope(np.concatenate([r[fn] for r in runs]), np.tile(ev, len(runs))), 2)
        doc["events_mean"][fn] = round(float(ev[bs].mean()), 4)
        doc["events_p50"][fn] = float(np.percentile(ev[bs], 50, method="inverted_cdf"))
    return doc


def machine(backend: str) -> dict:
    m = {"host": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, load average "
                 f"{os.getloadavg()[0]:.2f} before", "python": platform.python_version()}
    if backend == "cuda":
        import cupy
        name = cupy.cuda.runtime.getDeviceProperties(0)["name"]
        m["gpu"] = name.decode() if isinstance(name, bytes) else str(name)
        m["cupy"] = cupy.__version__
        m["driver"] = str(cupy.cuda.runtime.driverGetVersion())
    else:
        m["gpu"] = "none: the shm consumer on a CPU core (a check of the script, not a GPU figure)"
    return m


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=100_000, help="rounds per function per repeat, after the warmup")
    ap.add_argument("--warmup", type=int, default=5_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--stress", type=float, default=10.0, help="the second half's p over the bundled p")
    ap.add_argument("--backend", choices=("cuda", "shm"), default="cuda")
    ap.add_argument("--out", type=Path, help="write the measurement file here (a .yaml)")
    a = ap.parse_args(argv)
    if a.backend == "cuda":
        from hw_bridge.cuda import gpu_available
        ok, why = gpu_available(0)
        if not ok:
            print(f"gpu_decoders: skipped: {why}")
            return 0
    import twin.qec  # noqa: F401  (registers the decoders)
    from twin.qec.gpu_cost import SCHEMA
    n = -(-(a.warmup + a.rounds) // SLOTS) * SLOTS  # each batch starts on slot 0
    work = {fn: syndromes(fn, n, a.stress, 1000 + 10 * i) for i, fn in enumerate(FUNCTIONS)}
    mach = machine(a.backend)
    t = time.monotonic()
    runs = []
    for r in range(a.repeats):
        print(f"# repeat {r + 1}/{a.repeats} ({time.monotonic() - t:.0f} s)", file=sys.stderr, flush=True)
        runs.append(one_repeat(a.backend, work, a.warmup))
    doc = summarise(runs, work, a.warmup)
    print(f"# gpu decoders ({a.backend}): {mach['gpu']}; {mach['host']}; {a.repeats} x {a.rounds:,} rounds per "
          f"function, {FRAME} B frames, classic, one in flight; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"{'function':<20}{'p50 ns per repeat':>28}{'p99 ns per repeat':>28}{'over echo p50':>15}"
          f"{'p99':>8}{'ns/event':>10}{'events':>8}")
    for fn in FUNCTIONS:
        p50 = " ".join(f"{v:.0f}" for v in doc["round_trip_p50_ns"][fn])
        p99 = " ".join(f"{v:.0f}" for v in doc["round_trip_p99_ns"][fn])
        ex = "" if fn == "echo" else (f"{doc['over_echo_p50_ns'][fn]:>+15.0f}{doc['over_echo_p99_ns'][fn]:>+8.0f}"
                                      f"{doc['per_event_ns'][fn]:>10.1f}{doc['events_mean'][fn]:>8.2f}")
        print(f"{fn:<20}{p50:>28}{p99:>28}{ex}")
    if a.out:
        import yaml
        full = {"schema": SCHEMA, "measured_at": time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime()), "machine": mach,
                "protocol": " ".join(__doc__.split("Protocol: ", 1)[1].split("\n\n", 1)[0].split()),
                "command": "python benchmarks/gpu_decoders.py " + " ".join(argv if argv is not None else sys.argv[1:]),
                **doc}
        a.out.write_text("# The GPU decoders in the cuda backend's persistent kernel, measured live "
                         "(benchmarks/gpu_decoders.py; twin.qec.gpu_cost reads it).\n"
                         + yaml.safe_dump(full, sort_keys=False, width=110))
        print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
