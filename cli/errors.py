"""Turning expected failures into one red line and a non-zero exit, never a traceback."""

from __future__ import annotations

from typing import NoReturn

import typer
from rich.console import Console

err_console = Console(stderr=True, highlight=False, soft_wrap=True)


def fail(message: str, code: int = 2) -> NoReturn:
    """Print ``error: message`` on stderr and exit with ``code``."""
    err_console.print(f"[bold red]error:[/] {message}")
    raise typer.Exit(code)
