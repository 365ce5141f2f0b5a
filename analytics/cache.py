"""Compile-cache health: hit/miss/bypass by cache and reason, cold-miss cost, cache growth.

Rules:

* ``hit_ratio = hits / lookups`` where lookups count hits, misses and bypasses.
* **Cold-miss cost** (compile seconds a warm cache would have saved): each miss is charged the mean
  ``time_saved_ms`` of the hits of the same model × cache in the range; null when that model × cache had
  no hit to learn the saving from.
* **Growth:** a miss writes one entry of ``entry_bytes``; hits and bypasses write nothing. Growth is
  counted per day and bundle × hardware pool, with running totals over the range. Bytes count the entries
  whose size the host SDK measured on the cache's disk (an imported log does not say); null where none was.

Aggregates read the ``cache_events_1h`` rollup when the range ends fall on whole hours and no host filter
is set; otherwise the raw ``cache_events`` table.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import polars as pl

from inferensics.analytics.client import QueryClient
from inferensics.analytics.filters import SliceParams, check_filter_values, prefer_rollup, slice_where
from inferensics.schema import columns as col
from inferensics.schema.rollups import CACHE_EVENTS_1H

_TABLES = (CACHE_EVENTS_1H.name, "cache_events")


def _hourly(params: SliceParams) -> bool:
    epoch = datetime(2000, 1, 1, tzinfo=UTC)
    aligned = all((t - epoch) % timedelta(hours=1) == timedelta(0) for t in (params.start, params.end))
    return aligned and prefer_rollup(params, CACHE_EVENTS_1H.name)


def _lookups(client: QueryClient, params: SliceParams, keys: list[str], bucket: str | None = None) -> pl.DataFrame:
    """Lookups, time saved and entry bytes per ``keys`` × result (× day when ``bucket`` is ``day``)."""
    rollup = _hourly(params)
    table = CACHE_EVENTS_1H.name if rollup else "cache_events"
    tcol = col.BUCKET if rollup else col.TS
    where = slice_where(params, table, time_column=tcol, what="cache events")
    n = f"sum({col.REQUESTS})" if rollup else "count()"
    day = f"toDateTime64(toStartOfDay({tcol}), 0, 'UTC') AS bucket, " if bucket else ""
    group = ", ".join([*(["bucket"] if bucket else []), *keys, col.RESULT])
    frame = client.query_frame(
        f"SELECT {day}{', '.join(f'toString({k}) AS {k}' for k in keys)}, toString({col.RESULT}) AS {col.RESULT}, "
        f"toUInt64({n}) AS lookups, toFloat64(sum({col.TIME_SAVED_MS})) AS {col.TIME_SAVED_MS}, "
        f"toUInt64(sum({col.ENTRY_BYTES})) AS {col.ENTRY_BYTES} "
        f"FROM {client.database}.{table} WHERE {where.sql} GROUP BY {group}",
        where.params,
    )
    return frame.with_columns(pl.col("bucket").dt.cast_time_unit("ms")) if bucket else frame


def _count(result: str) -> pl.Expr:
    return pl.col("lookups").filter(pl.col(col.RESULT) == result).sum().cast(pl.UInt64)


def cache_health(client: QueryClient, params: SliceParams) -> pl.DataFrame:
    """Per model × hardware pool × cache: lookups by result, hit ratio, time saved and cold-miss cost.

    Columns: model, hw_pool, cache, hits, misses, bypasses, lookups, hit_ratio, time_saved_s,
    cold_miss_cost_s (rules in the module docstring). Sorted by model, hw_pool, cache.
    """
    check_filter_values(client, params, _TABLES)
    frame = _lookups(client, params, [col.MODEL, col.HW_POOL, col.CACHE])
    per_pool = frame.group_by([col.MODEL, col.HW_POOL, col.CACHE]).agg(
        _count("hit").alias("hits"),
        _count("miss").alias("misses"),
        _count("bypass").alias("bypasses"),
        pl.col("lookups").sum().cast(pl.UInt64).alias("lookups"),
        (pl.col(col.TIME_SAVED_MS).filter(pl.col(col.RESULT) == "hit").sum() / 1000).alias("time_saved_s"),
    )
    # Mean saving per hit is learned per model × cache (all pools), then charged to each pool's misses.
    saving = per_pool.group_by([col.MODEL, col.CACHE]).agg(
        pl.when(pl.col("hits").sum() > 0)
        .then(pl.col("time_saved_s").sum() / pl.col("hits").sum())
        .otherwise(None)
        .alias("_saved_per_hit_s")
    )
    return (
        per_pool.join(saving, on=[col.MODEL, col.CACHE], how="left")
        .with_columns(
            pl.when(pl.col("lookups") > 0).then(pl.col("hits") / pl.col("lookups")).otherwise(None).alias("hit_ratio"),
            pl.when(pl.col("misses") == 0)
            .then(pl.lit(0.0))
            .otherwise(pl.col("misses") * pl.col("_saved_per_hit_s"))
            .alias("cold_miss_cost_s"),
        )
        .select(
            col.MODEL,
            col.HW_POOL,
            col.CACHE,
            "hits",
            "misses",
            "bypasses",
            "lookups",
            "hit_ratio",
            "time_saved_s",
            "cold_miss_cost_s",
        )
        .sort([col.MODEL, col.HW_POOL, col.CACHE])
    )


def unpriced_misses(health: pl.DataFrame) -> int:
    """How many misses of a :func:`cache_health` frame have no cost: no hit of the same model and cache to
    price them by (their ``cold_miss_cost_s`` is null)."""
    return int(health.filter(pl.col("cold_miss_cost_s").is_null()).get_column("misses").sum() or 0)


def not_priced(misses: int) -> str:
    """``"3 misses not priced"`` (``""`` for none), as the report and the dashboard say it."""
    return f"{misses:,} {'miss' if misses == 1 else 'misses'} not priced" if misses else ""


def cache_trend(client: QueryClient, params: SliceParams) -> pl.DataFrame:
    """Daily lookups and hit ratio per cache.

    Columns: bucket (day, UTC), cache, hits, misses, bypasses, lookups, hit_ratio.
    """
    check_filter_values(client, params, _TABLES)
    frame = _lookups(client, params, [col.CACHE], bucket="day")
    return (
        frame.group_by(["bucket", col.CACHE])
        .agg(
            _count("hit").alias("hits"),
            _count("miss").alias("misses"),
            _count("bypass").alias("bypasses"),
            pl.col("lookups").sum().cast(pl.UInt64).alias("lookups"),
        )
        .with_columns((pl.col("hits") / pl.col("lookups")).alias("hit_ratio"))
        .sort(["bucket", col.CACHE])
    )


def cache_reasons(client: QueryClient, params: SliceParams) -> pl.DataFrame:
    """Misses and bypasses by cache and reason (raw ``cache_events``; the rollup has no reason).

    Columns: cache, result, reason, lookups, requests (distinct non-empty request ids). Most frequent first.
    """
    check_filter_values(client, params, ("cache_events",))
    where = slice_where(params, "cache_events", what="cache events")
    return client.query_frame(
        f"SELECT toString({col.CACHE}) AS {col.CACHE}, toString({col.RESULT}) AS {col.RESULT}, {col.REASON}, "
        f"toUInt64(count()) AS lookups, toUInt64(uniqExactIf({col.REQUEST_ID}, {col.REQUEST_ID} != '')) AS requests "
        f"FROM {client.database}.cache_events WHERE {where.sql} AND {col.RESULT} != 'hit' "
        f"GROUP BY {col.CACHE}, {col.RESULT}, {col.REASON} "
        f"ORDER BY lookups DESC, {col.CACHE}, {col.RESULT}, {col.REASON}",
        where.params,
    )


def cache_growth(client: QueryClient, params: SliceParams) -> pl.DataFrame:
    """Entries and bytes written to the caches per day and bundle × hardware pool (growth rule above).

    Columns: bucket (day, UTC), bundle_id, hw_pool, entries, bytes, cumulative_entries, cumulative_bytes
    (running totals from the range start, per bundle × pool).
    """
    check_filter_values(client, params, _TABLES)
    frame = _lookups(client, params, [col.BUNDLE_ID, col.HW_POOL], bucket="day")
    keys = [col.BUNDLE_ID, col.HW_POOL]
    return (
        frame.filter(pl.col(col.RESULT) == "miss")
        .group_by(["bucket", *keys])
        .agg(
            pl.col("lookups").sum().cast(pl.UInt64).alias("entries"),
            pl.col(col.ENTRY_BYTES).sum().cast(pl.UInt64).alias("bytes"),
        )
        .with_columns(pl.when(pl.col("bytes") > 0).then(pl.col("bytes")).alias("bytes"))  # 0: not measured
        .sort([*keys, "bucket"])
        .with_columns(
            pl.col("entries").cum_sum().over(keys).alias("cumulative_entries"),
            pl.col("bytes").cum_sum().over(keys).alias("cumulative_bytes"),
        )
        .sort(["bucket", *keys])
    )
