"""Every command's ``--help`` shows its options' bracketed text: Rich reads an unescaped ``[default: ...]``
as a markup tag and drops it, silently (``ISO week YYYY-Www .`` instead of the default it names)."""

from __future__ import annotations

import inspect
import re
from typing import Any

import typer.main
from typer.testing import CliRunner

from inferensics.cli.app import app

runner = CliRunner()


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
        wanted = [
            text.replace("\\[", "[")
            for p in command.params
            for text in re.findall(r"\\?\[[^\]]*\]", getattr(p, "help", None) or "")
        ]
        if not wanted:
            continue
        res = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "400"})
        assert res.exit_code == 0, (path, res.output)
        for text in wanted:
            assert text in res.output, (path, text)
            checked += 1
    assert checked >= 10


def test_help_prose_is_wrapped_by_the_terminal_not_the_source() -> None:
    """A docstring's later paragraphs kept its source line breaks: at 80 columns ``serve --help`` read
    "...; tokens come" / "from the config file's ..." with the rest of the first line cut again by Rich."""
    checked = 0
    for path, command in _commands(typer.main.get_command(app)):
        paragraphs = inspect.cleandoc(command.help or "").split("\n\n")[1:]
        wanted = [" ".join(p.split()).replace("\\[", "[") for p in paragraphs if "\n" in p]
        if not wanted:
            continue
        res = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "400"})
        assert res.exit_code == 0, (path, res.output)
        lines = [line.strip() for line in res.output.splitlines()]
        for text in wanted:
            assert text in lines, (path, text)
            checked += 1
    assert checked >= 5
