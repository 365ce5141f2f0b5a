"""Versioned schema migrations.

Version 1 creates the schema rendered from the models (every statement ``IF NOT EXISTS``). A later change
to the models adds a migration of ``ALTER TABLE … ADD COLUMN IF NOT EXISTS`` statements and regenerates the
committed DDL; version 1 is never edited by hand, it is the rendering of the models that shipped with it.
Applying the migrations twice changes nothing: versions already recorded in ``schema_migrations`` are
skipped, and every statement is idempotent on its own.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass

from inferensics.schema.ddl import DEDUP_WINDOW, WIDE_PART_MIN_BYTES, Target, render_schema
from inferensics.schema.events import EVENT_MODELS
from inferensics.schema.rollups import ROLLUPS


@dataclass(frozen=True, slots=True)
class Migration:
    """One schema version: its number, a name, and the statements that reach it from the one before."""

    version: int
    name: str
    statements: Callable[[Target], list[str]]

    def checksum(self, target: Target) -> str:
        """sha256 of the statements for ``target``: a recorded version whose checksum differs is reported."""
        return hashlib.sha256("\n;\n".join(self.statements(target)).encode()).hexdigest()


def migrations_table_sql(target: Target) -> str:
    """The bookkeeping table recording applied versions (one row per version)."""
    db = target.database
    engine = (
        "ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/" + db + "/schema_migrations', '{replica}')"
        if target.backend == "cluster"
        else "ReplacingMergeTree"
    )
    return (
        f"CREATE TABLE IF NOT EXISTS {db}.schema_migrations{target.on_cluster}\n"
        "(\n    `version` UInt32,\n    `name` String,\n    `checksum` String,\n"
        "    `applied_at` DateTime64(6, 'UTC')\n)\n"
        f"ENGINE = {engine}\nORDER BY version"
    )


def _compact_insert_parts(target: Target) -> list[str]:
    # Stores created before version 2 write every insert-sized part wide; the setting is idempotent.
    names = [m.TABLE.name for m in EVENT_MODELS] + [r.name for r in ROLLUPS]
    return [
        f"ALTER TABLE {target.database}.{target.local(name)}{target.on_cluster} "
        f"MODIFY SETTING min_bytes_for_wide_part = {WIDE_PART_MIN_BYTES}"
        for name in names
    ]


def _rollups_skip_replayed_batches(target: Target) -> list[str]:
    # Before version 3 a batch replayed with the same token was dropped from the event table but still
    # added to the rollups: a non-replicated rollup kept no block tokens to recognise the view's block by.
    # Replicated rollups (the cluster) always keep them.
    if target.backend == "cluster":
        return []
    return [
        f"ALTER TABLE {target.database}.{r.name} MODIFY SETTING non_replicated_deduplication_window = {DEDUP_WINDOW}"
        for r in ROLLUPS
    ]


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "initial schema", render_schema),
    Migration(2, "insert-sized parts compact", _compact_insert_parts),
    Migration(3, "rollups skip replayed batches", _rollups_skip_replayed_batches),
)
"""Every migration, in version order."""

LATEST_VERSION: int = MIGRATIONS[-1].version
