"""The parser built for one command (its module alone imported) parses, helps and refuses exactly
as the parser of every command does."""
from __future__ import annotations

import contextlib
import io

import pytest

from twin.commands import COMMANDS, build_parser


def _parse(parser, argv: list[str]) -> tuple:
    """(exit code or None, stdout, stderr, the namespace without its handler)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            ns = vars(parser.parse_args(argv))
            code = None
        except SystemExit as e:
            ns, code = {}, e.code
    ns.pop("handler", None)
    return code, out.getvalue(), err.getvalue(), ns


ARGVS = [[name, "--help"] for name in COMMANDS] + [
    ["run"], ["run", "s.yaml", "--rounds", "1e4", "--engine", "event", "--no-plot"], ["run", "--bogus"],
    ["run", "--engine", "fast"], ["run", "a", "b"], ["decode", "--shots", "x"], ["sweep"], ["scenarios", "copy"],
    ["gen", "--out", "o"], ["validate", "--nonsense"], ["components", "--format", "json"]]


@pytest.mark.parametrize("argv", ARGVS, ids=" ".join)
def test_one_commands_parser_is_the_whole_parsers(argv, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    assert _parse(build_parser(argv), argv) == _parse(build_parser(), argv)


def test_without_a_command_name_first_every_command_is_there():
    for argv in (None, [], ["--version"], ["--help"], ["nonsense"]):
        sub = next(a for a in build_parser(argv)._actions if a.dest == "command")
        assert list(sub.choices) == list(COMMANDS)
        assert all(len(p._actions) > 1 for p in sub.choices.values())  # each its own options, not a bare name


def test_a_command_name_first_registers_that_command_alone():
    sub = next(a for a in build_parser(["run", "--help"])._actions if a.dest == "command")
    assert [name for name, p in sub.choices.items() if len(p._actions) > 1] == ["run"]
