"""The recurrence ceiling: the direct engine's one-flow recurrence (closed loop, one in flight, the
generator on the card's clock) written in numba, on the same random draws, checked equal to
:func:`twin.engine.direct.run_direct` round for round. It is the reference the compiled core is
measured against (benchmarks/engine_speed.py), not an engine: it computes only this one shape.

Usage: python benchmarks/numba_recurrence.py [--rounds N]
"""
from __future__ import annotations

import argparse
import time

import numpy as np
from numba import njit

from twin.exchange.encoding import get_encoding
from twin.kernel import JitterStream


@njit(cache=True)
def _rounds(n, n_req, per_piece, phase, P, cost, body, fence, cP, read, bridge, land_ps, cclk, clk,
            req_ser, req_lat, rep_ser, rep_lat, req_jit, rep_jit, t_have):  # pragma: no cover - compiled
    back = 0
    bridge_free = 0
    t_free_c = 0
    last_have = 0
    req_free = req_last = rep_free = rep_last = 0
    for i in range(n):
        ts = 0 if i == 0 else -((-back) // clk) * clk
        tin = -((-ts) // cclk) * cclk
        bridge_free = max(tin, bridge_free) + bridge
        t_issue = bridge_free + land_ps
        land = 0
        for k in range(n_req):
            start = max(t_issue, req_free)
            req_free = start + req_ser[k]
            land = max(start + req_ser[k] + req_lat + req_jit[i * n_req + k], req_last)
            req_last = land
        t = max(land, t_free_c)
        t2 = phase + -((phase - t) // P) * P + cost + body
        if per_piece:
            start = max(t2, rep_free)
            rep_free = start + rep_ser[0]
            rland = max(start + rep_ser[0] + rep_lat + rep_jit[i], rep_last)
            rep_last = rland
            t_free_c = t2
        else:
            start = max(t2, rep_free)
            rep_free = start + rep_ser[0]
            rep_last = max(start + rep_ser[0] + rep_lat + rep_jit[2 * i], rep_last)
            t_free_c = t2 + fence
            start = max(t_free_c, rep_free)
            rep_free = start + rep_ser[1]
            rland = max(start + rep_ser[1] + rep_lat + rep_jit[2 * i + 1], rep_last)
            rep_last = rland
        t = max(rland, max(tin, last_have))
        th = -((-t) // cP) * cP + read
        last_have = th
        t_have[i] = th
        back = th


def recurrence(spec) -> np.ndarray:
    """Every round's ``t_have`` (int64 ps) of ``spec`` (closed loop, one in flight, card clock, no
    Aurora, no gaps), the random draws included."""
    tr, c, card = spec.traffic, spec.consumer, spec.card
    assert tr.mode == "closed_loop" and tr.in_flight == 1 and tr.clock == "card" and spec.aurora is None
    assert tr.gaps is None and tr.gap_ps == 0
    enc = get_encoding(c.encoding)
    phase, _, _ = spec.draws()
    sizes = [len(d) for _, d in enc.writes(1, bytes(tr.frame_bytes))]
    n = tr.rounds
    req_jit = JitterStream(spec.seed, spec.stream("pcie.request"), spec.jitter_ps).array(n * len(sizes))
    rep_jit = JitterStream(spec.seed, spec.stream("pcie.reply"), spec.jitter_ps).array(n * len(sizes))
    out = np.zeros(n, np.int64)
    _rounds(n, len(sizes), enc.per_piece, phase, c.poll_period_ps, c.poll_cost_ps,
            c.pre_service_ps(enc, tr.frame_bytes) + c.service_ps, c.fence_ps, card.reply_poll_period_ps,
            card.reply_read_ps, card.bridge_ps(tr.frame_bytes), card.engine_land_ps, card.clock_ps, tr.clock_ps,
            np.array([spec.request_link.serialise_ps(s) for s in sizes], np.int64), spec.request_link.latency_ps,
            np.array([spec.reply_link.serialise_ps(s) for s in sizes], np.int64), spec.reply_link.latency_ps,
            req_jit, rep_jit, out)
    return out


KEEPS = "t_have only (1 array of n int64), both lanes' jitter drawn for the whole run at once (2 arrays of n)"
"""What :func:`recurrence` keeps in memory, for a like-for-like reading of its rate."""


def rates(spec, warm: int = 0) -> tuple[float, list[float]]:
    """Rounds per CPU-second of :func:`recurrence` on ``spec``: its first full run (compiled first on
    a short run, checked equal to run_direct's t_have; raises AssertionError if it differs), then
    ``warm`` more runs in the same process."""
    from dataclasses import replace

    from twin.engine.direct import run_direct
    short = replace(spec, traffic=replace(spec.traffic, rounds=2000))
    assert np.array_equal(recurrence(short), run_direct(short).t_have), "the numba recurrence differs from run_direct"
    out = []
    for _ in range(1 + warm):
        t0 = time.process_time()
        recurrence(spec)
        out.append(spec.traffic.rounds / (time.process_time() - t0))
    return out[0], out[1:]


def rate(spec) -> float:
    """Rounds per CPU-second of :func:`recurrence`'s first full run on ``spec`` (:func:`rates`)."""
    return rates(spec)[0]


if __name__ == "__main__":
    from pathlib import Path

    from twin.calibration.params import load_params
    from twin.devices.generator import TrafficParams
    from twin.scenario.compile import flow_spec
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=1_000_000)
    args = ap.parse_args()
    params = load_params(Path(__file__).resolve().parent.parent / "calibrations" / "fitted" / "card_path.yaml")
    spec = flow_spec(params, "epyc7282", TrafficParams("closed_loop", args.rounds, 64), 0)
    print(f"numba recurrence, epyc7282: {rate(spec):,.0f} rounds per CPU-second")
