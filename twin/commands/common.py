"""What the commands share: the argparse value types (``_count``, ``_nonneg``, ``_seed``,
``_window``), the one-line errors and output-folder checks (from :mod:`twin.usage`) and the
bundled-file lookup (from :mod:`twin.bundled`)."""
from __future__ import annotations

import argparse
from pathlib import Path

from twin.bundled import bundled_path, local_or_bundled
from twin.output.files import RunFolder
from twin.output.progress import phase_spinner
from twin.usage import UsageError, check_out_folder, out_error

_bundled = local_or_bundled  # a bundled file: from the current folder if it has one, else the bundled copy

DEFAULT_SCENARIO = "scenarios/card_path_64b.yaml"
DEFAULT_PRIOR = "calibrations/card_path.yaml"
DEFAULT_FITTED = "calibrations/fitted/card_path.yaml"
DEFAULT_DECODE = "scenarios/decode_rep3.yaml"
DEFAULT_HOSTING = "calibrations/hosting.yaml"
DEFAULT_CARD = "calibrations/fitted/card_path.yaml"

MAX_ROUNDS = 100_000_000  # the scenario schema's bound too
MAX_STREAMED_ROUNDS = 10**10
"""``twin run --rounds`` above :data:`MAX_ROUNDS`: a run that streams its rounds (memory independent of
their number; twin.commands.run) may ask up to this many."""


def _whole(text: str, low: int, top: int = MAX_ROUNDS) -> int:
    try:
        if not text.isascii():  # float() reads "٣" (an Arabic-Indic 3) as 3
            raise ValueError(text)
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not (low <= value <= top) or value != int(value):
        raise argparse.ArgumentTypeError(f"must be a whole number from {low} to {top:.0e}: {text!r}")
    return int(value)


def _run_rounds(text: str) -> int:
    """``twin run --rounds``: a round count from 1 to :data:`MAX_STREAMED_ROUNDS` (above
    :data:`MAX_ROUNDS` only for a run that streams: checked by the command)."""
    return _whole(text, 1, MAX_STREAMED_ROUNDS)


def _count(text: str) -> int:
    """A round count >= 1; accepts ``100000``, ``1e5``, ``3e6``."""
    return _whole(text, 1)


def _nonneg(text: str) -> int:
    """A round count that may be 0."""
    return _whole(text, 0)


def _seed(text: str) -> int:
    try:
        if not text.isascii():  # int() reads "٣" (an Arabic-Indic 3) as 3
            raise ValueError(text)
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not 0 <= value < 2**64:  # stim's samplers take a 64-bit seed
        raise argparse.ArgumentTypeError(f"must be a whole number from 0 to 2**64-1: {text!r}")
    return value


def _file_name(text: str) -> str:
    """A file or folder named on the command line: not empty nor only spaces (``twin run ""`` would
    otherwise be the default scenario, or the current folder)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"an empty name {text!r}: give a file (or leave the argument out for the "
                                         "default, where it has one)")
    return text


def scenario_arg(text: str | None, default: str) -> Path:
    """The scenario a command was given (``default``, a bundled file, when none). A path that is not
    here but names a bundled scenario (``card_path_64b``, ``card_path_64b.yaml``, or
    ``scenarios/faults_epyc7282.yaml`` outside a clone) is that bundled scenario, found as the
    default is (the current folder's ``scenarios/NAME.yaml`` if it has one, else the bundled copy);
    ``twin scenarios copy NAME`` makes one to edit."""
    if not text:
        return _bundled(default)
    path = Path(text)
    if not path.exists():
        name = path.name if path.suffix in (".yaml", ".yml") else path.name + ".yaml"
        if bundled_path(Path("scenarios") / name).is_file() and path.parent in (Path("."), Path("scenarios")):
            return _bundled(Path("scenarios") / name)
    return path


def stamped(path: Path, now=None) -> Path:
    """``path`` with the UTC date and minute before its suffix (``NAME-YYYYMMDD-HHMM.yaml``): where a
    fit writes when not told where, a new file beside the committed ones, never over them."""
    import datetime as _dt
    t = now or _dt.datetime.now(_dt.timezone.utc)
    return path.with_name(f"{path.stem}-{t:%Y%m%d-%H%M}{path.suffix}")


def add_table(parser: argparse.ArgumentParser) -> None:
    """Add ``--table text|csv|json`` (how the printed tables come out: :mod:`twin.output.table`)."""
    parser.add_argument("--table", choices=("text", "csv", "json"), default="text",
                        help="the printed tables: text (default; folded to the terminal's width, never cut), csv or "
                             "json (JSON Lines, one table a line): the tables alone on standard output, every other "
                             "line on standard error")


def add_overwrite(parser: argparse.ArgumentParser, what: str = "an earlier run's outputs in the output folder "
                                                                "(only the files its manifest.json names)") -> None:
    """Add ``--overwrite`` to a command that writes files (:mod:`twin.output.files`)."""
    parser.add_argument("--overwrite", action="store_true", help=f"replace {what}; without it the twin refuses "
                        "to write over anything already there")


def add_allow_code(parser: argparse.ArgumentParser) -> None:
    """Add ``--allow-code NAME`` (repeatable) to a command that loads scenarios: a module (or package)
    or C library a scenario's ``decode.function`` or sinter class may name although it is not one of
    the user's own files (:mod:`twin.config.trust`; ``$TWIN_ALLOW_CODE`` does the same)."""
    parser.add_argument("--allow-code", action="append", metavar="NAME", dest="allow_code", default=[],
                        help="let the scenario's decode.function or sinter class come from module (or package, or C "
                             "library) NAME although it is not under the scenario's folder or the current directory "
                             "(e.g. an installed package); repeatable; also $TWIN_ALLOW_CODE=NAME[,NAME]. A scenario "
                             "is a program: docs/scenarios.md, Trust")


def add_figure_format(parser: argparse.ArgumentParser, names: str, default: str | None = "png") -> None:
    """Add ``--figure-format png|pdf|svg`` to a command that draws figures (``names``: its figures'
    stems, for the help): :data:`twin.output.figure.FORMATS`, read by :func:`run_folder`. ``default``
    None: the command picks (``twin topology``: from ``--out``'s suffix, else png)."""
    from twin.output.figure import DPI, FORMATS
    parser.add_argument("--figure-format", choices=FORMATS, default=default, dest="figure_format",
                        help=f"format of the figures ({names}): png (default, a {DPI} dpi raster), pdf or svg "
                             "(vector drawings, for a paper)")


def run_folder(args: argparse.Namespace, out: str | Path, seed: int | None = None) -> RunFolder:
    """The :class:`twin.output.files.RunFolder` of a command's output folder ``out``, with the
    command line (``args.argv``, set by :func:`twin.commands.main`), ``--overwrite``, ``seed`` and
    ``--figure-format`` (:func:`add_figure_format`; png where the command has none)."""
    return RunFolder(out, overwrite=getattr(args, "overwrite", False), command=getattr(args, "argv", None),
                     seed=seed, figure_format=getattr(args, "figure_format", "png"))


def _window(text: str) -> tuple[int, int]:
    """A round window ``FIRST:LAST`` (1-based, inclusive) or one round ``N``."""
    parts = text.split(":") if text.isascii() else ["not ASCII"]  # int() reads "٣" as 3
    try:
        first, last = (int(parts[0]), int(parts[-1])) if len(parts) in (1, 2) else (0, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a round window FIRST:LAST: {text!r}") from None
    if not 1 <= first <= last:
        raise argparse.ArgumentTypeError(f"needs 1 <= FIRST <= LAST: {text!r}")
    return first, last


__all__ = ["UsageError", "add_overwrite", "add_figure_format", "run_folder", "phase_spinner",
           "check_out_folder", "out_error", "bundled_path", "local_or_bundled", "_bundled", "scenario_arg",
           "_count", "_run_rounds", "_nonneg", "_seed", "_window", "_file_name", "MAX_ROUNDS", "DEFAULT_SCENARIO",
           "DEFAULT_PRIOR",
           "stamped", "DEFAULT_FITTED", "DEFAULT_DECODE", "DEFAULT_HOSTING", "DEFAULT_CARD"]
