"""``GET /api/v1/queries`` answers and counts its failures like the other query routes.

What it got wrong: a named query whose parameters have no JSON schema failed the listing with a bare
"Internal Server Error" (a traceback in the log) and no count, where the named-query and SQL routes count theirs in
``query_errors_total`` and ``rejected_total``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from pydantic import BaseModel
from starlette.testclient import TestClient

from inferensics.collector.service import ServiceState, build_state, create_app, load_config, queries
from inferensics.schema.store import Store
from tests.collector.service.harness import READ, TOKENS
from tests.collector.service.named import TEST_QUERIES, NamedQuery


class NoSchemaParams(BaseModel):
    """Parameters that pydantic validates but cannot describe as JSON schema."""

    pick: Callable[[int], int] = abs


class MidwayParams(BaseModel):
    """No parameters."""


def _fails_midway(client: Store, params: BaseModel) -> object:
    """A named query that fails after the engine has sent its header and first blocks."""
    return client.query_frame(
        "SELECT number, throwIf(number = 100000) FROM numbers(200000) SETTINGS max_block_size = 1000", {}
    )


@pytest.fixture(params=[True, False], ids=["writer", "writer_stopped"])
def api(store_dsn: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[ServiceState, TestClient]]:
    """The service; with the writer's thread not started, no other statement runs in the process between the
    test's (chDB's session is the process's: a writer's probe would take a failed query's leftovers)."""
    config = load_config(
        {"dsn": store_dsn, "spool_dir": str(tmp_path / "spool"), "batch_max_age_s": 0.05, "tokens": TOKENS},
        environ={},
    )
    broken = NamedQuery("broken", NoSchemaParams, lambda client, params: None, "Cannot be described.")
    midway = NamedQuery("midway", MidwayParams, _fails_midway, "Fails after its first blocks.")
    answer = NamedQuery("answer", MidwayParams, lambda client, params: client.query_frame("SELECT 42 AS x"), "42.")
    state = build_state(
        config,
        open_store=lambda: Store.open(store_dsn),
        named_queries={**TEST_QUERIES, "broken": broken, "midway": midway, "answer": answer},
        start_writer=request.param,
    )
    try:
        with TestClient(create_app(state), raise_server_exceptions=False) as client:
            yield state, client
    finally:
        state.close()
        store = Store.open(store_dsn)
        store.client.command(f"DROP DATABASE IF EXISTS {store.database} SYNC")
        store.close()


def test_a_listing_that_fails_answers_one_line_and_is_counted(api: tuple[ServiceState, TestClient]) -> None:
    state, client = api
    before = state.metrics.get("query_errors")
    r = client.get("/api/v1/queries", headers={"Authorization": f"Bearer {READ}"})
    assert r.status_code == 500, r.text
    error = r.json()["error"]
    assert error.startswith("the named query broken cannot be described: "), error
    assert "\n" not in error
    assert "Traceback" not in error
    assert state.metrics.get("query_errors") == before + 1
    metrics = client.get("/metrics", headers={"Authorization": f"Bearer {READ}"}).text
    assert f"inferensics_collector_query_errors_total {int(before + 1)}" in metrics.splitlines()


def test_a_named_query_that_fails_midway_leaves_nothing_for_the_next(api: tuple[ServiceState, TestClient]) -> None:
    """chDB hands a query that failed midway's leftovers to the next statement on the same connection and thread:
    the next named query got a broken answer ("Message metadata too long") instead of its own. Run on this thread
    (the routes run each request on a worker thread, which may or may not be the failed one's)."""
    state, client = api
    with pytest.raises(queries.QueryError, match=r"^midway failed: "):
        queries.run_named(state, "midway", {})
    frame = pa.ipc.open_stream(queries.run_named(state, "answer", {})).read_all()
    assert frame.to_pylist() == [{"x": 42}]
    r = client.post("/api/v1/query/midway", json={}, headers={"Authorization": f"Bearer {READ}"})
    assert r.status_code == 500, r.text
    assert r.json()["error"].startswith("midway failed: "), r.text
