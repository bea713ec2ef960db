"""Every twin exception whose __init__ takes more than its message crosses a process boundary whole
(issue 31: a ConfigError raised in a sinter or multiprocessing worker arrived as ``TypeError:
ConfigError.__init__() missing 3 required positional arguments``)."""
from __future__ import annotations

import concurrent.futures
import multiprocessing
import pickle
from pathlib import Path

import pytest

from hw_bridge.endpoint import LiveFailure
from twin.config import ConfigError
from twin.config.errors import Located
from twin.engine.stop import Interrupted
from twin.output.files import OutputError
from twin.qec.decoders.function import FunctionFailed
from twin.rtl.build import RtlBuildError
from twin.runtime.native import QrtError
from twin.studies.sweep import SweepInterrupted

ERRORS = [
    ConfigError("scenario.yaml", "traffic.period", "1 parsec", "not a time"),
    ConfigError(Path("cal.yaml"), None, None, "not a regular file"),
    Located(("nodes", 0, "model"), "rtll", "unknown model"),
    OutputError("runs/x/results.json", "disk full"),
    FunctionFailed(b"\x01\x02", "reply of 3 bytes, expected 1"),
    LiveFailure("hung", 12, "no reply within 1 s", "udp"),
    QrtError("qrt_serve failed", 7),
    RtlBuildError("verilator failed", Path("build.log"), "%Error: x.sv:3"),
    Interrupted("at round 10"),
    SweepInterrupted([{"p50_ns": 1.0}], 1, 4),
]


@pytest.mark.parametrize("e", ERRORS, ids=lambda e: type(e).__name__)
def test_pickles_whole(e):
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is type(e) and str(back) == str(e) and back.args == e.args
    assert vars(back) == vars(e)


def _load_in_worker(path: str):
    from twin.scenario import load_scenario
    return load_scenario(path)


def _raise_config_error(_):
    raise ConfigError("scenario.yaml", "rounds", -1, "expected rounds >= 1")


def test_a_worker_raising_config_error_reaches_the_parent_as_config_error(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nrounds: -5\n")
    ctx = multiprocessing.get_context("fork")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=ctx) as pool:
        with pytest.raises(ConfigError) as e:
            pool.submit(_load_in_worker, str(bad)).result()
    assert str(bad) in str(e.value) and e.value.file == str(bad)
    with ctx.Pool(1) as pool, pytest.raises(ConfigError) as e:
        pool.map(_raise_config_error, [0])
    assert (e.value.key, e.value.value) == ("rounds", -1)
