"""``twin run`` of the default scenario imports only what it needs: no graph library, figure
library, QEC sampler, quantum framework or cluster library, and no other command's module (each
costs start-up time a short run feels: issue 25's whole-process targets)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("networkx", "matplotlib", "stim", "pennylane", "dask", "distributed", "psutil")
OTHER_COMMANDS = ("calibrate", "validate", "gen", "decode", "machine", "hosting", "topology", "sweep", "scenarios",
                  "components")

CHILD = """
import json, sys
from twin.launch import main
code = main(sys.argv[1:])
print(json.dumps({"rc": code, "modules": sorted(sys.modules)}), file=sys.stderr)
"""


def _modules(tmp_path, *argv: str) -> set[str]:
    r = subprocess.run([sys.executable, "-c", CHILD, *argv], capture_output=True, text=True, timeout=300,
                       cwd=ROOT, env={"PATH": "/usr/bin:/bin", "COLUMNS": "200"})
    last = json.loads(r.stderr.strip().splitlines()[-1])
    assert last["rc"] == 0, r.stderr[-3000:]
    return set(last["modules"])


def test_twin_run_of_the_default_scenario_imports_no_heavy_library(tmp_path):
    mods = _modules(tmp_path, "run", "--engine", "event", "--rounds", "2000", "--no-rounds", "--no-plot", "--quiet",
                    "--out", str(tmp_path / "o"))
    assert (tmp_path / "o" / "results.json").is_file()
    loaded = sorted(m for m in mods if m.split(".")[0] in HEAVY)
    assert not loaded, f"twin run imported {loaded[:10]}"
    commands = sorted(m for m in mods if m.startswith("twin.commands.") and m.split(".")[2] in OTHER_COMMANDS)
    assert not commands, f"twin run imported other commands' modules: {commands}"


def test_twin_run_direct_streamed_imports_no_heavy_library(tmp_path):
    mods = _modules(tmp_path, "run", "--engine", "direct", "--rounds", "2e6", "--no-rounds", "--no-plot", "--quiet",
                    "--out", str(tmp_path / "o"))
    assert not sorted(m for m in mods if m.split(".")[0] in HEAVY)
