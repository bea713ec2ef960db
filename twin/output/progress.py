"""Progress for the phases of a command that take seconds and have no round count (a Verilator
build, writing a large file, drawing a figure): a spinner row inside the command's live progress
display, on a terminal only, so piped output stays byte for byte what it was."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, ContextManager


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


__all__ = ["phase_spinner"]
