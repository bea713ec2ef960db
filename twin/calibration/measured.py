"""Published measurements the twin is calibrated and validated against."""
from __future__ import annotations

from pathlib import Path

from pydantic import Field, field_validator, model_validator

from twin.config import Located, load_model
from twin.config.strict import Strict
from twin.units import UnitError, time_ps


def _quantity(v: str) -> str:
    try:
        time_ps(v)
    except UnitError as e:
        raise ValueError(str(e)) from None
    return v


class MeasuredRow(Strict):
    """One measured configuration: percentiles of the round trip as quantity strings."""

    platform: str
    device: str
    p50: str
    p90: str
    p99: str | None = None
    note: str = ""
    run: str = ""  # the run folder (relative to this file) whose rounds these numbers summarise, if any

    _q = field_validator("p50", "p90")(classmethod(lambda cls, v: _quantity(v)))
    _q99 = field_validator("p99")(classmethod(lambda cls, v: v if v is None else _quantity(v)))

    @model_validator(mode="after")
    def _ordered(self):
        if self.p50_ps <= 0:
            raise Located(("p50",), self.p50, "must be > 0")
        if self.p90_ps < self.p50_ps:
            raise Located(("p90",), self.p90, f"must be >= p50 ({self.p50})")
        return self

    @property
    def p50_ps(self) -> int:
        """Published median in ps."""
        return time_ps(self.p50)

    @property
    def p90_ps(self) -> int:
        """Published 90th percentile in ps."""
        return time_ps(self.p90)


class Setup(Strict):
    """How the measurement was taken (boundary, frame size, traffic, rounds, clock, bin, function)."""

    boundary: str
    frame_bytes: int = Field(gt=0)
    traffic: str
    rounds: int = Field(gt=0)
    clock: str
    bin: str
    function: str


class Measured(Strict):
    """A measurement file (``calibrations/measured/*.yaml``)."""

    source: str
    setup: Setup
    consumers: dict[str, MeasuredRow]
    interconnect: dict[str, str] = {}
    interconnect_source: str = ""

    _i = field_validator("interconnect")(classmethod(lambda cls, v: {k: _quantity(x) for k, x in v.items()}))

    def interconnect_ps(self, key: str) -> int:
        """One interconnect figure (e.g. ``"link_round_trip"``) in ps."""
        return time_ps(self.interconnect[key])


def load_measured(path: str | Path) -> Measured:
    """Load a measurement file; raises :class:`twin.config.ConfigError`."""
    return load_model(path, Measured)
