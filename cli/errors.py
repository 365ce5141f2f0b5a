"""Turning expected failures into one red line and a non-zero exit, never a traceback."""

from __future__ import annotations

from typing import NoReturn

import typer
from rich.markup import escape

from inferensics.cli.console import err_console


def fail(message: str, code: int = 2) -> NoReturn:
    """Print ``error: message`` on stderr and exit with ``code``."""
    err_console.print(f"[bold red]error:[/] {escape(message)}")  # plain text: '[tokens]' is no markup tag
    raise typer.Exit(code)
