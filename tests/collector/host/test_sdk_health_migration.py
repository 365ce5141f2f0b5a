"""The host SDK health migration adds its table to a store that the schema version before it left without it."""

from __future__ import annotations

from datetime import UTC, datetime

from inferensics.schema import SdkHealthEvent
from inferensics.schema.migrations import LATEST_VERSION
from inferensics.schema.store import Store
from tests.collector.migration_check import roll_back_before, table_exists

TABLE = SdkHealthEvent.TABLE.name


def test_the_sdk_health_migration_adds_its_table(store_dsn: str) -> None:
    s = Store.open(store_dsn)
    try:
        before = roll_back_before(s, "host SDK health records", TABLE)
        assert s.schema_version() == before
        assert not table_exists(s, TABLE)
        assert s.migrate() == LATEST_VERSION
        assert table_exists(s, TABLE)
        s.insert_events([SdkHealthEvent(ts=datetime.now(UTC), host="h", requests_seen=3, refused_auth=2)])
        assert s.query_rows(f"SELECT requests_seen, refused_auth FROM {s.database}.{TABLE}") == [(3, 2)]
        assert s.migrate() == LATEST_VERSION
    finally:
        s.client.command(f"DROP DATABASE IF EXISTS {s.database} SYNC")
        s.close()
