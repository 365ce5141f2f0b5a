"""Migration 22 gives ``compiles.outcome`` of a store created before it the comment a fresh store has, which lists
``incomplete`` (a compile whose log ended before it did)."""

from __future__ import annotations

from inferensics.schema import CompileEvent
from inferensics.schema import columns as col
from inferensics.schema.migrations import LATEST_VERSION, MIGRATIONS, Step
from inferensics.schema.store import Store
from tests.collector.migration_check import table_columns

TABLE = CompileEvent.TABLE.name
NAME = "a compile's outcome comment lists incomplete"
OLD_COMMENT = "``ok``, ``failed`` or ``recompile_limit``."
"""The comment ``compiles.outcome`` had before this migration."""


def _comment(s: Store) -> str:
    return next(c for n, _, c in table_columns(s, TABLE) if n == col.OUTCOME)


def test_migration_22_gives_the_outcome_column_of_an_older_store_the_fresh_comment(store_dsn: str) -> None:
    s = Store.open(store_dsn)
    try:
        assert s.migrate() == LATEST_VERSION
        version = next(m.version for m in MIGRATIONS if m.name == NAME)
        assert version == 22
        fresh = table_columns(s, TABLE)
        assert "``incomplete``" in _comment(s)
        s.client.command(f"ALTER TABLE {s.database}.{TABLE} COMMENT COLUMN `{col.OUTCOME}` '{OLD_COMMENT}'")
        s.client.command(
            f"ALTER TABLE {s.database}.schema_migrations DELETE WHERE version >= {version} SETTINGS mutations_sync = 1"
        )
        assert s.schema_version() == version - 1
        assert _comment(s) == OLD_COMMENT
        assert s.migrate() == LATEST_VERSION
        assert table_columns(s, TABLE) == fresh  # the same names, types, comments and order as a fresh table
        for step in MIGRATIONS[version - 1].statements(s.target):  # nothing conditional is left to do
            assert isinstance(step, Step)
            assert s.query_rows(step.when) == [(0,)], step.sql[:80]
        assert s.migrate() == LATEST_VERSION
    finally:
        s.client.command(f"DROP DATABASE IF EXISTS {s.database} SYNC")
        s.close()
