"""The ``inferensics`` command: one typer app; each part registers its subcommands in its own module."""

from __future__ import annotations

import importlib.metadata
from typing import Annotated

import typer

from inferensics.cli import (
    bundle_commands,
    dashboard_commands,
    demo_commands,
    kernels_commands,
    replay_commands,
    report_commands,
    requests_commands,
    service_commands,
    store_commands,
    trace_commands,
)
from inferensics.cli.help_format import command_app

app = command_app(
    "Observability and incident forensics for torch.compile'd inference.",
    name="inferensics",
    pretty_exceptions_enable=False,
    add_completion=False,
)


def _print_version(wanted: bool) -> None:
    if wanted:
        try:
            version = importlib.metadata.version("inferensics")
        except importlib.metadata.PackageNotFoundError:  # a source tree on PYTHONPATH, not installed
            version = "unknown (not installed)"
        typer.echo(f"inferensics {version}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True, help="Print the installed version and exit."),
    ] = False,
) -> None:
    # no docstring: the app's help stays the one given above
    pass


store_commands.register(app)
trace_commands.register(app)
service_commands.register(app)
dashboard_commands.register(app)
report_commands.register(app)
requests_commands.register(app)
replay_commands.register(app)
demo_commands.register(app)
kernels_commands.register(app)
bundle_commands.register(app)


def main() -> None:
    """Console-script entry point."""
    app()
