"""How ``--help`` and usage errors print: plain text that wraps, flags without a type, arguments by name.

Every app of the command is made by :func:`command_app`, which turns Rich's help panels off: Rich lays the
options out as a table and cuts what does not fit its cells with an ellipsis, so at 80 columns (and in a pipe)
``--shapes-from-service`` read ``--shapes-from-servi…`` and a DSN's form, an environment variable's name or a
default path lost their ends. Click's own formatter wraps every line instead and loses nothing. Help text is
therefore plain text: a bracket is a bracket, never a markup tag.

Typer labels every option with its Python type, so a flag reads ``--help <bool>`` as if it took a value, and
writes a required argument as ``{path}`` in the usage line; and it keeps a docstring's line breaks after the
first paragraph, so the source's wrap and the terminal's cut the prose into ragged lines. The app's group
class turns every command it hands out into these classes and rejoins those paragraphs, so each command module
registers its commands as usual.

A usage error (a missing argument or option, an unknown option, a bad value, an unknown command) prints as the
command's other errors do: one line, what is wrong and where the command's help is. Click printed the usage
line, a hint and the error: four lines, the error last.
"""

from __future__ import annotations

import inspect
from typing import Any

import typer
from rich.markup import escape
from typer._click.core import Context
from typer._click.exceptions import NoArgsIsHelpError, UsageError
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

from inferensics.cli.console import err_console


class OneLineUsageError(UsageError):
    """A usage error shown as one line: ``error: <click's words>; see `<command> --help```."""

    def show(self, file: Any = None) -> None:
        """Print the line on standard error (as :func:`~inferensics.cli.errors.fail` prints)."""
        where = self.ctx.command_path if self.ctx is not None else "inferensics"
        said = self.format_message().strip().rstrip(".")
        err_console.print(f"[bold red]error:[/] {escape(said)}; see `{escape(where)} --help`")


def _one_line(exc: UsageError, ctx: Context) -> UsageError:
    """``exc`` as a :class:`OneLineUsageError` (a request for help, ``no_args_is_help``, stays as it is)."""
    if isinstance(exc, NoArgsIsHelpError | OneLineUsageError):
        return exc
    return OneLineUsageError(exc.format_message(), exc.ctx or ctx)


def _tidy(params: list[Any]) -> list[Any]:
    for param in params:
        if isinstance(param, TyperOption) and param.is_flag and param.metavar is None:
            param.metavar = ""  # a flag takes no value: no type column
        elif isinstance(param, TyperArgument) and param.metavar is None:
            param.metavar = (param.name or "").upper()
    return params


def _unwrapped(text: str | None) -> str | None:
    """``text`` with each paragraph on one line (click wraps it to the terminal); a ``\b`` paragraph, click's
    mark for "keep my line breaks", is kept as written."""
    if not text:
        return text
    paragraphs = inspect.cleandoc(text).split("\n\n")
    return "\n\n".join(p if p.startswith("\b") else " ".join(p.split("\n")) for p in paragraphs)


class HelpCommand(TyperCommand):
    """A command whose help shows flags without a type and arguments as ``PATH``."""

    def get_params(self, ctx: Context) -> list[Any]:
        """The parameters, tidied for help (see the module docstring)."""
        return _tidy(super().get_params(ctx))

    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        """The arguments parsed; a usage error is one line (see the module docstring)."""
        try:
            return super().parse_args(ctx, args)
        except UsageError as exc:
            raise _one_line(exc, ctx) from None

    def collect_usage_pieces(self, ctx: Context) -> list[str]:
        """``[OPTIONS] PATH``: required arguments bare, optional ones in brackets."""
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if isinstance(param, TyperArgument):
                name = param.metavar or (param.name or "").upper()
                pieces.append(name if param.required else f"[{name}]")
        return pieces


class HelpGroup(TyperGroup):
    """The app's group: its own flags tidied, and every subcommand or subgroup handed out tidied too."""

    def get_params(self, ctx: Context) -> list[Any]:
        """The parameters, tidied for help."""
        return _tidy(super().get_params(ctx))

    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        """The arguments parsed; a usage error is one line (see the module docstring)."""
        try:
            return super().parse_args(ctx, args)
        except UsageError as exc:
            raise _one_line(exc, ctx) from None

    def resolve_command(self, ctx: Context, args: list[str]) -> Any:
        """The subcommand ``args`` name; an unknown one is one line."""
        try:
            return super().resolve_command(ctx, args)
        except UsageError as exc:
            raise _one_line(exc, ctx) from None

    def get_command(self, ctx: Context, cmd_name: str) -> Any:
        """The subcommand, as a :class:`HelpGroup` or :class:`HelpCommand`."""
        command = super().get_command(ctx, cmd_name)
        if type(command) is TyperGroup:
            command.__class__ = HelpGroup  # same layout, only the help methods differ
        elif type(command) is TyperCommand:
            command.__class__ = HelpCommand
        if command is not None:
            command.help = _unwrapped(command.help)
            if command.short_help is None and command.help:
                # the commands list shows the first paragraph whole, wrapped (click cuts it to one line with "...")
                command.short_help = command.help.split("\n\n")[0].removeprefix("\b").strip()
        return command


def command_app(help: str, **settings: Any) -> typer.Typer:
    """A typer app whose help and usage errors print as plain, wrapped text (see the module docstring)."""
    return typer.Typer(help=help, no_args_is_help=True, rich_markup_mode=None, cls=HelpGroup, **settings)
