"""The decoder's cost per call (twin/qec/percall.py, ``decode.cost.how: measured``, the default):
the measurement separates the native work from the binding's per-call overhead (on a virtual clock,
exactly), draws follow the measured calls of each event count and are seeded, the file round-trips,
``twin calibrate decoder`` writes what a decode scenario reads and ``twin decode`` says which cost it
used, a placement picks native or through Python, the host table carries it, and every bundled decode
scenario's CPU placements draw the file measured for their own workload."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from twin.commands import main
from twin.config import ConfigError
from twin.qec import percall as P
from twin.qec.decoders.base import Decoder

ROOT = Path(__file__).resolve().parent.parent
CAL = str(ROOT / "calibrations" / "fitted" / "card_path.yaml")
HOSTING = str(ROOT / "calibrations" / "hosting.yaml")


class _Clock:
    """A virtual nanosecond clock: each read advances it by 1 ns (the timer's own cost)."""

    def __init__(self):
        self.t = 0

    def __call__(self):
        self.t += 1
        return self.t


class _Fake(Decoder):
    """Costs ``overhead`` ns per call plus ``base + per_event * events`` per shot on the virtual clock;
    a repeated syndrome (a batch of one row repeated) costs ``repeat_discount`` of that per shot."""

    kind = "matching"

    def __init__(self, clock, overhead=4000, base=100, per_event=50, repeat_discount=0.5):
        self.clock, self.o, self.b, self.e, self.disc = clock, overhead, base, per_event, repeat_discount
        self.n_detectors, self.n_observables = 16, 1

    def decode_shots_bit_packed(self, dets):
        ev = np.unpackbits(dets, axis=1).sum(axis=1)
        per = self.b + self.e * ev
        same = len(dets) > 1 and (dets == dets[0]).all()
        self.clock.t += self.o + int(round((per * (self.disc if same else 1.0)).sum()))
        return np.zeros((len(dets), 1), np.uint8)


def _workload(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    ev = np.minimum(rng.binomial(16, 0.12, n) + 1, 16)  # no zero syndrome: every shot a new one
    syn = np.zeros((n, 2), np.uint8)
    for i, k in enumerate(ev):
        bits = np.zeros(16, np.uint8)
        bits[rng.choice(16, k, replace=False)] = 1
        syn[i] = np.packbits(bits)
    return syn, ev


def test_measure_separates_the_native_work_from_the_bindings_overhead(monkeypatch):
    clock = _Clock()
    monkeypatch.setattr(P, "_clock", clock)
    syn, ev = _workload()
    s = P.measure(_Fake(clock), syn, ev, 2000, warmup=10, seed=1)
    assert s.timer_ns == 1 and s.repeat >= 2
    want = 100 + 50 * s.events
    # through Python: the overhead plus the shot, the timer's 1 ns removed
    assert np.array_equal(s.python_ns, 4000 + want)
    # native: the shot alone, the repeated-syndrome discount undone by each event count's level (a rare
    # count by the whole sample's)
    common = np.isin(s.events, [k for k, v in s.native_check["level_ratio_by_events"].items() if v is not None])
    assert common.mean() > 0.99
    assert np.allclose(s.native_ns[common], want[common], rtol=1e-3)
    assert np.allclose(s.native_ns[~common], want[~common], rtol=0.05)
    assert np.allclose(s.binding_ns[common], 4000, atol=3)
    assert s.native_check["level_ratio_whole"] == pytest.approx(2.0, rel=0.02)


def test_draws_follow_each_event_counts_calls_and_are_seeded():
    rng = np.random.default_rng(2)
    ev = rng.integers(0, 6, 5000)
    py = (3000 + 200 * ev + rng.gamma(2, 300, 5000)).astype(np.int64)
    nat = 50.0 + 100 * ev + rng.gamma(2, 10, 5000)
    s = P.Sample(ev, py, nat, 100, 50)
    doc = {"sample": P.encode_sample(s)}
    e2, p2, n2 = P.decode_sample(doc["sample"])
    order = np.lexsort((py, ev))
    assert np.array_equal(e2, ev[order]) and np.array_equal(p2, py[order]) and np.allclose(n2, nat[order], atol=0.05)
    pc = P.PerCall(e2, p2, n2, {"native": P._slope(e2, n2), "python": P._slope(e2, p2)}, {}, "x")
    req = rng.integers(0, 6, 200_000)
    for call, t in (("native", nat), ("python", py)):
        d = pc.draw_ns(req, call, seed=7)
        assert np.array_equal(d, pc.draw_ns(req, call, seed=7)) and not np.array_equal(d, pc.draw_ns(req, call, 8))
        for k in (0, 3, 5):  # each event count draws that count's calls
            assert np.percentile(d[req == k], [50, 99]) == pytest.approx(np.percentile(t[ev == k], [50, 99]), rel=0.03)
    # an event count the sample lacks: the nearest count's calls plus the slope
    far = pc.draw_ns(np.full(1000, 9), "native", 1)
    near = np.sort(nat[ev == 5])
    assert np.median(far) == pytest.approx(np.median(near) + 4 * pc.slope_ns["native"], rel=0.02)
    assert pc.slope_ns["native"] == pytest.approx(100, rel=0.05)


def test_host_factor_is_the_clock_and_ipc_ratio_and_says_so():
    h = P.load_hosts()
    ref, c = h.reference, h.classes["epyc7282"]
    f, how = P.host_factor("epyc7282", "epyc7282", ref.host_class)
    assert f == pytest.approx(ref.clock_ghz * ref.ipc_vs_zen4 / (c.clock_ghz * c.ipc_vs_zen4))
    assert "assumption" in how and "epyc7282" in how
    assert P.host_factor("mi210", "epyc9755", ref.host_class)[0] == pytest.approx(
        ref.clock_ghz / (4.1 * 1.16))  # by its host
    f, how = P.host_factor("grace_core", "gb200", ref.host_class)
    assert f == 1.0 and "no host class" in how
    f, how = P.host_factor("epyc7282", "epyc7282", "unlisted: some CPU")
    assert f == 1.0 and "not carried" in how


def _scenario(tmp_path: Path, cost: dict | None, decoder="matching", placements=None, **decode) -> Path:
    d = {"code": "surface", "distance": 3, "rounds": 3, "p": 0.003, "shots": 400, "decoder": decoder,
         "placements": placements or [{"device": "epyc7282", "mode": "inline"}], **decode}
    if cost is not None:
        d["cost"] = cost
    p = tmp_path / f"s{len(list(tmp_path.glob('s*.yaml')))}.yaml"
    p.write_text(yaml.safe_dump({"name": "percall", "calibration": CAL, "hosting": HOSTING, "seed": 3, "decode": d}))
    return p


def test_calibrate_writes_a_file_that_twin_decode_draws_and_names(tmp_path, capsys):
    scen = _scenario(tmp_path, None)
    out = tmp_path / "pc.yaml"
    assert main(["calibrate", "decoder", str(scen), "--calls", "400", "--warmup", "20", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "native" in printed and "through Python" in printed and "binding overhead" in printed
    doc = yaml.safe_load(out.read_text())
    assert doc["schema"] == P.SCHEMA and doc["calls"] == 400 and doc["workload"]["distance"] == 3
    assert doc["machine"]["packages"]["pymatching"] and doc["machine"]["packages"]["stim"] and doc["measured_at"]
    for call in ("native_ns", "python_ns", "binding_ns"):
        assert set(doc[call]) >= {"p50", "p90", "p99", "p99.9", "ci95"}
    assert doc["python_ns"]["p50"] > doc["native_ns"]["p50"]
    pc = P.load_percall(out)
    assert len(pc.events) == 400

    runs = {}
    for name, cost, call in (("native", {"file": str(out)}, None), ("again", {"file": str(out)}, None),
                             ("python", {"file": str(out)}, "python"),
                             ("scaled", {"file": str(out), "scale": 2.0}, None)):
        pl = {"device": "epyc7282", "mode": "inline", **({"call": call} if call else {})}
        p = _scenario(tmp_path, cost, placements=[pl])
        d = tmp_path / name
        assert main(["decode", str(p), "--out", str(d), "--quiet"]) == 0
        text = (d / "results.json").read_text()
        runs[name] = (text, json.loads(text)["placements"][0])
    printed = capsys.readouterr().out
    assert f"compute measured per call (native): {out}" in printed.replace("\n", "")
    s = runs["native"][1]
    c = s["cost"]
    assert c["how"] == "measured" and c["call"] == "native" and c["source"]["file"] == str(out)
    assert c["source"]["measured_at"] == doc["measured_at"] and c["source"]["machine"] == doc["machine"]["cpu"]
    assert c["exact_workload"] is False  # the file's name is not this workload's shipped name
    assert runs["native"][0] == runs["again"][0]  # same seed: byte-identical
    f = c["factor"]
    draws = pc.draw_ns(np.zeros(0), "native", 3)  # noqa: F841  (the draws themselves: decoder_only below)
    assert s["decoder_only"]["p50_ns"] == pytest.approx(f * np.percentile(pc.native_ns, 50), rel=0.25)
    py = runs["python"][1]
    assert py["cost"]["call"] == "python"
    assert py["decoder_only"]["p50_ns"] == pytest.approx(f * np.percentile(pc.python_ns, 50), rel=0.25)
    assert runs["scaled"][1]["decoder_only"]["p50_ns"] == pytest.approx(2 * s["decoder_only"]["p50_ns"], rel=0.01)


def test_measured_refuses_what_it_cannot_use(tmp_path):
    from twin.qec.load import load_decode
    cases = [({"how": "model", "fixed": "1 us"}, [{"device": "epyc7282", "call": "python"}],
              "decode.placements[0].call", {}),
             (None, [{"device": "mi210", "call": "native"}], "decode.placements[0].call",
              {"decoder": "lookup", "code": "rep", "rounds": 1}),
             ({"how": "measured", "file": CAL}, None, "decode.cost.file", {}),
             (None, None, "decode.cost", {"decoder": "tesseract"})]  # no per-call file of it
    # (a user function with no time names decode.cost.fixed: tests/test_qec_loop.py)
    for cost, pls, key, extra in cases:
        with pytest.raises(ConfigError) as e:
            load_decode(_scenario(tmp_path, cost, placements=pls, **extra))
        assert e.value.key == key, (cost, pls, str(e.value))
        assert "\n" not in str(e.value)


def test_the_shipped_files_say_where_and_how_they_were_measured():
    files = [f for f in sorted((ROOT / P.FOLDER).glob("*.yaml")) if P.SCHEMA in f.read_text()[:400]]
    assert len(files) >= 7
    for f in files:
        pc = P.load_percall(f)
        d = pc.doc
        assert d["calls"] >= 5000 and len(pc.events) == d["calls"], f
        assert d["machine"]["cpu"] and d["measured_at"] and d["host_class"] == P.load_hosts().reference.host_class, f
        assert "shared 2-core VM" in d["conditions"], f
        for pkg in ("stim", "pymatching", "ldpc"):
            assert d["machine"]["packages"][pkg], (f, pkg)
        for call in ("native", "python"):  # the quantiles are the sample's
            t = pc.times(call)
            assert d[f"{call}_ns"]["p50"] == pytest.approx(np.percentile(t, 50, method="inverted_cdf"), abs=0.1), f


def test_every_bundled_decode_scenarios_cpu_placements_draw_their_own_workloads_file():
    from twin.qec.load import load_decode
    from twin.qec.schema import cost_timed
    seen = 0
    for f in sorted((ROOT / "scenarios").glob("decode_*.yaml")):
        ld = load_decode(f)
        d = ld.sc.decode
        if d.cost.how != "measured":
            assert d.cost.fixed is not None, f  # a stated time, on purpose (the stream studies)
            continue
        cpus = [dev for pl in d.placements for dev in pl.names
                if ld.params.consumers[dev].kind == "cpu" and cost_timed(pl.model)
                or ld.params.consumers[dev].handoff is not None]
        if cpus:
            pc, exact, wanted = ld.percall
            assert exact and pc is not None and Path(pc.file).name == wanted, (f, wanted)
            seen += 1
    assert seen >= 7
