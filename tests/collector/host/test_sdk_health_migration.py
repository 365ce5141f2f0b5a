"""The host SDK health migrations add its table, and later its kernel-registry counters (untraceable providers last,
in migration 24), the requests dead processes lost (26) and the dead processes and their requests recovered (27), to
a store that the schema version before each left without them."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from inferensics.collector.host.kernel_counts import KERNEL_COUNTERS
from inferensics.schema import SdkHealthEvent
from inferensics.schema import columns as col
from inferensics.schema.migrations import LATEST_VERSION, MIGRATIONS
from inferensics.schema.store import Store
from tests.collector.migration_check import roll_back_before, table_columns, table_exists

TABLE = SdkHealthEvent.TABLE.name
MIGRATION_24 = next(m.name for m in MIGRATIONS if m.version == 24)
"""The migration that adds ``kernel_untraceable`` (with two other gaps)."""
MIGRATION_26 = next(m.name for m in MIGRATIONS if m.version == 26)
"""The migration that adds ``requests_lost``."""
MIGRATION_27 = next(m.name for m in MIGRATIONS if m.version == 27)
"""The migration that adds ``dead_processes`` and ``requests_recovered``."""
LATER_27 = (col.DEAD_PROCESSES, col.REQUESTS_RECOVERED)


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


def test_the_kernel_counts_migration_adds_its_columns_to_an_older_health_table(store_dsn: str) -> None:
    s = Store.open(store_dsn)
    try:
        assert s.migrate() == LATEST_VERSION
        version = next(
            m.version
            for m in MIGRATIONS
            if m.name == "host SDK health: kernel-registry failures, fallbacks and unproven providers; clean stops"
        )
        fresh = _columns(s)
        # None of them at the version before.
        added = (*KERNEL_COUNTERS, col.STOPPED, col.INTERVAL_S, col.PROCESS, col.REQUESTS_LOST, *LATER_27)
        for name in added:
            s.client.command(f"ALTER TABLE {s.database}.{TABLE} DROP COLUMN {name}")
        s.client.command(
            f"ALTER TABLE {s.database}.schema_migrations DELETE WHERE version >= {version} SETTINGS mutations_sync = 1"
        )
        s.client.command(f"INSERT INTO {s.database}.{TABLE} (ts, host, requests_seen) VALUES (now(), 'old', 5)")
        assert s.schema_version() == version - 1
        assert not set(added) & {name for name, _, _ in _columns(s)}
        assert s.migrate() == LATEST_VERSION
        assert _columns(s) == fresh  # the same names, types, comments and order as a fresh table
        s.insert_events(
            [SdkHealthEvent(ts=datetime.now(UTC), host="new", kernel_failures=2, kernel_fallbacks=1, stopped=True)]
        )
        rows = s.query_rows(
            f"SELECT host, requests_seen, kernel_failures, kernel_fallbacks, stopped FROM {s.database}.{TABLE} "
            "ORDER BY host"
        )
        assert rows == [("new", 0, 2, 1, True), ("old", 5, 0, 0, False)]
    finally:
        s.client.command(f"DROP DATABASE IF EXISTS {s.database} SYNC")
        s.close()


@pytest.mark.parametrize(
    ("migration", "dropped", "new", "old"),
    [
        (
            "host SDK health records carry their interval",
            (col.INTERVAL_S, col.PROCESS, col.KERNEL_UNTRACEABLE, col.REQUESTS_LOST, *LATER_27),
            {"interval_s": 300.0},
            0.0,
        ),
        (
            "host SDK health records name their process",
            (col.PROCESS, col.KERNEL_UNTRACEABLE, col.REQUESTS_LOST, *LATER_27),
            {"process": "42@1764950400000"},
            "",
        ),
        (MIGRATION_24, (col.KERNEL_UNTRACEABLE, col.REQUESTS_LOST, *LATER_27), {"kernel_untraceable": 3}, 0),
        (MIGRATION_26, (col.REQUESTS_LOST, *LATER_27), {"requests_lost": 5}, 0),
        (MIGRATION_27, LATER_27, {"dead_processes": 2}, 0),
        (MIGRATION_27, LATER_27, {"requests_recovered": 3}, 0),
    ],
)
def test_the_interval_process_untraceable_and_lost_migrations_add_their_column_and_older_rows_read_the_default(
    store_dsn: str, migration: str, dropped: tuple[str, ...], new: dict[str, object], old: object
) -> None:
    s = Store.open(store_dsn)
    try:
        assert s.migrate() == LATEST_VERSION
        version = next(m.version for m in MIGRATIONS if m.name == migration)
        fresh = _columns(s)
        for name in dropped:  # the column, and the ones later migrations add (a store at the version before)
            s.client.command(f"ALTER TABLE {s.database}.{TABLE} DROP COLUMN {name}")
        s.client.command(
            f"ALTER TABLE {s.database}.schema_migrations DELETE WHERE version >= {version} SETTINGS mutations_sync = 1"
        )
        s.client.command(f"INSERT INTO {s.database}.{TABLE} (ts, host, requests_seen) VALUES (now(), 'old', 5)")
        assert s.schema_version() == version - 1
        assert s.migrate() == LATEST_VERSION
        assert _columns(s) == fresh
        ((column, value),) = new.items()
        s.insert_events([SdkHealthEvent(ts=datetime.now(UTC), host="new", **new)])
        rows = s.query_rows(f"SELECT host, {column} FROM {s.database}.{TABLE} ORDER BY host")
        assert rows == [("new", value), ("old", old)]
    finally:
        s.client.command(f"DROP DATABASE IF EXISTS {s.database} SYNC")
        s.close()


def _columns(s: Store) -> list[tuple[str, str, str]]:
    return table_columns(s, TABLE)
