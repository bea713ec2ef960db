"""Kept so ``python -m twin.cli`` and ``from twin.cli import main`` keep working: the commands live in
:mod:`twin.commands` (``python -m twin`` is the short form)."""
import sys

from twin.commands import build_parser, main

__all__ = ["build_parser", "main"]

if __name__ == "__main__":
    sys.exit(main())
