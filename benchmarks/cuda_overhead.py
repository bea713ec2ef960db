"""The cuda backend's own overhead: hw_bridge's persistent kernel vs a minimal persistent-kernel
ping-pong on the same queues, and the placements the hardware allows, measured in one run.

Every variant serves 64-byte classic echo requests, one in flight, and every reply is checked byte for
byte. The host side of a round is the same C loop for the bridge and the ping-pong (``hb_batch`` in
hw_bridge/c/hb_producer.c: write the slot image, publish its sequence word last, spin on the reply's
sequence word, compare), timed with CLOCK_MONOTONIC around each round. Variants:

- ``bridge``: hw_bridge's kernel (c/hb_cuda_kernel.cu: a classic echo answered from the warp's burst
  of the slot, with qrt_dispatch_one's checks and qrt_complete's header), queues in pinned, mapped host
  memory, as ``twin run`` drives it live;
- ``bridge paced``: the same kernel driven by the paced loop ``twin run`` uses for a live node
  (``hb_paced``, :class:`hw_bridge.paced.PacedFlow`), back to back (issue 26: within 5 % of the warp
  ping-pong at p50);
- ``bridge via qrt_dispatch_one``: the same kernel built with -DHB_NO_ECHO_PATH: every request
  through the library on the on-chip copy (the dispatch table, as other functions go);
- ``pingpong acquire 1 lane`` / ``volatile 1 lane`` / ``acquire 32 lanes``: benchmarks/cuda_pingpong.cu,
  the minimal kernel (poll the sequence word, copy header and payload, publish) on the same mapped host
  queues: an ``ld.acquire.sys`` poll vs a volatile poll plus a fence once it matches; one thread vs a
  warp copying the slot;
- ``pingpong device queue``: the request queue in device memory, written by the host with two
  ``cudaMemcpyAsync`` (body, then sequence word), the reply queue in mapped host memory (the
  executable built from the same .cu file; its own C host loop).

Variants are interleaved ``--repeats`` times and each one's rounds pooled after ``--warmup``.
Prints p50/p90/p99 per variant and each one's p50 over the fastest minimal ping-pong's (the warp's;
target for the bridge <= 1.10).
Needs an NVIDIA GPU, CuPy and nvcc (hw_bridge.cuda.gpu_available says which is missing).
Usage: PYTHONPATH=. python benchmarks/cuda_overhead.py [--rounds 100000] [--repeats 3]
"""
from __future__ import annotations

import argparse
import ctypes
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from hw_bridge.build import producer_library
from hw_bridge.contract import BridgeSettings
from hw_bridge.cuda import CudaEndpoint, gpu_available
from twin.exchange.encoding import get_encoding
from twin.runtime.native import ENCODINGS

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bridge_overhead import frames, print_pooled  # noqa: E402  (the shm benchmark's images and table)

SLOTS = 16


def build(arch: str) -> tuple[Path, Path]:
    """nvcc the ping-pong kernel (cubin) and its device-queue executable into a temporary folder."""
    out = Path(tempfile.gettempdir()) / "twin-cuda-pingpong"
    out.mkdir(exist_ok=True)
    src = HERE / "cuda_pingpong.cu"
    cubin, exe = out / "pp.cubin", out / "cuda_pingpong"
    subprocess.run(["nvcc", f"-arch=sm_{arch}", "-O2", "-cubin", "-o", str(cubin), str(src)], check=True)
    subprocess.run(["nvcc", f"-arch=sm_{arch}", "-O2", "-o", str(exe), str(src)], check=True)
    return cubin, exe


def bridge(total: int, payload: int, enc, slot_bytes: int, defines: tuple[str, ...] = ()) -> np.ndarray:
    """Round trips (ns) of hw_bridge's cuda backend, ``total`` rounds in one hb_batch; ``defines``:
    the kernel's build macros (:func:`hw_bridge.cuda.kernel_cubin`)."""
    ep = CudaEndpoint(BridgeSettings("cuda", timeout_ns=2_000_000_000))
    ep.kernel_defines = defines
    ep.open(slot_bytes, SLOTS, "classic")
    try:
        img, ln, exp, eln = frames(total, 1, payload, enc, slot_bytes)
        t0, t1, bad = ep.batch(img, ln, exp, eln, first_seq=1)
        if bad.any():
            raise SystemExit(f"bridge: {int(bad.sum())} wrong replies")
    finally:
        ep.close()
    return t1 - t0


def paced(total: int, payload: int, enc, slot_bytes: int) -> np.ndarray:
    """Round trips (ns) of the bridge driven as ``twin run`` drives a live cuda node at its pace
    (:class:`hw_bridge.paced.PacedFlow`, ``hb_paced``: each request at its simulated instant, here
    back to back: a closed loop with no gap after each reply), ``total`` rounds, no Python between
    the rounds of one call: sent -> reply seen."""
    from hw_bridge.paced import PacedFlow, Pacing
    ep = CudaEndpoint(BridgeSettings("cuda", timeout_ns=2_000_000_000))
    ep.open(slot_bytes, SLOTS, "classic")
    try:
        img, ln, exp, eln = frames(total, 1, payload, enc, slot_bytes)
        flow = PacedFlow(ep, np.zeros(total, np.int64), True, Pacing(chunk=total, call_s=60.0))
        while flow.done < total:
            d = flow.done
            flow.step(img[d:], ln[d:], exp[d:], eln[d:])
        if flow.bad.any():
            raise SystemExit(f"paced: {int(flow.bad.sum())} wrong replies")
        late = flow.lateness_ns()
    finally:
        ep.close()
    print(f"# paced: lateness p50 {np.percentile(late, 50):.0f} ns, p99 {np.percentile(late, 99):.0f} ns, "
          f"{flow.late_rounds} rounds late (> {flow.pacing.late_ns} ns)", file=sys.stderr)
    return flow.seen - flow.sent


def pingpong(cubin: Path, total: int, payload: int, enc, slot_bytes: int, lanes: int, acquire: int) -> np.ndarray:
    """Round trips (ns) of the minimal kernel on mapped host queues laid out as the bridge's."""
    import cupy
    rt = cupy.cuda.runtime
    qbytes = SLOTS * slot_bytes
    total_bytes = 4096 + 2 * qbytes
    host = rt.hostAlloc(total_bytes, rt.hostAllocMapped)
    try:
        ctypes.memset(host, 0, total_bytes)
        req, rep, stop, served = host + 4096, host + 4096 + qbytes, host, host + 128
        kern = cupy.RawModule(path=str(cubin)).get_function("pp_kernel")
        stream = cupy.cuda.Stream(non_blocking=True)
        nbytes = 16 + -(-payload // 16) * 16
        with stream:
            kern((1,), (lanes,), (np.uint64(req), np.uint64(rep), np.uint32(slot_bytes), np.uint32(SLOTS),
                                  np.uint32(nbytes), np.int32(acquire), np.uint64(stop), np.uint64(served)))
        img, ln, exp, eln = frames(total, 1, payload, enc, slot_bytes)
        t0 = np.zeros(total, np.int64)
        t1 = np.zeros(total, np.int64)
        bad = np.zeros(total, np.uint8)
        lib = producer_library()
        done = lib.hb_batch(req, rep, slot_bytes, SLOTS, ENCODINGS["classic"], img.ctypes.data, ln.ctypes.data,
                            exp.ctypes.data, eln.ctypes.data, img.shape[1], total, 2_000_000_000, t0.ctypes.data,
                            t1.ctypes.data, bad.ctypes.data, None)
        ctypes.c_uint32.from_address(stop).value = 1
        stream.synchronize()
        if done != total or bad.any():
            raise SystemExit(f"pingpong lanes={lanes} acquire={acquire}: {done} of {total} rounds, "
                             f"{int(bad.sum())} wrong replies")
        return t1 - t0
    finally:
        rt.freeHost(host)


def device_queue(exe: Path, total: int, payload: int) -> np.ndarray:
    """Round trips (ns) with the request queue in device memory written by cudaMemcpyAsync."""
    out = subprocess.run([str(exe), str(total), str(payload), "1", "1"], check=True, capture_output=True, text=True)
    return np.array(out.stdout.split("rounds:\n", 1)[1].split(), np.int64)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--payload", type=int, default=64)
    ap.add_argument("--warmup", type=int, default=5_000)
    a = ap.parse_args(argv)
    ok, name = gpu_available(0)
    if not ok:
        print(f"cuda_overhead: {name}", file=sys.stderr)
        return 1
    import cupy
    cc = cupy.cuda.Device(0).compute_capability
    t = time.monotonic()
    cubin, exe = build(cc)
    print(f"# built the ping-pong in {time.monotonic() - t:.1f} s", file=sys.stderr)
    enc = get_encoding("classic")
    slot_bytes = -(-enc.slot_bytes(a.payload) // 16) * 16
    total = a.warmup + a.rounds
    variants = {
        "bridge": lambda: bridge(total, a.payload, enc, slot_bytes),
        "bridge paced (twin run's live path)": lambda: paced(total, a.payload, enc, slot_bytes),
        "bridge via qrt_dispatch_one": lambda: bridge(total, a.payload, enc, slot_bytes, ("HB_NO_ECHO_PATH",)),
        "pingpong acquire 1 lane": lambda: pingpong(cubin, total, a.payload, enc, slot_bytes, 1, 1),
        "pingpong volatile 1 lane": lambda: pingpong(cubin, total, a.payload, enc, slot_bytes, 1, 0),
        "pingpong acquire 32 lanes": lambda: pingpong(cubin, total, a.payload, enc, slot_bytes, 32, 1),
        "pingpong device queue": lambda: device_queue(exe, total, a.payload),
    }
    pooled: dict[str, list[np.ndarray]] = {k: [] for k in variants}
    for r in range(a.repeats):
        for k, run in variants.items():
            print(f"# repeat {r + 1}/{a.repeats}: {k}", file=sys.stderr, flush=True)
            pooled[k].append(run()[a.warmup:])
    print(f"# cuda overhead: {name}, host {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}, load average {os.getloadavg()[0]:.2f}, "
          f"{time.strftime('%Y-%m-%d')}; {a.repeats} x {a.rounds:,} rounds each, {a.payload} B payload, classic")
    print_pooled(pooled, "pingpong acquire 32 lanes", ("variant", 36), ("/ warp pingpong", 16),
                 lambda p50, base: f"{p50 / base:>16.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
