"""The committed DDL matches the models, and every statement of every backend parses in the engine."""

from __future__ import annotations

import pytest

from inferensics.schema.ddl import BACKENDS, SQL_DIR, Backend, Target, iter_statements, render_sql_file
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
    rows = store.query_rows(f"SELECT version, checksum FROM {store.database}.schema_migrations FINAL")
    assert rows == [(m.version, m.checksum(store.target)) for m in MIGRATIONS]


def test_fresh_store_reports_version_zero_then_latest(store_dsn: str) -> None:
    s = Store.open(store_dsn)
    try:
        assert s.schema_version() == 0
        assert s.migrate() == MIGRATIONS[-1].version
        assert set(s.row_counts()) == set(s.table_names())
    finally:
        s.client.command(f"DROP DATABASE IF EXISTS {s.database} SYNC")
