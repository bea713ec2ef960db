"""``twin run`` of the default scenario imports only what it needs: no graph library, figure
library, QEC sampler, quantum framework or cluster library, and no other command's module (each
costs start-up time a short run feels: issue 25's whole-process targets); the collector is off while
the program starts and on for the run (twin.startup)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("networkx", "matplotlib", "stim", "pennylane", "dask", "distributed", "psutil", "scipy", "pyarrow", "pandas")
HEAVY_PARTS = ("numpy.ma",)  # (numpy.unique's first call imports it: 15 ms; twin.stats.sorted_distinct does not)
OTHER_COMMANDS = ("calibrate", "validate", "gen", "decode", "machine", "hosting", "topology", "sweep", "scenarios",
                  "components")

CHILD = """
import gc, json, sys
import twin.studies.run as study
seen = {}
def run_study(*a, **k):  # the collector's state while the run runs
    seen.update(enabled=gc.isenabled(), frozen=gc.get_freeze_count())
    return real(*a, **k)
real, study.run_study = study.run_study, run_study
from twin.launch import main
code = main(sys.argv[1:])
print(json.dumps({"rc": code, "modules": sorted(sys.modules), "gc": seen}), file=sys.stderr)
"""


def _child(*argv: str) -> dict:
    r = subprocess.run([sys.executable, "-c", CHILD, *argv], capture_output=True, text=True, timeout=300,
                       cwd=ROOT, env={"PATH": "/usr/bin:/bin", "COLUMNS": "200"})
    last = json.loads(r.stderr.strip().splitlines()[-1])
    assert last["rc"] == 0, r.stderr[-3000:]
    return last


def _modules(tmp_path, *argv: str) -> set[str]:
    return set(_child(*argv)["modules"])


def test_twin_run_of_the_default_scenario_imports_no_heavy_library(tmp_path):
    mods = _modules(tmp_path, "run", "--engine", "event", "--rounds", "2000", "--no-rounds", "--no-plot", "--quiet",
                    "--out", str(tmp_path / "o"))
    assert (tmp_path / "o" / "results.json").is_file()
    loaded = sorted(m for m in mods if m.split(".")[0] in HEAVY or m in HEAVY_PARTS)
    assert not loaded, f"twin run imported {loaded[:10]}"
    commands = sorted(m for m in mods if m.startswith("twin.commands.") and m.split(".")[2] in OTHER_COMMANDS)
    assert not commands, f"twin run imported other commands' modules: {commands}"


def test_twin_run_direct_streamed_imports_no_heavy_library(tmp_path):
    mods = _modules(tmp_path, "run", "--engine", "direct", "--rounds", "2e6", "--no-rounds", "--no-plot", "--quiet",
                    "--out", str(tmp_path / "o"))
    assert not sorted(m for m in mods if m.split(".")[0] in HEAVY or m in HEAVY_PARTS)


def test_the_start_up_runs_without_the_collector_and_the_run_with_it(tmp_path):
    """twin run (the program, twin.launch.main; twin.startup): the collector is off while the program starts, on
    again once the scenario is loaded, the start-up's objects frozen out of its collections."""
    last = _child("run", "--engine", "event", "--rounds", "2000", "--no-rounds", "--no-plot", "--quiet",
                  "--out", str(tmp_path / "o"))
    assert last["gc"]["enabled"] and last["gc"]["frozen"] > 10_000, last["gc"]


def test_commands_in_process_leave_the_collector_alone(tmp_path):
    import gc

    from twin.commands import main
    frozen, enabled = gc.get_freeze_count(), gc.isenabled()
    assert main(["run", "--engine", "event", "--rounds", "500", "--no-rounds", "--no-plot", "--quiet",
                 "--out", str(tmp_path / "o")]) == 0
    assert (gc.get_freeze_count(), gc.isenabled()) == (frozen, enabled)
