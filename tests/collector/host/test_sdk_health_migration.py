"""The host SDK health migration adds its table to a store that the schema version before it left without it."""

from __future__ import annotations

from datetime import UTC, datetime

from inferensics.schema import SdkHealthEvent
from inferensics.schema.migrations import LATEST_VERSION, MIGRATIONS
from inferensics.schema.store import Store

TABLE = SdkHealthEvent.TABLE.name


def _exists(s: Store) -> bool:
    rows = s.query_rows(
        "SELECT count() FROM system.tables WHERE database = {db:String} AND name = {t:String}",
        {"db": s.database, "t": TABLE},
    )
    return bool(rows[0][0])


def test_the_sdk_health_migration_adds_its_table(store_dsn: str) -> None:
    version = next(m.version for m in MIGRATIONS if m.name == "host SDK health records")
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
        s.insert_events([SdkHealthEvent(ts=datetime.now(UTC), host="h", requests_seen=3, refused_auth=2)])
        assert s.query_rows(f"SELECT requests_seen, refused_auth FROM {s.database}.{TABLE}") == [(3, 2)]
        assert s.migrate() == LATEST_VERSION
    finally:
        s.client.command(f"DROP DATABASE IF EXISTS {s.database} SYNC")
        s.close()
