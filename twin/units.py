"""Units: integer picoseconds inside the event kernel, quantity strings at the edges.

The kernel keeps every instant and duration as an ``int`` number of picoseconds so that
ties stay ties and runs are reproducible byte for byte. Public parameters either carry
their unit in the name (``latency_ns``) or accept a quantity string (``"28 ns"``,
``"10.3125 Gb/s"``, ``"250 MHz"``).
"""
from __future__ import annotations

import math
import re
from fractions import Fraction

from twin.config.errors import short

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
# ASCII digits only (``\d`` would take "٣", an Arabic-Indic 3, for 3), bounded lengths (a 10^6-digit
# number or a 1e999999999 exponent would cost seconds to read before any range check).
_QTY = re.compile(r"^\s*([-+]?[0-9]{1,40}(?:\.[0-9]{0,40})?(?:[eE][-+]?[0-9]{1,4})?)\s*([A-Za-zµ/]{1,8})\s*$",
                  re.ASCII)
# Physical ranges of a line rate and a clock (anything outside is a typo, and would overflow the
# integer-picosecond arithmetic): 1 kb/s .. 10 Tb/s, 1 kHz .. 100 GHz.
RATE_RANGE_BPS = (1e3, 1e13)
FREQ_RANGE_HZ = (1e3, 1e11)


class UnitError(ValueError):
    """A quantity string could not be read (bad number, unknown or wrong unit)."""


def split_quantity(text: str, kind: str = "quantity") -> tuple[Fraction, str]:
    """``"2.5 us"`` -> (Fraction(5, 2), "us"): the exact number and the unit as written. ASCII
    digits only, at most 40 of them before and after the point, an exponent of at most 4 digits.
    Raises :class:`UnitError` naming ``kind`` for anything else."""
    m = _QTY.match(text) if isinstance(text, str) else None
    if not m:
        raise UnitError(f"cannot read {short(text)} as a {kind} (expected e.g. '28 ns', ASCII digits)")
    return Fraction(m.group(1)), m.group(2)


def _finite(value: int | float, kind: str) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise UnitError(f"{value!r} is not a {kind}: it must be a finite number")


class Ps(int):
    """A duration read once into integer picoseconds that keeps the text it was read from
    (``Ps(2_500_000, "2.5 us")``): an ``int`` for arithmetic (which gives plain ints); ``str``,
    ``repr`` and ``format`` with no spec give the text, so a file's value is shown and written back as
    the file has it. :func:`time_ps` takes one as the picoseconds it holds."""

    text: str

    def __new__(cls, ps: int, text: str) -> "Ps":
        self = super().__new__(cls, ps)
        self.text = text
        return self

    def __getnewargs__(self) -> tuple[int, str]:  # type: ignore[override]  (copies and pickles keep the text)
        return int(self), self.text

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return repr(self.text)


def time_ps(value: str | int | float, default_unit: str = "ns") -> int:
    """Convert a duration to integer picoseconds.

    ``value`` is a quantity string (``"28 ns"``, ``"2.428 us"``), a :class:`Ps` (read already) or a
    bare number in ``default_unit``. Rounds to the nearest picosecond. Raises :class:`UnitError` for
    an unreadable string (non-ASCII digits included), an unknown unit or a non-finite number.
    """
    if isinstance(value, Ps):
        return int(value)
    if isinstance(value, bool):
        raise UnitError(f"cannot read {value!r} as a duration")
    if isinstance(value, (int, float)):
        _finite(value, "duration")
        if default_unit not in _TIME_UNITS:
            raise UnitError(f"unknown time unit {short(default_unit)} (use ps, ns, us, ms, s)")
        q = Fraction(value) * _TIME_UNITS[default_unit]
    else:
        return duration_text_ps(value)[1]
    return int(round(q))


def duration_text_ps(text: str) -> tuple[Fraction, int]:
    """A duration string (``"2.5 us"``) as (the number as written, exact; the duration in integer
    picoseconds, nearest). One parse, for callers that check both (a non-zero value that rounds
    to 0 ps). Raises :class:`UnitError` as :func:`time_ps` does."""
    num, unit = split_quantity(text, "duration")
    if unit not in _TIME_UNITS:
        raise UnitError(f"unknown time unit {short(unit)} in {short(text)} (use ps, ns, us, ms, s)")
    return num, int(round(num * _TIME_UNITS[unit]))


def _scaled(value: str | int | float, kind: str, units: dict[str, int], hint: str) -> float:
    if isinstance(value, bool):
        raise UnitError(f"cannot read {value!r} as a {kind}")
    if isinstance(value, (int, float)):
        _finite(value, kind)
        return float(value)
    num, unit = split_quantity(value, kind)
    if unit not in units:
        raise UnitError(f"unknown {kind} unit {short(unit)} in {short(value)} (use {hint})")
    try:
        return float(num * units[unit])
    except OverflowError:
        raise UnitError(f"{kind} {short(value)} is beyond any finite number") from None


def check_physical(value: float, kind: str, text: object = None) -> float:
    """``value`` (bit/s for ``kind`` "rate", Hz for "frequency") within :data:`RATE_RANGE_BPS` or
    :data:`FREQ_RANGE_HZ`; returns it. Raises :class:`UnitError` naming ``text`` (as written)."""
    span, unit = (RATE_RANGE_BPS, "b/s") if kind == "rate" else (FREQ_RANGE_HZ, "Hz")
    if not span[0] <= value <= span[1]:
        raise UnitError(f"{kind} {short(value if text is None else text)} is outside {span[0]:g} .. {span[1]:g} "
                        f"{unit}, the physical range")
    return value


def rate_bps(value: str | int | float) -> float:
    """Convert a line rate (``"10.3125 Gb/s"``, ``"8 GT/s"``, ``"2 GB/s"`` = 16e9) or a number in
    bit/s to bit/s. Case matters (b = bit, B = byte). Raises :class:`UnitError` (a non-finite number
    included)."""
    return _scaled(value, "rate", _RATE_UNITS, "b/s, Mb/s, Gb/s, GB/s, GT/s")


def freq_hz(value: str | int | float) -> float:
    """Convert a clock frequency (``"250 MHz"``) or a number in Hz to Hz. Case matters (MHz, not
    mHz). Raises :class:`UnitError` (a non-finite number included)."""
    return _scaled(value, "frequency", _FREQ_UNITS, "Hz, kHz, MHz, GHz")


def period_ps(freq: str | int | float) -> int:
    """Clock period in integer picoseconds for a frequency (``"250 MHz"`` -> 4000)."""
    hz = freq_hz(freq)
    if hz <= 0:
        raise UnitError(f"clock frequency must be positive, got {short(freq)}")
    return int(round(PS_PER_S / hz))


def ceil_to_grid(t_ps: int, period: int, phase: int = 0) -> int:
    """Smallest instant ``phase + k*period`` that is >= ``t_ps`` (all integer picoseconds)."""
    return phase + -((phase - t_ps) // period) * period
