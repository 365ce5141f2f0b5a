"""The shape-guards migration adds its table to a store that the schema version before it left without it."""

from __future__ import annotations

from datetime import UTC, datetime

from inferensics.schema import ShapeGuardEvent
from inferensics.schema.migrations import LATEST_VERSION, MIGRATIONS
from inferensics.schema.store import Store

TABLE = ShapeGuardEvent.TABLE.name


def _exists(s: Store) -> bool:
    rows = s.query_rows(
        "SELECT count() FROM system.tables WHERE database = {db:String} AND name = {t:String}",
        {"db": s.database, "t": TABLE},
    )
    return bool(rows[0][0])


def test_the_shape_guards_migration_adds_its_table(store_dsn: str) -> None:
    version = next(m.version for m in MIGRATIONS if m.name == "shape guards imported from trace logs")
    s = Store.open(store_dsn)
    try:
        # A store from before that migration: the current schema without its table and without the records
        # of it and of every later migration (those are idempotent and run again).
        assert s.migrate() == LATEST_VERSION
        s.client.command(f"DROP TABLE {s.database}.{TABLE} SYNC")
        s.client.command(
            f"ALTER TABLE {s.database}.schema_migrations DELETE WHERE version >= {version} SETTINGS mutations_sync = 1"
        )
        assert s.schema_version() == version - 1
        assert not _exists(s)
        assert s.migrate() == LATEST_VERSION
        assert _exists(s)
        sources = ("s0=L['x'].size()[0]",)
        s.insert_events([ShapeGuardEvent(ts=datetime.now(UTC), host="h", expr="Eq(s0, s1)", symbol_sources=sources)])
        assert s.query_rows(f"SELECT expr, symbol_sources FROM {s.database}.{TABLE}") == [
            ("Eq(s0, s1)", ["s0=L['x'].size()[0]"])
        ]
        assert s.migrate() == LATEST_VERSION
    finally:
        s.client.command(f"DROP DATABASE IF EXISTS {s.database} SYNC")
        s.close()
