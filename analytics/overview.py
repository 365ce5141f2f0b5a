"""Fleet overview: request rate, latency quantiles, error/fallback/recompile rates, compile time, cache use.

Every rate is a ratio of sums over the slice: ``error_rate = errors / requests``, ``fallback_rate = fallbacks /
requests`` (requests served eagerly), ``recompile_rate = recompiles / requests`` (recompiles per request, can
exceed 1; ``recompiles`` are the request recompiles of
:func:`~inferensics.analytics.recompile_counts.request_recompiles`, the same sum of the same pieces),
``cache_hit_ratio = cache_hits / (cache_hits + cache_misses)`` over requests that compiled (null when none did),
``request_rate_per_s = requests / range seconds``, ``nonfinite_rate = nonfinite / fingerprinted``: outputs
holding NaN or inf among the requests whose output was fingerprinted (null when none was). The host SDK
fingerprints only a sample of CPU outputs (one request in 32 by default), so over all requests that rate would
read up to 32 times too low; ``fingerprinted`` counts the rows of
:data:`~inferensics.schema.rollups.FINGERPRINTED_SQL`, the rule the canary compares by. Latency quantiles come
from the rollups' latency histograms (±0.9 %, see ``inferensics.schema.rollups``).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Final, Literal

import polars as pl

from inferensics.analytics._requests import SUM_COLUMNS, BucketUnit, aggregate_sql, quantile_columns, time_bucket
from inferensics.analytics.client import QueryClient
from inferensics.analytics.errors import AnalyticsError
from inferensics.analytics.filters import SliceParams, check_filter_values, slice_where
from inferensics.analytics.recompile_counts import recompile_rate
from inferensics.analytics.request_list import FELL_BACK
from inferensics.schema import columns as col

GroupBy = Literal["model", "hw_pool", "traffic_class", "bundle", "none"]
_DIMS = (col.MODEL, col.HW_POOL, col.TRAFFIC_CLASS)
_GROUP_COLUMNS = {
    "model": col.MODEL,
    "hw_pool": col.HW_POOL,
    "traffic_class": col.TRAFFIC_CLASS,
    "bundle": col.BUNDLE_ID,
}
_REQUEST_TABLES = ("requests_1h", "requests")
MAX_MINUTE_RANGE: Final = timedelta(days=7)
"""The longest range a time series (:func:`fleet_timeseries`, recompiles over time) splits into minute buckets
(10,080 buckets per series)."""


def _rates(frame: pl.DataFrame, seconds: float) -> pl.DataFrame:
    requests = pl.col(col.REQUESTS)
    lookups = pl.col(col.CACHE_HITS) + pl.col(col.CACHE_MISSES)
    fingerprinted = pl.col(col.FINGERPRINTED)
    return frame.with_columns(
        (requests / seconds if seconds > 0 else pl.lit(None, pl.Float64)).alias("request_rate_per_s"),
        (pl.col(col.LATENCY_SUM_MS) / requests).alias("mean_ms"),
        (pl.col(col.ERRORS) / requests).alias("error_rate"),
        (pl.col(col.FALLBACKS) / requests).alias("fallback_rate"),
        recompile_rate(),
        pl.when(fingerprinted > 0).then(pl.col(col.NONFINITE) / fingerprinted).otherwise(None).alias("nonfinite_rate"),
        pl.when(lookups > 0).then(pl.col(col.CACHE_HITS) / lookups).otherwise(None).alias("cache_hit_ratio"),
    )


def fleet_overview(client: QueryClient, params: SliceParams) -> pl.DataFrame:
    """One row per model × hardware pool × traffic class with traffic in the slice.

    Columns: model, hw_pool, traffic_class, the sums (requests, errors, fallbacks, recompiles, compiles,
    compile_seconds, cache_hits, cache_misses, nonfinite, fingerprinted, latency_sum_ms), p50_ms, p95_ms, p99_ms,
    request_rate_per_s, mean_ms, error_rate, fallback_rate, recompile_rate, nonfinite_rate,
    cache_hit_ratio (rules in the module docstring). Sorted by requests descending.
    """
    check_filter_values(client, params, _REQUEST_TABLES)
    dims = ", ".join(_DIMS)
    inner, values = aggregate_sql(client.database, params, params.start, params.end, keys={d: d for d in _DIMS})
    frame = client.query_frame(
        f"SELECT {dims}, {', '.join(SUM_COLUMNS)}, {', '.join(quantile_columns())} FROM ({inner}) "
        f"ORDER BY {col.REQUESTS} DESC, {dims}",
        values,
    )
    return _rates(_typed(frame), params.seconds)


def check_bucket_unit(params: SliceParams, unit: BucketUnit) -> None:
    """Raise :class:`AnalyticsError` for minute buckets over a range longer than ``MAX_MINUTE_RANGE``."""
    if unit == "minute" and params.end - params.start > MAX_MINUTE_RANGE:
        raise AnalyticsError(
            f"minute buckets over {params.end - params.start} would be {params.seconds / 60:,.0f} buckets per "
            f"series; ask for unit='hour' or 'day', or a range of at most {MAX_MINUTE_RANGE.days} days"
        )


def model_pool_series(
    client: QueryClient,
    params: SliceParams,
    unit: BucketUnit,
    *,
    table: str,
    what: str,
    measures: str,
    having: str = "",
) -> pl.DataFrame:
    """The compile-side ``table``'s ``measures`` (SQL select items) per time bucket, model and hardware pool,
    over the slice of ``params`` (``what`` names the series in a refused filter's message), sorted by bucket,
    model and pool; ``having`` filters the groups. Buckets without a row are absent.

    Raises:
        AnalyticsError: minute buckets over a range longer than :data:`MAX_MINUTE_RANGE`.
    """
    check_bucket_unit(params, unit)
    check_filter_values(client, params, (table,))
    where = slice_where(params, table, what=what)
    keys = f"{col.BUCKET}, {col.MODEL}, {col.HW_POOL}"
    return client.query_frame(
        f"SELECT {time_bucket(col.TS, unit)} AS {col.BUCKET}, {col.MODEL}, {col.HW_POOL}, {measures} "
        f"FROM {client.database}.{table} WHERE {where.sql} GROUP BY {keys} "
        f"{f'HAVING {having} ' if having else ''}ORDER BY {keys}",
        where.params,
    ).with_columns(pl.col(col.BUCKET).dt.cast_time_unit("ms"))


def fleet_timeseries(
    client: QueryClient, params: SliceParams, *, unit: BucketUnit = "hour", by: GroupBy = "none"
) -> pl.DataFrame:
    """Request aggregates per time bucket (and per value of ``by``), for trend charts.

    Columns: bucket, group (the ``by`` value; ``all`` when ``by`` is ``none``), the sums, p50_ms, p95_ms,
    p99_ms and the rates of :func:`fleet_overview` (``request_rate_per_s`` over the bucket length).
    Buckets with no requests are absent. Buckets are always of ``unit``: a range whose ends are not on
    whole buckets gives partial first and last buckets (labelled by their start), never coarser ones.

    Raises:
        AnalyticsError: minute buckets over a range longer than ``MAX_MINUTE_RANGE``.
    """
    check_bucket_unit(params, unit)
    check_filter_values(client, params, _REQUEST_TABLES)
    group = _GROUP_COLUMNS[by] if by != "none" else "'all'"
    inner, values = aggregate_sql(
        client.database, params, params.start, params.end, keys={"group": f"toString({group})"}, unit=unit
    )
    frame = client.query_frame(
        f"SELECT bucket, group, {', '.join(SUM_COLUMNS)}, {', '.join(quantile_columns())} FROM ({inner}) "
        "ORDER BY bucket, group",
        values,
    )
    seconds = {"minute": 60.0, "hour": 3600.0, "day": 86400.0}[unit]
    return _rates(_typed(frame), seconds)


def _typed(frame: pl.DataFrame) -> pl.DataFrame:
    casts = {
        name: pl.Float64 if name in (col.COMPILE_SECONDS, col.LATENCY_SUM_MS) else pl.UInt64 for name in SUM_COLUMNS
    }
    casts.update({"p50_ms": pl.Float64, "p95_ms": pl.Float64, "p99_ms": pl.Float64})
    return frame.with_columns(*(pl.col(n).cast(t) for n, t in casts.items()))


def fallback_reasons(client: QueryClient, params: SliceParams) -> pl.DataFrame:
    """Eager fallbacks by reason per model × hardware pool × traffic class.

    Columns: model, hw_pool, traffic_class, fallback_reason, fallbacks, requests (all requests of that
    slice), fallback_rate (``fallbacks / requests``). Read from raw rows with ``outcome = 'fallback'``
    (the rollups carry no reason); requests come from the rollup. Sorted by fallbacks descending.
    """
    check_filter_values(client, params, _REQUEST_TABLES)
    where = slice_where(params, "requests")
    dims = ", ".join(_DIMS)
    reasons = client.query_frame(
        f"SELECT {dims}, {col.FALLBACK_REASON}, count() AS fallbacks FROM {client.database}.requests "
        f"PREWHERE {FELL_BACK} WHERE {where.sql} "
        f"GROUP BY {dims}, {col.FALLBACK_REASON}",
        where.params,
    ).with_columns(pl.col("fallbacks").cast(pl.UInt64))
    # Only the request counts: no latency quantiles (the histograms are the costly part of an overview).
    inner, values = aggregate_sql(
        client.database,
        params,
        params.start,
        params.end,
        keys={d: d for d in _DIMS},
        sums=(col.REQUESTS,),
        quantiles=False,
    )
    totals = client.query_frame(inner, values).with_columns(pl.col(col.REQUESTS).cast(pl.UInt64))
    return (
        reasons.join(totals, on=list(_DIMS), how="left")
        .with_columns((pl.col("fallbacks") / pl.col(col.REQUESTS)).alias("fallback_rate"))
        .sort(["fallbacks", *_DIMS, col.FALLBACK_REASON], descending=[True, False, False, False, False])
    )
