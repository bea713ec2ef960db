"""What a run's memory grows with, estimated before it runs, and the memory there is to grow into.

A loop that keeps its rounds (every engine, unless the direct engine streams them:
:func:`twin.engine.direct.run_direct` with a batch, ``twin run --engine direct --no-plot`` over 1e6
rounds or ``--chunk-rounds``, the per-round file written batch by batch) holds per round its four
instants, its check and its hop instants (:class:`twin.engine.spec.LoopResult`,
:class:`twin.engine.hops.Hops`, int64 picoseconds), and a
study keeps every loop's until its outputs are written (the per-round file, the histograms). The
whole process's peak was measured (peak RSS, ``ru_maxrss``) against the rounds asked, on a 2-core
shared VM on 2026-12-02, the slope between two round counts:

=========================================================  ==================  ======================
run                                                          rounds             bytes per loop-round
=========================================================  ==================  ======================
one loop, auto engine, rounds.parquet and histograms         1e6 -> 3e6         93
one loop, ``--no-rounds --no-plot`` (rounds still kept)      1e6 -> 3e6         91
five loops (``card_path_64b``), auto, parquet, histograms    1e6 -> 2e6         93
two mesh flows on the event engine                           5e4 -> 1.5e5       118
one loop, event engine                                       1e5 -> 3e5         100
one loop, ``--engine direct --no-rounds --no-plot``          1e6 -> 3e6         0 (streamed)
=========================================================  ==================  ======================

:data:`ROUND_BYTES` bounds them all; :data:`BASE_BYTES` is the process without rounds (the imports:
about 180-220 MB measured). ``twin run --rounds 1e8`` on the five loops of ``card_path_64b`` peaks
near 46 GB by these numbers (the estimate says 60 GB).

A decode study's estimate (:func:`decode_bytes`) counts its shots, their detectors and requests, and
its placements (measured beside its constants).

The memory there is: the least of the system's available memory (``MemAvailable`` in ``/proc/meminfo``,
the number psutil reports on Linux, read without importing it; else ``psutil.virtual_memory().available``
when psutil is installed), what the process's cgroup
still allows (``memory.max`` less ``memory.current``, cgroup v2), and what its address-space limit
(``RLIMIT_AS``, ``ulimit -v``) leaves above its current size (``VmSize`` in ``/proc/self/status``).
"""
from __future__ import annotations

import resource
from pathlib import Path

ROUND_BYTES = 120  # a kept round of one loop or flow, whole process peak (the measurements above, rounded up)
BASE_BYTES = 256 * 2**20  # the process before any round (imports, the compiled core, the figures' library)


def run_bytes(loop_rounds: int, streamed: bool = False) -> int:
    """The estimated peak memory (bytes) of a run that keeps ``loop_rounds`` rounds in all (its
    loops' or flows' rounds added up); ``streamed``: the direct engine streams them in batches, in
    memory independent of the rounds (:data:`BASE_BYTES` alone)."""
    return BASE_BYTES + (0 if streamed else loop_rounds * ROUND_BYTES)


def _meminfo(key: str, path: str = "/proc/meminfo") -> int | None:
    try:
        for line in Path(path).read_text().splitlines():
            name, _, rest = line.partition(":")
            if name == key:
                return int(rest.split()[0]) * 1024  # kB
    except (OSError, ValueError, IndexError):
        return None
    return None


def _cgroup_left() -> int | None:
    """What this process's cgroup (v2) still allows, or None (no limit, or not readable)."""
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            if line.startswith("0::"):
                root = Path("/sys/fs/cgroup") / line[3:].lstrip("/")
                limit = (root / "memory.max").read_text().strip()
                if limit == "max":
                    return None
                return max(0, int(limit) - int((root / "memory.current").read_text()))
    except (OSError, ValueError):
        return None
    return None


def _address_space_left() -> int | None:
    """What ``RLIMIT_AS`` leaves above this process's current address space, or None (no limit)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return None
    size = _meminfo("VmSize", "/proc/self/status") or 0
    return max(0, soft - size)


def available_bytes() -> tuple[int, str] | None:
    """The memory a run may still allocate: ``(bytes, where that number comes from)``, the least of
    the sources in the module's docstring; None when none can be read (not Linux, no psutil)."""
    found = []
    avail = _meminfo("MemAvailable")  # psutil's available memory on Linux is this number; read without it
    if avail is not None:
        found.append((avail, "MemAvailable in /proc/meminfo"))
    else:
        try:
            import psutil  # type: ignore[import-untyped]
            found.append((int(psutil.virtual_memory().available), "available memory (psutil)"))
        except ImportError:
            pass
    cg = _cgroup_left()
    if cg is not None:
        found.append((cg, "the cgroup's memory.max less memory.current"))
    left = _address_space_left()
    if left is not None:
        found.append((left, "the address-space limit (ulimit -v) above this process's size"))
    return min(found) if found else None


STREAM_HINT = "stream a loop's rounds in constant memory (twin run --engine direct --no-plot)"

# A decode study keeps every shot's sample (detection events, observables, stim+PyMatching's
# prediction) and each placement's per-request results until it writes them. Measured as above
# (twin decode, peak RSS slope, 2026-12-02, benchmarks/memory_per_round.py --decode): decode_rep3
# (4 detectors, 1 request a shot, 3 placements) 490-551 B a shot from 1e5 to 3e5 shots;
# decode_surface_d5 (120 detectors, 1 request a shot, 2 placements) 645-661 B a shot from 2e4 to
# 6e4. The estimate below gives 676 and 1,020.
SHOT_BYTES = 300  # a shot's sample and the study's per-shot records
REQUEST_BYTES = 120  # a request's results in one placement (as a loop's round)
DETECTOR_BYTES = 4  # a detector of a shot (its event, the frame bits, the decoders' copies)


def decode_bytes(shots: int, requests_per_shot: int, placements: int, detectors: int) -> int:
    """The estimated peak memory (bytes) of a decode study of ``shots`` shots, each of
    ``requests_per_shot`` requests and ``detectors`` detectors, over ``placements`` placements."""
    return BASE_BYTES + shots * (SHOT_BYTES + REQUEST_BYTES * requests_per_shot * placements
                                 + DETECTOR_BYTES * detectors)


def memory_refusal(need: int, what: str, hint: str) -> str | None:
    """Why ``need`` bytes (estimated as ``what`` says, e.g. "5 x 10^8 rounds x 120 B") would not fit
    in the memory there is (one line with the numbers, ending "ask for fewer ..., or ``hint``"), or
    None (it fits, or the memory cannot be read)."""
    have = available_bytes()
    if have is None or need <= have[0]:
        return None
    return (f"{what} (+ {BASE_BYTES / 2**30:.2f} GiB) need about {need / 2**30:,.1f} GiB; {have[0] / 2**30:,.1f} GiB "
            f"can be allocated ({have[1]}): {hint}")


def run_refusal(loops: int, loop_rounds: int, streamed: bool = False, hint: str = STREAM_HINT) -> str | None:
    """:func:`memory_refusal` for a run of ``loops`` loops or flows keeping ``loop_rounds`` rounds in
    all (``streamed``: none kept, never refused)."""
    return memory_refusal(run_bytes(loop_rounds, streamed), f"{loop_rounds:,} rounds kept over {loops:,} loop(s) x "
                          f"{ROUND_BYTES} B a round", f"ask for fewer rounds, or {hint}")
