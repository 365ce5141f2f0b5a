"""What a failed statement leaves on the store writer's chDB connection, and that the writer never reads it.

chDB's session hands the statement after a failed one what the failed one had sent before it failed (its header
and first blocks): a ``command`` returns them as its own result, a ``query`` fails on them. The schema migrator
clears them after a failed migration by asking ``SELECT 1`` again; the writer's probe and its check after a
refused insert ask the same way. A cancelled insert (the fault control's ``kill_inserts``) and an insert refused
for a bad row leave nothing: the statements after them get their own results.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from inferensics.collector.service import ServiceState, build_state, create_app, load_config
from inferensics.collector.service.testing import encode_request
from inferensics.schema.store import Store
from tests.collector.service.harness import ADMIN, INGEST, TOKENS
from tests.collector.service.otel import request
from tests.polling import poll

FAILS_MIDWAY = "SELECT number, throwIf(number = 100000) FROM numbers(200000) SETTINGS max_block_size = 1000"
"""A query that fails after the engine has sent its header and first blocks."""


def _drop(dsn: str) -> None:
    store = Store.open(dsn)
    try:
        store.client.command(f"DROP DATABASE IF EXISTS {store.database} SYNC")
    finally:
        store.close()


def _state(dsn: str, spool: Path, *, start_writer: bool) -> ServiceState:
    config = load_config(
        {"dsn": dsn, "spool_dir": str(spool), "tokens": TOKENS, "fault_control": True, "batch_max_age_s": 0.05},
        environ={},
    )
    return build_state(config, open_store=lambda: Store.open(dsn), start_writer=start_writer)


@pytest.fixture
def idle(store_dsn: str, tmp_path: Path) -> Iterator[ServiceState]:
    """The service's parts with the writer's store open and its thread not started (the test owns the connection)."""
    state = _state(store_dsn, tmp_path / "spool", start_writer=False)
    try:
        assert state.writer.connect() is not None, state.writer.last_error
        yield state
    finally:
        state.close()
        _drop(store_dsn)


def _fail(store: Store, sql: str) -> None:
    with pytest.raises(Exception, match="Code: "):
        store.client.query(sql) if sql.startswith("SELECT") else store.client.command(sql)


def test_chdb_hands_a_failed_querys_leftovers_to_the_next_statement(idle: ServiceState) -> None:
    """The engine's behaviour the writer guards against (when chDB stops doing this, the guard can go)."""
    store = idle.writer.store
    assert store is not None
    _fail(store, FAILS_MIDWAY)
    assert store.client.command("SELECT 44") != 44  # the leftover bytes, returned as this statement's result
    assert store.client.query("SELECT 42").result_rows == [(42,)]  # one statement takes them all


@pytest.mark.parametrize(
    "failed",
    [
        FAILS_MIDWAY,
        # a bad row: the engine refuses the value (CANNOT_PARSE_DATETIME, a content refusal)
        "INSERT INTO {db}.requests (request_id, ts) VALUES ('bad', 'not a time')",
    ],
    ids=["query_failed_midway", "insert_of_a_bad_row"],
)
def test_the_probe_reads_its_own_answer_after_a_failed_statement(idle: ServiceState, failed: str) -> None:
    """Asked once, the probe read the failed query's leftovers and reported the store down while it answered."""
    writer = idle.writer
    store = writer.store
    assert store is not None
    with writer.store_lock:
        _fail(store, failed.format(db=store.database))
    assert writer.probe() is True, writer.last_error
    assert writer.store_ok
    assert writer.last_error == ""
    assert store.client.query("SELECT 42").result_rows == [(42,)]
    assert store.client.command("SELECT 44") == 44


def test_a_killed_insert_leaves_nothing_for_the_writers_next_statements(store_dsn: str, tmp_path: Path) -> None:
    state = _state(store_dsn, tmp_path / "spool", start_writer=True)
    try:
        with TestClient(create_app(state)) as api:
            admin = {"Authorization": f"Bearer {ADMIN}"}
            ingest = {"Authorization": f"Bearer {INGEST}", "Content-Type": "application/x-protobuf"}
            killed = api.post("/api/v1/_faults", json={"kill_inserts": 1}, headers=admin)
            assert killed.status_code == 200, killed.text
            acked: list[str] = []
            for k in range(400):
                events = [request(i, run="kill") for i in range(k * 50, k * 50 + 50)]
                assert api.post("/v1/traces", content=encode_request(events), headers=ingest).status_code == 200
                acked += [e.request_id for e in events]
                if state.metrics.get("store_errors") >= 1:
                    break
                poll(state.spool.files, lambda n: n == 0, timeout=10, interval=0.01)
            assert state.metrics.get("store_errors") >= 1, "no insert was cancelled"
            assert state.faults.killed >= 1
            assert state.writer.drain(timeout=120), "the writer did not write the cancelled segment again"
            writer = state.writer
            store = writer.store
            assert store is not None
            with writer.store_lock:  # the writer's own connection, right after its cancelled insert and retry
                assert store.client.query("SELECT 42").result_rows == [(42,)]
                assert store.client.command("SELECT 44") == 44
            # the next insert gets its own result: every acknowledged span once, the next batch too
            last = [request(i, run="after") for i in range(20)]
            assert api.post("/v1/traces", content=encode_request(last), headers=ingest).status_code == 200
            assert writer.drain(timeout=120)
            rows = state.query_store().query_rows(f"SELECT request_id FROM {store.database}.requests")
            assert Counter(r[0] for r in rows) == Counter(acked + [e.request_id for e in last])
            assert state.metrics.get("quarantined_segments") == 0
            assert writer.store_ok
    finally:
        state.close()
        _drop(store_dsn)
