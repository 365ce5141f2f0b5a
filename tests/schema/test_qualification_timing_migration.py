"""Migration 19 gives the kernel qualification records their ``timing`` column (how each median was measured) in
a store that the schema version before it left without one, placed as a fresh table has it."""

from __future__ import annotations

from datetime import UTC, datetime

from inferensics.schema import KernelQualificationEvent
from inferensics.schema import columns as col
from inferensics.schema.migrations import LATEST_VERSION, MIGRATIONS, Step
from inferensics.schema.store import Store
from tests.collector.migration_check import table_columns

TABLE = KernelQualificationEvent.TABLE.name
NAME = "kernel qualification records say how each median was timed"


def test_migration_19_adds_the_timing_column_to_an_older_qualification_table(store_dsn: str) -> None:
    s = Store.open(store_dsn)
    try:
        assert s.migrate() == LATEST_VERSION
        version = next(m.version for m in MIGRATIONS if m.name == NAME)
        assert version == 19
        fresh = _columns(s)
        assert [n for n, _, _ in fresh].index(col.TIMING) == [n for n, _, _ in fresh].index(col.TRIALS) + 1
        s.client.command(f"ALTER TABLE {s.database}.{TABLE} DROP COLUMN {col.TIMING}")
        s.client.command(
            f"ALTER TABLE {s.database}.schema_migrations DELETE WHERE version >= {version} SETTINGS mutations_sync = 1"
        )
        s.client.command(
            f"INSERT INTO {s.database}.{TABLE} (ts, host, op, provider, median_us) VALUES (now(), 'old', 'rms_norm', "
            "'triton', 411.0)"
        )
        assert s.schema_version() == version - 1
        assert col.TIMING not in {name for name, _, _ in _columns(s)}
        assert s.migrate() == LATEST_VERSION
        assert _columns(s) == fresh  # the same names, types, comments and order as a fresh table
        for step in MIGRATIONS[version - 1].statements(s.target):  # nothing conditional is left to do
            assert isinstance(step, Step)
            assert s.query_rows(step.when) == [(0,)], step.sql[:80]
        now = datetime.now(UTC)
        s.insert_events(
            [
                KernelQualificationEvent(
                    ts=now, host="new", op="rms_norm", provider="t", median_us=4.2, timing="cuda_graph"
                )
            ]
        )
        rows = s.query_rows(f"SELECT host, median_us, timing FROM {s.database}.{TABLE} ORDER BY host")
        assert rows == [("new", 4.2, "cuda_graph"), ("old", 411.0, "")]  # rows stored before read it empty
        assert s.migrate() == LATEST_VERSION
    finally:
        s.client.command(f"DROP DATABASE IF EXISTS {s.database} SYNC")
        s.close()


def test_the_timing_column_round_trips(store: Store) -> None:
    events = [
        KernelQualificationEvent(ts=datetime.now(UTC), host="h", op="silu_mul", provider=p, timing=t, trials=15)
        for p, t in (("reference", "cuda_graph"), ("triton", "events"), ("inductor", "wall"), ("vendor", ""))
    ]
    assert store.insert_events(events) == len(events)
    back = store.select_events(KernelQualificationEvent)
    assert sorted((e.provider, e.timing) for e in back) == sorted((e.provider, e.timing) for e in events)


def _columns(s: Store) -> list[tuple[str, str, str]]:
    return table_columns(s, TABLE)
