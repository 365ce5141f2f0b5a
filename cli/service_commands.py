"""``inferensics serve``: run the collector service; and the service half of ``inferensics status``."""

from __future__ import annotations

import faulthandler
import signal
import subprocess
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from inferensics.cli.console import console
from inferensics.cli.errors import fail
from inferensics.cli.extras import needs_extra, require_extra
from inferensics.cli.options import DataDirOption, dsn_from, typed
from inferensics.collector.service_url import SERVICE_URL_ENV, TOKEN_ENV

if TYPE_CHECKING:
    from inferensics.collector.service.config import ServiceConfig


def _service_url(ctx: typer.Context, value: str | None) -> str | None:
    """``--service``, or ``$INFERENSICS_SERVICE_URL`` unless ``--dsn`` or ``--data-dir`` is typed: an argument
    beats an environment variable (the variable won, and the store typed was left unread). Typed beside
    either, ``--service`` is refused by :func:`~inferensics.cli.options.dsn_from`."""
    if value and not typed(ctx, "service") and (typed(ctx, "dsn") or typed(ctx, "data_dir")):
        return None
    return value


ServiceOption = Annotated[
    str | None,
    typer.Option(
        "--service",
        envvar=SERVICE_URL_ENV,
        help=f"URL of the collector service, `inferensics serve` (e.g. http://127.0.0.1:4318; falls back to "
        f"${SERVICE_URL_ENV}); needed while that service owns an embedded store.",
        show_default=False,
        callback=_service_url,
    ),
]
TokenOption = Annotated[
    str | None,
    typer.Option(
        "--token", envvar=TOKEN_ENV, help=f"Bearer token for the service (or ${TOKEN_ENV}).", show_default=False
    ),
]


@needs_extra("service", "serve")
def serve(
    ctx: typer.Context,
    *,
    host: Annotated[str | None, typer.Option(help="Address to listen on [default: 127.0.0.1].")] = None,
    port: Annotated[int | None, typer.Option(help="TCP port [default: 4318].")] = None,
    dsn: Annotated[
        str | None,
        typer.Option(
            help="Store DSN: chdb:///<data dir> (embedded) or http(s)://user:password@host:port/database "
            "[default: $INFERENSICS_DSN, then the config file, then the embedded default directory]."
        ),
    ] = None,
    config: Annotated[str | None, typer.Option("--config", help="TOML config file (settings and [tokens]).")] = None,
    spool_dir: Annotated[
        str | None, typer.Option(help="Spool directory [default: the data directory's spool/, DIR/spool].")
    ] = None,
    data_dir: DataDirOption = None,
    with_dashboard: Annotated[
        bool, typer.Option("--with-dashboard", help="Also run the on-call dashboard against this service.")
    ] = False,
    dashboard_port: Annotated[int, typer.Option(help="Port of the dashboard that --with-dashboard starts.")] = 8501,
) -> None:
    """Run the collector service: OTLP/HTTP in, the store, the query and blob API.

    Settings resolve as argument > INFERENSICS_* environment variable > config file > default; tokens come
    from the config file's [tokens] table and $INFERENSICS_TOKENS (token=role+role,...).
    """
    if with_dashboard:
        require_extra("dashboard", "serve --with-dashboard")  # before anything is bound or opened
    from inferensics.analytics.registry import NAMED_QUERIES
    from inferensics.collector.service import ConfigError, ListenError, StartError, listen, load_config
    from inferensics.collector.service import serve as run_service

    dsn = dsn_from(ctx, dsn, data_dir)
    try:
        settings = load_config({"host": host, "port": port, "dsn": dsn, "spool_dir": spool_dir}, config_file=config)
    except ConfigError as exc:
        fail(str(exc))
    from inferensics.cli.store_paths import writable_store

    writable_store(settings.dsn or None, "`inferensics serve` opens a store, or makes one")
    if settings.auth and not settings.tokens:
        fail("no tokens configured: set $INFERENSICS_TOKENS=token=admin or a [tokens] table in --config "
             "(or INFERENSICS_AUTH=false for an open loopback service)")  # fmt: skip
    try:
        sock = listen(settings.host, settings.port)  # before the store, the spool and the dashboard
    except ListenError as exc:
        fail(str(exc))
    dashboard = _start_dashboard(settings, dashboard_port) if with_dashboard else None
    # uvicorn re-raises SIGTERM after its graceful shutdown; the default action would end this process there,
    # before the service writes what its spool holds and closes the store (and before a dashboard child is
    # stopped), so turn it into an exit that runs those finally blocks.
    signal.signal(signal.SIGTERM, _exit_on_signal)
    if not faulthandler.is_enabled():
        # A crash in native code (the embedded engine, a library) prints every thread's stack on stderr
        # before the process ends; the store keeps this handler when chDB loads (schema.engine_signals).
        faulthandler.enable(all_threads=True)
    try:
        run_service(settings, sock, named_queries=NAMED_QUERIES)  # the collector never imports analytics
    except StartError as exc:  # a spool folder it cannot use, or another service's spool or embedded store
        fail(str(exc))
    finally:
        if dashboard is not None:
            dashboard.terminate()
            dashboard.wait(30)


def _exit_on_signal(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def _start_dashboard(settings: ServiceConfig, port: int) -> subprocess.Popen[bytes]:
    """Start ``inferensics dashboard`` as a child pointed at this service, with a token that may read."""
    from inferensics.dashboard.launcher import start_dashboard

    readers = sorted(t for t, roles in settings.tokens.items() if "read" in roles)
    readers = readers or sorted(t for t, roles in settings.tokens.items() if "admin" in roles)
    if settings.auth and not readers:
        fail("--with-dashboard needs a token with the read role: add one to $INFERENSICS_TOKENS or [tokens]")
    host = "127.0.0.1" if settings.host in ("0.0.0.0", "::", "") else settings.host
    url = f"{'https' if settings.tls_cert else 'http'}://{host}:{settings.port}"
    console.print(f"dashboard on http://127.0.0.1:{port} (reading {url})")
    return start_dashboard(port=port, service_url=url, token=readers[0] if settings.auth else None)


def _human(n: float) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def print_service_status(url: str, token: str | None) -> None:
    """Print a running service's store, schema, spool and counters (``inferensics status --service``).

    Exits 1 after printing when something it checks is down (the store unavailable, the schema behind,
    the spool at its cap), with one line saying what and what to do: a monitoring script reads the code.
    """
    from inferensics.collector.client import ServiceClient, ServiceError

    try:
        with ServiceClient(url, token=token, timeout=30) as client:
            status: dict[str, Any] = client.status()
    except ServiceError as exc:
        fail(exc.message)
    store, spool = status["store"], status["spool"]
    console.print(f"service      {url} (up {status['uptime_s']:.0f} s)")
    where = store.get("dsn", "(the service could not open it)")
    console.print(f"store        {where} ({'ok' if store['ok'] else 'UNAVAILABLE'})")
    reason = store.get("last_error") or store.get("error") or ""
    if not store["ok"] and reason:
        console.print(f"last error   {reason}")
    newer = "schema_version" in store and store["schema_version"] > store["latest_version"]
    behind = "schema_version" in store and store["schema_version"] < store["latest_version"]
    if "schema_version" in store:
        latest = store["latest_version"]
        state = (
            "newer than the service's release, which must not write to it"
            if newer
            else ("behind, run `inferensics init`" if behind else "current")
        )
        console.print(f"schema       version {store['schema_version']} (latest {latest}: {state})")
    full = spool["bytes"] >= spool["max_bytes"]
    console.print(
        f"spool        {spool['dir']}: {spool['files']} files, {_human(spool['bytes'])} of {_human(spool['max_bytes'])}"
    )
    counters = status.get("counters", {})
    reasons = status.get("rejected_by_reason") or {}
    console.print("counters     " + ", ".join(f"{k} {v:,.0f}" for k, v in counters.items()))
    if reasons:
        console.print("rejected     " + ", ".join(f"{k} {v:,.0f}" for k, v in reasons.items()))
    counts = store.get("row_counts") or {}
    if counts:
        disk = store.get("disk_bytes") or {}
        table = Table("table", "rows", "on disk", title="rows per table")
        for name, n in counts.items():
            table.add_row(name, f"{n:,}", _human(disk.get(name, 0)))
        console.print(table)
        # The service reports the engine's parts, not the folder (a server store has none this host could read).
        console.print(f"on disk      {_human(sum(disk.values()))} in the tables' active parts (the sum of the table)")
    problems: list[str] = []
    if not store["ok"]:
        problems.append(
            "the store is unavailable: the service acknowledges into its spool until the spool is full; bring the "
            "store its DSN names back (see 'last error' above, and the service's log)"
        )
    if newer:
        from inferensics.schema.migrations import newer_store_text

        problems.append(
            newer_store_text(where, store["schema_version"], store["latest_version"], release="the service's release")
        )
    if behind:
        problems.append(
            f"the store's schema is version {store['schema_version']}, the service needs {store['latest_version']}: "
            "run `inferensics init` with the migrating user's DSN (the writer waits meanwhile)"
        )
    if full:
        problems.append(
            "the spool is at its cap: ingest is refused (429/503) until the writer catches up; fix the store, or "
            "raise spool_max_bytes ($INFERENSICS_SPOOL_MAX_BYTES)"
        )
    if problems:
        fail("; and ".join(problems), code=1)


def register(app: typer.Typer) -> None:
    """Add ``serve`` to the app."""
    app.command("serve")(serve)
