"""The service answers the named queries the command that starts it hands over, and says so when it has none.

The collector never imports analytics (an import contract checks it); ``inferensics serve`` passes the
analytics registry in (tests/analytics/test_registry.py runs those queries through the service).
"""

from __future__ import annotations

import socket
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, cast

import pytest
import typer
import typer.main

from inferensics.collector.service.queries import NO_QUERIES, QueryError, describe, registry, run_named

if TYPE_CHECKING:
    from inferensics.collector.service.state import ServiceState


def bare() -> ServiceState:
    """A state as ``python -m inferensics.collector.service`` builds it: no named queries handed in."""
    return cast("ServiceState", SimpleNamespace(named_queries=None))


def test_a_service_started_without_named_queries_says_how_to_get_them() -> None:
    assert registry(bare()) == {}
    assert describe(bare()) == {"queries": {}}
    with pytest.raises(QueryError) as err:
        run_named(bare(), "fleet_overview", {})
    assert err.value.status == 404
    assert err.value.message == f"unknown query 'fleet_overview'; {NO_QUERIES}"
    assert NO_QUERIES == "this service was started without named queries: start it with `inferensics serve`"


def test_the_serve_command_hands_over_the_analytics_registry(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from inferensics.analytics.registry import NAMED_QUERIES
    from inferensics.cli import service_commands
    from inferensics.cli.app import app

    seen: dict[str, object] = {}

    def fake_serve(settings: object, sock: socket.socket, *, named_queries: object = None) -> None:
        seen["named_queries"] = named_queries
        sock.close()

    monkeypatch.setattr("inferensics.collector.service.serve", fake_serve)
    monkeypatch.setenv("INFERENSICS_AUTH", "false")
    ctx = typer.Context(typer.main.get_command(app))  # as the CLI passes one (read only with --data-dir)
    service_commands.serve(ctx, port=0, dsn=f"chdb://{tmp_path}/never-opened", spool_dir=str(tmp_path / "spool"))
    assert seen["named_queries"] is NAMED_QUERIES
