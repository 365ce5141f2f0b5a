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

from inferensics.schema.ddl import Target, render_schema


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


MIGRATIONS: tuple[Migration, ...] = (Migration(1, "initial schema", render_schema),)
"""Every migration, in version order."""

LATEST_VERSION: int = MIGRATIONS[-1].version
