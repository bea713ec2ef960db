"""Never crash on the surfaces beside the scenario files (issue 29): mutated stim circuits, Q1ASM
programs, live run folders and gaps files (tests/surface_mutations.py) are read or refused with one line that
starts with the file it names; no other exception, no hang.

``TWIN_FUZZ_SURFACES`` sets the number of mutants per surface (default 40); the draws are
derandomized unless ``TWIN_FUZZ_SCENARIOS_RANDOM=1``. The long run is
``benchmarks/fuzz_scenarios.py --surfaces N``; every surface in a child process under a memory
limit: ``benchmarks/hostile_inputs.py``.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from surface_mutations import (
    attempt_circuit,
    attempt_gaps,
    attempt_q1asm,
    attempt_run,
    circuit_cases,
    gaps_cases,
    q1asm_cases,
    run_cases,
)

EXAMPLES = int(os.environ.get("TWIN_FUZZ_SURFACES", "40"))
RANDOM = os.environ.get("TWIN_FUZZ_SCENARIOS_RANDOM") == "1"
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=not RANDOM,
                    suppress_health_check=list(HealthCheck))


def judged(got, what) -> None:
    assert got.kind in ("refused", "accepted"), f"{what!r:.400}: {got.kind}\n{got.detail[-3000:]}"


@SETTINGS
@given(case=circuit_cases())
def test_a_mutated_circuit_is_loaded_or_refused_in_one_line(case):
    with tempfile.TemporaryDirectory() as d:
        judged(attempt_circuit(case, Path(d)), case)


@SETTINGS
@given(case=q1asm_cases())
def test_a_mutated_q1asm_program_runs_or_is_refused_in_one_line(case):
    judged(attempt_q1asm(case), case)


@pytest.fixture(scope="module")
def live_base(tmp_path_factory):
    from test_validate import synthetic_run, truth_set
    base = tmp_path_factory.mktemp("live")
    return synthetic_run(base, "run", truth_set(base), rounds=400)


@SETTINGS
@given(case=run_cases())
def test_a_mutated_run_folder_is_read_or_refused_in_one_line(live_base, case):
    with tempfile.TemporaryDirectory() as d:
        judged(attempt_run(live_base, case, Path(d)), case)


@settings(SETTINGS, max_examples=min(EXAMPLES, 20))
@given(case=gaps_cases())
def test_a_mutated_gaps_file_is_read_or_refused_in_one_line(case):
    with tempfile.TemporaryDirectory() as d:
        judged(attempt_gaps(case, Path(d)), case)
