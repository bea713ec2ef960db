"""A host runtime between the request landing and the decoder call: dispatcher, queue, worker.

A real-time decoding host does not run the decoder in the thread that polls the request ring: a
dispatcher thread claims the request and enqueues it to a worker queue, a worker thread wakes
(spinning, or blocked on a futex), decodes, and hands the result back to the dispatcher, which
publishes the reply. :class:`HostRuntime` adds those stages to a consumer, drawn per round from a
live measurement (``calibrations/measured/host_runtime/*.yaml``, schema ``twin.host_runtime/1``,
written by ``benchmarks/host_runtime.py`` from ``hw_bridge/c/hb_host_runtime.c``):

- ``host_enqueue``: the dispatcher has the request (the consumer's ``start``) -> it is in the
  worker queue;
- ``host_wake``: -> the worker has it (its spin or its futex wait returned);
- ``service``: the consumer's own read and function body (the decoder's cost: the scenario's, not
  the harness's lookup);
- ``host_handback``: the worker pushed the result back -> the dispatcher has it and issues the
  reply (the consumer's ``reply``).

The measured file holds, per wake mode, points at several gaps; each point the worker's measured
idle time before a request (median, ns) and its per-request stage times. A round takes the point
whose median idle is nearest (in log time) to its own idle gap (the consumer's thread free -> the
poll that took the request, as the idle cost uses: :mod:`twin.devices.service`) and, from one
uniform draw of stream ``<loop>.consumer.host_runtime``, one measured request of that point: its
enqueue, wake and hand-back together (the stages' dependence kept), in integer ps (ns x 1000).
The dispatcher does not poll again before it has published (one worker, one request at a time).
Both engines call :meth:`HostRuntime.stages_ps` with the same draw and gap, so their instants are
identical (``tests/test_host_runtime.py``); the compiled core computes it likewise, both its direct
recurrence and its event core, from the same draws (:mod:`twin.engine.service_core`,
``tests/test_core_service_extra.py``).
"""
from __future__ import annotations

import base64
import functools
import math
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from twin.kernel.sim import stream_rng

SCHEMA = "twin.host_runtime/1"
WAKES = ("spin", "block")
INNER = ("hr_enqueued", "hr_awake", "hr_decoded")
"""The host runtime's instants per round between ``start`` and ``reply`` (``Hops.inner``)."""
BEFORE, AFTER = ("host_enqueue", "host_wake"), ("host_handback",)
"""The host runtime's stages before and after the consumer's ``service`` in the budget."""
STREAM = "consumer.host_runtime"


@dataclass(frozen=True, eq=False)
class HostRuntime:
    """Measured host-runtime stages of one wake mode.

    name: the measured file's name (shown); wake: "spin" | "block"; idle_ps: per point, its median
    measured idle (ps, > 0, increasing); enqueue_ps, wake_ps, handback_ps: per point, its per-request
    times (int64 ps, one array per point, equal lengths within a point, at least one request).
    Raises ValueError for an unknown wake, no points, or points out of shape.
    """

    name: str
    wake: str
    idle_ps: tuple[int, ...]
    enqueue_ps: tuple[np.ndarray, ...]
    wake_ps: tuple[np.ndarray, ...]
    handback_ps: tuple[np.ndarray, ...]

    def __post_init__(self):
        if self.wake not in WAKES:
            raise ValueError(f"wake must be one of {', '.join(WAKES)}, got {self.wake!r}")
        k = len(self.idle_ps)
        if not k or not (len(self.enqueue_ps) == len(self.wake_ps) == len(self.handback_ps) == k):
            raise ValueError(f"{self.name}: no measured points of wake {self.wake}, or points out of shape")
        if any(b <= a for a, b in zip(self.idle_ps, self.idle_ps[1:])) or self.idle_ps[0] <= 0:
            raise ValueError(f"{self.name}: the points' idle times must be > 0 and increasing")
        for e, w, h in zip(self.enqueue_ps, self.wake_ps, self.handback_ps):
            if not len(e) or not (len(e) == len(w) == len(h)) or min(e.min(), w.min(), h.min()) < 0:
                raise ValueError(f"{self.name}: a point without requests, or a negative stage time")

    def __repr__(self) -> str:
        return f"HostRuntime({self.name!r}, wake={self.wake!r})"

    def draws(self, seed: int, stream: str, n: int) -> np.ndarray:
        """``n`` uniform draws in [0, 1), one per round, from stream ``stream`` of ``seed`` (round
        i's does not depend on ``n``)."""
        return stream_rng(seed, stream).random(n)

    def point(self, gap_ps: int) -> int:
        """The point whose median idle is nearest to ``gap_ps`` in log time (< 1 ps counts as 1 ps)."""
        g = math.log(max(1, gap_ps))
        return min(range(len(self.idle_ps)), key=lambda k: abs(math.log(self.idle_ps[k]) - g))

    def stages_ps(self, u: float, gap_ps: int) -> tuple[int, int, int]:
        """(enqueue, wake, hand-back) in ps of the round with draw ``u`` and idle gap ``gap_ps``:
        request ``floor(u * rows)`` of the nearest point."""
        k = self.point(gap_ps)
        e = self.enqueue_ps[k]
        i = min(len(e) - 1, int(u * len(e)))
        return int(e[i]), int(self.wake_ps[k][i]), int(self.handback_ps[k][i])


def decode_sample(doc: dict) -> dict[str, np.ndarray]:
    """{column: int64 ns} of a point's ``sample`` (zlib+base64, per column <u4 ns, concatenated;
    ``hw_bridge.host_runtime.encode_sample``). Raises ValueError when its size does not match."""
    raw = zlib.decompress(base64.b64decode(doc["data"]))
    rows, cols = int(doc["rows"]), list(doc["columns"])
    a = np.frombuffer(raw, "<u4")
    if len(a) != rows * len(cols):
        raise ValueError(f"sample holds {len(a)} values, not rows x columns = {rows * len(cols)}")
    return {c: a[j * rows:(j + 1) * rows].astype(np.int64) for j, c in enumerate(cols)}


@functools.lru_cache(maxsize=16)
def read(path: str, wake: str) -> HostRuntime:
    """The :class:`HostRuntime` of wake mode ``wake`` from measured file ``path``. Raises
    ValueError (one line: what is wrong) for another schema, a wake it has no points of, or a
    malformed point; OSError when it cannot be read."""
    doc = yaml.safe_load(Path(path).read_text())
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise ValueError(f"not a host runtime measurement (schema {SCHEMA})")
    if wake not in WAKES:
        raise ValueError(f"wake must be one of {', '.join(WAKES)}")
    pts = []
    try:
        for p in doc.get("points") or []:
            if p["wake"] != wake:
                continue
            s = decode_sample(p["sample"])
            pts.append((max(1, round(float(p["idle_ns"]["p50"]) * 1000)), s["enqueue"] * 1000, s["wake"] * 1000,
                        s["handback"] * 1000))
    except (KeyError, TypeError, ValueError, zlib.error) as e:
        raise ValueError(f"a malformed point ({type(e).__name__}: {e})") from None
    if not pts:
        raise ValueError(f"no measured points of wake {wake} (it has: "
                         f"{', '.join(sorted({str(p.get('wake')) for p in doc.get('points') or []})) or 'none'})")
    pts.sort(key=lambda t: t[0])
    merged: dict[int, list] = {}
    for idle, e, w, h in pts:  # two points with the same median idle: one point of both samples
        m = merged.setdefault(idle, [[], [], []])
        m[0].append(e), m[1].append(w), m[2].append(h)
    idle = tuple(merged)
    cat = [tuple(np.concatenate(m[j]) for m in merged.values()) for j in range(3)]
    return HostRuntime(Path(path).name, wake, idle, cat[0], cat[1], cat[2])
