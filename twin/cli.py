"""Kept so ``python -m twin.cli`` and ``from twin.cli import main`` keep working: the commands live in
:mod:`twin.commands` (``python -m twin`` is the short form). Run as a program it starts as ``twin``
does (:func:`twin.launch.main`: the signal handlers before the commands load)."""
import sys

if __name__ == "__main__":
    from twin.launch import main as _launch
    sys.exit(_launch())

from twin.commands import build_parser, main  # noqa: E402

__all__ = ["build_parser", "main"]
