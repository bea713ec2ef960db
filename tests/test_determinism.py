"""Runs are deterministic for a seed: same seed -> identical per-round arrays (in one process, in
either engine, run after run, and in a fresh interpreter with another hash seed); a different
seed -> different arrays where the run draws anything (jitter, an independent clock's phase)."""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from twin.devices import LinkCardParams, TrafficParams, cpu_core, fpga_logic, gpu_persistent_kernel
from twin.engine import LoopSpec, run_direct, run_event
from twin.links import Aurora64B66B, PcieLink

FIELDS = ("t_send", "t_in", "t_have", "t_back")
ROOT = Path(__file__).resolve().parents[1]


def spec_for(kind: str, seed: int, jitter_ps: int = 20_000, mode: str = "closed_loop", clock: str = "card",
             aurora=None, rounds: int = 400) -> LoopSpec:
    c, lat = {
        "fpga": (fpga_logic(4000, 28_000, "classic"), 1_100_000),
        "cpu": (cpu_core(37_000, 80_000, 30_000, "per_piece"), 900_000),
        "gpu": (gpu_persistent_kernel(600_000, 100_000, "classic", 800_000), 1_100_000),
    }[kind]
    tr = TrafficParams(mode=mode, rounds=rounds, frame_bytes=64, clock=clock, ppm=37,
                       period_ps=5_000_000 if mode == "open_loop" else 0)
    return LoopSpec(kind, LinkCardParams(), c, tr, PcieLink(latency_ps=lat), PcieLink(latency_ps=lat), jitter_ps,
                    aurora=aurora, seed=seed)


def arrays(res):
    return {f: getattr(res, f).copy() for f in FIELDS}


def digest(res) -> str:
    h = hashlib.sha256()
    for f in FIELDS:
        h.update(np.ascontiguousarray(getattr(res, f), dtype="<i8").tobytes())
    return h.hexdigest()


CASES = [("fpga", "closed_loop", "card", None), ("cpu", "closed_loop", "independent", None),
         ("gpu", "open_loop", "independent", Aurora64B66B(link_stage_ps=200_000)), ("cpu", "open_loop", "card", None)]


@pytest.mark.parametrize("kind, mode, clock, aurora", CASES)
@pytest.mark.parametrize("engine", [run_event, run_direct], ids=["event", "direct"])
def test_same_seed_same_rounds(engine, kind, mode, clock, aurora):
    a = engine(spec_for(kind, 11, mode=mode, clock=clock, aurora=aurora))
    b = engine(spec_for(kind, 11, mode=mode, clock=clock, aurora=aurora))
    for f in FIELDS:
        assert np.array_equal(getattr(a, f), getattr(b, f)), f
    assert np.array_equal(a.ok, b.ok)


@pytest.mark.parametrize("kind, mode, clock, aurora", CASES)
def test_different_seed_different_rounds(kind, mode, clock, aurora):
    a = run_event(spec_for(kind, 11, mode=mode, clock=clock, aurora=aurora))
    b = run_event(spec_for(kind, 12, mode=mode, clock=clock, aurora=aurora))
    # with 20 ns of exponential jitter on every posted write, the round trips must differ
    assert not np.array_equal(a.rtt_ps, b.rtt_ps)
    assert not np.array_equal(a.t_have, b.t_have)


def test_a_run_leaves_no_state_behind():
    # interleave runs of other seeds and loops; a repeat of the first run is unchanged
    first = arrays(run_event(spec_for("cpu", 5)))
    run_event(spec_for("cpu", 6))
    run_direct(spec_for("gpu", 5))
    run_event(spec_for("fpga", 5, mode="open_loop", clock="independent"))
    again = run_event(spec_for("cpu", 5))
    for f in FIELDS:
        assert np.array_equal(first[f], getattr(again, f)), f


def test_without_jitter_only_the_drawn_phases_depend_on_the_seed():
    # jitter 0, the consumer's poll phase given and the generator on the card: nothing is drawn
    # that affects timing, so every seed gives the same rounds ...
    c = fpga_logic(4000, 28_000, "classic", poll_phase_ps=1000)
    tr = TrafficParams(mode="closed_loop", rounds=100, frame_bytes=64)
    runs = [run_event(LoopSpec("v80", LinkCardParams(), c, tr, PcieLink(latency_ps=10**6),
                               PcieLink(latency_ps=10**6), 0, seed=s)) for s in (1, 2, 3)]
    for r in runs[1:]:
        for f in FIELDS:
            assert np.array_equal(getattr(r, f), getattr(runs[0], f))
    # ... while an independent generator clock draws its start phase from the seed
    a = run_event(spec_for("cpu", 1, jitter_ps=0, mode="open_loop", clock="independent"))
    b = run_event(spec_for("cpu", 2, jitter_ps=0, mode="open_loop", clock="independent"))
    assert a.t_send[0] != b.t_send[0]


def test_same_seed_same_rounds_in_a_fresh_interpreter():
    """The run must not depend on the process (e.g. Python's per-process string hash seed)."""
    here = digest(run_event(spec_for("cpu", 21, mode="open_loop", clock="independent", rounds=300)))
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); sys.path.insert(0, sys.argv[2]);"
        "from test_determinism import spec_for, digest; from twin.engine import run_event;"
        "print(digest(run_event(spec_for('cpu', 21, mode='open_loop', clock='independent', rounds=300))))"
    )
    env = dict(os.environ, PYTHONHASHSEED="12345")
    out = subprocess.run([sys.executable, "-c", code, str(Path(__file__).parent), str(ROOT)], env=env,
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == here
