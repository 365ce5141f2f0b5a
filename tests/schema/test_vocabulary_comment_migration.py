"""Migration 25 gives a store of the version before it the column and table comments a fresh store has: each closed
vocabulary's column names every word its writers write, and the blob index's ``kind`` names capture markers.

What it got wrong: the comments (the models' docstrings) of ``compiles.cache_status``, ``bundle_states.state`` and
``kernel_qualifications.decision`` lacked ``mixed``, ``pushed`` and ``demoted``; ``blobs.kind`` did not say what an
``inputs_ref`` row is.
"""

from __future__ import annotations

from inferensics.schema import columns as col
from inferensics.schema.events import BlobIndexEvent, BundleStateEvent, CompileEvent, KernelQualificationEvent
from inferensics.schema.migrations import LATEST_VERSION, MIGRATIONS, Step
from inferensics.schema.store import Store
from tests.collector.migration_check import table_columns

NAME = "column comments name every word their columns take; capture markers named"
OLD = {
    (CompileEvent.TABLE.name, col.CACHE_STATUS): "FX-graph-cache status of this compile: ``hit``, ``miss``, "
    "``bypass`` or ``none``.",
    (BundleStateEvent.TABLE.name, col.STATE): "``promoted``, ``demoted``, ``revoked``, ``quarantined`` or "
    "``released``.",
    (KernelQualificationEvent.TABLE.name, col.DECISION): "``incumbent``, ``promoted``, ``kept`` or ``refused``.",
    (BlobIndexEvent.TABLE.name, col.KIND): "``output_code``, ``guard_tree``, ``inputs``, ``manifest``, ``graph``, "
    "``config``.",
}
"""The column comments before this migration."""
OLD_TABLE = "A change of a bundle's release state: promoted to a channel, demoted, revoked, quarantined, released."


def _table_comment(s: Store, table: str) -> str:
    rows = s.query_rows(
        "SELECT comment FROM system.tables WHERE database = {db:String} AND name = {t:String}",
        {"db": s.database, "t": table},
    )
    return str(rows[0][0])


def _quoted(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def test_migration_25_gives_an_older_store_the_fresh_comments(store_dsn: str) -> None:
    s = Store.open(store_dsn)
    try:
        assert s.migrate() == LATEST_VERSION
        version = next(m.version for m in MIGRATIONS if m.name == NAME)
        assert version == 25
        tables = sorted({t for t, _ in OLD})
        fresh = {t: table_columns(s, t) for t in tables}
        fresh_table = _table_comment(s, BundleStateEvent.TABLE.name)
        assert "pushed" in fresh_table
        db = s.database
        for (table, column), comment in OLD.items():
            s.client.command(f"ALTER TABLE {db}.{table} COMMENT COLUMN `{column}` {_quoted(comment)}")
        s.client.command(f"ALTER TABLE {db}.{BundleStateEvent.TABLE.name} MODIFY COMMENT {_quoted(OLD_TABLE)}")
        s.client.command(
            f"ALTER TABLE {db}.schema_migrations DELETE WHERE version >= {version} SETTINGS mutations_sync = 1"
        )
        assert s.schema_version() == version - 1
        assert {t: table_columns(s, t) for t in tables} != fresh
        assert s.migrate() == LATEST_VERSION
        assert {t: table_columns(s, t) for t in tables} == fresh  # names, types, comments and order of a fresh table
        assert _table_comment(s, BundleStateEvent.TABLE.name) == fresh_table
        for step in MIGRATIONS[version - 1].statements(s.target):  # nothing conditional is left to do
            assert isinstance(step, Step)
            assert s.query_rows(step.when) == [(0,)], step.sql[:80]
    finally:
        s.client.command(f"DROP DATABASE IF EXISTS {s.database} SYNC")
        s.close()
