"""``inferensics dashboard``: the on-call dashboard (Streamlit) over a running collector service."""

from __future__ import annotations

import signal
import subprocess
from typing import Annotated

import typer

from inferensics.cli.errors import fail
from inferensics.cli.extras import needs_extra
from inferensics.cli.options import MinCompileSecondsOption, MinRecompilesOption
from inferensics.collector.service_url import DEFAULT_URL, SERVICE_URL_ENV, TOKEN_ENV, service_url_problem

ADDRESS_ENV = "INFERENSICS_DASHBOARD_ADDRESS"
PORT_ENV = "INFERENSICS_DASHBOARD_PORT"


@needs_extra("dashboard", "dashboard")
def dashboard(  # noqa: PLR0917 - one option each
    port: Annotated[
        int, typer.Option(envvar=PORT_ENV, help=f"Port the dashboard listens on (or ${PORT_ENV}).", min=1, max=65535)
    ] = 8501,
    address: Annotated[
        str,
        typer.Option(
            envvar=ADDRESS_ENV,
            help=f"Address the dashboard listens on (or ${ADDRESS_ENV}; 0.0.0.0: every interface).",
        ),
    ] = "127.0.0.1",
    service: Annotated[
        str,
        typer.Option(envvar=SERVICE_URL_ENV, help=f"URL of the collector service (or ${SERVICE_URL_ENV})."),
    ] = DEFAULT_URL,
    token: Annotated[
        str | None,
        typer.Option(envvar=TOKEN_ENV, help=f"Bearer token with the read role (or ${TOKEN_ENV}).", show_default=False),
    ] = None,
    min_recompiles: MinRecompilesOption = None,
    min_compile_seconds: MinCompileSecondsOption = None,
) -> None:
    """Run the on-call dashboard against a collector service (`inferensics serve`), headless.

    Open http://ADDRESS:PORT in a browser. The dashboard reads everything through the service's API
    and never opens the store itself. A small fleet (or a short demo) lowers the storm rule's floors with
    --min-recompiles and --min-compile-seconds, as `inferensics report weekly` does; the overview's storm
    alerts and the Weekly report page start with them (each page can change them).
    """
    from inferensics.dashboard.launcher import start_dashboard

    if not address.strip():
        # Streamlit takes an empty address as every interface; an unset `--address ${VAR}` arrives so.
        fail(
            "--address: empty; give an address to listen on (127.0.0.1: this machine only, 0.0.0.0: every "
            f"interface) with --address or ${ADDRESS_ENV}"
        )
    _check_service(service, token)
    floors = {"min_recompiles": min_recompiles, "min_compile_seconds": min_compile_seconds}
    typer.echo(f"inferensics dashboard on http://{address}:{port} (service {service})")
    proc = start_dashboard(
        port=port,
        address=address,
        service_url=service,
        token=token,
        storm_floors={k: v for k, v in floors.items() if v is not None},
    )
    # SIGTERM (kill, a supervisor) stops it as Ctrl-C does: by default it would end this process alone and
    # leave the Streamlit child serving the port.
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        code = proc.wait()
    except KeyboardInterrupt:
        proc.send_signal(signal.SIGINT)
        try:
            code = proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
    if code not in (0, -signal.SIGINT, -signal.SIGTERM):
        raise typer.Exit(code)


def _interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def _check_service(service: str, token: str | None) -> None:
    """A service URL that cannot work is a usage error; a service that does not answer yet only a warning
    (it may be starting): every page shows the error until it answers."""
    from inferensics.collector.client import ServiceClient, ServiceError

    problem = service_url_problem(service)
    if problem:
        fail(f"--service {service!r}: {problem}")
    try:
        with ServiceClient(service, token, timeout=5) as client:
            client.status()
    except ServiceError as exc:
        typer.echo(f"warning: {exc}; starting the dashboard anyway", err=True)


def register(app: typer.Typer) -> None:
    """Add ``dashboard`` to the app."""
    app.command("dashboard")(dashboard)
