"""Installable anywhere: a wheel of this checkout (not an editable install), installed into a fresh
virtual environment, runs the bundled studies from a folder outside the repository.

The fresh environment borrows the running environment's dependencies through a .pth file (no
downloads), but ``twin`` itself must come from the wheel: the test checks where it is imported from.
Building the wheel compiles the runtime library (a C compiler, as for any install) and fetches the
build backend as pip does for any build; about a minute here.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _run(cmd, cwd, env, timeout=600):
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(map(str, cmd))}: exit {proc.returncode}\n{proc.stdout[-3000:]}\n" \
                                 f"{proc.stderr[-3000:]}"
    return proc


@pytest.mark.slow
def test_wheel_installs_and_runs_from_another_folder(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    wheels = tmp_path / "wheels"
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels), str(ROOT)], tmp_path, env)
    (wheel,) = wheels.glob("twin-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for f in ("twin/_bundled/scenarios/card_path_64b.yaml", "twin/_bundled/calibrations/fitted/card_path.yaml",
              "twin/_bundled/calibrations/measured/card_path_64b.yaml", "twin/_bundled/calibrations/hosting.yaml",
              "twin/_bundled/rtl/qrt_v80.v", "twin/_bundled/rtl/qrt_contract.vh",
              "twin/_bundled/examples/rep3_rule.py", "twin/commands/__init__.py", "twin/__main__.py", "twin/launch.py"):
        assert f in names, f
    for top in ("scenarios", "calibrations", "rtl"):  # every file of the bundled folders the wheel means to carry
        for f in (ROOT / top).rglob("*"):
            if f.is_file() and f.suffix in (".yaml", ".v", ".vh", ".npz", ".json", ".stim"):
                assert f"twin/_bundled/{f.relative_to(ROOT).as_posix()}" in names, f

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], tmp_path, env)
    py = venv / "bin" / "python"
    site = Path(_run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], tmp_path,
                     env).stdout.strip())
    # the running environment's packages as dependencies, after the fresh site-packages (a plain path
    # entry: its own .pth files, an editable twin's among them, are not processed)
    (site / "_twin_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _run([str(py), "-m", "pip", "install", "--no-deps", "--no-index", "-q", str(wheel)], tmp_path, env)

    here = tmp_path / "elsewhere"
    here.mkdir()
    env = {**env, "PATH": f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", "VIRTUAL_ENV": str(venv)}
    where = _run([str(py), "-c", "import twin, twin.bundled as b; print(twin.__file__); print(b.bundled_root())"],
                 here, env).stdout.split()
    assert Path(where[0]).is_relative_to(site) and Path(where[1]) == site / "twin" / "_bundled", where
    twin = str(venv / "bin" / "twin")
    assert "scenarios" in _run([twin, "--help"], here, env).stdout
    assert "scenarios" in _run([str(py), "-m", "twin", "--help"], here, env).stdout
    listing = _run([twin, "scenarios"], here, env).stdout
    assert "card_path_64b" in listing and "decode_rep3" in listing
    _run([twin, "scenarios", "copy", "card_path_64b"], here, env)
    assert (here / "card_path_64b.yaml").is_file()
    _run([twin, "run", "card_path_64b.yaml", "--rounds", "2000", "--quiet", "--no-plot"], here, env)
    text = (here / "runs" / "card_path_64b" / "results.json").read_text()
    doc = json.loads(text)
    assert doc["rounds"] == 2000 and all(c["mismatches"] == 0 for c in doc["consumers"])
    # the copy names the wheel's files bundled:...; its results.json records that, not site-packages
    assert doc["measured"]["file"] == "bundled:calibrations/measured/card_path_64b.yaml"
    assert str(site) not in text and str(venv) not in text
    # the generated files belong to the source checkout: an installed twin gen refuses, writing nothing
    vh = site / "twin" / "_bundled" / "rtl" / "qrt_contract.vh"
    before = vh.stat().st_mtime_ns
    gen = subprocess.run([twin, "gen"], cwd=here, env=env, capture_output=True, text=True)
    assert gen.returncode == 2 and "source checkout" in gen.stderr and gen.stderr.count("\n") == 1, gen.stderr
    assert vh.stat().st_mtime_ns == before
    _run([twin, "decode", "--shots", "500", "--quiet"], here, env)
    doc = json.loads((here / "runs" / "decode_rep3" / "results.json").read_text())
    assert doc["workload"]["shots"] == 500
    assert all(p["identical_corrections"] == p["requests"] and not p["card_mismatches"] for p in doc["placements"])
    assert not (here / "scenarios").exists()  # the default study came from the wheel, not from here


def test_setup_loads_the_runtime_build_id_module_with_the_standard_library_alone(tmp_path):
    """pip builds in an isolated environment where ``twin`` cannot be imported: setup.py loads
    twin/runtime/native.py by path, so that module may import only the standard library at top
    level (a ``from twin... import`` there broke ``pip install`` on a fresh machine)."""
    code = ("import importlib.util, sys\n"
            "spec = importlib.util.spec_from_file_location('native_by_path', sys.argv[1])\n"
            "mod = importlib.util.module_from_spec(spec)\n"
            "spec.loader.exec_module(mod)\n"
            "print(mod.source_build_id(mod.C_DIR))\n")
    r = subprocess.run([sys.executable, "-I", "-S", "-c", code, str(ROOT / "twin" / "runtime" / "native.py")],
                       capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.strip()) >= 8
