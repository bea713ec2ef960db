"""A decoder's cost per call as a real-time host pays it: measured one request at a time, shipped
as a file per decoder and workload, drawn from that file in a decode study (``decode.cost.how:
measured``, the default).

Measuring (:func:`measure`), on a sample of the workload's own requests (its event distribution,
not stratified), warm (``warmup`` untimed calls first), the garbage collector off, in one seeded
order:

- **through Python**: each request is one call of the decoder's Python entry point on that one
  syndrome, :meth:`twin.qec.decoders.Decoder.decode_shots_bit_packed` on a (1, ceil(D/8)) uint8 array
  (PyMatching: ``Matching.decode_batch`` of one bit-packed shot; BP+OSD: stimbposd's compiled
  decoder; the lookup table: its numpy index), timed with ``time.perf_counter_ns`` around the call;
  the timer's own cost (median of 20,000 back-to-back ``perf_counter_ns`` pairs) is subtracted.
- **native**: the same syndrome repeated ``R`` times is decoded in one call (the binding's
  per-call work ``O`` is paid once); the request's native time is ``(batch - O) / R``.
  ``O`` comes from each number of detection events' requests decoded in turn in chunks of ``R``
  (each chunk once a pass, the least kept): through Python they cost ``n O + sum(native)``, in ``c``
  chunks ``c O + sum(native)`` (:func:`_overhead`; preempted calls clipped).
  ``R`` is chosen from a pilot so that ``R - 1`` copies of the native work exceed the binding's
  per-call overhead 20 times (2 <= R <= 8,192, and R copies at most :data:`MAX_BATCH_NS`).
  The requests are gone through :data:`PASSES` times,
  spread over the measurement (a busy spell of a shared host falls on one pass, not on all the
  timings of a request); a pass times every request's call through Python one after another (as a
  host's decoding loop makes them), then every request's batch. Each batch keeps its least timing
  over the passes: the decoder's own work on a core nobody else takes (a real-time host's isolated
  core); each request's call through Python comes from one pass (request k from pass k mod PASSES).
  A syndrome repeated is decoded faster than a new one each call (the branch predictor and the
  decoder's state have seen it), so each number of detection events gets its level from its own
  requests' syndromes decoded in turn in chunks of ``R`` (as long as a repeated batch, so no more
  often preempted; less ``O`` a chunk, over their number; an event count with fewer than
  :data:`MIN_LEVEL` requests takes the whole sample's): the request's
  repeated-syndrome time times (that batch's time per shot / the count's mean repeated-syndrome
  time). The repeated batches give the spread between syndromes, the batch of distinct ones the level.
  The binding's per-call overhead is measured apart: through-Python minus native, request by request.

What the native tail holds: the syndrome's own spread (events, where they lie); a host interruption
is spread over a batch's ``R`` copies and mostly dropped by the least of its timings, so the native
tail leaves out a shared host's preemptions, which the through-Python sample keeps. The file
records ``O`` and the level ratios (``native_check``).

Drawing (:meth:`PerCall.draw_ns`): a request with ``e`` detection events takes the time of a
measured call with ``e`` events, picked uniformly (numpy ``default_rng([seed, DRAW_STREAM])``: the
same seed gives the same times); an event count the sample lacks takes the nearest one's calls plus
the Theil-Sen slope of the per-event-count medians times the difference. For the workload the file
was measured on, the draws follow the measured per-call distribution (its quantiles, its tail).

Carrying to another CPU (:func:`host_factor`, ``calibrations/decoder_hosts.yaml``): an assumption,
stated in every result: the time scales as the inverse of single-thread performance (clock x IPC).
"""
from __future__ import annotations

import base64
import gc
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from pydantic import Field

from twin.config.strict import StrictByName
from twin.qec.decoders import Decoder

SCHEMA = "twin.decoder_percall/1"
CALLS = ("native", "python")  # how a placement calls the decoder
QUANTILES = (("p50", 50.0), ("p90", 90.0), ("p99", 99.0), ("p99.9", 99.9))
DRAW_STREAM = 0xCA11  # the random stream of the per-call draws, beside the scenario seed
FOLDER = Path("calibrations") / "measured" / "decoders"
HOSTS = Path("calibrations") / "decoder_hosts.yaml"
MAX_REPEAT = 8192  # R copies of a syndrome stay in L2 (a larger batch evicts what the next call needs)
MAX_BATCH_NS = 500_000  # a repeated batch's length at most (so that it is seldom preempted)
MIN_LEVEL = 20  # an event count with this many requests gets its own level (module docstring)
PASSES = 3  # passes over the requests: each native batch's least timing kept (module docstring)


@dataclass
class Sample:
    """One workload's measured calls, request by request: ``events`` int64 (n,), ``python_ns``
    int64 (n,) (timer cost subtracted), ``native_ns`` float64 (n,) (>= 0); ``repeat`` R of the
    native batches; ``timer_ns`` the timer cost subtracted; ``native_check``: the mean per shot of the
    whole sample in one batch beside the native mean (ns)."""

    events: np.ndarray
    python_ns: np.ndarray
    native_ns: np.ndarray
    repeat: int
    timer_ns: int
    native_check: dict = field(default_factory=dict)

    @property
    def binding_ns(self) -> np.ndarray:
        """The binding's per-call overhead, request by request: through Python minus native (ns)."""
        return self.python_ns - self.native_ns


_clock = time.perf_counter_ns  # the timer (a test puts a virtual clock here)


def timer_cost_ns(n: int = 20_000) -> int:
    """Median nanoseconds of two back-to-back ``time.perf_counter_ns`` calls on this host."""
    pc = _clock
    t = np.empty(n, np.int64)
    for i in range(n):
        a = pc()
        t[i] = pc() - a
    return int(np.median(t))


def _time(f, x) -> int:
    pc = _clock
    t0 = pc()
    f(x)
    return pc() - t0


def _repeat(decoder: Decoder, rows: list, timer: int) -> int:
    """R from a pilot (module docstring): the binding's overhead against the native work."""
    f = decoder.decode_shots_bit_packed
    one = np.median([_time(f, r) for r in rows]) - timer
    big = np.median([_time(f, np.repeat(r, 64, axis=0)) for r in rows[:50]]) - timer
    native = max((big - one) / 63, 0.05)
    want = 1 + np.ceil(20 * max(one - native, 0.0) / native)
    return int(np.clip(min(want, MAX_BATCH_NS / native), 2, MAX_REPEAT))


def measure(decoder: Decoder, syndromes: np.ndarray, events: np.ndarray, calls: int, *, warmup: int = 1000,
            seed: int = 0, progress=None) -> Sample:
    """Time ``calls`` requests of a workload (``syndromes`` uint8 (shots, ceil(D/8)), ``events``
    int (shots,)) through Python and natively (module docstring). ``progress(done, total)`` every
    500 requests of each pass. Raises ValueError for calls < 1 or no shots."""
    syn = np.ascontiguousarray(syndromes, np.uint8)
    ev = np.asarray(events, np.int64)
    if calls < 1 or len(syn) == 0 or len(ev) != len(syn):
        raise ValueError(f"calls {calls} of {len(syn)} shots ({len(ev)} event counts): need at least one of each")
    rng = np.random.default_rng([seed, 0x7113])
    pick = np.concatenate([rng.permutation(len(syn)) for _ in range(-(-calls // len(syn)))])[:calls]
    rows = [syn[i:i + 1].copy() for i in pick]
    f = decoder.decode_shots_bit_packed
    for i in range(warmup):  # caches, branch predictors, lazy initialisation
        f(rows[i % len(rows)])
    timer = timer_cost_ns()
    R = _repeat(decoder, rows[:200], timer)
    py = np.empty((PASSES, calls), np.int64)
    batch = np.empty((PASSES, calls), np.int64)
    e = ev[pick]
    # each event count's requests in chunks of R distinct syndromes: as long as a repeated batch, so a
    # chunk is preempted no more often than one (a long batch on a busy host always would be)
    chunks = {int(k): [syn[c] for c in np.array_split(pick[e == k], max(1, int((e == k).sum()) // R))]
              for k in np.unique(e)}
    level = {k: np.full(len(v), np.iinfo(np.int64).max) for k, v in chunks.items()}
    was = gc.isenabled()
    gc.disable()
    try:
        for n in range(PASSES):  # passes spread in time: a busy spell of a shared host falls on one of them
            for k, row in enumerate(rows):  # one call after another, as a host's decoding loop makes them
                py[n, k] = _time(f, row) - timer
            for k, row in enumerate(rows):
                batch[n, k] = _time(f, np.repeat(row, R, axis=0)) - timer
                if progress and k % 500 == 499:
                    progress(n * calls + k + 1, PASSES * calls)
            for k, cs in chunks.items():
                level[k] = np.minimum(level[k], [_time(f, c) - timer for c in cs])
    finally:
        if was:
            gc.enable()
    py = py[np.arange(calls) % PASSES, np.arange(calls)]  # each request's call through Python from one pass
    batch = batch.min(axis=0)
    overhead = _overhead(py, e, level)
    rep = np.maximum(batch - overhead, 0.0) / R
    native = np.empty(calls, np.float64)
    ratio = {}
    for k, t in level.items():  # each event count's level: its requests' syndromes in turn, less O a chunk
        sel = e == k
        n = int(sel.sum())
        lv = max(float(t.sum()) - overhead * len(t), 0.0) / n
        ratio[k] = lv / rep[sel].mean() if rep[sel].mean() > 0 and n >= MIN_LEVEL else None
    per_shot = max(sum(float(t.sum()) for t in level.values()) - overhead * sum(len(t) for t in level.values()),
                   0.0) / calls
    whole = per_shot / rep.mean() if rep.mean() > 0 else 1.0
    for k in level:
        sel = e == k
        native[sel] = rep[sel] * (ratio[k] if ratio[k] is not None else whole)
    check = {"binding_overhead_ns": round(overhead, 1),
             "batch_of_the_sample_mean_ns_per_shot": round(float(per_shot), 1),
             "repeated_syndrome_mean_ns": round(float(rep.mean()), 1), "native_mean_ns": round(float(native.mean()), 1),
             "level_ratio_by_events": {k: (round(float(v), 3) if v is not None else None) for k, v in ratio.items()},
             "level_ratio_whole": round(float(whole), 3)}
    if progress:
        progress(PASSES * calls, PASSES * calls)
    return Sample(e, py, native, R, timer, check)


def _overhead(py: np.ndarray, e: np.ndarray, level: dict) -> float:
    """The binding's per-call overhead O (ns): an event count's requests through Python cost
    ``n_k O + sum(native)``, its chunks ``c_k O + sum(native)``, so O = (the through-Python sums - the
    chunks) / (calls - chunks); a preempted call (above its count's median + 10 MAD) counts at that
    bound."""
    from scipy.stats import median_abs_deviation
    total, n_chunks = 0.0, 0
    for k, t in level.items():
        x = py[e == k].astype(np.float64)
        total += float(np.minimum(x, np.median(x) + 10 * median_abs_deviation(x)).sum()) - float(t.sum())
        n_chunks += len(t)
    return max(total / max(len(py) - n_chunks, 1), 0.0)


# -- quantiles, with their uncertainty ---------------------------------------------------------

def quantiles(x: np.ndarray, seed: int = 0, boot: int = 200) -> dict:
    """p50/p90/p99/p99.9, mean and max of ``x`` (ns), each percentile with its bootstrap 95 %
    interval (``boot`` resamples): ``{"p50": v, ..., "mean": m, "max": M, "ci95": {"p50": [lo, hi], ...}}``."""
    from twin.stats import percentile
    a = np.asarray(x, np.float64)
    qs = [q for _, q in QUANTILES]
    out = {k: round(float(v), 1) for (k, _), v in zip(QUANTILES, percentile(a, qs))}
    rng = np.random.default_rng([seed, 0xB007])
    bs = np.array([percentile(a[rng.integers(0, len(a), len(a))], qs) for _ in range(boot)])
    lo, hi = np.percentile(bs, [2.5, 97.5], axis=0)
    out.update(mean=round(float(a.mean()), 1), max=round(float(a.max()), 1),
               ci95={k: [round(float(a_), 1), round(float(b_), 1)] for (k, _), a_, b_ in zip(QUANTILES, lo, hi)})
    return out


# -- the sample in the file --------------------------------------------------------------------

def encode_sample(s: Sample) -> dict:
    """The per-request sample, compressed: rows sorted by (events, python_ns), three little-endian
    columns (events uint16, python_ns int32, native in 0.1 ns uint32), concatenated, zlib level 9,
    base64 (ASCII)."""
    order = np.lexsort((s.python_ns, s.events))
    cols = [s.events[order].astype("<u2"), np.clip(s.python_ns[order], -2**31, 2**31 - 1).astype("<i4"),
            np.rint(s.native_ns[order] * 10).astype("<u4")]
    raw = b"".join(c.tobytes() for c in cols)
    return {"rows": int(len(order)), "encoding": "zlib+base64: events <u2, python_ns <i4, native_ns*10 <u4, "
                                                 "columns concatenated, rows sorted by (events, python_ns)",
            "data": base64.b64encode(zlib.compress(raw, 9)).decode("ascii")}


def decode_sample(doc: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(events int64, python_ns int64, native_ns float64) from :func:`encode_sample`'s mapping.
    Raises ValueError for data of the wrong length."""
    n = int(doc["rows"])
    raw = zlib.decompress(base64.b64decode(doc["data"]))
    if len(raw) != 10 * n:
        raise ValueError(f"{len(raw)} bytes for {n} rows (10 a row)")
    ev = np.frombuffer(raw[:2 * n], "<u2").astype(np.int64)
    py = np.frombuffer(raw[2 * n:6 * n], "<i4").astype(np.int64)
    nat = np.frombuffer(raw[6 * n:], "<u4").astype(np.float64) / 10
    return ev, py, nat


_Strict = StrictByName


class _Workload(_Strict):
    code: str | None = None
    circuit: str | None = None
    circuit_sha256: str | None = None
    distance: int | None = None
    rounds: int | None = None
    p: float | None = None
    noise: str | None = None
    per: str = "shot"
    detectors: int
    events: dict


class _Sample(_Strict):
    rows: int = Field(gt=1)
    encoding: str
    data: str


class PerCallFile(_Strict):
    """A per-call decoder-cost file (``calibrations/measured/decoders/*.yaml``, schema
    ``twin.decoder_percall/1``), written by ``twin calibrate decoder``."""

    schema_: str = Field(alias="schema", pattern=r"^twin\.decoder_percall/1$")
    description: str = ""
    decoder: str
    implementation: str
    workload: _Workload
    machine: dict
    host_class: str
    conditions: str
    measured_at: str
    command: str
    seed: int
    warmup: int = Field(ge=0)
    calls: int = Field(gt=1)
    timer_ns: float = Field(ge=0)
    native_repeat: int = Field(ge=2)
    native_check: dict
    python_ns: dict
    native_ns: dict
    binding_ns: dict
    per_event: dict
    sample: _Sample


# -- a loaded file, and its draws --------------------------------------------------------------

@dataclass
class PerCall:
    """A loaded per-call file: the sample (``events``, ``python_ns``, ``native_ns``), the slope of
    the per-event-count medians for each call (``slope_ns``), and what the file says (``doc``:
    the validated mapping, ``file``: its path as given)."""

    events: np.ndarray
    python_ns: np.ndarray
    native_ns: np.ndarray
    slope_ns: dict
    doc: dict
    file: str

    def times(self, call: str) -> np.ndarray:
        """The measured times of ``call`` (native | python), float64 ns (n,)."""
        return self.native_ns if call == "native" else self.python_ns.astype(np.float64)

    def draw_ns(self, events: np.ndarray, call: str, seed: int) -> np.ndarray:
        """One time per request, float64 ns (n,), for requests with ``events`` (int (n,)): a measured
        call of the same event count (module docstring). Deterministic for ``seed``."""
        ev = np.asarray(events, np.int64)
        t = self.times(call)
        have = np.unique(self.events)
        rng = np.random.default_rng([seed, DRAW_STREAM])
        u = rng.random(len(ev))
        out = np.empty(len(ev), np.float64)
        for k in np.unique(ev):
            g = have[np.argmin(np.abs(have - k))]
            group = np.sort(t[self.events == g])
            sel = ev == k
            out[sel] = group[np.minimum((u[sel] * len(group)).astype(np.int64), len(group) - 1)] \
                + self.slope_ns[call] * (k - g)
        return np.maximum(out, 0.0)

    def source(self) -> dict:
        """Where the numbers come from, for results.json."""
        m = self.doc["machine"]
        return {"file": self.file, "machine": m.get("cpu"), "host_class": self.doc["host_class"],
                "conditions": self.doc["conditions"], "measured_at": self.doc["measured_at"],
                "calls": self.doc["calls"], "packages": m.get("packages")}


def _slope(events: np.ndarray, ns: np.ndarray) -> float:
    from twin.qec.cost_fit import _line
    return max(_line(events, np.asarray(ns, np.float64), 20)[1], 0.0)


def load_percall(path: str | Path, shown: str | None = None) -> PerCall:
    """Read a per-call file; raises :class:`twin.config.ConfigError` naming the file, key and value."""
    from twin.config import ConfigError, load_model
    doc = load_model(Path(path), PerCallFile)
    try:
        ev, py, nat = decode_sample(doc.sample.model_dump())
    except (ValueError, zlib.error, TypeError) as e:
        raise ConfigError(Path(path), "sample.data", "<data>", f"not the encoded sample ({e})") from None
    return PerCall(ev, py, nat, {"native": _slope(ev, nat), "python": _slope(ev, py)},
                   doc.model_dump(by_alias=True), shown or str(path))


def file_name(decoder: str, code: str | None, distance: int | None, rounds: int | None, p: float | None,
              noise: str | None, per: str = "shot", circuit: str | None = None, sha: str | None = None) -> str:
    """The file name of a workload's per-call measurement: ``matching_surface_d5_r5_p0.001_circuit.yaml``,
    ``..._per-round`` for per-round requests, ``matching_circuit-NAME-SHA8.yaml`` for a circuit file."""
    tail = "" if per == "shot" else f"_per-{per}"
    if circuit is not None:
        return f"{decoder}_circuit-{Path(circuit).stem}-{(sha or '')[:8]}{tail}.yaml"
    dist = "" if code and code.startswith("bb") else f"_d{distance}"  # a BB code's distance is its own
    return f"{decoder}_{code}{dist}_r{rounds}_p{p:g}_{noise}{tail}.yaml"


def shipped(wanted: str, decoder: str, code: str | None, distance: int, rounds: int, p: float,
            folder: Path | None = None) -> tuple[Path | None, bool]:
    """The shipped per-call file for a workload: (``wanted`` in the bundled :data:`FOLDER`, True),
    else (the nearest file of the same ``decoder``, False): same code first, then the nearest
    distance, rounds and p (log); files of another request kind (``_per-...``) or circuit files
    only when nothing else is there. (None, False) when the decoder has none."""
    from twin.bundled import bundled_path
    root = folder or bundled_path(FOLDER)
    if (root / wanted).is_file():
        return root / wanted, True
    import math
    import re
    pat = re.compile(rf"^{re.escape(decoder)}_([a-z0-9]+)(?:_d(\d+))?_r(\d+)_p([0-9.e+-]+)_([a-z_]+?)"
                     r"(_per-[a-z]+)?\.yaml$")
    best = None
    for f in sorted(root.glob(f"{decoder}_*.yaml")):
        m = pat.match(f.name)
        if m is None:
            key = (2, 0, 0, 0.0, 0.0)
        else:
            c, dd, rr, pp, _, per = m.groups()
            key = (1 if per else 0, int(c != code), abs(int(dd or distance) - distance), abs(int(rr) - rounds),
                   abs(math.log10(float(pp) / p)) if p > 0 and float(pp) > 0 else 0.0)
        if best is None or key < best[0]:
            best = (key, f)
    return (best[1] if best else None), False


# -- carrying to another CPU -------------------------------------------------------------------

def measuring_class(machine: dict, hosts: HostsFile | None = None) -> str:
    """The host class of a measuring machine (:func:`twin.qec.cost_fit.machine`): the table's
    reference when its CPU family and model, logical CPUs and VM flag are the reference's, else
    ``unlisted: <cpu>`` (a measurement that is not carried to other classes)."""
    ref = (hosts or load_hosts()).reference
    same = (machine.get("cpu_family_model") == ref.cpu_family_model and machine.get("logical_cpus") == ref.logical_cpus
            and bool(machine.get("virtual_machine")) == ref.virtual_machine)
    return ref.host_class if same else f"unlisted: {machine.get('cpu')}"


class _HostClass(_Strict):
    cpu: str
    clock_ghz: float = Field(gt=0)
    ipc_vs_zen4: float = Field(gt=0)
    sources: str
    devices: list[str] = Field(min_length=1)


class _Reference(_Strict):
    host_class: str
    cpu: str
    cpu_family_model: list[int] = Field(min_length=2, max_length=2)
    logical_cpus: int = Field(gt=0)
    virtual_machine: bool
    clock_ghz: float = Field(gt=0)
    ipc_vs_zen4: float = Field(gt=0)
    sources: str


class HostsFile(_Strict):
    """``calibrations/decoder_hosts.yaml``: the measuring host class and the classes a measurement
    is carried to, each a clock and an IPC relative to Zen 4 with their sources."""

    schema_: str = Field(alias="schema", pattern=r"^twin\.decoder_hosts/1$")
    assumption: str
    reference: _Reference
    classes: dict[str, _HostClass]


def load_hosts(path: Path | None = None) -> HostsFile:
    """The host-class table (default: the bundled one). Raises ConfigError."""
    from twin.bundled import bundled_path
    from twin.config import load_model
    return load_model(path or bundled_path(HOSTS), HostsFile)


def host_factor(device: str, host: str | None, measured_class: str,
                hosts: HostsFile | None = None) -> tuple[float, str]:
    """(factor, how) to carry a per-call time measured on host class ``measured_class`` to the CPU
    of ``device`` (a consumer name) on ``host`` (its host in the parameter set): (clock x IPC of the
    measuring class) / (clock x IPC of the class listing the device or its host). A device no class
    lists, or one of the measuring class itself: 1.0, said so."""
    h = hosts or load_hosts()
    ref = h.reference
    if measured_class != ref.host_class:
        return 1.0, f"measured on {measured_class}, not the table's reference {ref.host_class}: not carried (x1)"
    cls = next((k for k, c in h.classes.items() if device in c.devices or host in c.devices), None)
    if cls is None or cls == ref.host_class:
        return 1.0, f"{device}: the measuring host class ({ref.host_class}) itself" if cls else \
            f"{device}: no host class in {HOSTS} lists it; taken as fast as {ref.host_class} (assumption, x1)"
    c = h.classes[cls]
    f = (ref.clock_ghz * ref.ipc_vs_zen4) / (c.clock_ghz * c.ipc_vs_zen4)
    return f, (f"carried from {ref.host_class} to {cls} ({c.cpu}) by single-thread performance "
               f"(clock x IPC, {ref.clock_ghz:g} GHz x {ref.ipc_vs_zen4:g} / {c.clock_ghz:g} GHz x "
               f"{c.ipc_vs_zen4:.3g}; an assumption, {HOSTS}): x{f:.3f}")
