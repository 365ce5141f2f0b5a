"""Compile-cache health: hit/miss/bypass by cache and reason, cold-miss cost, cache growth.

Rules:

* ``hit_ratio = hits / lookups`` where lookups count hits, misses and bypasses.
* **Cold-miss cost** (compile seconds a warm cache would have saved): a missed cache is priced at the mean
  ``time_saved_ms`` of the hits of the same model × cache in the range, and each compile whose lookups missed
  is charged once, the price of its priciest missed cache, to that cache's row: one compile misses
  AOTAutograd's cache and the FX graph cache inside it, and a warm AOTAutograd cache would have saved both
  (charging each miss read more than every compile's time), and never more than that compile's own
  whole-frame seconds where its compile record is stored. A compile is its host, process and compile id
  (with its request); a miss without a compile id is a compile of its own. A row's cost is null when it
  charges nothing and holds a miss of a compile that no hit of its model and caches prices.
* **Growth:** a miss writes one entry of ``entry_bytes``; hits and bypasses write nothing. Growth is
  counted per day and bundle × hardware pool, with running totals over the range. Bytes count the entries
  whose size the host SDK measured on the cache's disk (an imported log does not say); null where none was.

Aggregates read the ``cache_events_1h`` rollup when the range ends fall on whole hours and no host filter
is set; otherwise the raw ``cache_events`` table.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Literal

import polars as pl

from inferensics.analytics._requests import time_bucket
from inferensics.analytics.client import QueryClient
from inferensics.analytics.filters import SliceParams, check_filter_values, prefer_rollup, slice_where, time_column_sql
from inferensics.schema import columns as col
from inferensics.schema.rollups import CACHE_EVENTS_1H

_TABLES = (CACHE_EVENTS_1H.name, "cache_events")


def _hourly(params: SliceParams) -> bool:
    epoch = datetime(2000, 1, 1, tzinfo=UTC)
    aligned = all((t - epoch) % timedelta(hours=1) == timedelta(0) for t in (params.start, params.end))
    return aligned and prefer_rollup(params, CACHE_EVENTS_1H.name)


def _lookups(
    client: QueryClient, params: SliceParams, keys: list[str], bucket: Literal["hour", "day"] | None = None
) -> pl.DataFrame:
    """Lookups, time saved and entry bytes per ``keys`` × result (× ``bucket``, an hour or a day, when given)."""
    rollup = _hourly(params)
    table = CACHE_EVENTS_1H.name if rollup else "cache_events"
    tcol = col.BUCKET if rollup else col.TS
    where = slice_where(params, table, time_column=tcol, what="cache events")
    n = f"sum({col.REQUESTS})" if rollup else "count()"
    day = f"{time_bucket(time_column_sql(table, tcol), bucket)} AS bucket, " if bucket else ""
    group = ", ".join([*(["bucket"] if bucket else []), *keys, col.RESULT])
    frame = client.query_frame(
        f"SELECT {day}{', '.join(f'toString({k}) AS {k}' for k in keys)}, toString({col.RESULT}) AS {col.RESULT}, "
        f"toUInt64({n}) AS lookups, toFloat64(sum({col.TIME_SAVED_MS})) AS {col.TIME_SAVED_MS}, "
        f"toUInt64(sum({col.ENTRY_BYTES})) AS {col.ENTRY_BYTES} "
        f"FROM {client.database}.{table} WHERE {where.sql} GROUP BY {group}",
        where.params,
    )
    return frame.with_columns(pl.col("bucket").dt.cast_time_unit("ms")) if bucket else frame


def lookups_by_result(
    client: QueryClient, params: SliceParams, keys: list[str], *, unit: Literal["hour", "day"] | None = None
) -> pl.DataFrame:
    """The compile-cache lookups of ``params``' slice per ``keys`` (and per ``unit`` bucket when given), counted by
    result as :func:`cache_health` counts them (its hit ratio's hits and lookups): every cache's.

    Columns: bucket (when ``unit`` is given; UTC, ms), the ``keys``, hits, misses, bypasses, lookups. Groups
    without a lookup are absent.
    """
    groups = [*(["bucket"] if unit else []), *keys]
    return (
        _lookups(client, params, keys, bucket=unit)
        .group_by(groups)
        .agg(
            _count("hit").alias("hits"),
            _count("miss").alias("misses"),
            _count("bypass").alias("bypasses"),
            pl.col("lookups").sum().cast(pl.UInt64).alias("lookups"),
        )
        .sort(groups)
    )


def hit_ratio(hits: pl.Expr, lookups: pl.Expr) -> pl.Expr:
    """The compile caches' ``hit_ratio`` (module docstring): ``hits / lookups``, null where there was no lookup.
    The one definition of the ratio :func:`cache_health`, :func:`cache_trend` and the weekly report give."""
    return pl.when(lookups > 0).then(hits / lookups).otherwise(None)


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
    charged = _charged_misses(client, params, saving)
    return (
        per_pool.join(charged, on=[col.MODEL, col.HW_POOL, col.CACHE], how="left")
        .with_columns(
            hit_ratio(pl.col("hits"), pl.col("lookups")).alias("hit_ratio"),
            pl.when(pl.col("misses") == 0)
            .then(pl.lit(0.0))
            .when((pl.col("_charged_s").fill_null(0.0) == 0) & pl.col("_unpriced").fill_null(False))
            .then(pl.lit(None, pl.Float64))
            .otherwise(pl.col("_charged_s").fill_null(0.0))
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


def _charged_misses(client: QueryClient, params: SliceParams, saving: pl.DataFrame) -> pl.DataFrame:
    """Per model × pool × cache: ``_charged_s``, the cold-miss cost charged to that cache (each compile once, to
    its priciest missed cache: the module docstring's rule), and ``_unpriced``, whether a miss of the row belongs
    to a compile no missed cache prices. Read from the raw misses: the rollup keeps no compile id."""
    where = slice_where(params, "cache_events", what="cache events")
    compile_key = (
        f"if({col.COMPILE_ID} = '', concat('row:', toString(rowNumberInAllBlocks())), concat({col.HOST}, '|', "
        f"{col.ATTRS}['{col.PROCESS}'], '|', {col.COMPILE_ID}, '|', {col.REQUEST_ID}))"
    )
    misses = client.query_frame(
        f"SELECT toString({col.MODEL}) AS {col.MODEL}, toString({col.HW_POOL}) AS {col.HW_POOL}, "
        f"toString({col.CACHE}) AS {col.CACHE}, {compile_key} AS compile "
        f"FROM {client.database}.cache_events WHERE {where.sql} AND {col.RESULT} = 'miss' "
        f"GROUP BY {col.MODEL}, {col.HW_POOL}, {col.CACHE}, compile",
        where.params,
    )
    keys = [col.MODEL, col.HW_POOL, col.CACHE]
    if misses.is_empty():
        return pl.DataFrame(schema={**{k: pl.String for k in keys}, "_charged_s": pl.Float64, "_unpriced": pl.Boolean})
    priced = misses.join(saving, on=[col.MODEL, col.CACHE], how="left").sort(
        ["compile", "_saved_per_hit_s", col.CACHE], descending=[False, True, False], nulls_last=True
    )
    per_compile = priced.group_by(col.MODEL, col.HW_POOL, "compile").agg(
        pl.col(col.CACHE).first().alias("_charged_cache"), pl.col("_saved_per_hit_s").first().alias("_cost_s")
    )
    # A warm cache saves at most the compile's own time: a hit's recorded saving is the time its entry's compile
    # took, elsewhere and under another load (the walker's hits saved 26 s of compiles that took 12).
    # A compile starts before its lookups: its record is looked for from an hour before the range.
    compiled = slice_where(params, "compiles", start=params.start - timedelta(hours=1), end=params.end)
    took = client.query_frame(
        f"SELECT toString({col.MODEL}) AS {col.MODEL}, toString({col.HW_POOL}) AS {col.HW_POOL}, "
        f"{compile_key} AS compile, toFloat64(sum({col.ENTIRE_FRAME_S})) AS _took_s "
        f"FROM {client.database}.compiles WHERE {compiled.sql} AND {col.COMPILE_ID} != '' "
        f"GROUP BY {col.MODEL}, {col.HW_POOL}, compile",
        compiled.params,
    )
    per_compile = (
        per_compile.join(took, on=[col.MODEL, col.HW_POOL, "compile"], how="left")
        .with_columns(
            pl.when(pl.col("_took_s").is_not_null() & pl.col("_cost_s").is_not_null())
            .then(pl.min_horizontal("_cost_s", "_took_s"))
            .otherwise(pl.col("_cost_s"))
            .alias("_cost_s")
        )
        .drop("_took_s")
    )
    charges = (
        per_compile.filter(pl.col("_cost_s").is_not_null())
        .group_by(col.MODEL, col.HW_POOL, pl.col("_charged_cache").alias(col.CACHE))
        .agg(pl.col("_cost_s").sum().alias("_charged_s"))
    )
    unpriced = (
        misses.join(per_compile, on=[col.MODEL, col.HW_POOL, "compile"])
        .group_by(keys)
        .agg(pl.col("_cost_s").is_null().any().alias("_unpriced"))
    )
    return unpriced.join(charges, on=keys, how="full", coalesce=True)


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
    frame = lookups_by_result(client, params, [col.CACHE], unit="day")
    return frame.with_columns(hit_ratio(pl.col("hits"), pl.col("lookups")).alias("hit_ratio"))


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
