"""Honest live measurement: is the machine quiet enough, and which rounds were stalled.

- :func:`check_isolation` (before a live run): the cores this process may run on
  (``os.sched_getaffinity``), the 1-minute load average against them, and how busy the cores the
  run pins were over a short sample of ``/proc/stat`` (other work on them). Each shortfall is one
  warning line; the run goes ahead (the numbers say what it measured).
- :func:`find_stalls` (after it): rounds whose live service time lies far beyond the service
  distribution -- above ``p50 + k * MAD`` (``k`` = :data:`STALL_K` median absolute deviations) or
  above :data:`STALL_ABS_NS` (1 ms: a time slice, never a poll loop's spread) -- counted as
  stalled (preempted, interrupted, frozen), reported apart and left out of the "clean"
  percentiles; :func:`find_live_stalls` adds the rounds that queued behind one (their round trip
  beyond its own distribution by the same rule, their service normal).
- :func:`find_level_shift` (after it): whether the clean round trip stayed one distribution over
  the run: the medians of :data:`SHIFT_BLOCKS` consecutive blocks of rounds, a Kruskal-Wallis test
  across the blocks (scipy), and a warning when the blocks' medians spread by more than
  :data:`SHIFT_WARN_PCT` of the run's median (the machine changed state mid-run: a thread moved to
  another core or cache domain, a clock changed; the run then measured two machines).
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass

import numpy as np

STALL_K = 20.0          # median absolute deviations above the median that make a round "stalled"
STALL_ABS_NS = 1e6      # 1 ms: a round this long was preempted whatever the distribution
SHIFT_BLOCKS = 10       # consecutive blocks of rounds whose medians find_level_shift compares
SHIFT_WARN_PCT = 2.0    # block medians spread by more than 2 % of the median: the run changed level
SHIFT_P = 1e-3          # ... and the Kruskal-Wallis test across the blocks rejects one distribution
BUSY_WARN = 0.10        # a pinned core busy more than 10 % of a sample with other work: not quiet


def _cpu_times() -> dict[int, tuple[int, int]]:
    """Per cpu: (busy jiffies, total jiffies) from /proc/stat ({} where there is none)."""
    out = {}
    try:
        with open("/proc/stat") as f:
            for line in f:
                if line.startswith("cpu") and line[3].isdigit():
                    name, *v = line.split()
                    v = [int(x) for x in v[:8]]
                    idle = v[3] + v[4]
                    out[int(name[3:])] = (sum(v) - idle, sum(v))
    except OSError:
        pass
    return out


LOAD_SLACK = 0.5
"""Cores of other work (1-minute load average) tolerated before a warning: the average counts the twin's
own imports and set-up just before the check, and a pinned core's own sample says whether it is busy."""
SAMPLE_ALLOWED = 4
"""An unpinned run held (taskset) to at most this many of the machine's cores has each of them sampled
as a pinned core is."""


def check_isolation(pinned: list[int], sample_s: float = 0.2, cpu_consumer: bool = True) -> dict:
    """Before a live run that pins ``pinned`` cores (may be empty): ``cores_allowed`` (count),
    ``load_1min``, ``busy`` (per pinned core, or per allowed core of an unpinned run held to at most
    :data:`SAMPLE_ALLOWED` of the machine's cores (taskset): the fraction of ``sample_s`` it ran
    anything), ``warnings`` (one line each: fewer allowed cores than the run needs, a load average
    leaving the machine's cores fewer free than the run needs by more than :data:`LOAD_SLACK` when
    no core could be sampled (a sample of the run's own cores outranks a decaying average), a
    sampled core busy over :data:`BUSY_WARN`). With no core to sample (none pinned, not held to a
    few cores) it does not wait ``sample_s``. ``cpu_consumer`` False: the
    consumer is not a host thread (a GPU's persistent kernel), so an unpinned run needs one core (the
    twin, which is the producer), not two."""
    allowed = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    # pinned cores (the twin on the producer's), else the twin's and a CPU consumer's
    need = max(len(set(pinned)), 1) + (0 if pinned or not cpu_consumer else 1)
    least = 2 if cpu_consumer else 1
    warnings = []
    if len(allowed) < max(need, least):
        who = "producer and consumer" if cpu_consumer else "the producer; the consumer is the GPU"
        warnings.append(f"{len(allowed)} core(s) allowed, the run needs {max(need, least)} quiet one(s) ({who}): "
                        "they take turns, rounds wait for a time slice")
    # the load average counts runnable tasks on the whole machine: set against the machine's cores (a
    # run held to a few cores by taskset on a large idle host is not loaded by the host's other work);
    # the cores the run may use are sampled one by one below
    cores = os.cpu_count() or len(allowed)
    free = cores - load
    loaded = free < need - LOAD_SLACK  # the twin's own start-up is in the 1-minute average too
    held = len(allowed) < cores and len(allowed) <= SAMPLE_ALLOWED  # taskset to a few of the machine's cores
    sampled = list(pinned) or (allowed if held else [])
    busy = {}
    if sampled:  # none to sample (unpinned, all cores allowed): nothing to wait for
        a = _cpu_times()
        time.sleep(sample_s)
        b = _cpu_times()
    for c in sampled:
        if c in a and c in b and b[c][1] > a[c][1]:
            busy[c] = round((b[c][0] - a[c][0]) / (b[c][1] - a[c][1]), 3)
            if busy[c] > BUSY_WARN:
                warnings.append(f"core {c} ({'pinned' if pinned else 'allowed'}) was {100 * busy[c]:.0f} % busy "
                                "with other work before the run")
    if loaded and not busy:  # the cores the run uses, sampled just now, are the truer witness: a load average
        # still decaying from work that has ended (the minute before) is not other work on them
        warnings.append(f"load average {load:.2f} on {cores} core(s): {max(free, 0):.2f} free, the run "
                        f"{'pins' if pinned else 'needs'} {need}: expect preempted rounds")
    return {"cores_allowed": len(allowed), "load_1min": round(load, 2), "pinned": list(pinned), "busy": busy,
            "warnings": warnings}


@dataclass
class Stalls:
    """Stalled rounds of a live run: ``mask`` (bool per round), ``threshold_ns``, ``count``,
    ``fraction``, ``longest_ns`` (of the service); ``queued``: rounds left out because they waited
    behind a stalled one (:func:`find_live_stalls`; counted in ``mask`` but not in ``count``)."""

    mask: np.ndarray
    threshold_ns: float
    count: int
    fraction: float
    longest_ns: float
    queued: int = 0

    def summary(self) -> dict:
        """For results.json: threshold, count (stalled, ``rounds``), fraction, longest, ``queued_behind``,
        and ``first_rounds``: the first 20 rounds left out (1-based), stalled or queued behind one."""
        return {"threshold_ns": round(self.threshold_ns, 3), "rounds": self.count,
                "fraction": round(self.fraction, 6), "longest_ns": self.longest_ns,
                "queued_behind": self.queued,
                "first_rounds": [int(i) + 1 for i in np.flatnonzero(self.mask)[:20]],
                "rule": f"service > min(p50 + {STALL_K:g} x MAD, {STALL_ABS_NS / 1e6:g} ms); queued behind: "
                        "round trip beyond its own distribution by the same rule"}


def find_stalls(service_ns: np.ndarray, k: float = STALL_K, abs_ns: float = STALL_ABS_NS) -> Stalls:
    """Stalled rounds of a live service-time series (ns per round; see module docstring). The
    median absolute deviation is floored at 1 ns (a service time quantised to one value)."""
    s = np.asarray(service_ns, np.float64)
    if not len(s):
        return Stalls(np.zeros(0, bool), abs_ns, 0, 0.0, 0.0)
    med = float(np.median(s))
    mad = max(float(np.median(np.abs(s - med))), 1.0)
    thr = min(med + k * mad, abs_ns)
    mask = s > thr
    n = int(mask.sum())
    return Stalls(mask, thr, n, n / len(s), float(s[mask].max()) if n else 0.0)


def find_live_stalls(service_ns: np.ndarray, rtt_ps: np.ndarray) -> Stalls:
    """:func:`find_stalls` on the service, plus the rounds whose card-boundary round trip (ps) lies
    beyond its own distribution by the same rule while their service does not: they queued behind
    a stalled round (an open-loop request sent while the device was stalled). ``mask`` holds both."""
    st = find_stalls(service_ns)
    if len(rtt_ps) != len(st.mask) or not len(rtt_ps):
        return st
    behind = find_stalls(np.asarray(rtt_ps, np.float64) / 1000).mask & ~st.mask
    return Stalls(st.mask | behind, st.threshold_ns, st.count, st.fraction, st.longest_ns, int(behind.sum()))


def find_level_shift(rtt_ps: np.ndarray, keep: np.ndarray | None = None, blocks: int = SHIFT_BLOCKS) -> dict | None:
    """Whether a live run's round trip (int ps per round, in order; ``keep``: the rounds to use,
    e.g. not stalled) stayed at one level: split into ``blocks`` consecutive blocks, their medians
    (``block_p50_ns``), the spread of those medians as % of the whole median (``spread_pct``), the
    Kruskal-Wallis p value across the blocks (``kruskal_p``, :func:`scipy.stats.kruskal`) and
    ``shifted``: spread above :data:`SHIFT_WARN_PCT` and p below :data:`SHIFT_P`. None for fewer
    than 50 rounds per block."""
    x = np.asarray(rtt_ps, np.int64)
    if keep is not None and len(keep) == len(x):
        x = x[np.asarray(keep, bool)]
    if len(x) < 50 * blocks:
        return None
    from scipy.stats import kruskal
    parts = np.array_split(x / 1000.0, blocks)
    meds = [float(np.median(b)) for b in parts]
    med = float(np.median(x)) / 1000.0
    spread = 100.0 * (max(meds) - min(meds)) / med if med > 0 else 0.0
    pv = float(kruskal(*parts).pvalue)
    return {"blocks": blocks, "block_p50_ns": [round(m, 3) for m in meds], "spread_pct": round(spread, 3),
            "kruskal_p": pv, "shifted": bool(spread > SHIFT_WARN_PCT and pv < SHIFT_P),
            "rule": f"{blocks} consecutive blocks of the clean rounds: their medians spread > {SHIFT_WARN_PCT:g} % "
                    f"of the median and Kruskal-Wallis p < {SHIFT_P:g}"}
