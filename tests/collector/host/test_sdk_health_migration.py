"""Migration 9 adds the host SDK's health table to a store that schema version 8 left without it."""

from __future__ import annotations

from datetime import UTC, datetime

from inferensics.schema import SdkHealthEvent
from inferensics.schema.store import Store

TABLE = SdkHealthEvent.TABLE.name


def _exists(s: Store) -> bool:
    rows = s.query_rows(
        "SELECT count() FROM system.tables WHERE database = {db:String} AND name = {t:String}",
        {"db": s.database, "t": TABLE},
    )
    return bool(rows[0][0])


def test_migration_9_adds_the_sdk_health_table(store_dsn: str) -> None:
    s = Store.open(store_dsn)
    try:
        # A version-8 store: the current schema without the table version 9 brings, and without its record.
        assert s.migrate() == 9
        s.client.command(f"DROP TABLE {s.database}.{TABLE} SYNC")
        s.client.command(
            f"ALTER TABLE {s.database}.schema_migrations DELETE WHERE version = 9 SETTINGS mutations_sync = 1"
        )
        assert s.schema_version() == 8
        assert not _exists(s)
        assert s.migrate() == 9
        assert _exists(s)
        s.insert_events([SdkHealthEvent(ts=datetime.now(UTC), host="h", requests_seen=3, refused_auth=2)])
        assert s.query_rows(f"SELECT requests_seen, refused_auth FROM {s.database}.{TABLE}") == [(3, 2)]
        assert s.migrate() == 9
    finally:
        s.client.command(f"DROP DATABASE IF EXISTS {s.database} SYNC")
        s.close()
