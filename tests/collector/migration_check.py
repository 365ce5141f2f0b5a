"""A store as a schema version before a table's migration left it, for tests of migrations that add a table."""

from __future__ import annotations

from inferensics.schema.migrations import LATEST_VERSION, MIGRATIONS
from inferensics.schema.store import Store


def table_exists(s: Store, table: str) -> bool:
    """Whether ``table`` is in the store's database."""
    rows = s.query_rows(
        "SELECT count() FROM system.tables WHERE database = {db:String} AND name = {t:String}",
        {"db": s.database, "t": table},
    )
    return bool(rows[0][0])


def table_columns(s: Store, table: str) -> list[tuple[str, str, str]]:
    """``(name, type, comment)`` of each column of ``table``, in order: what a migrated table must share with a
    fresh one."""
    return [
        (str(n), str(t), str(c))
        for n, t, c in s.query_rows(
            "SELECT name, type, comment FROM system.columns WHERE database = {db:String} AND table = {t:String} "
            "ORDER BY position",
            {"db": s.database, "t": table},
        )
    ]


def roll_back_before(s: Store, migration: str, table: str) -> int:
    """Migrate ``s``, then make it a store from before ``migration``: ``table`` dropped and the records of that
    migration and every later one deleted (those are idempotent and run again). Returns the version before."""
    version = next(m.version for m in MIGRATIONS if m.name == migration)
    assert s.migrate() == LATEST_VERSION
    s.client.command(f"DROP TABLE {s.database}.{table} SYNC")
    s.client.command(
        f"ALTER TABLE {s.database}.schema_migrations DELETE WHERE version >= {version} SETTINGS mutations_sync = 1"
    )
    return version - 1
