"""Versioned schema migrations.

Version 1 creates the schema rendered from the models (every statement ``IF NOT EXISTS``). A later change
to the models adds a migration of ``ALTER TABLE … ADD COLUMN IF NOT EXISTS`` statements and regenerates the
committed DDL; version 1 is never edited by hand, it is the rendering of the models that shipped with it.
Applying the migrations twice changes nothing: versions already recorded in ``schema_migrations`` are
skipped, and every statement is idempotent on its own (a :class:`Step` that reads a column runs only while
that column exists, so a migration interrupted half-way completes when applied again).
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from inferensics.schema import columns as col
from inferensics.schema.ddl import DEDUP_WINDOW, WIDE_PART_MIN_BYTES, Target, render_rollup, render_schema
from inferensics.schema.events import EVENT_MODELS
from inferensics.schema.rollups import HIST_TYPE, QUANTILES, REQUESTS_1D, REQUESTS_1H, REQUESTS_1M, ROLLUPS


@dataclass(frozen=True, slots=True)
class Step:
    """A statement that runs only while ``table`` (its physical name) has ``column``."""

    sql: str
    table: str
    column: str

    def __str__(self) -> str:
        return self.sql


@dataclass(frozen=True, slots=True)
class Migration:
    """One schema version: its number, a name, and the statements that reach it from the one before."""

    version: int
    name: str
    statements: Callable[[Target], Sequence[str | Step]]

    def checksum(self, target: Target) -> str:
        """sha256 of the statements for ``target``: a recorded version whose checksum differs is reported."""
        return hashlib.sha256("\n;\n".join(map(str, self.statements(target))).encode()).hexdigest()


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


def _quantile_point_hist(state: str) -> str:
    # A quantilesTiming state cannot be read back as a histogram; its quantile codes (p50, p95, p99) can.
    # The row's requests are spread over those codes (up to 50 % at p50, up to 95 % at p95, the rest at
    # p99), so each converted row answers its own quantiles exactly; merged rows answer a weighted mixture.
    codes = f"arrayMap(x -> toUInt16(x), finalizeAggregation({state}))"
    n = col.REQUESTS
    upto = [f"toUInt64(round({n} * {q}))" for q in QUANTILES[:-1]]
    bounds = [*upto, f"toUInt64({n})"]
    counts = [upto[0], *(f"toUInt64({hi} - {lo})" for lo, hi in itertools.pairwise(bounds))]
    merged = f"arrayReduce('sumMap', [{codes}], [[{', '.join(counts)}]])"
    return f"mapFilter((k, v) -> v > 0, CAST({merged}, 'Map(UInt16, UInt64)'))"


def _request_rollups_keep_histograms(target: Target) -> list[str | Step]:
    # Before version 4 the request rollups kept quantilesTiming states (6.4 KB a row at ~1.7k requests,
    # slow to merge); from 4 on a latency histogram. Views are dropped first (no insert meets a half-changed
    # table), each table gains the histogram, its rows are converted, the state column goes, the views
    # return in their current form.
    db, on = target.database, target.on_cluster
    rollups = (REQUESTS_1M, REQUESTS_1H, REQUESTS_1D)
    out: list[str | Step] = [f"DROP VIEW IF EXISTS {db}.{r.view_name}{on}" for r in rollups]
    for r in rollups:
        local = target.local(r.name)
        tables = [local, r.name] if target.backend == "cluster" else [local]
        out.extend(
            f"ALTER TABLE {db}.{t}{on} ADD COLUMN IF NOT EXISTS `{col.LATENCY_HIST}` {HIST_TYPE} "
            f"AFTER `{col.LATENCY_SUM_MS}`"
            for t in tables
        )
        out.append(
            Step(
                f"ALTER TABLE {db}.{local}{on} UPDATE `{col.LATENCY_HIST}` = "
                f"{_quantile_point_hist(col.LATENCY_STATE)} WHERE 1 SETTINGS mutations_sync = 2",
                local,
                col.LATENCY_STATE,
            )
        )
        out.extend(f"ALTER TABLE {db}.{t}{on} DROP COLUMN IF EXISTS `{col.LATENCY_STATE}`" for t in tables)
    for r in rollups:
        out.extend(stmt for stmt in render_rollup(r, target) if stmt.startswith("CREATE MATERIALIZED VIEW"))
    return out


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "initial schema", render_schema),
    Migration(2, "insert-sized parts compact", _compact_insert_parts),
    Migration(3, "rollups skip replayed batches", _rollups_skip_replayed_batches),
    Migration(4, "request rollups keep latency histograms", _request_rollups_keep_histograms),
)
"""Every migration, in version order."""

LATEST_VERSION: int = MIGRATIONS[-1].version
