"""Units: integer picoseconds inside the event kernel, quantity strings at the edges.

The kernel keeps every instant and duration as an ``int`` number of picoseconds so that
ties stay ties and runs are reproducible byte for byte. Public parameters either carry
their unit in the name (``latency_ns``) or accept a quantity string (``"28 ns"``,
``"10.3125 Gb/s"``, ``"250 MHz"``).
"""
from __future__ import annotations

import re
from fractions import Fraction

PS_PER_NS = 1_000
PS_PER_US = 1_000_000
PS_PER_MS = 1_000_000_000
PS_PER_S = 1_000_000_000_000

_TIME_UNITS = {"ps": Fraction(1), "ns": Fraction(10**3), "us": Fraction(10**6), "µs": Fraction(10**6),
               "ms": Fraction(10**9), "s": Fraction(10**12)}
# Case matters: b = bit, B = byte (x8); M = mega, m would be milli (not accepted).
_RATE_UNITS = {"b/s": 1, "bps": 1, "kb/s": 10**3, "Mb/s": 10**6, "Gb/s": 10**9, "Tb/s": 10**12,
               "B/s": 8, "kB/s": 8 * 10**3, "MB/s": 8 * 10**6, "GB/s": 8 * 10**9, "TB/s": 8 * 10**12,
               "GT/s": 10**9}
_FREQ_UNITS = {"Hz": 1, "kHz": 10**3, "MHz": 10**6, "GHz": 10**9}
_QTY = re.compile(r"^\s*([-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)\s*([A-Za-zµ/]+)\s*$")


class UnitError(ValueError):
    """A quantity string could not be read (bad number, unknown or wrong unit)."""


def _split(text: str, kind: str) -> tuple[Fraction, str]:
    m = _QTY.match(str(text))
    if not m:
        raise UnitError(f"cannot read {text!r} as a {kind} (expected e.g. '28 ns')")
    return Fraction(m.group(1)), m.group(2)


def time_ps(value: str | int | float, default_unit: str = "ns") -> int:
    """Convert a duration to integer picoseconds.

    ``value`` is a quantity string (``"28 ns"``, ``"2.428 us"``) or a bare number in
    ``default_unit``. Rounds to the nearest picosecond. Raises :class:`UnitError` for an
    unreadable string or an unknown unit.
    """
    if isinstance(value, bool):
        raise UnitError(f"cannot read {value!r} as a duration")
    if isinstance(value, (int, float)):
        if default_unit not in _TIME_UNITS:
            raise UnitError(f"unknown time unit {default_unit!r} (use ps, ns, us, ms, s)")
        q = Fraction(value) * _TIME_UNITS[default_unit]
    else:
        num, unit = _split(value, "duration")
        if unit not in _TIME_UNITS:
            raise UnitError(f"unknown time unit {unit!r} in {value!r} (use ps, ns, us, ms, s)")
        q = num * _TIME_UNITS[unit]
    return int(round(q))


def _scaled(value: str | int | float, kind: str, units: dict[str, int], hint: str) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    num, unit = _split(value, kind)
    if unit not in units:
        raise UnitError(f"unknown {kind} unit {unit!r} in {value!r} (use {hint})")
    return float(num * units[unit])


def rate_bps(value: str | int | float) -> float:
    """Convert a line rate (``"10.3125 Gb/s"``, ``"8 GT/s"``, ``"2 GB/s"`` = 16e9) or a number in
    bit/s to bit/s. Case matters (b = bit, B = byte). Raises :class:`UnitError`."""
    return _scaled(value, "rate", _RATE_UNITS, "b/s, Mb/s, Gb/s, GB/s, GT/s")


def freq_hz(value: str | int | float) -> float:
    """Convert a clock frequency (``"250 MHz"``) or a number in Hz to Hz. Case matters (MHz, not
    mHz). Raises :class:`UnitError`."""
    return _scaled(value, "frequency", _FREQ_UNITS, "Hz, kHz, MHz, GHz")


def period_ps(freq: str | int | float) -> int:
    """Clock period in integer picoseconds for a frequency (``"250 MHz"`` -> 4000)."""
    hz = freq_hz(freq)
    if hz <= 0:
        raise UnitError(f"clock frequency must be positive, got {freq!r}")
    return int(round(PS_PER_S / hz))


def ceil_to_grid(t_ps: int, period: int, phase: int = 0) -> int:
    """Smallest instant ``phase + k*period`` that is >= ``t_ps`` (all integer picoseconds)."""
    return phase + -((phase - t_ps) // period) * period
