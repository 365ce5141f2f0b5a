"""The shape-guards migration adds its table to a store that the schema version before it left without it."""

from __future__ import annotations

from datetime import UTC, datetime

from inferensics.schema import ShapeGuardEvent
from inferensics.schema.migrations import LATEST_VERSION
from inferensics.schema.store import Store
from tests.collector.migration_check import roll_back_before, table_exists

TABLE = ShapeGuardEvent.TABLE.name


def test_the_shape_guards_migration_adds_its_table(store_dsn: str) -> None:
    s = Store.open(store_dsn)
    try:
        before = roll_back_before(s, "shape guards imported from trace logs", TABLE)
        assert s.schema_version() == before
        assert not table_exists(s, TABLE)
        assert s.migrate() == LATEST_VERSION
        assert table_exists(s, TABLE)
        sources = ("s0=L['x'].size()[0]",)
        s.insert_events([ShapeGuardEvent(ts=datetime.now(UTC), host="h", expr="Eq(s0, s1)", symbol_sources=sources)])
        assert s.query_rows(f"SELECT expr, symbol_sources FROM {s.database}.{TABLE}") == [
            ("Eq(s0, s1)", ["s0=L['x'].size()[0]"])
        ]
        assert s.migrate() == LATEST_VERSION
    finally:
        s.client.command(f"DROP DATABASE IF EXISTS {s.database} SYNC")
        s.close()
