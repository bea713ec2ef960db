"""Never crash on input (issue 17): every bundled scenario, mutated by hypothesis (types, ranges,
units, encodings, structure: see tests/scenario_mutations.py), is either loaded or refused with one
:class:`twin.config.ConfigError` line that starts with the file's name; no other exception, and each
load within 10 s. An accepted mutant, one in four, also runs for 50 rounds (shots) and its
results.json must hold no non-finite number.

``TWIN_FUZZ_SCENARIOS`` sets the number of mutants (default 100, about 15 s here); the draws are
derandomized unless ``TWIN_FUZZ_SCENARIOS_RANDOM=1``. The long run is ``benchmarks/fuzz_scenarios.py``.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from scenario_mutations import BUNDLED, attempt, base_doc, cases, render

EXAMPLES = int(os.environ.get("TWIN_FUZZ_SCENARIOS", "100"))


RANDOM = os.environ.get("TWIN_FUZZ_SCENARIOS_RANDOM") == "1"


@settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=not RANDOM,
          suppress_health_check=list(HealthCheck))
@given(case=cases())
def test_a_mutated_scenario_is_loaded_or_refused_in_one_line(case):
    index, ops, run = case
    bundled = BUNDLED[index]
    files = render(base_doc(bundled), ops)
    with tempfile.TemporaryDirectory() as d:
        got = attempt(bundled, files, Path(d), run=run)
    assert got.kind in ("refused", "accepted"), f"{bundled.name} with {ops!r:.300}: {got.kind}\n{got.detail}"
    assert got.seconds < 10


def test_every_bundled_scenario_loads_unmutated():
    """The fuzzer's base: each bundled scenario, its paths made absolute and written elsewhere,
    loads as it is (a mutant refused is refused for its mutation)."""
    for bundled in BUNDLED:
        with tempfile.TemporaryDirectory() as d:
            got = attempt(bundled, render(base_doc(bundled), []), Path(d))
        assert got.kind == "accepted", f"{bundled.name}: {got.detail}"
