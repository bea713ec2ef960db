"""Idle priors per device class (twin/calibration/idle_prior.py): a CPU or GPU takes its class's prior
by default (or when its calibration says `idle: prior`), `idle: none` opts out, an unknown word is
refused in one line naming file, key and value, back to back is unchanged, an FPGA asking for it is
refused, a live stand-in from `--from-live` says `idle: none`, and the fit reads fixed-gap points only."""
from __future__ import annotations

import numpy as np
import pytest

from twin.bundled import bundled_path
from twin.calibration.idle_prior import ClassSpec, bundled_priors, gap_of
from twin.calibration.params import ParamSet, load_params
from twin.config import ConfigError
from twin.devices.generator import TrafficParams
from twin.engine.direct import run_direct
from twin.fitting.idle_priors import fit_class

PERIOD_PS = 1_000_000_000  # 1 ms


def _rtt(ps: ParamSet, consumer: str, traffic: TrafficParams) -> np.ndarray:
    return run_direct(ps.loop_spec(consumer, traffic, seed=7)).rtt_ps.astype(np.int64)


def _with_idle(ps: ParamSet, consumer: str, idle="prior") -> ParamSet:
    data = ps.model_dump()
    data["consumers"][consumer]["idle"] = idle
    return ParamSet.model_validate(data)


@pytest.mark.parametrize("consumer, kind", [("epyc7282", "cpu"), ("mi210", "gpu")])
def test_bundled_device_at_1ms_pays_its_class_prior(consumer, kind):
    ps = load_params(bundled_path("calibrations/fitted/card_path.yaml"))
    open_1ms = TrafficParams(mode="open_loop", rounds=300, period_ps=PERIOD_PS)
    with_prior, without = _rtt(ps, consumer, open_1ms), _rtt(_with_idle(ps, consumer, "none"), consumer, open_1ms)
    assert np.array_equal(with_prior, _rtt(_with_idle(ps, consumer), consumer, open_1ms))  # the default is prior
    prior = bundled_priors().classes[kind]
    # the consumer idles the period less its own busy time (a few us): the prior's cost there, read
    # from the measured table (log-gap interpolation between its points)
    busy_ns = float(np.median(without)) / 1000
    expected_ns = prior.at_ns(PERIOD_PS / 1000 - busy_ns)
    assert expected_ns > 50  # the measured 1 ms cost of both classes is over 100 ns
    diff_ns = (with_prior[1:] - without[1:]) / 1000  # round 0 had no idle before it
    assert abs(float(np.median(diff_ns)) - expected_ns) <= 5.0


@pytest.mark.parametrize("consumer", ["epyc7282", "mi210", "epyc9755", "mi355x"])
def test_back_to_back_is_unchanged(consumer):
    ps = _with_idle(load_params(bundled_path("calibrations/fitted/card_path.yaml")), consumer)
    closed = TrafficParams(rounds=2000)
    assert ps.consumers[consumer].uses_idle_prior
    assert ps.loop_spec(consumer, closed, seed=1).consumer.idle == ()  # nothing attached: compiled core stays
    # and were it attached, the closed loop's gaps lie below the class's zero: the same round trips
    from dataclasses import replace
    spec = ps.loop_spec(consumer, closed, seed=1)
    prior = bundled_priors().classes[ps.consumers[consumer].kind]
    forced = replace(spec, consumer=replace(spec.consumer, idle=prior.costs()))
    assert np.array_equal(run_direct(forced).rtt_ps, run_direct(spec).rtt_ps)


def test_the_prior_is_the_default_none_opts_out_and_an_fpga_has_none():
    ps = load_params(bundled_path("calibrations/fitted/card_path.yaml"))
    open_1ms = TrafficParams(mode="open_loop", rounds=10, period_ps=PERIOD_PS)
    assert ps.consumers["epyc7282"].idle is None and ps.consumers["epyc7282"].uses_idle_prior
    spec = ps.loop_spec("epyc7282", open_1ms, seed=1)
    assert spec.consumer.idle and spec.consumer.idle[0].kind == "table"
    assert spec.consumer.idle == bundled_priors().classes["cpu"].costs()
    assert _with_idle(ps, "epyc7282", "none").loop_spec("epyc7282", open_1ms, seed=1).consumer.idle == ()
    fpgas = [n for n, c in ps.consumers.items() if c.kind == "fpga"]
    assert fpgas
    assert not ps.consumers[fpgas[0]].uses_idle_prior
    assert ps.loop_spec(fpgas[0], open_1ms, seed=1).consumer.idle == ()
    assert _with_idle(ps, fpgas[0], "none").loop_spec(fpgas[0], open_1ms, seed=1).consumer.idle == ()
    with pytest.raises(Exception, match="idle"):
        _with_idle(ps, fpgas[0])


def test_an_unknown_idle_word_is_refused_in_one_line(tmp_path):
    import yaml
    doc = yaml.safe_load(bundled_path("calibrations/fitted/card_path.yaml").read_text())
    doc["consumers"]["mi210"]["idle"] = "sometimes"
    f = tmp_path / "set.yaml"
    f.write_text(yaml.safe_dump(doc))
    with pytest.raises(ConfigError) as e:
        load_params(f)
    msg = str(e.value)
    assert "\n" not in msg and str(f) in msg and "consumers.mi210.idle" in msg and "sometimes" in msg


def test_live_stand_ins_from_live_fits_opt_out():
    """Every bundled set written by `twin calibrate --from-live` says `idle: none` for its stand-in (or has
    its own idle): its measured service already paid the live device's idling."""
    import glob
    seen = 0
    for f in sorted(glob.glob(str(bundled_path("calibrations/fitted") / "*.yaml"))):
        with open(f) as fh:
            if "--from-live" not in fh.readline():
                continue
        ps = load_params(f)
        for name, c in ps.consumers.items():
            if name.endswith("_fitted"):
                seen += 1
                assert c.idle == "none" or isinstance(c.idle, list), (f, name, c.idle)
    assert seen >= 10


def _source(tmp_path, name, points):
    """A duty_cycle.py folder: per point (idle ns, service ns) constant rounds."""
    folder = tmp_path / name
    folder.mkdir()
    arrays = {}
    for point, (idle, svc) in points.items():
        arrays[f"{point}.service_ns"] = np.full(50, svc, np.int64)
        arrays[f"{point}.idle_ns"] = np.full(50, idle, np.int64)
    np.savez(folder / "shm.npz", **arrays)
    return folder


def test_fit_takes_fixed_gaps_and_holds_out_random_ones(tmp_path):
    _source(tmp_path, "a", {"back_to_back": (100, 400), "gap_100us": (100_000, 500), "gap_1ms": (1_000_000, 700),
                            "exp_1ms": (690_000, 9_999)})
    _source(tmp_path, "b", {"back_to_back": (120, 420), "gap_100us": (100_020, 540), "gap_1ms": (1_000_020, 720)})
    spec = ClassSpec(sources=["a", "b"], backend="shm", zero_below_ns=10_000)
    prior = fit_class(spec, tmp_path)
    # per gap, the median over sources of service p50 minus the source's back-to-back p50
    assert prior.table == [(10_000.0, 0.0), (100_010.0, 110.0), (1_000_010.0, 300.0)]
    assert [r["point"] for r in prior.held_out] == ["exp_1ms"]  # never in the table
    g = {r["point"]: r for r in prior.points}
    assert g["gap_100us"]["spread_ns"] == 20.0
    assert prior.rebased(100_010.0) == [(100_010.0, 0.0), (1_000_010.0, 190.0)]


def test_a_source_that_could_not_pace_back_to_back_is_refused(tmp_path):
    _source(tmp_path, "slow", {"back_to_back": (70_000, 400), "gap_1ms": (1_000_000, 700)})
    with pytest.raises(ConfigError, match="could not pace back to back"):
        fit_class(ClassSpec(sources=["slow"], backend="shm", zero_below_ns=10_000), tmp_path)


def test_point_names():
    assert gap_of("back_to_back") == ("fixed", 0.0)
    assert gap_of("period_100us") == ("fixed", 100_000.0)
    assert gap_of("exp_10us") == ("random", 10_000.0)
    assert gap_of("size_64") is None


def test_points_of_one_gap_match_across_sources_and_the_reference_by_its_gap(tmp_path):
    """A closed loop's gap_100us and an open loop's period_100us are one point; a GPU-style reference
    named gap_100us is found as period_100us in a sweep that names it so."""
    _source(tmp_path, "a", {"back_to_back": (100, 900), "gap_100us": (100_000, 500), "gap_1ms": (1_000_000, 700)})
    _source(tmp_path, "b", {"back_to_back": (120, 900), "period_100us": (99_000, 520), "period_1ms": (999_000, 760)})
    prior = fit_class(ClassSpec(sources=["a", "b"], backend="shm", reference="gap_100us", zero_below_ns=100_000),
                      tmp_path)
    names = [r["point"] for r in prior.points]
    assert "gap_100us/period_100us" in names and "gap_1ms/period_1ms" in names
    assert prior.table == [(100_000.0, 0.0), (999_500.0, 220.0)]  # costs 200 and 240 over each own reference


def test_a_missing_source_names_the_spec_and_key_and_an_empty_pattern_is_said(tmp_path):
    from twin.fitting.idle_priors import fit_priors
    spec = tmp_path / "spec.yaml"
    spec.write_text("name: t\nclasses:\n  cpu:\n    sources: [nosuch]\n    backend: shm\n    zero_below_ns: 10000\n")
    with pytest.raises(ConfigError) as e:
        fit_priors(spec)
    assert str(spec) in str(e.value) and "classes.cpu.sources" in str(e.value) and "nosuch" in str(e.value)
    _source(tmp_path, "a", {"back_to_back": (100, 400), "gap_1ms": (1_000_000, 700)})
    prior = fit_class(ClassSpec(sources=["a", "later_*_paced"], backend="shm", zero_below_ns=10_000), tmp_path)
    assert any("later_*_paced" in n and "matched no folder" in n for n in prior.notes)


def test_idle_takes_prior_or_a_list_and_says_so():
    ps = load_params(bundled_path("calibrations/fitted/card_path.yaml"))
    with pytest.raises(Exception, match="'prior'"):
        _with_idle(ps, "epyc7282", "bogus")
