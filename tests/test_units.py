"""twin.units: quantity strings and bare numbers to integer picoseconds, bit/s and Hz.

Expected values are written from the SI definitions (1 ns = 10**3 ps, 1 Gb/s = 10**9 bit/s,
period = 1 / frequency), never from the module's output.
"""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from twin.units import (
    PS_PER_MS,
    PS_PER_NS,
    PS_PER_S,
    PS_PER_US,
    UnitError,
    ceil_to_grid,
    freq_hz,
    period_ps,
    rate_bps,
    time_ps,
)

# SI: picoseconds per unit, written out here rather than imported.
PS_PER = {"ps": 1, "ns": 10**3, "us": 10**6, "µs": 10**6, "ms": 10**9, "s": 10**12}


def test_named_constants_are_the_si_factors():
    assert (PS_PER_NS, PS_PER_US, PS_PER_MS, PS_PER_S) == (10**3, 10**6, 10**9, 10**12)


# ---------------------------------------------------------------------------------------------
# time_ps
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("28 ns", 28 * 10**3),              # the V80's answer time (seeds)
    ("2.428 us", 2428 * 10**3),         # the V80's p50 (seeds)
    ("2.428 µs", 2428 * 10**3),
    ("10 ns", 10 * 10**3),
    ("0.44 us", 440 * 10**3),
    ("500 ps", 500),
    ("1 s", 10**12),
    ("1.5 ms", 15 * 10**8),
    ("29 ms", 29 * 10**9),
    ("4.8 s", 48 * 10**11),
    ("1e3 ps", 1000),
    ("2.5e-3 us", 2500),
    ("28ns", 28 * 10**3),               # no space
    ("  28   ns  ", 28 * 10**3),        # surrounding blanks
    ("+3 ns", 3000),
    ("0 ns", 0),
])
def test_time_ps_quantity_strings(text, expected):
    got = time_ps(text)
    assert got == expected
    assert type(got) is int


def test_time_ps_bare_numbers_use_the_default_unit():
    assert time_ps(28) == 28 * 10**3                      # default: ns
    assert time_ps(3, default_unit="us") == 3 * 10**6
    assert time_ps(7, default_unit="ps") == 7
    assert time_ps(2, default_unit="s") == 2 * 10**12
    assert time_ps(0.5) == 500
    # 0.1 is not exact in binary; the nearest picosecond is still 100.
    assert time_ps(0.1) == 100
    assert type(time_ps(0.1)) is int


def test_time_ps_rounds_to_the_nearest_picosecond():
    assert time_ps("0.4 ps") == 0
    assert time_ps("0.6 ps") == 1
    assert time_ps("1.0004 ns") == 1000
    assert time_ps("1.0006 ns") == 1001
    assert time_ps("2.7 ps") == 3


@settings(max_examples=60, deadline=None)
@given(n=st.integers(min_value=0, max_value=10**6), unit=st.sampled_from(sorted(PS_PER)))
def test_time_ps_integer_quantities_are_exact(n, unit):
    assert time_ps(f"{n} {unit}") == n * PS_PER[unit]
    assert time_ps(n, default_unit=unit) == n * PS_PER[unit]


@settings(max_examples=60, deadline=None)
@given(whole=st.integers(min_value=0, max_value=10**6), frac=st.integers(min_value=0, max_value=999))
def test_time_ps_decimal_nanoseconds_are_exact(whole, frac):
    # "W.FFF ns" is exactly W*1000 + FFF ps: decimal strings must not go through binary floats.
    assert time_ps(f"{whole}.{frac:03d} ns") == whole * 1000 + frac


@pytest.mark.parametrize("bad", ["", "ns", "28", "abc", "28 furlongs", "28 ns extra", "28 n s",
                                 "1.2.3 ns", "28 Gb/s", "28 MHz", "--3 ns"])
def test_time_ps_rejects_bad_strings(bad):
    with pytest.raises(UnitError):
        time_ps(bad)


def test_time_ps_rejects_booleans():
    with pytest.raises(UnitError):
        time_ps(True)


def test_time_ps_unknown_default_unit_is_a_unit_error():
    # The docstring promises UnitError "for an unknown unit"; a bare number with an unknown
    # default unit is exactly that.
    with pytest.raises(UnitError):
        time_ps(5, default_unit="parsec")


def test_unit_error_is_a_value_error():
    assert issubclass(UnitError, ValueError)


# ---------------------------------------------------------------------------------------------
# rate_bps, freq_hz, period_ps
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("10.3125 Gb/s", 10.3125e9),        # one Aurora lane (seeds)
    ("8 GT/s", 8e9),                    # PCIe Gen3 transfer rate
    ("16 GT/s", 16e9),
    ("2 GB/s", 16e9),                   # bytes: 8 bits each
    ("100 Mb/s", 100e6),
    ("25 kb/s", 25e3),
    ("1 Tb/s", 1e12),
    ("9600 b/s", 9600.0),
    ("9600 bps", 9600.0),
])
def test_rate_bps(text, expected):
    assert rate_bps(text) == pytest.approx(expected, rel=1e-15)


def test_rate_bps_numbers_are_bits_per_second():
    assert rate_bps(10.3125e9) == 10.3125e9
    assert rate_bps(40) == 40.0
    assert type(rate_bps(40)) is float


@pytest.mark.parametrize("bad", ["10 Gb", "ten Gb/s", "10 furlongs/s", "", "10 Hz", "10 ns"])
def test_rate_bps_rejects_bad_strings(bad):
    with pytest.raises(UnitError):
        rate_bps(bad)


def test_rate_bps_rejects_booleans():
    with pytest.raises(UnitError):
        rate_bps(True)


@pytest.mark.parametrize("bad", ["16 gt/s", "1 gb/s", "1 mb/s"])
def test_rate_bps_units_are_case_sensitive(bad):
    # b/B (bit/byte) and M/m (mega/milli) differ only in case, so a wrong case is refused.
    with pytest.raises(UnitError):
        rate_bps(bad)


@pytest.mark.parametrize("bad", ["1 mHz", "250 mhz", "1 ghz"])
def test_freq_hz_units_are_case_sensitive(bad):
    with pytest.raises(UnitError):
        freq_hz(bad)


@pytest.mark.parametrize("text", ["1 GB/s", "1 MB/s"])
def test_rate_bps_does_not_read_bytes_as_bits(text):
    # "B" is a byte (8 bits), "b" a bit. "1 GB/s" must be 8e9 bit/s or refused, never 1e9.
    try:
        got = rate_bps(text)
    except UnitError:
        return
    bits = 8 * (10**9 if text.startswith("1 G") else 10**6)
    assert got == bits, f"rate_bps({text!r}) = {got}, a byte rate read as a bit rate"


@pytest.mark.parametrize("text, expected", [
    ("250 MHz", 250e6),                 # the link card's clock (seeds)
    ("1 GHz", 1e9),
    ("10 kHz", 1e4),
    ("50 Hz", 50.0),
    ("156.25 MHz", 156.25e6),
])
def test_freq_hz(text, expected):
    assert freq_hz(text) == pytest.approx(expected, rel=1e-15)


def test_freq_hz_numbers_are_hertz():
    assert freq_hz(250e6) == 250e6
    assert type(freq_hz(3)) is float


@pytest.mark.parametrize("bad", ["250 MHZZ", "250", "MHz", "250 ns", "250 Gb/s"])
def test_freq_hz_rejects_bad_strings(bad):
    with pytest.raises(UnitError):
        freq_hz(bad)


@pytest.mark.parametrize("freq, expected", [
    ("250 MHz", 4000),                  # 1 / 250e6 s = 4 ns
    ("1 GHz", 1000),
    ("100 MHz", 10_000),
    ("156.25 MHz", 6400),               # 64b/66b block clock of a 10.3125 Gb/s lane: 66 / 10.3125e9 s
    ("3 GHz", 333),                     # 333.33... -> nearest ps
    (250e6, 4000),
])
def test_period_ps(freq, expected):
    got = period_ps(freq)
    assert got == expected
    assert type(got) is int


@pytest.mark.parametrize("bad", ["0 MHz", "-1 MHz", 0, -5.0])
def test_period_ps_rejects_non_positive_frequencies(bad):
    with pytest.raises(UnitError):
        period_ps(bad)


# ---------------------------------------------------------------------------------------------
# ceil_to_grid
# ---------------------------------------------------------------------------------------------

def test_ceil_to_grid_examples():
    assert ceil_to_grid(0, 4000) == 0
    assert ceil_to_grid(1, 4000) == 4000
    assert ceil_to_grid(4000, 4000) == 4000        # on the grid: stays
    assert ceil_to_grid(4001, 4000) == 8000
    assert ceil_to_grid(0, 4000, 1000) == 1000
    assert ceil_to_grid(1000, 4000, 1000) == 1000
    assert ceil_to_grid(1001, 4000, 1000) == 5000


@settings(max_examples=60, deadline=None)
@given(t=st.integers(min_value=-10**13, max_value=10**13),
       period=st.integers(min_value=1, max_value=10**9),
       data=st.data())
def test_ceil_to_grid_properties(t, period, data):
    phase = data.draw(st.integers(min_value=0, max_value=period - 1))
    r = ceil_to_grid(t, period, phase)
    assert r >= t
    assert r - t < period
    assert (r - phase) % period == 0
    assert ceil_to_grid(r, period, phase) == r       # idempotent on the grid


@settings(max_examples=60, deadline=None)
@given(t=st.integers(min_value=-10**9, max_value=10**9),
       period=st.integers(min_value=1, max_value=10**6),
       phase=st.integers(min_value=-10**7, max_value=10**7))
def test_ceil_to_grid_any_phase(t, period, phase):
    # Also correct when the phase lies outside [0, period) (a grid is a grid).
    r = ceil_to_grid(t, period, phase)
    assert r >= t and r - t < period and (r - phase) % period == 0
