"""The committed DDL matches the models, and every statement of every backend parses in the engine."""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa
import pytest

from inferensics.schema import RequestEvent
from inferensics.schema import columns as c
from inferensics.schema.ddl import (
    BACKENDS,
    DEDUP_WINDOW,
    SQL_DIR,
    WIDE_PART_MIN_BYTES,
    Backend,
    Target,
    iter_statements,
    render_schema,
    render_sql_file,
)
from inferensics.schema.migrations import MIGRATIONS, migrations_table_sql
from inferensics.schema.store import Store


@pytest.mark.parametrize("backend", BACKENDS)
def test_committed_ddl_matches_the_models(backend: Backend) -> None:
    committed = (SQL_DIR / f"{backend}.sql").read_text(encoding="utf-8")
    assert committed == render_sql_file(backend), (
        f"schema/sql/{backend}.sql drifted from schema/events.py: run `python -m inferensics.schema.ddl`"
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_statement_parses_in_the_engine(store: Store, backend: Backend) -> None:
    # No cluster runs here: the cluster rendering (ReplicatedMergeTree, Distributed, ON CLUSTER) is checked
    # by the engine's own parser rather than executed.
    statements = list(iter_statements((SQL_DIR / f"{backend}.sql").read_text(encoding="utf-8")))
    statements.append(migrations_table_sql(Target(backend)))
    assert len(statements) > 20
    for stmt in statements:
        formatted = store.query_rows("SELECT formatQuery({q:String})", {"q": stmt})[0][0]
        assert formatted.split()[0] == "CREATE"


def test_cluster_rendering_is_replicated_and_distributed() -> None:
    text = (SQL_DIR / "cluster.sql").read_text(encoding="utf-8")
    statements = list(iter_statements(text))
    creates = [s for s in statements if s.startswith("CREATE TABLE")]
    assert all("ON CLUSTER '{cluster}'" in s for s in statements)
    assert sum("ENGINE = Distributed(" in s for s in creates) == sum("_local ON CLUSTER" in s for s in creates)
    assert "Distributed('{cluster}', inferensics, requests_local, cityHash64(request_id))" in text
    assert "ReplicatedMergeTree(" not in (SQL_DIR / "chdb.sql").read_text(encoding="utf-8")


def test_migrations_are_idempotent(store: Store) -> None:
    def snapshot() -> list[tuple[object, ...]]:
        return store.query_rows(
            "SELECT name, create_table_query FROM system.tables WHERE database = {db:String} ORDER BY name",
            {"db": store.database},
        )

    before = snapshot()
    assert store.migrate() == MIGRATIONS[-1].version
    assert store.migrate() == MIGRATIONS[-1].version
    assert snapshot() == before
    rows = store.query_rows(f"SELECT version, checksum FROM {store.database}.schema_migrations FINAL ORDER BY version")
    assert rows == [(m.version, m.checksum(store.target)) for m in MIGRATIONS]


def test_fresh_store_reports_version_zero_then_latest(store_dsn: str) -> None:
    s = Store.open(store_dsn)
    try:
        assert s.schema_version() == 0
        assert s.migrate() == MIGRATIONS[-1].version
        assert set(s.row_counts()) == set(s.table_names())
    finally:
        s.client.command(f"DROP DATABASE IF EXISTS {s.database} SYNC")


def _version_1_statements(target: Target) -> list[str]:
    """The schema as version 1 created it: wide parts from 10 MiB, rollups without a token window."""
    out = []
    for stmt in render_schema(target):
        old = stmt.replace(f", min_bytes_for_wide_part = {WIDE_PART_MIN_BYTES}", "")
        if "AggregatingMergeTree" in old:
            old = old.replace(f", non_replicated_deduplication_window = {DEDUP_WINDOW}", "")
        out.append(old)
    return out


def test_migrations_2_and_3_bring_a_version_1_store_up_to_date(store_dsn: str) -> None:
    s = Store.open(store_dsn)
    try:
        s.client.command(migrations_table_sql(s.target))
        for stmt in _version_1_statements(s.target):
            s.client.command(stmt)
        s.client.insert(
            f"{s.database}.schema_migrations",
            [[1, MIGRATIONS[0].name, MIGRATIONS[0].checksum(s.target), datetime.now(UTC)]],
            column_names=["version", "name", "checksum", "applied_at"],
        )
        assert s.schema_version() == 1
        assert s.migrate() == 3
        assert s.migrate() == 3
        tables = dict(
            s.query_rows(
                "SELECT name, create_table_query FROM system.tables WHERE database = {db:String} "
                "AND engine LIKE '%MergeTree' AND name != 'schema_migrations'",
                {"db": s.database},
            )
        )
        assert set(tables) == set(s.table_names())
        for name, query in tables.items():
            assert f"min_bytes_for_wide_part = {WIDE_PART_MIN_BYTES}" in query, name
            assert f"non_replicated_deduplication_window = {DEDUP_WINDOW}" in query, name
        now = datetime.now(UTC)  # inside the tables' TTL, which drops an expired insert at once
        # The version-3 store answers like a fresh one: a replayed batch reaches neither table nor rollup.
        batch = pa.table(
            {
                c.REQUEST_ID: ["r1", "r2"],
                c.TS: pa.array([now] * 2, pa.timestamp("us", tz="UTC")),
                **{name: ["x", "x"] for name in (c.HOST, c.MODEL, c.HW_POOL, c.TRAFFIC_CLASS)},
            }
        )
        for _ in range(2):
            s.insert_arrow(RequestEvent, batch, dedup_token="spool-1")
        assert s.query_rows(f"SELECT count() FROM {s.database}.requests")[0][0] == 2
        for rollup in ("requests_1m", "requests_1h", "requests_1d"):
            assert s.query_rows(f"SELECT sum(requests) FROM {s.database}.{rollup}")[0][0] == 2, rollup
        # An insert-sized part past the old 10 MiB limit (100k rows of 128-byte ids, ~16 MB) is compact.
        n = 100_000
        batch = pa.table(
            {
                c.REQUEST_ID: [f"req-{i:08d}-{'x' * 115}" for i in range(n)],
                c.TS: pa.array([now] * n, pa.timestamp("us", tz="UTC")),
                **{name: pa.array(["x"] * n) for name in (c.HOST, c.MODEL, c.HW_POOL, c.TRAFFIC_CLASS)},
            }
        )
        assert s.insert_arrow(RequestEvent, batch) == n
        types = s.query_rows(
            "SELECT part_type, data_uncompressed_bytes > 10485760 FROM system.parts "
            "WHERE database = {db:String} AND table = 'requests' AND active AND rows >= {n:UInt64}",
            {"db": s.database, "n": n},
        )
        assert types == [("Compact", True)]
    finally:
        s.client.command(f"DROP DATABASE IF EXISTS {s.database} SYNC")


@pytest.mark.parametrize("backend", BACKENDS)
def test_migration_statements_parse_in_the_engine(store: Store, backend: Backend) -> None:
    for m in MIGRATIONS[1:]:
        for stmt in m.statements(Target(backend)):
            formatted = store.query_rows("SELECT formatQuery({q:String})", {"q": stmt})[0][0]
            assert formatted.startswith("ALTER TABLE"), formatted
