"""PennyLane's own device test suite (``pennylane.devices.tests``, the ``pl-device-test`` command) on
``twin.loop``, analytic and with shots. Its needs, beside PennyLane: ``pytest``, ``pytest-mock`` and
``flaky`` (PennyLane's ``qml.devices.tests``, https://docs.pennylane.ai/en/stable/code/api/pennylane.devices.tests.html);
without them the tests skip, naming what is missing (under ``TWIN_TEST_EXTRA=1`` they fail; the test
extra, which CI installs, has them)."""
from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parent.parent
NEEDS = {"pennylane": "pennylane", "pytest_mock": "pytest-mock", "flaky": "flaky"}


def _pl_device_test() -> str:
    missing = [pkg for mod, pkg in NEEDS.items() if importlib.util.find_spec(mod) is None]
    exe = shutil.which("pl-device-test", path=str(Path(sys.executable).parent)) or shutil.which("pl-device-test")
    if exe is None and not missing:
        missing = ["pennylane's pl-device-test command"]
    if missing:
        why = f"PennyLane's device suite needs {', '.join(missing)} (pip install -e '.[test]')"
        if os.environ.get("TWIN_TEST_EXTRA"):
            pytest.fail(why)
        pytest.skip(why)
    assert exe is not None
    return exe


@pytest.mark.parametrize("shots", [None, 10000], ids=["analytic", "shots"])
def test_pennylane_device_suite_passes_on_twin_loop(shots, tmp_path):
    exe = _pl_device_test()
    cmd = [exe, "--device", "twin.loop", "-q", "-p", "no:cacheprovider", *(["--shots", str(shots)] if shots else [])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=900)
    tail = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else p.stderr[-2000:]
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-2000:]
    assert not re.search(r"\d+ (failed|error)", tail), tail
    passed = int(re.search(r"(\d+) passed", tail)[1])
    assert passed > 300, tail  # the suite ran (not collected away)
