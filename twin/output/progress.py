"""The commands' progress display, one helper for all: :func:`progress_bar` (one row per task:
what it counts, a bar, done of total, elapsed time), and for the phases of a command that take
seconds and have no round count (a Verilator build, writing a large file, drawing a figure)
:func:`phase_spinner`, a spinner row inside it, on a terminal only, so piped output stays byte for
byte what it was."""
from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING, Callable, ContextManager

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress


def progress_bar(console: Console, *, quiet: bool = False, transient: bool = False) -> Progress:
    """A rich ``Progress`` on ``console`` whose rows read ``description  bar  done/total  elapsed``
    (add a row with ``add_task(description, total=...)``, ``total=None`` while unknown). ``quiet``:
    nothing is shown; ``transient``: the rows are removed when it stops (else left on screen).
    Use it as a context manager, or ``start()`` / ``stop()`` it."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=console, transient=transient, disable=quiet)


def phase_spinner(bar, console, quiet: bool = False) -> Callable[[str], ContextManager] | None:
    """A ``show(text)`` for :func:`twin.rtl.build.build_status` and other phases that run inside a
    live rich Progress ``bar``: a spinner row ``text`` (no total, elapsed time) in ``bar`` while the
    block runs, removed after. On a terminal only (``console.is_terminal``) and not ``quiet``; else
    ``None`` (nothing shown: piped output stays byte for byte what it was)."""
    if quiet or not console.is_terminal:
        return None

    @contextmanager
    def show(text: str):
        task = bar.add_task(text, total=None)
        try:
            yield
        finally:
            bar.remove_task(task)
    return show


__all__ = ["phase_spinner", "progress_bar"]
