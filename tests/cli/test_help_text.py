"""Every command's ``--help`` shows all of its text, at any terminal width: Rich read an unescaped
``[default: ...]`` as a markup tag and dropped it (``ISO week YYYY-Www .`` instead of the default it names), and
its option table cut what did not fit at 80 columns with an ellipsis."""

from __future__ import annotations

import inspect
import itertools
import re
from typing import Any

import typer.main
from typer.testing import CliRunner

from inferensics.cli.app import app

runner = CliRunner()


def _flat(output: str) -> str:
    """The help's words on one line: a line break after a hyphen (click wraps there) or any run of whitespace
    (wrapping, indents) reads as the text the source wrote."""
    return " ".join(re.sub(r"(?<=\w)-\n\s*", "-", output).split())


def _help(path: tuple[str, ...], columns: int = 400) -> str:
    res = runner.invoke(app, [*path, "--help"], env={"COLUMNS": str(columns)})
    assert res.exit_code == 0, (path, res.output)
    return res.output


def _commands(command: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    """``(argv path, command)`` for the command and every subcommand (typer ships its own click)."""
    out = [(path, command)]
    for name, sub in getattr(command, "commands", {}).items():
        out += _commands(sub, (*path, name))
    return out


def test_every_bracketed_help_text_is_shown() -> None:
    commands = _commands(typer.main.get_command(app))
    assert len(commands) > 10  # the walk reaches the subcommands (report weekly, canary compare, ...)
    checked = 0
    for path, command in commands:
        wanted = [" ".join(t.split()) for p in command.params for t in re.findall(r"\[[^\]]*\]", p.help or "")]
        if not wanted:
            continue
        shown = _flat(_help(path))
        for text in wanted:
            assert text in shown, (path, text)
            checked += 1
    assert checked >= 10


def test_help_prose_is_wrapped_by_the_terminal_not_the_source() -> None:
    """A docstring's later paragraphs kept its source line breaks: at 80 columns ``serve --help`` read
    "...; tokens come" / "from the config file's ..." with the rest of the first line cut again by Rich.
    A paragraph now fills each line up to the terminal's width before it breaks."""
    checked = 0
    for path, command in _commands(typer.main.get_command(app)):
        paragraphs = inspect.cleandoc(command.help or "").split("\n\n")[1:]
        wanted = [" ".join(p.split()) for p in paragraphs if "\n" in p]
        if not wanted:
            continue
        shown = _help(path, columns=80)
        for text in wanted:
            assert text in _flat(shown), (path, text)
            checked += 1
        prose = shown.split("\nArguments:")[0].split("\nOptions:")[0].splitlines()
        for line, after in itertools.pairwise(prose):
            if line.strip() and after.strip():
                # a wrapped line leaves no room for the next line's first word
                assert len(line) + 1 + len(after.split()[0]) > 78, (path, line, after)
    assert checked >= 5


def test_help_loses_nothing_at_80_columns() -> None:
    """Rich's option table cut every cell that did not fit with an ellipsis: at 80 columns (and in a pipe)
    ``bundle build --help`` read ``--shapes-from-servi…``, and ``report weekly``'s --dsn lost
    ``http(s)://user:password@host:port/database`` and its environment variable's name."""
    checked = 0
    for path, command in _commands(typer.main.get_command(app)):
        shown = _help(path, columns=80)
        assert max(len(line) for line in shown.splitlines()) <= 80, path
        flat = _flat(shown)
        for param in command.params:
            names = param.opts if isinstance(param, typer.core.TyperOption) else [param.metavar or param.name.upper()]
            for name in names:
                assert name in shown, (path, name)
            if param.help:
                assert " ".join(param.help.split()) in flat, (path, param.help)
                checked += 1
        for name, sub in getattr(command, "commands", {}).items():  # a group lists each command's summary whole
            summary = " ".join(inspect.cleandoc(sub.help or "").split("\n\n")[0].split())
            assert f"{name} {summary}" in flat, (path, name, summary)
            checked += 1
    assert checked >= 60
