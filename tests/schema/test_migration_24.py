"""Migration 24: replay verdicts name the request they replayed (``request_host``, ``request_ts``), host SDK health
records count untraceable kernel providers (``kernel_untraceable``), and every table's comment is its model
docstring's whole first paragraph; a store that the version before left without them reaches a fresh store's schema,
its rows reading the defaults.

What it got wrong: a table comment was the docstring's first line only, so ``shape_guards`` (and ``sdk_health``)
described themselves in half a sentence.
"""

from __future__ import annotations

import inspect
from datetime import UTC, datetime

from inferensics.schema import columns as col
from inferensics.schema.events import EVENT_MODELS, NO_TS, ReplayResultEvent, SdkHealthEvent, ShapeGuardEvent
from inferensics.schema.migrations import LATEST_VERSION, MIGRATIONS, Step
from inferensics.schema.store import Store
from tests.collector.migration_check import table_columns

VERSION = 24
ADDED = {
    ReplayResultEvent.TABLE.name: (col.REQUEST_HOST, col.REQUEST_TS),
    SdkHealthEvent.TABLE.name: (col.KERNEL_UNTRACEABLE,),
}
"""The columns migration 24 adds, by table."""
LATER = {SdkHealthEvent.TABLE.name: (col.REQUESTS_LOST, col.DEAD_PROCESSES, col.REQUESTS_RECOVERED)}
"""Columns later migrations add (26, 27): a store of the version before has none of them either."""


def _comments(s: Store) -> dict[str, str]:
    rows = s.query_rows(
        "SELECT name, comment FROM system.tables WHERE database = {db:String} AND engine NOT LIKE '%View'",
        {"db": s.database},
    )
    return {str(name): str(comment) for name, comment in rows}


def _first_line(model: type) -> str:
    """A table's comment before migration 24."""
    return (model.__doc__ or "").strip().splitlines()[0]


def test_every_table_comment_is_its_docstrings_first_paragraph_in_whole_sentences(store: Store) -> None:
    comments = _comments(store)
    shape_guards = comments[ShapeGuardEvent.TABLE.name]
    assert shape_guards.startswith("A symbolic-shape guard added while tracing: a condition on input sizes that ")
    assert shape_guards.endswith("."), shape_guards
    assert "a guard that fails at run time is a ``guard_failures`` row instead." in shape_guards
    assert "Counters are cumulative since the process started" in comments[SdkHealthEvent.TABLE.name]
    for model in EVENT_MODELS:
        comment = comments[model.TABLE.name]
        paragraph = inspect.cleandoc(model.__doc__ or "").split("\n\n")[0]
        assert comment == " ".join(paragraph.split("\n")), model.TABLE.name
        assert comment.endswith("."), (model.TABLE.name, comment)


def test_migration_24_brings_a_store_of_the_version_before_to_a_fresh_stores_schema(store_dsn: str) -> None:
    s = Store.open(store_dsn)
    try:
        assert s.migrate() == LATEST_VERSION
        assert MIGRATIONS[VERSION - 1].version == VERSION
        db = s.database
        fresh = {t: table_columns(s, t) for t in ADDED}
        fresh_comments = _comments(s)
        for table, names in ADDED.items():  # what the version before left: no such columns, first-line comments
            for name in (*names, *LATER.get(table, ())):
                s.client.command(f"ALTER TABLE {db}.{table} DROP COLUMN {name}")
        for model in EVENT_MODELS:
            old = _first_line(model).replace("'", "\\'")
            s.client.command(f"ALTER TABLE {db}.{model.TABLE.name} MODIFY COMMENT '{old}'")
        s.client.command(
            f"ALTER TABLE {db}.schema_migrations DELETE WHERE version >= {VERSION} SETTINGS mutations_sync = 1"
        )
        assert s.schema_version() == VERSION - 1
        assert _comments(s)[ShapeGuardEvent.TABLE.name].endswith("the exported program or")
        s.client.command(
            f"INSERT INTO {db}.replay_results (ts, replay_id, request_id, host) VALUES (now(), 'old', 'q', 'replayer')"
        )
        s.client.command(f"INSERT INTO {db}.sdk_health (ts, host, kernel_unproven) VALUES (now(), 'old', 2)")
        assert s.migrate() == LATEST_VERSION
        assert {t: table_columns(s, t) for t in ADDED} == fresh  # names, types, comments and order of a fresh table
        assert _comments(s) == fresh_comments
        for step in MIGRATIONS[VERSION - 1].statements(s.target):  # nothing conditional is left to do
            assert isinstance(step, Step)
            assert s.query_rows(step.when) == [(0,)], step.sql[:100]
        now = datetime.now(UTC).replace(microsecond=123456)
        s.insert_events(
            [
                ReplayResultEvent(
                    ts=now, replay_id="new", request_id="q", host="replayer", request_host="h2", request_ts=now
                )
            ]
        )
        s.insert_events([SdkHealthEvent(ts=now, host="new", kernel_unproven=1, kernel_untraceable=3)])
        replays = s.query_rows(
            f"SELECT replay_id, request_host, request_ts FROM {db}.replay_results ORDER BY replay_id"
        )
        naive = [t.replace(tzinfo=None) for t in (now, NO_TS)]  # the engine's rows read back as naive UTC
        assert replays == [("new", "h2", naive[0]), ("old", "", naive[1])]  # rows stored before read the defaults
        health = s.query_rows(f"SELECT host, kernel_unproven, kernel_untraceable FROM {db}.sdk_health ORDER BY host")
        assert health == [("new", 1, 3), ("old", 2, 0)]
        assert s.migrate() == LATEST_VERSION
    finally:
        s.client.command(f"DROP DATABASE IF EXISTS {s.database} SYNC")
        s.close()
