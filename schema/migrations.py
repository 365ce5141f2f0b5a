"""Versioned schema migrations.

Version 1 creates the schema rendered from the models (every statement ``IF NOT EXISTS``). A later change
to the models adds a migration of ``ALTER TABLE … ADD COLUMN IF NOT EXISTS`` statements and regenerates the
committed DDL; version 1 is never edited by hand, it is the rendering of the models that shipped with it.
Applying the migrations twice changes nothing: versions already recorded in ``schema_migrations`` are
skipped, and every statement is idempotent on its own (a :class:`Step` runs only while its ``when`` query
says there is still work, so a migration interrupted half-way completes when applied again).
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from inferensics.schema import columns as col
from inferensics.schema.ddl import (
    DEDUP_WINDOW,
    WIDE_PART_MIN_BYTES,
    Target,
    columns_of,
    dedup_window_setting,
    distributed_sql,
    render_event_table,
    render_rollup,
    render_schema,
    table_comment,
)
from inferensics.schema.ddl import _column_sql as column_sql
from inferensics.schema.ddl import _quote as sql_string
from inferensics.schema.dedup import seen_table_sql
from inferensics.schema.events import (
    EVENT_MODELS,
    BlobIndexEvent,
    BundleStateEvent,
    CompileEvent,
    KernelQualificationEvent,
    ReplayResultEvent,
    RequestEvent,
    SdkHealthEvent,
)
from inferensics.schema.rollups import HIST_TYPE, QUANTILES, REQUESTS_1D, REQUESTS_1H, REQUESTS_1M, ROLLUPS, Rollup
from inferensics.schema.table import Event


@dataclass(frozen=True, slots=True)
class Step:
    """A statement that runs only while the query ``when`` (one number) answers more than zero."""

    sql: str
    when: str

    def __str__(self) -> str:
        return self.sql


@dataclass(frozen=True, slots=True)
class KeepTtl:
    """Give table ``dest`` the TTL table ``source`` has when this runs: the one an operator set (``MODIFY TTL``,
    the README's "Retention"), or none where they removed it, instead of the schema's default that ``dest`` was
    created with. The migrator reads ``source``'s TTL from ``system.tables`` (``engine_full``, :attr:`sql`) and
    alters ``dest`` where it differs (:func:`~inferensics.schema.migrator.keep_ttl`); with ``when``, only while that
    query answers more than zero. A migration that fills a new table to exchange with an old one (a copy and
    exchange) keeps the old table's TTL with it: :func:`_copy_and_exchange` adds this step before the copy fills.

    A TTL in ``replaced`` (one an earlier release's schema gave the table, which the migration means to replace) is
    not carried: ``dest`` keeps the schema's. Its text (the checksum's, and what the engine's parser sees) is the
    query that reads the TTL."""

    database: str
    source: str
    dest: str
    on_cluster: str = ""
    when: str | None = None
    replaced: tuple[str, ...] = ()

    @property
    def sql(self) -> str:
        """The query that reads ``source``'s engine clause (its TTL among the rest)."""
        return engine_full_query(self.database, self.source)

    def __str__(self) -> str:
        return self.sql


EARLIER_TTLS: Final[Mapping[str, tuple[str, ...]]] = {
    REQUESTS_1M.name: ("toDateTime(bucket) + toIntervalDay(7)",),
}
"""TTLs an earlier release's schema gave a table (as ``engine_full`` writes them) and a later one changed: a copy
and exchange of that table does not carry them over (:class:`KeepTtl`), the store takes today's. Before version 7
the per-minute request rollup kept 7 days; migration 7 rebuilds it for 32."""


def engine_full_query(db: str, table: str) -> str:
    """The query of a table's ``engine_full`` (no row: no such table)."""
    return f"SELECT engine_full FROM system.tables WHERE database = '{db}' AND name = '{table}'"


def _has_column(db: str, table: str, column: str) -> str:
    return f"SELECT count() FROM system.columns WHERE database = '{db}' AND table = '{table}' AND name = '{column}'"


def _has_table(db: str, table: str) -> str:
    return f"SELECT count() FROM system.tables WHERE database = '{db}' AND name = '{table}'"


def _sorted_otherwise(db: str, table: str, sorting_key: tuple[str, ...]) -> str:
    return (
        f"SELECT count() FROM system.tables WHERE database = '{db}' AND name = '{table}' "
        f"AND sorting_key != '{', '.join(sorting_key)}'"
    )


def statements_checksum(statements: Sequence[object]) -> str:
    """sha256 of ``statements`` as applied, one text each (the checksum ``schema_migrations`` records)."""
    return hashlib.sha256("\n;\n".join(map(str, statements)).encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Migration:
    """One schema version: its number, a name, and the statements that reach it from the one before."""

    version: int
    name: str
    statements: Callable[[Target], Sequence[str | Step | KeepTtl]]

    def checksum(self, target: Target) -> str:
        """sha256 of the statements for ``target`` as applied, recorded with the version (an audit trail of
        what ran). Not compared on later runs: the migrations render from the current models, so an earlier
        version's statements change whenever the models do."""
        return statements_checksum(self.statements(target))


def migrations_table_sql(target: Target) -> str:
    """The bookkeeping table recording applied versions (one row per version).

    On a cluster it is one replicated table across every shard (its Keeper path has no ``{shard}``, its
    replica names are ``<shard>-<replica>``): whichever node a process asks sees the same versions, so
    migrations applied ``ON CLUSTER`` through one node are not run again through another.
    """
    db = target.database
    engine = (
        "ReplicatedReplacingMergeTree('/clickhouse/tables/" + db + "/schema_migrations', '{shard}-{replica}')"
        if target.backend == "cluster"
        else "ReplacingMergeTree"
    )
    return (
        f"CREATE TABLE IF NOT EXISTS {db}.schema_migrations{target.on_cluster}\n"
        "(\n    `version` UInt32,\n    `name` String,\n    `checksum` String,\n"
        "    `applied_at` DateTime64(6, 'UTC')\n)\n"
        f"ENGINE = {engine}\nORDER BY version"
    )


def _setting_step(target: Target, name: str, setting: str) -> Step:
    """``MODIFY SETTING setting`` of table ``name``, run only where the table exists without that setting.

    A settings migration lists today's tables, and a store that reaches it from an earlier version has only the
    tables its own version had: a table a later migration creates is created with the setting already."""
    db = target.database
    return Step(
        f"ALTER TABLE {db}.{name}{target.on_cluster} MODIFY SETTING {setting}",
        when=f"{_has_table(db, name)} AND position(engine_full, {sql_string(setting)}) = 0",
    )


def _compact_insert_parts(target: Target) -> list[str | Step]:
    # Stores created before version 2 write every insert-sized part wide; the setting is idempotent.
    names = [m.TABLE.name for m in EVENT_MODELS] + [r.name for r in ROLLUPS]
    return [_setting_step(target, target.local(n), f"min_bytes_for_wide_part = {WIDE_PART_MIN_BYTES}") for n in names]


def _rollups_skip_replayed_batches(target: Target) -> list[str | Step]:
    # Before version 3 a batch replayed with the same token was dropped from the event table but still
    # added to the rollups: a non-replicated rollup kept no block tokens to recognise the view's block by.
    # Replicated rollups (the cluster) always keep them.
    if target.backend == "cluster":
        return []
    return [_setting_step(target, r.name, f"non_replicated_deduplication_window = {DEDUP_WINDOW}") for r in ROLLUPS]


def _drop_views(rollups: Sequence[Rollup], target: Target) -> list[str | Step]:
    return [f"DROP VIEW IF EXISTS {target.database}.{r.view_name}{target.on_cluster}" for r in rollups]


def _create_views(rollups: Sequence[Rollup], target: Target) -> list[str | Step]:
    # Views are rendered from today's definitions: the request views read the fingerprint's status (16)
    # and feed the rollups' ``fingerprinted`` (17), so a store migrating from before those versions gets
    # the columns first (each step idempotent: it runs only where its column is missing).
    # Every request rollup gains the column, not only those whose views are recreated: the hourly view
    # reads the per-minute rollup's ``fingerprinted`` (migration 8 recreates it alone).
    first: list[str | Step] = []
    if any(r.source == RequestEvent.TABLE.name or r.name in _REQUEST_ROLLUP_NAMES for r in rollups):
        first = _request_columns_of_today(target)
    return first + [s for r in rollups for s in render_rollup(r, target) if s.startswith("CREATE MATERIALIZED VIEW")]


def _request_columns_of_today(target: Target) -> list[str | Step]:
    """Raw requests gain the fingerprint's status and rate (16), the request rollups ``fingerprinted`` (17),
    where missing. A migration before 16 that copies or rebuilds those tables in today's form (5, 6, 7), or
    recreates their views, needs them first; each step runs only where its column is missing."""
    return [*_request_fingerprint_status(target), *_fingerprinted_rollup_columns(_REQUEST_ROLLUPS, target)]


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
    # Stores created by version 1's first release have no daily rollup (it came without a migration): it is
    # created in today's form and filled from the hourly rollup once that holds histograms.
    out = _drop_views(rollups, target) + [s for s in render_rollup(REQUESTS_1D, target) if "MATERIALIZED" not in s]
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
                _has_column(db, local, col.LATENCY_STATE),
            )
        )
        out.extend(f"ALTER TABLE {db}.{t}{on} DROP COLUMN IF EXISTS `{col.LATENCY_STATE}`" for t in tables)
    return out + _request_columns_of_today(target) + _daily_rollup_filled(target) + _create_views(rollups, target)


def _daily_rollup_filled(target: Target) -> list[str | Step]:
    """Fill an empty daily request rollup from the hourly one with its own view's query (what the view would
    have inserted); nothing where it has rows, or where the hourly one has none."""
    db, cluster = target.database, target.backend == "cluster"
    view = render_rollup(REQUESTS_1D, target)[1]
    select = view[view.index("AS SELECT") + 3 :]
    # On a cluster through the Distributed tables: rollups are sharded at random.
    hourly = REQUESTS_1H.name if cluster else target.local(REQUESTS_1H.name)
    daily = REQUESTS_1D.name if cluster else target.local(REQUESTS_1D.name)
    select = select.replace(f"FROM {db}.{target.local(REQUESTS_1H.name)}\n", f"FROM {db}.{hourly}\n")
    return [
        Step(
            f"INSERT INTO {db}.{daily} {select} SETTINGS insert_deduplicate = 0",
            when=f"SELECT (SELECT count() FROM {db}.{daily}) = 0 AND (SELECT count() FROM {db}.{hourly}) > 0",
        )
    ]


def _copy_and_exchange(
    target: Target,
    name: str,
    *,
    suffix: str,
    table: str,
    distributed: Sequence[str],
    shard_key: str,
    fill: Callable[[str], Sequence[str]],
    when: str | None,
) -> list[str | Step | KeepTtl]:
    """Give table ``name`` a form ``ALTER`` cannot reach (a sorting key, a rebuilt content): fill a copy
    ``name + suffix`` in that form, exchange the two, drop the old one.

    ``table`` is the new form's ``CREATE TABLE`` of ``name`` (the shard-local one on a cluster) and
    ``distributed`` its Distributed table's statements; ``fill(dest)`` gives the inserts that fill the
    copy ``dest`` (on a cluster the copy's Distributed table, so rows land on their shards). With ``when``
    every step up to the exchange runs only while ``when`` says there is work, and a rerun empties the copy
    before filling it; without, the copy is dropped and created anew, so an interrupted run starts again
    from nothing (a copy left from one is never reused, whatever its form).

    The copy is created with the schema's TTL; before it fills it takes the TTL ``name`` has then
    (:class:`KeepTtl`), so a TTL the operator set survives the exchange.
    """
    db, on = target.database, target.on_cluster
    cluster = target.backend == "cluster"
    local, copy, copy_local = target.local(name), name + suffix, target.local(name + suffix)
    create = table.replace(f"{db}.{local}", f"{db}.{copy_local}", 1).replace(f"/{local}'", f"/{copy_local}'")

    def step(sql: str) -> str | Step:
        return sql if when is None else Step(sql, when)

    out: list[str | Step | KeepTtl] = []
    if when is None:
        if cluster:
            out.append(f"DROP TABLE IF EXISTS {db}.{copy}{on} SYNC")
        out.append(f"DROP TABLE IF EXISTS {db}.{copy_local}{on} SYNC")
    out.append(step(create))
    if cluster:
        out.append(step(distributed_sql(copy, copy_local, shard_key, target)))
    if when is not None:
        out.append(step(f"TRUNCATE TABLE IF EXISTS {db}.{copy_local}{on}"))
    # The shard tables hold the rows and the TTL (a Distributed table takes none).
    out.append(KeepTtl(db, local, copy_local, on, when, EARLIER_TTLS.get(name, ())))
    out.extend(step(sql) for sql in fill(copy if cluster else copy_local))
    out.append(step(f"EXCHANGE TABLES {db}.{local} AND {db}.{copy_local}{on}"))
    if cluster:
        # The Distributed table names its local table; it is recreated over the exchanged one.
        out.append(f"DROP TABLE IF EXISTS {db}.{copy}{on} SYNC")
        out.append(f"DROP TABLE IF EXISTS {db}.{name}{on} SYNC")
        out.extend(distributed)
    out.append(f"DROP TABLE IF EXISTS {db}.{copy_local}{on} SYNC")
    return out


V5_SUFFIX = "__v5"
"""Suffix of the tables migration 5 fills before exchanging them with the old ones."""


def _rollups_ordered_by_time(target: Target) -> list[str | Step | KeepTtl]:
    # Before version 5 every rollup was ordered by its keys, then the bucket: each granule held a few
    # series' whole history, so any time range read the whole table (the hourly request rollup's 27 edge
    # hours of a 7-day overview read all 1.4M rows, 0.67 s). From 5 on a coarser time bucket leads the key,
    # and the daily request rollup drops the bundle (half the rows a long overview merges). A sorting key
    # cannot be altered: each rollup whose key differs is copied into a new table (re-aggregated to its
    # keys), the two are exchanged and the old one dropped. Each step is idempotent: a rerun after an
    # interruption empties the copy before filling it, and a rollup already in its new order is skipped.
    db = target.database
    # The copies are today's tables, filled with today's values: the old request rollups gain the columns
    # added since (their defaults are what old rows read) before they are read.
    out: list[str | Step | KeepTtl] = [*_drop_views(ROLLUPS, target), *_request_columns_of_today(target)]
    cluster = target.backend == "cluster"
    for r in ROLLUPS:
        table, *distributed = [s for s in render_rollup(r, target) if s.startswith("CREATE TABLE")]
        keys = ", ".join(r.keys)
        values = ", ".join(f"{v.merge} AS {v.name}" for v in r.values)
        # On a cluster the copy goes through the Distributed tables: rollups are sharded at random and
        # merged at read time, so a row may land on any shard.
        source = r.name if cluster else target.local(r.name)

        def fill(dest: str, keys: str = keys, values: str = values, source: str = source) -> list[str]:
            return [
                f"INSERT INTO {db}.{dest} SELECT {col.BUCKET}, {keys}, {values} FROM {db}.{source} "
                f"GROUP BY {col.BUCKET}, {keys} SETTINGS insert_deduplicate = 0"
            ]

        old = _sorted_otherwise(db, target.local(r.name), r.sorting_key)
        out += _copy_and_exchange(
            target,
            r.name,
            suffix=V5_SUFFIX,
            table=table,
            distributed=distributed,
            shard_key="rand()",
            fill=fill,
            when=old,
        )
    return [*out, *_create_views(ROLLUPS, target)]


V6_SUFFIX = "__v6"
"""Suffix of the table migration 6 fills before exchanging it with ``requests``."""


def _requests_ordered_by_class_then_pool(target: Target) -> list[str | Step | KeepTtl]:
    # Before version 6 raw requests were ordered by model, pool, traffic class, time. A canary compares one
    # model and traffic class across every pool, so each part held one short run of its rows per pool
    # (~800 rows of a 3.3M-row day at 10^8 rows a month) and every run cost a whole 8192-row granule: a
    # 7-day canary read 1.44M rows for 233k. From 6 on the class comes before the pool and those rows are
    # one run per part. The sorting key cannot be altered: the table is copied into a new one (every row
    # as it is, block tokens not applied), the two are exchanged and the old one dropped, the view that
    # reads ``requests`` dropped before and recreated after. As in migration 5 every step is idempotent.
    # The copy does not carry the old table's insert-token log: a batch inserted just before the upgrade
    # and replayed just after it (a crash between the insert and the spool's commit) would be kept twice.
    db = target.database
    spec = RequestEvent.TABLE
    views = [r for r in ROLLUPS if r.parent is None and r.source == spec.name]
    # On a cluster the copy goes through the Distributed tables (same shard key: rows stay on their shard).
    source = spec.name if target.backend == "cluster" else target.local(spec.name)

    def fill(dest: str) -> list[str]:
        return [
            f"INSERT INTO {db}.{dest} SELECT * FROM {db}.{source} "
            "SETTINGS insert_deduplicate = 0, max_insert_threads = 2"
        ]

    table, *distributed = render_event_table(RequestEvent, target)
    old = _sorted_otherwise(db, target.local(spec.name), spec.order_by)
    return [
        *_drop_views(views, target),
        *_request_columns_of_today(target),  # the copy is today's table: ``SELECT *`` must match its columns
        *_copy_and_exchange(
            target,
            spec.name,
            suffix=V6_SUFFIX,
            table=table,
            distributed=distributed,
            shard_key=spec.shard_key,
            fill=fill,
            when=old,
        ),
        *_create_views(views, target),
    ]


V7_SUFFIX = "__v7"
"""Suffix of the table migration 7 fills before exchanging it with ``requests_1m``."""
REBUILD_DAYS = 32
"""Days of raw requests (counted back from the newest) migration 7 rebuilds the per-minute rollup from."""


def _minute_rollup_covers_raw_retention(target: Target) -> list[str | Step | KeepTtl]:
    # Before version 7 the per-minute request rollup kept 7 days, so a dashboard range of 7 or 30 days
    # (ending on a whole minute) read its first minutes from raw rows: 17 minutes of every model's
    # requests read a whole day's partition (raw rows are not ordered by time), 140-210 ms of the 10^8-row
    # store's 7-day overview against 50-60 ms through the rollup. From 7 on it keeps 32 days (the planner
    # trusts a rollup back to its retention less a day, and a 30-day range ending on a whole minute starts
    # more than 30 days back: ``plan_pieces``), rebuilt from the raw rows so that what it holds matches
    # that retention. The rebuild fills a new table one day at a time (days counted back from the newest
    # raw row, so one day's groups are in memory at once) with the view's own query, then exchanges the two.
    # Every step is unconditional and the sequence idempotent: an interrupted run starts again from an
    # empty copy, and the tables exchanged are always a complete rebuild. The request views are dropped
    # for the duration (nothing is fed twice) and recreated.
    db = target.database
    r = REQUESTS_1M
    views = [REQUESTS_1M, REQUESTS_1H, REQUESTS_1D]
    table, view, *distributed = render_rollup(r, target)
    # The view's query over raw rows; on a cluster through the Distributed tables (rows of a minute may
    # sit on every shard; the rollup is sharded at random and merged at read time).
    select = view[view.index("AS SELECT") + 3 :]
    source = f"FROM {db}.{target.local(r.source)}\n"
    if target.backend == "cluster":
        select = select.replace(source, f"FROM {db}.{r.source}\n")
        source = f"FROM {db}.{r.source}\n"
    newest = f"(SELECT max(toDate({col.TS})) FROM {db}.{r.source})"
    days = [
        select.replace(source, f"{source.rstrip()} WHERE toDate({col.TS}) = {newest} - {back}\n")
        for back in range(REBUILD_DAYS)
    ]

    def fill(dest: str) -> list[str]:
        return [
            f"INSERT INTO {db}.{dest} {day} SETTINGS insert_deduplicate = 0, max_insert_threads = 2" for day in days
        ]

    return [
        *_drop_views(views, target),
        *_request_columns_of_today(target),  # today's view query reads the fingerprint's status
        *_copy_and_exchange(
            target,
            r.name,
            suffix=V7_SUFFIX,
            table=table,
            distributed=distributed,
            shard_key="rand()",
            fill=fill,
            when=None,
        ),
        *_create_views(views, target),
    ]


def _coarse_request_views_gather_histograms(target: Target) -> list[str | Step]:
    # Before version 8 the hourly and daily request views summed the finer rollup's histograms per code on
    # insert (sumMap): more engine time than the per-minute view. From 8 on they gather the entries as the
    # per-minute view does (rollups.hist_gather_sql); rows already stored read the same either way. The two
    # views are recreated; the per-minute view, which feeds them, is left in place.
    views = [REQUESTS_1H, REQUESTS_1D]
    return [*_drop_views(views, target), *_create_views(views, target)]


def _replicated_tables_remember_segments(target: Target) -> list[str | Step]:
    # Before version 9 a cluster's replicated tables kept the engine's default window of insert blocks
    # (1000 per shard): with several collectors it covered too short a time for a segment retried after a
    # collector restart to be recognised. The non-replicated stores have kept DEDUP_WINDOW since version 3.
    if target.backend != "cluster":
        return []
    names = [m.TABLE.name for m in EVENT_MODELS] + [r.name for r in ROLLUPS]
    return [_setting_step(target, target.local(name), dedup_window_setting(target)) for name in names]


def _sdk_health_table(target: Target) -> list[str]:
    # The host SDK's own health records (a host gone quiet, exports refused by cause): one new table.
    return render_event_table(SdkHealthEvent, target)


def _sdk_health_kernel_counts(target: Target) -> list[str | Step]:
    # A host whose kernel providers fail or fall back to the reference says so in its health records, and a
    # process that shuts down cleanly says so in its last one (stopped, not gone quiet).
    return _sdk_health_columns(target, col.KERNEL_FAILURES, col.KERNEL_FALLBACKS, col.KERNEL_UNPROVEN, col.STOPPED)


def _qualification_timing(target: Target) -> list[str | Step]:
    # Qualification says how it timed each median (CUDA-graph replays, CUDA events around eager calls, CPU wall
    # time): a ``timing`` column after ``trials``, as a fresh table has it. Rows stored before read it empty.
    from inferensics.schema.events import KernelQualificationEvent

    return _add_model_columns(target, KernelQualificationEvent, (col.TIMING, col.TRIALS))


def _sdk_health_interval(target: Target) -> list[str | Step]:
    # A process that reports every 5 minutes is not quiet after the reader's 3 minutes: each health record says
    # its own interval. Rows stored before read 0 (the reader's threshold alone, as before).
    return _sdk_health_columns(target, col.INTERVAL_S)


def _sdk_health_process(target: Target) -> list[str | Step]:
    # Two processes of one host serving one model in one pool, or a process and its replacement, are told apart
    # by the process each record names. Rows stored before read '' (one process per host, model and pool).
    return _sdk_health_columns(target, col.PROCESS)


def _sdk_health_columns(target: Target, *names: str) -> list[str | Step]:
    """Add the ``sdk_health`` columns ``names`` where they are missing, at the end (as a fresh table has them)."""
    return _add_model_columns(target, SdkHealthEvent, *((n, None) for n in names))


def _add_model_columns(target: Target, model: type[Event], *columns: tuple[str, str | None]) -> list[str | Step]:
    """Add each ``(name, after)`` column of ``model`` (as the model defines it) to the model's tables where it is
    missing: after column ``after``, or at the end when that is ``None``."""
    db, defs = target.database, {c.name: c for c in columns_of(model)}
    return [
        Step(
            f"ALTER TABLE {db}.{t}{target.on_cluster} ADD COLUMN IF NOT EXISTS {column_sql(defs[name]).strip()}"
            + (f" AFTER `{after}`" if after else ""),
            when=f"SELECT 1 - ({_has_column(db, t, name)})",
        )
        for t in _model_tables(target, model.TABLE.name)
        for name, after in columns
    ]


def _column_comments(target: Target, model: type[Event], *names: str) -> list[str | Step]:
    """Give each column ``names`` of ``model``'s tables the comment the model's field docstring gives it now, where
    it has another (a store created before the docstring changed)."""
    db, defs = target.database, {c.name: c for c in columns_of(model)}
    return [
        Step(
            f"ALTER TABLE {db}.{t}{target.on_cluster} COMMENT COLUMN `{name}` {sql_string(defs[name].comment)}",
            when=f"{_has_column(db, t, name)} AND comment != {sql_string(defs[name].comment)}",
        )
        for t in _model_tables(target, model.TABLE.name)
        for name in names
    ]


def _compile_outcome_comment(target: Target) -> list[str | Step]:
    # A compile whose log ended before it did is stored ``incomplete``: the outcome column's comment lists it.
    return _column_comments(target, CompileEvent, col.OUTCOME)


def _columns_as_fresh(target: Target) -> list[str | Step]:
    # A column added by a migration before its model had a docstring or codec for it (bundles' signer columns
    # (12), replay verdict columns (13)) had neither, and sat after ``attrs`` where a fresh table has it before;
    # a docstring changed without a migration (``requests.status``, ``graph_ms``) left the old comment. A table
    # where any model column differs from a fresh table's in comment, codec or place has every model column
    # given its definition and place, in one ALTER: metadata only (each keeps its type, so no part is
    # rewritten); a column the model no longer has stays, after them. Every model column is named, so the columns
    # later migrations add (24, 26, 27) are added first where missing.
    db = target.database
    out = [*_columns_added_in_24(target), *_columns_added_in_26(target), *_columns_added_in_27(target)]
    for model in EVENT_MODELS:
        columns = columns_of(model)
        differs = " OR ".join(
            f"(name = '{c.name}' AND (comment != {sql_string(c.comment)} OR compression_codec != "
            f"'{f'CODEC({c.type.codec})' if c.type.codec else ''}' OR position != {i + 1}))"
            for i, c in enumerate(columns)
        )
        clauses = ", ".join(
            f"MODIFY COLUMN {column_sql(c).strip()}" + (f" AFTER `{columns[i - 1].name}`" if i else " FIRST")
            for i, c in enumerate(columns)
        )
        out.extend(
            Step(
                f"ALTER TABLE {db}.{t}{target.on_cluster} {clauses}",
                when=f"SELECT count() FROM system.columns WHERE database = '{db}' AND table = '{t}' AND ({differs})",
            )
            for t in _model_tables(target, model.TABLE.name)
        )
    return out


def _columns_added_in_24(target: Target) -> list[str | Step]:
    """Replay verdicts gain their request's host and start time after ``verdict_json``, health records the count of
    untraceable kernel providers at the end (as a fresh table has them), where missing. Rows stored before read ''
    and the epoch (nothing tells which request of a shared id they replayed), and 0."""
    replay = _add_model_columns(
        target, ReplayResultEvent, (col.REQUEST_HOST, col.VERDICT_JSON), (col.REQUEST_TS, col.REQUEST_HOST)
    )
    return [*replay, *_sdk_health_columns(target, col.KERNEL_UNTRACEABLE)]


def _columns_added_in_26(target: Target) -> list[str | Step]:
    """Health records count the finished requests that dead processes of the host never exported (``requests_lost``),
    at the end as a fresh table has it, where missing. Rows stored before read 0."""
    return _sdk_health_columns(target, col.REQUESTS_LOST)


def _columns_added_in_27(target: Target) -> list[str | Step]:
    """Health records count the dead processes of the host whose crash journals the process read, and the requests
    they had in flight that it exported (``dead_processes``, ``requests_recovered``), at the end as a fresh table has
    them, where missing. Rows stored before read 0."""
    return _sdk_health_columns(target, col.DEAD_PROCESSES, col.REQUESTS_RECOVERED)


def _table_comments(target: Target) -> list[str | Step]:
    """Give each model's tables the comment a fresh one has (:func:`~inferensics.schema.ddl.table_comment`), where
    they have another: metadata only. A cluster's Distributed table took its local table's comment when created."""
    db = target.database
    return [
        Step(
            f"ALTER TABLE {db}.{t}{target.on_cluster} MODIFY COMMENT {sql_string(table_comment(model))}",
            when=f"{_has_table(db, t)} AND comment != {sql_string(table_comment(model))}",
        )
        for model in EVENT_MODELS
        for t in _model_tables(target, model.TABLE.name)
    ]


def _replay_request_untraceable_whole_comments(target: Target) -> list[str | Step]:
    # Three gaps in one version. A replay verdict names the replayed request's host and start time, so verdicts of
    # requests that share an id are told apart by more than their inputs' digest. A health record counts the kernel
    # providers a compiler could not trace. A table's comment is its docstring's whole first paragraph (it was the
    # first line, which stopped mid-sentence for ``shape_guards`` and ``sdk_health``).
    return [*_columns_added_in_24(target), *_table_comments(target)]


def _vocabulary_comments(target: Target) -> list[str | Step]:
    # Three column comments lacked a word their writers write (a compile's ``mixed`` cache status, a bundle's
    # ``pushed`` state, a qualification's ``demoted`` decision; bundle_states' table comment too), and the blob
    # index's ``kind`` did not say what a capture marker (``inputs_ref``) is: metadata only.
    return [
        *_column_comments(target, CompileEvent, col.CACHE_STATUS),
        *_column_comments(target, BundleStateEvent, col.STATE),
        *_column_comments(target, KernelQualificationEvent, col.DECISION),
        *_column_comments(target, BlobIndexEvent, col.KIND),
        *_table_comments(target),
    ]


def _model_tables(target: Target, name: str) -> list[str]:
    """The tables an event model's rows live in: its local table, and on a cluster the Distributed one too."""
    return [target.local(name), *([name] if target.backend == "cluster" else [])]


def _add_missing_columns(target: Target, name: str, types: Mapping[str, str]) -> list[str | Step]:
    """Add each column of ``types`` (name → ClickHouse type) to a model's tables where it is missing."""
    db = target.database
    return [
        Step(
            f"ALTER TABLE {db}.{t}{target.on_cluster} ADD COLUMN IF NOT EXISTS `{c}` {ty}",
            when=f"SELECT 1 - ({_has_column(db, t, c)})",
        )
        for t in _model_tables(target, name)
        for c, ty in types.items()
    ]


def _kernel_registry_records(target: Target) -> list[str | Step]:
    # The kernel registry's records: a compile's provider decisions (a column of ``compiles`` and a table
    # of their reasons) and qualification evidence. Tables and the column are created only where missing.
    from inferensics.schema.events import CompileEvent, KernelDecisionEvent, KernelQualificationEvent

    db = target.database
    column = next(c for c in columns_of(CompileEvent) if c.name == col.KERNEL_PROVIDERS)
    statements: list[str | Step] = [
        *render_event_table(KernelDecisionEvent, target),
        *render_event_table(KernelQualificationEvent, target),
    ]
    for t in _model_tables(target, CompileEvent.TABLE.name):
        statements.append(
            f"ALTER TABLE {db}.{t}{target.on_cluster} ADD COLUMN IF NOT EXISTS {column_sql(column).strip()} "
            f"AFTER `{col.SOURCE}`"
        )
    return statements


def _bundle_states_and_misses(target: Target) -> list[str | Step]:
    # Release bundles (issue 21): who signed a registered bundle and whether the host verified it, the
    # state changes (promote, revoke, quarantine) and the compiles outside a bundle.
    from inferensics.schema.events import BundleEvent, BundleMissEvent, BundleStateEvent

    types = {"builder_keyid": "LowCardinality(String)", "signature_state": "LowCardinality(String)",
             "graph_keys": "Array(LowCardinality(String))"}  # fmt: skip
    alters = _add_missing_columns(target, BundleEvent.TABLE.name, types)
    return [*render_event_table(BundleStateEvent, target), *render_event_table(BundleMissEvent, target), *alters]


def _replay_verdict_columns(target: Target) -> list[str | Step]:
    # Replay (issue 22): the verdict's op, node, kernel and user source line get columns of their own.
    from inferensics.schema.events import ReplayResultEvent

    types = {"op": "LowCardinality(String)", "fx_node": "String", "kernel": "String", "source_file": "String",
             "source_line": "UInt32", "source_text": "String", "verdict_json": "String"}  # fmt: skip
    return _add_missing_columns(target, ReplayResultEvent.TABLE.name, types)


def _ingest_dedup_keys(target: Target) -> list[str | Step]:
    # The collector's per-span dedup keys (a retried request is stored once); see schema/dedup.py.
    return list(seen_table_sql(target))


def _shape_guards_table(target: Target) -> list[str]:
    # Symbolic-shape guards imported from TORCH_TRACE logs (torch.export's and Dynamo's): one new table.
    from inferensics.schema.events import ShapeGuardEvent

    return render_event_table(ShapeGuardEvent, target)


def _request_fingerprint_status(target: Target) -> list[str | Step]:
    # The host SDK samples CPU output fingerprints (issue 25): each request says whether its fp_* columns
    # hold a fingerprint and under which sampling rate, placed after fp_absmax as a fresh table has them.
    return _add_model_columns(target, RequestEvent, (col.FP_STATUS, col.FP_ABSMAX), (col.FP_RATE, col.FP_STATUS))


_REQUEST_ROLLUPS: Final = (REQUESTS_1M, REQUESTS_1H, REQUESTS_1D)
_REQUEST_ROLLUP_NAMES: Final = frozenset(r.name for r in _REQUEST_ROLLUPS)


def _fingerprinted_rollup_columns(rollups: Sequence[Rollup], target: Target) -> list[str | Step]:
    """Each request rollup table (and its Distributed table on a cluster) gains ``fingerprinted`` after
    ``nonfinite``, as a fresh one has it, where it is missing."""
    db = target.database
    out: list[str | Step] = []
    for r in rollups:
        column = next(v for v in r.values if v.name == col.FINGERPRINTED)
        out.extend(
            Step(
                f"ALTER TABLE {db}.{t}{target.on_cluster} ADD COLUMN IF NOT EXISTS {column.definition} "
                f"AFTER `{col.NONFINITE}`",
                when=f"SELECT 1 - ({_has_column(db, t, col.FINGERPRINTED)})",
            )
            for t in _model_tables(target, r.name)
        )
    return out


def _request_rollups_count_fingerprinted(target: Target) -> list[str | Step]:
    # The host SDK fingerprints a sample of CPU outputs (migration 16), so a rate of non-finite outputs is
    # taken over the fingerprinted requests, which the request rollups count from version 17 on. Rows
    # stored before read ``fingerprinted`` as their ``requests`` (the column's DEFAULT): every request with
    # an output was fingerprinted then. The views are dropped first (no insert meets a half-changed table),
    # each table gains the column (``_create_views`` adds it where missing) and the views return in their
    # current form.
    rollups = (REQUESTS_1M, REQUESTS_1H, REQUESTS_1D)
    return _drop_views(rollups, target) + _create_views(rollups, target)


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "initial schema", render_schema),
    Migration(2, "insert-sized parts compact", _compact_insert_parts),
    Migration(3, "rollups skip replayed batches", _rollups_skip_replayed_batches),
    Migration(4, "request rollups keep latency histograms", _request_rollups_keep_histograms),
    Migration(5, "rollups ordered by time first, daily request rollup without bundle", _rollups_ordered_by_time),
    Migration(6, "requests ordered by model, traffic class, pool", _requests_ordered_by_class_then_pool),
    Migration(7, "per-minute request rollup kept 32 days, rebuilt from raw", _minute_rollup_covers_raw_retention),
    Migration(8, "hourly and daily request views gather histograms", _coarse_request_views_gather_histograms),
    Migration(9, "replicated tables remember as many insert blocks as others", _replicated_tables_remember_segments),
    Migration(10, "host SDK health records", _sdk_health_table),
    Migration(11, "kernel registry decisions and qualification evidence", _kernel_registry_records),
    Migration(12, "bundle states, bundle misses, signer of a registered bundle", _bundle_states_and_misses),
    Migration(13, "replay verdict columns", _replay_verdict_columns),
    Migration(14, "collector per-span dedup keys", _ingest_dedup_keys),
    Migration(15, "shape guards imported from trace logs", _shape_guards_table),
    Migration(16, "request fingerprint status and sampling rate", _request_fingerprint_status),
    Migration(17, "request rollups count fingerprinted requests", _request_rollups_count_fingerprinted),
    Migration(
        18,
        "host SDK health: kernel-registry failures, fallbacks and unproven providers; clean stops",
        _sdk_health_kernel_counts,
    ),
    Migration(19, "kernel qualification records say how each median was timed", _qualification_timing),
    Migration(20, "host SDK health records carry their interval", _sdk_health_interval),
    Migration(21, "host SDK health records name their process", _sdk_health_process),
    Migration(22, "a compile's outcome comment lists incomplete", _compile_outcome_comment),
    Migration(23, "every model column in a fresh table's place, with its comment and codec", _columns_as_fresh),
    Migration(
        24,
        "replay verdicts name their request's host and start; host SDK health counts untraceable kernel providers; "
        "table comments are whole first paragraphs",
        _replay_request_untraceable_whole_comments,
    ),
    Migration(25, "column comments name every word their columns take; capture markers named", _vocabulary_comments),
    Migration(26, "host SDK health records count the requests dead processes lost", _columns_added_in_26),
    Migration(
        27, "host SDK health records count dead processes and the requests recovered from them", _columns_added_in_27
    ),
)
"""Every migration, in version order."""

LATEST_VERSION: int = MIGRATIONS[-1].version


def fresh_schema(target: Target) -> list[str]:
    """Every statement that creates the latest schema in a database holding no table yet: the models' tables,
    rollups and views as they are today (migration 1's :func:`render_schema`) and the one table a migration adds
    outside the models (the collector's dedup keys, migration 14). Every other migration finds nothing to do on
    it: ``tests/schema/test_old_store_upgrades.py`` pins that the result equals an empty database taken through
    every migration in turn."""
    return [*render_schema(target), *seen_table_sql(target)]


def fresh_checksum(target: Target) -> str:
    """sha256 of :func:`fresh_schema` for ``target``: what a store created in one pass records for every version."""
    return statements_checksum(fresh_schema(target))


_NEWER: Final = (
    "newer than {latest}, the newest {release} knows: a later inferensics migrated it and {release} must not "
    "write to it"
)


def newer_store_text(store: object, version: int, latest: int = LATEST_VERSION, release: str = "this release") -> str:
    """One line for ``store`` at schema ``version``, newer than ``latest`` (what ``release`` knows): the rollback
    case. ``init``, ``status``, ``status --service`` and ``serve`` all say it in these words."""
    return (
        f"store {store} is at schema version {version}, {_NEWER.format(release=release, latest=latest)}; run the "
        "release that migrated it (upgrade inferensics again), or restore the backup taken before that upgrade"
    )


COPY_SUFFIXES: tuple[str, ...] = (V5_SUFFIX, V6_SUFFIX, V7_SUFFIX)
"""Suffixes of the copies migrations fill before exchanging them with a table (a failed run's copy is dropped)."""


def view_statements(target: Target, view_name: str) -> list[str | Step]:
    """The statements that create the materialized view ``view_name`` as this release defines it, the columns it
    reads and feeds first (empty for a view this release does not define)."""
    rollups = [r for r in ROLLUPS if r.view_name == view_name]
    return _create_views(rollups, target) if rollups else []
