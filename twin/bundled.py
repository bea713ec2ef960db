"""The files the twin ships beside its code: the studies (``scenarios/``), the parameter sets and
measurements (``calibrations/``), the Verilog (``rtl/``) and the example decoders (``examples/``).

In a checkout they are the repository's top-level folders. A wheel carries them as package data
under ``twin/_bundled/`` (setup.py maps each folder there, keeping the layout, so a scenario's
``../calibrations/fitted/card_path.yaml`` still resolves). :func:`bundled_path` finds a file in
either: ``bundled_path("scenarios/card_path_64b.yaml")``. This module is the one place that knows
where they are; it imports only the standard library.
"""
from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
INSTALLED = PACKAGE / "_bundled"  # an installed wheel (see setup.py: BUNDLED)
CHECKOUT = PACKAGE.parent         # a checkout (an editable install runs from here)
FOLDERS = ("scenarios", "calibrations", "rtl", "examples")


def bundled_root() -> Path:
    """The folder holding ``scenarios/``, ``calibrations/``, ``rtl/`` and ``examples/``: the wheel's
    ``twin/_bundled`` when it is there, else the repository root."""
    return INSTALLED if (INSTALLED / "scenarios").is_dir() else CHECKOUT


def bundled_path(rel: str | Path) -> Path:
    """A bundled file or folder by its path in the repository, e.g. ``"rtl/qrt_v80.v"``. The path
    need not exist (callers report a missing file themselves)."""
    return bundled_root() / rel


def local_or_bundled(rel: str | Path) -> Path:
    """``rel`` from the current folder if it has one (a checkout's root, or a user's own copy),
    else the bundled file: how the commands find their default scenario and parameter sets."""
    here = Path(rel)
    return here if here.exists() else bundled_path(rel)


def is_bundled(path: str | Path) -> bool:
    """Whether ``path`` lies inside an installed wheel's bundled files (not to be written to)."""
    try:
        return Path(path).resolve().is_relative_to(INSTALLED)
    except OSError:
        return False


def in_checkout() -> bool:
    """Whether the package runs from a source checkout (its parent holds ``pyproject.toml`` and
    ``setup.py``; an editable install runs from there too), not from an installed wheel in
    site-packages, whose files are the installer's and not to be regenerated."""
    return (CHECKOUT / "pyproject.toml").is_file() and (CHECKOUT / "setup.py").is_file()


def scenario_files() -> list[Path]:
    """The bundled scenarios (``scenarios/*.yaml``), sorted by name."""
    return sorted(bundled_path("scenarios").glob("*.yaml"))
