"""The commands' progress display (twin/output/progress.py): a row per task saying what it counts,
how many of how many and for how long; and for phases without a round count (twin/rtl/build.py) a
spinner row in it on a terminal, nothing when piped; a Verilator build shows its steps while they
run, a cached library none."""
from __future__ import annotations

import io
import re
from pathlib import Path

from rich.console import Console
from rich.progress import Progress

import twin.rtl.build as B
from twin.output.progress import phase_spinner, progress_bar


def test_a_bar_row_says_what_how_many_of_how_many_and_how_long():
    out = io.StringIO()
    tty = Console(file=out, width=100, force_terminal=True, color_system=None)
    with progress_bar(tty) as bar:
        task = bar.add_task("sweep (local)", total=40)
        bar.update(task, completed=30)
    rows = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.getvalue()).splitlines()
    last = [r for r in rows if r.strip()][-1]  # left on screen (not transient)
    assert re.fullmatch(r"sweep \(local\) +\S+ +30/40 +0:00:0\d *", last), last
    assert progress_bar(tty, transient=True).live.transient and not progress_bar(tty).live.transient
    quiet = io.StringIO()
    with progress_bar(Console(file=quiet, width=100, force_terminal=True), quiet=True) as bar:
        bar.add_task("replies", total=5)
    assert quiet.getvalue() == ""


def test_spinner_rows_on_a_terminal_only():
    piped = Console(file=io.StringIO(), width=100)
    assert not piped.is_terminal and phase_spinner(Progress(console=piped), piped) is None
    tty = Console(file=io.StringIO(), width=100, force_terminal=True)
    assert phase_spinner(Progress(console=tty), tty, quiet=True) is None
    bar = Progress(console=tty, auto_refresh=False)
    show = phase_spinner(bar, tty)
    with show("verilating x"):
        assert [t.description for t in bar.tasks] == ["verilating x"] and bar.tasks[0].total is None
    assert bar.tasks == []  # removed after the phase


def test_a_build_shows_each_step_while_it_runs_and_a_cached_one_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("TWIN_RTL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(B, "verilator_root", lambda: tmp_path)  # the tools are not run: _run below
    shown: list[str] = []  # the phase open while each tool runs
    phases: list[tuple[str, str]] = []

    def run(cmd, cwd: Path, log, step):
        phases.append((step, shown[-1] if shown else ""))
        if "harness" in step:
            (cwd / "libqrt_node.so").write_bytes(b"\x7fELF")
    monkeypatch.setattr(B, "_run", run)

    class Show:
        def __init__(self, text):
            self.text = text

        def __enter__(self):
            shown.append(self.text)

        def __exit__(self, *exc):
            shown.pop()
    with B.build_status(Show):
        lib = B.build(B.card_sources())
        assert lib.is_file()
        assert [step for step, _ in phases] == ["verilating qrt_card", "compiling the harness for qrt_card"]
        assert phases[0][1].startswith("model rtl: verilating qrt_card (first use")
        assert phases[1][1] == "model rtl: compiling the harness for qrt_card"
        assert B.build(B.card_sources()) == lib and len(phases) == 2  # cached: no tool, no row
    assert B._STATUS.get() is None
