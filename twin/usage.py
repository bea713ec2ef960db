"""Command-line value errors and output folders: :class:`UsageError` (one line, exit 2),
:func:`check_out_folder` (before any work, is ``--out`` usable?) and :func:`out_error` (an OSError
while writing, as one line naming the option). Library code that writes a command's outputs (the
mesh run, for instance) imports them from here; the commands (:mod:`twin.commands`) re-export them.
Also the one line and exit code of a command stopped by a signal (:data:`INTERRUPTED_EXIT`,
:func:`interrupted_line`; the handler is :mod:`twin.commands.interrupt`).
"""
from __future__ import annotations

import os
from pathlib import Path


class UsageError(Exception):
    """A command-line value that cannot be used (one line, exit 2)."""


def check_out_folder(value: str | Path, option: str = "--out", shown: str | Path | None = None) -> Path:
    """Check, before any work, that ``value`` is or can become an output folder; create nothing.

    Walks up to the nearest existing ancestor: it must be a folder we may write in (or ``value``
    itself an existing folder). Returns ``Path(value)``. Raises :class:`UsageError` naming the
    option and the value (``shown`` if given: the value the user typed), one line, e.g.
    ``--out /etc/passwd/x: /etc/passwd is not a folder``."""
    out = Path(value)
    it = "" if shown is None else f"{out} "
    value = value if shown is None else shown
    if out.exists():
        if not out.is_dir():
            raise UsageError(f"{option} {value}: {it}exists and is not a folder")
        if not os.access(out, os.W_OK | os.X_OK):
            raise UsageError(f"{option} {value}: {it}is a folder we may not write in")
        return out
    base = out.absolute().parent
    while not base.exists() and base != base.parent:
        base = base.parent
    if not base.is_dir():
        raise UsageError(f"{option} {value}: {base} is not a folder")
    if out.parent.exists() and out.is_symlink():
        raise UsageError(f"{option} {value}: a broken link")
    if not os.access(base, os.W_OK | os.X_OK):
        raise UsageError(f"{option} {value}: cannot create a folder in {base} (permission denied)")
    return out


def out_error(option: str, value: str | Path, e: OSError) -> UsageError:
    """A filesystem error while writing an output, as one line naming the option and its value."""
    if isinstance(e, FileExistsError) and e.filename and not Path(e.filename).is_dir():
        return UsageError(f"{option} {value}: {e.filename} exists and is not a folder")
    where = f" ({e.filename})" if e.filename and str(e.filename) != str(value) else ""
    return UsageError(f"{option} {value}: {e.strerror or e}{where}")


INTERRUPTED_EXIT = 130  # 128 + SIGINT: the shell's code for a command ended by Ctrl-C (also used for SIGTERM)


def interrupted_line(done: int, requested: int, out, unit: str = "round") -> str:
    """The one line a command prints when a signal stopped it and it saved ``done`` of ``requested``
    rounds (a mesh: replies of all flows; a decode study: requests) in folder ``out``; ``unit``
    ``point`` for a sweep."""
    return (f"twin: interrupted at {unit} {done:,} of {requested:,}; the {done:,} {unit}s so far are saved in "
            f"{out} (partial)")


def interrupted_before_any(requested: int, unit: str = "round") -> str:
    """The line for a stop before the first whole round (or point): nothing was written."""
    return f"twin: interrupted at {unit} 0 of {requested:,}; no {unit} completed, nothing saved"
