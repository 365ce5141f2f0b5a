"""Recompile storms and novelty: hours where recompiles or compile time jump, and graph keys new to a pool.

**Storm rule.** Per model × hardware pool, hourly sums of recompiles and compile seconds are compared with
a baseline: the median of the preceding ``baseline_hours`` hours, hours without any counting as zero. The
recompiles are the hour's recompile records (:func:`~inferensics.analytics.recompile_counts.recompile_records`),
inside requests or not (a server's warm-up, imported TORCH_TRACE logs), the recompile limit's hits left out: a
request whose recompile failed (it raised) counts none in its own row, but its record is a recompile of the hour,
and its request is among those the storm lists. The
compile seconds are what requests paid (from the ``requests_1h`` rollup, raw rows when filtered by host) plus
the compiles outside any request, read from the ``compiles`` table by their empty request id, so a store of
imported logs alone shows its storms too. Recompile records carry no bundle: under a bundle filter the
recompiles are the request recompiles of the bundle's requests
(:func:`~inferensics.analytics.recompile_counts.request_recompiles`: a failed recompile counts none there), and compiles
carry no traffic class: under that filter the compiles outside requests are left out. An hour is a storm when

* ``recompiles >= max(min_recompiles, factor × baseline_recompiles)``, or
* ``recompiles >= min_recompiles`` and ``compile_seconds >= max(min_compile_seconds, factor ×
  baseline_compile_seconds)``.

Defaults: 24 hours, factor 3, at least 10 recompiles; 60 compile seconds. The median ignores a short
earlier storm; the floors stop a quiet pool's single recompile from counting. The compile seconds include
first compiles (a request's compile time is not split by what started it), and one cold compile of a large
model takes one to two minutes: without the recompile floor, every hour with one recompile and a cold start
was a storm (a slow first compile is :func:`slow_compiles`' finding, not a storm). With it, the compile-seconds
condition finds an hour whose recompiles reach the floor and cost far more than usual, though their number
stays under ``factor`` times the usual.

**Slow compile rule.** An hour whose compile seconds reach the same threshold, ``max(min_compile_seconds,
factor × baseline_compile_seconds)``, with fewer than ``min_recompiles`` recompiles (none, or a few under the
floor) is a slow compile hour (:func:`slow_compiles`): one 60 s cold compile of a new graph, with or without a
recompile or two beside it. So every hour whose compile seconds reach the threshold is in exactly one of the two
lists: a storm when its recompiles reach the floor, else a slow compile hour.

The range's first and last hours are clipped to it: a range from 06:30 counts the 06:00 hour's events from
06:30 on, and lists its storm under the hour's start, 06:00. Only hours with data are computed (memory follows
the data, not the range: a range from 1970 costs what its hours with data cost). Each storm lists its top
recompile reasons (their patterns: :mod:`~inferensics.analytics.reasons`) and the requests that triggered
them (from the ``recompiles`` table).

**Novelty rule.** A graph key is new in a pool when its first compile in that pool (over all history up to
the range end) falls inside the range.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Final

import polars as pl
from pydantic import BaseModel, Field

from inferensics.analytics._requests import aggregate_sql, time_bucket
from inferensics.analytics.cache import lookups_by_result
from inferensics.analytics.client import QueryClient
from inferensics.analytics.filters import (
    FILTER_COLUMNS,
    TIME_TYPE,
    SliceParams,
    check_filter_values,
    filters_apply,
    slice_where,
    table_columns,
)
from inferensics.analytics.reasons import PATTERN, as_reason, reason_pattern_sql
from inferensics.analytics.recompile_counts import IS_RECORD, recompile_records, request_recompiles
from inferensics.schema import columns as col

_KEYS = [col.MODEL, col.HW_POOL]


class StormRule(BaseModel):
    """The storm rule's knobs (see the module docstring). A small fleet (or a short demo) may lower the floors:
    at the defaults an hour needs 10 recompiles (or 60 compile seconds) of one model and pool to be a storm,
    however quiet the hours before it were."""

    baseline_hours: int = Field(24, ge=1, le=24 * 14)
    """Hours before each bucket whose median is the baseline."""
    factor: float = Field(3.0, gt=0)
    """How many times the baseline a storm must reach."""
    min_recompiles: int = Field(10, ge=1)
    """Recompiles an hour needs at least to be a storm."""
    min_compile_seconds: float = Field(60.0, gt=0)
    """Compile seconds an hour needs at least to be a storm by its compile time (its recompiles still reach
    ``min_recompiles``)."""

    def describe(self) -> str:
        """The rule in one sentence, with these numbers."""
        return (
            f"An hour is a storm when its recompiles reach max({self.min_recompiles:g}, {self.factor:g} × the median "
            f"of the {self.baseline_hours} hours before), or they reach {self.min_recompiles:g} and its compile "
            f"seconds reach max({self.min_compile_seconds:g}, {self.factor:g} × their median)."
        )

    def describe_slow(self) -> str:
        """The slow compile rule (module docstring) in one sentence, with these numbers."""
        return (
            f"An hour is a slow compile hour when its compile seconds reach max({self.min_compile_seconds:g}, "
            f"{self.factor:g} × the median of the {self.baseline_hours} hours before) with fewer than "
            f"{self.min_recompiles:g} recompiles (too few for a storm): a cold compile of a new graph or model."
        )

    def thresholds(self) -> str:
        """The rule's two thresholds in a phrase, with these numbers (beside a storm's figures and its baseline;
        :meth:`describe` says what the baseline is)."""
        return (
            f"recompiles ≥ max({self.min_recompiles:g}, {self.factor:g} × baseline), or recompiles ≥ "
            f"{self.min_recompiles:g} and compile seconds ≥ max({self.min_compile_seconds:g}, {self.factor:g} × "
            "baseline)"
        )


class StormParams(StormRule, SliceParams):
    """A slice and the storm rule's knobs."""


def recompile_storms(client: QueryClient, params: StormParams) -> pl.DataFrame:
    """Storm hours in the slice, newest first. A storm is recompiles: an hour with fewer than ``min_recompiles``
    is never one, however long its compiles took (a slow first compile is :func:`slow_compiles`).

    Columns: bucket (the hour's start; the range's first and last hours count only their part inside the range),
    model, hw_pool, requests, recompiles, compile_seconds, baseline_recompiles,
    baseline_compile_seconds, trigger (``recompiles``, ``compile_seconds`` or ``both``), top_reasons
    (up to 3 recompile reasons, most frequent first), top_reason_counts (their recompiles: the recompile limit's
    hits, which compiled nothing, are left out, as from ``recompiles``; under a bundle filter, the records of the
    bundle's requests, failed recompiles too), request_ids (up to 10 requests that triggered a recompile, sorted).
    """
    empty = _empty()
    base = _hours(client, params)
    if base is None:
        return empty
    by_recompiles, by_seconds = _rules(params)
    # Compile seconds count first compiles too: a storm by them needs the recompile floor as well.
    by_seconds = by_seconds & (pl.col(col.RECOMPILES) >= params.min_recompiles)
    storms = base.filter(by_recompiles | by_seconds).with_columns(
        pl.when(by_recompiles & by_seconds)
        .then(pl.lit("both"))
        .when(by_recompiles)
        .then(pl.lit("recompiles"))
        .otherwise(pl.lit("compile_seconds"))
        .alias("trigger")
    )
    if storms.is_empty():
        return empty
    reasons = _storm_reasons(client, params, storms.select(*_KEYS, "bucket"))
    out = storms.join(reasons, on=[*_KEYS, "bucket"], how="left").with_columns(
        pl.col("top_reasons").fill_null(pl.lit([], pl.List(pl.String))),
        pl.col("top_reason_counts").fill_null(pl.lit([], pl.List(pl.UInt64))),
        pl.col("request_ids").fill_null(pl.lit([], pl.List(pl.String))),
    )
    return out.select(empty.columns).sort(["bucket", *_KEYS], descending=[True, False, False])


CACHE_LOOKUP_COLUMNS: Final = ("cache_lookups", "cache_hits", "cache_misses", "cache_bypasses")
""":func:`slow_compiles`' counts of the hour's compile-cache lookups, by result."""


def slow_compiles(client: QueryClient, params: StormParams) -> pl.DataFrame:
    """Hours whose compile seconds reach the storm rule's compile-time threshold with fewer recompiles than a
    storm needs (none: first compiles of a model, cold caches; or a few under ``min_recompiles``: a new graph's
    cold compile beside them), newest first: the slow compile rule of the module docstring, a finding of its own,
    never a storm. Each hour says why it is listed (``why``).

    Whether a cold cache was in it is not guessed: each hour carries its model and pool's compile-cache
    lookups of that hour, every cache, counted as ``cache_health`` counts them (its hit ratio's hits and
    lookups), so an hour of first compiles whose lookups all hit reads as that, not as a cold cache.

    Columns: bucket, model, hw_pool, requests, recompiles (under ``min_recompiles``), compile_seconds,
    baseline_compile_seconds, why (the threshold reached and the recompiles, in words), cache_lookups, cache_hits,
    cache_misses, cache_bypasses (0 when the hour had no lookup; null under a filter cache events carry no column
    for: traffic class).
    """
    base = _hours(client, params)
    if base is None:
        return _unknown_lookups(_empty().select(SLOW_COLUMNS[:-1]).with_columns(pl.lit(None, pl.String).alias("why")))
    _, by_seconds = _rules(params)
    # Compile seconds over the threshold with recompiles at the floor make a storm: the rest are slow compiles.
    slow = base.filter(by_seconds & (pl.col(col.RECOMPILES) < params.min_recompiles))
    why = pl.Series("why", [_slow_why(params, row) for row in slow.iter_rows(named=True)], pl.String)
    return _with_cache_lookups(client, params, slow.with_columns(why).select(SLOW_COLUMNS)).sort(
        ["bucket", *_KEYS], descending=[True, False, False]
    )


SLOW_COLUMNS: Final = (
    "bucket", col.MODEL, col.HW_POOL, col.REQUESTS, col.RECOMPILES, col.COMPILE_SECONDS, "baseline_compile_seconds",
    "why",
)  # fmt: skip
""":func:`slow_compiles`' columns before the cache lookups (:data:`CACHE_LOOKUP_COLUMNS`)."""


def _slow_why(rule: StormRule, hour: dict[str, object]) -> str:
    """Why a slow compile hour is listed, in words: the threshold its compile seconds reached, and its recompiles
    (none, or too few for a storm)."""
    seconds, baseline = float(hour[col.COMPILE_SECONDS]), float(hour["baseline_compile_seconds"] or 0.0)  # type: ignore[arg-type]
    recompiles = int(hour[col.RECOMPILES])  # type: ignore[call-overload]
    threshold = max(rule.min_compile_seconds, rule.factor * baseline)
    how = (
        f"{seconds:,.1f} compile s reach max({rule.min_compile_seconds:g}, {rule.factor:g} × baseline {baseline:,.1f}) "
        f"= {threshold:,.1f} s"
    )
    if not recompiles:
        return f"{how}, without a recompile (first compiles)"
    some = f"{recompiles} recompile{'s' if recompiles > 1 else ''}"
    return f"{how}, with {some}: under the storm floor of {rule.min_recompiles}"


def _unknown_lookups(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.with_columns(pl.lit(None, pl.UInt64).alias(c) for c in CACHE_LOOKUP_COLUMNS)


def _with_cache_lookups(client: QueryClient, params: StormParams, hours: pl.DataFrame) -> pl.DataFrame:
    """``hours`` (bucket, model, hw_pool, ...) with their compile-cache lookups by result
    (:data:`CACHE_LOOKUP_COLUMNS`), as :func:`~inferensics.analytics.cache.lookups_by_result` counts them."""
    if hours.is_empty() or not filters_apply(params, "cache_events"):
        return _unknown_lookups(hours)
    buckets = hours.get_column("bucket").to_list()
    # The edge hours are clipped to the range, as their compile seconds are.
    span = params.model_copy(
        update={"start": max(min(buckets), params.start), "end": min(max(buckets) + timedelta(hours=1), params.end)}
    )
    lookups = lookups_by_result(client, span, list(_KEYS), unit="hour").rename(
        dict(zip(("lookups", "hits", "misses", "bypasses"), CACHE_LOOKUP_COLUMNS, strict=True))
    )
    return hours.join(lookups, on=["bucket", *_KEYS], how="left").with_columns(
        pl.col(c).fill_null(0) for c in CACHE_LOOKUP_COLUMNS
    )


def _rules(params: StormParams) -> tuple[pl.Expr, pl.Expr]:
    """The storm rule's two conditions (recompiles, compile seconds) over :func:`_hours`' frame."""
    by_recompiles = pl.col(col.RECOMPILES) >= pl.max_horizontal(
        pl.lit(float(params.min_recompiles)), params.factor * pl.col("baseline_recompiles")
    )
    by_seconds = pl.col(col.COMPILE_SECONDS) >= pl.max_horizontal(
        pl.lit(params.min_compile_seconds), params.factor * pl.col("baseline_compile_seconds")
    )
    return by_recompiles, by_seconds


def _hours(client: QueryClient, params: StormParams) -> pl.DataFrame | None:
    """Per model × pool × hour of the slice that holds any request, recompile or compile: requests, recompiles,
    compile seconds and their baselines (the medians of the ``baseline_hours`` before, hours without any
    counting as zero); ``None`` when the slice has no traffic. An hour without any is left out: neither rule
    can hold there (both floors are above zero).

    The range's first and last hours are clipped to it: a range starting at 06:30 counts its 06:00 hour's
    events from 06:30 on (the whole hours before it are the baseline's). Memory is bounded by the hours with
    data, never by the range's length: the baselines are computed on the hours the slice's hours look back on
    (:func:`_lookback_grid`), not on every hour of the range."""
    check_filter_values(client, params, ("requests_1h", "requests", "recompiles", "compiles"))
    first_hour = _hour_floor(params.start)
    lo = first_hour - timedelta(hours=params.baseline_hours)
    # Two reads: the whole hours before the range (the baseline's) and the range itself, ends clipped.
    before = _hourly(client, params, lo, first_hour)
    inside = _hourly(client, params, params.start, params.end)
    if inside.is_empty():
        return None
    hourly = pl.concat([f for f in (before, inside) if not f.is_empty()], how="vertical_relaxed")
    hourly = hourly.group_by("bucket", *_KEYS).agg(pl.col(c).sum() for c in _COUNTS)
    grid = _lookback_grid(inside.select(*_KEYS, "bucket"), params.baseline_hours)
    filled = (
        grid.join(hourly, on=[*_KEYS, "bucket"], how="left")
        .with_columns(
            pl.col(col.REQUESTS).fill_null(0),
            pl.col(col.RECOMPILES).fill_null(0),
            pl.col(col.COMPILE_SECONDS).fill_null(0.0),
        )
        .sort([*_KEYS, "bucket"])
    )
    n = params.baseline_hours
    # Every hour of ``inside`` has its n hours before it in the grid, consecutively: the n rows before its row
    # are those hours (a gap in the grid lies before them), so the rolling median over rows is over hours.
    base = filled.with_columns(
        pl.col(col.RECOMPILES)
        .cast(pl.Float64)
        .shift(1)
        .rolling_median(n, min_samples=n)
        .over(_KEYS)
        .alias("baseline_recompiles"),
        pl.col(col.COMPILE_SECONDS)
        .shift(1)
        .rolling_median(n, min_samples=n)
        .over(_KEYS)
        .alias("baseline_compile_seconds"),
    )
    return base.join(inside.select(*_KEYS, "bucket"), on=[*_KEYS, "bucket"], how="semi")


_COUNTS: Final = {col.REQUESTS: pl.UInt64, col.RECOMPILES: pl.UInt64, col.COMPILE_SECONDS: pl.Float64}
"""The hourly figures the storm rule reads, and their types."""


def _hour_floor(value: datetime) -> datetime:
    return value.replace(minute=0, second=0, microsecond=0)


def _hourly(client: QueryClient, params: StormParams, start: datetime, end: datetime) -> pl.DataFrame:
    """Per model × pool × hour bucket with data in ``[start, end)`` (its edge hours clipped to it): requests,
    recompiles and compile seconds (module docstring), each bucket at its hour's start."""
    if end <= start:
        return pl.DataFrame()
    inner, values = aggregate_sql(
        client.database, params, start, end, keys={k: k for k in _KEYS}, unit="hour",
        sums=(col.REQUESTS, col.COMPILE_SECONDS), quantiles=False,
    )  # fmt: skip
    paid = client.query_frame(inner, values)
    # The hour's recompiles are its recompile records; under a filter they carry no column for (the bundle),
    # the request recompiles of the slice's requests (a recompile whose compile failed counts none there).
    recompiles = (
        recompile_records(client, params, start, end, unit="hour")
        if filters_apply(params, "recompiles")
        else request_recompiles(client, params, start, end, unit="hour")
    )
    return _summed(paid, recompiles, _unpaid_compiles(client, params, start, end))


def _lookback_grid(hours: pl.DataFrame, n: int) -> pl.DataFrame:
    """Every hour that ``hours`` (model, hw_pool, bucket) covers or looks back on (the ``n`` hours before each),
    once per model × pool: overlapping look-backs merge into one run of hours. At most ``n + 1`` rows per row of
    ``hours``, however long the range they lie in."""
    back = timedelta(hours=n)
    runs = (
        hours.unique()
        .sort([*_KEYS, "bucket"])
        .with_columns((pl.col("bucket") - back).alias("_from"))
        .with_columns(
            # A new run where this look-back starts after the previous hour of the same model and pool.
            (pl.col("_from") > pl.col("bucket").shift(1).over(_KEYS) + timedelta(hours=1))
            .fill_null(True)
            .cum_sum()
            .over(_KEYS)
            .alias("_run")
        )
        .group_by(*_KEYS, "_run")
        .agg(pl.col("_from").min(), pl.col("bucket").max().alias("_to"))
    )
    return (
        runs.select(*_KEYS, pl.datetime_ranges("_from", "_to", interval="1h", closed="both").alias("bucket"))
        .explode("bucket")
        .with_columns(pl.col("bucket").dt.cast_time_unit("ms"))
    )


def _unpaid_compiles(client: QueryClient, params: StormParams, lo: datetime, end: datetime) -> pl.DataFrame:
    """Per model × pool × hour: the whole-frame seconds of the compiles no request paid (an empty request id),
    when the slice's filters apply to the ``compiles`` table (else none)."""
    if not filters_apply(params, "compiles"):
        return pl.DataFrame()
    where = slice_where(params, "compiles", start=lo, end=end)
    return client.query_frame(
        f"SELECT {time_bucket(col.TS, 'hour')} AS bucket, {col.MODEL}, {col.HW_POOL}, "
        f"toFloat64(sum({col.ENTIRE_FRAME_S})) AS {col.COMPILE_SECONDS} FROM {client.database}.compiles "
        f"WHERE {where.sql} AND {col.REQUEST_ID} = '' GROUP BY bucket, {col.MODEL}, {col.HW_POOL}",
        where.params,
    )


def _summed(*parts: pl.DataFrame) -> pl.DataFrame:
    """The hourly parts (the requests' sums, the recompiles, the compiles no request paid) added up, one row per
    model × pool × hour; a part without a column adds 0 to it."""
    types = _COUNTS
    frames = [f for f in parts if not f.is_empty()]
    if not frames:
        return pl.DataFrame()
    both = pl.concat(
        [
            f.with_columns(pl.col("bucket").dt.cast_time_unit("ms")).with_columns(
                (pl.col(name).cast(t) if name in f.columns else pl.lit(0, t).alias(name)) for name, t in types.items()
            )
            for f in frames
        ],
        how="diagonal_relaxed",
    )
    return both.group_by("bucket", *_KEYS).agg(pl.col(name).sum() for name in types)


def _storm_reasons(client: QueryClient, params: StormParams, storms: pl.DataFrame) -> pl.DataFrame:
    """Top reasons and triggering requests of each storm hour in ``storms`` (model, hw_pool, bucket).

    Reads only recompiles of the storms' models, pools and hours (a superset of the storm hours, narrowed
    exactly by a join), not every recompile of the range: a 7-day range holds ~230k recompiles on the
    10^8-row store, its storms a few thousand. Under a filter recompile records carry no column for (the
    bundle), the records are those of the slice's requests: the requests whose own rows counted the storm's
    recompiles, and those whose recompile failed."""
    hours = storms.get_column("bucket").unique().sort().to_list()
    # The edge hours are clipped to the range, as their counts are.
    start, end = max(hours[0], params.start), min(hours[-1] + timedelta(hours=1), params.end)
    columns = table_columns("recompiles")
    unsupported = {name: None for name in params.active() if FILTER_COLUMNS[name] not in columns}
    where = slice_where(params.model_copy(update=unsupported), "recompiles", start=start, end=end)
    of_requests, values = "", dict(where.params)
    if unsupported:
        # A request starts before its recompiles: its row may lie in the hour before the first storm hour.
        requests = slice_where(params, "requests", time_column=None)
        of_requests = (
            f"AND {col.REQUEST_ID} IN (SELECT {col.REQUEST_ID} FROM {client.database}.requests WHERE {requests.sql} "
            f"AND {col.TS} >= {{r_start:{TIME_TYPE}}} AND {col.TS} < {{r_end:{TIME_TYPE}}}) "
        )
        values |= {**requests.params, "r_start": start - timedelta(hours=1), "r_end": end}
    values |= {
        "s_models": storms.get_column(col.MODEL).unique().sort().to_list(),
        "s_pools": storms.get_column(col.HW_POOL).unique().sort().to_list(),
        "s_hours": hours,
    }
    rows = (
        client.query_frame(
            f"SELECT toDateTime64(toStartOfHour({col.TS}), 0, 'UTC') AS bucket, {col.MODEL}, {col.HW_POOL}, "
            f"{reason_pattern_sql(col.REASON)} AS {PATTERN}, {col.REQUEST_ID} FROM {client.database}.recompiles "
            # The hour's recompiles leave the recompile limit's hits out: so do its reasons' counts.
            f"WHERE {where.sql} AND {IS_RECORD} {of_requests}"
            f"AND {col.MODEL} IN {{s_models:Array(String)}} AND {col.HW_POOL} IN {{s_pools:Array(String)}} "
            f"AND toDateTime64(toStartOfHour({col.TS}), 0, 'UTC') IN {{s_hours:Array(DateTime64(0, 'UTC'))}}",
            values,
        )
        .with_columns(pl.col("bucket").dt.cast_time_unit("ms"))
        .join(storms, on=[*_KEYS, "bucket"], how="semi")
        .pipe(as_reason)
    )
    keys = [*_KEYS, "bucket"]
    top = (
        rows.group_by([*keys, col.REASON])
        .agg(pl.len().cast(pl.UInt64).alias("n"))
        .sort([*keys, "n", col.REASON], descending=[False, False, False, True, False])
        .group_by(keys, maintain_order=True)
        .agg(pl.col(col.REASON).head(3).alias("top_reasons"), pl.col("n").head(3).alias("top_reason_counts"))
    )
    ids = (
        rows.filter(pl.col(col.REQUEST_ID) != "")
        .select([*keys, col.REQUEST_ID])
        .unique()
        .sort([*keys, col.REQUEST_ID])
        .group_by(keys, maintain_order=True)
        .agg(pl.col(col.REQUEST_ID).head(10).alias("request_ids"))
    )
    return top.join(ids, on=keys, how="left")


def _empty() -> pl.DataFrame:
    return pl.DataFrame(
        schema={
            "bucket": pl.Datetime("ms", "UTC"),
            col.MODEL: pl.String,
            col.HW_POOL: pl.String,
            col.REQUESTS: pl.UInt64,
            col.RECOMPILES: pl.UInt64,
            col.COMPILE_SECONDS: pl.Float64,
            "baseline_recompiles": pl.Float64,
            "baseline_compile_seconds": pl.Float64,
            "trigger": pl.String,
            "top_reasons": pl.List(pl.String),
            "top_reason_counts": pl.List(pl.UInt64),
            "request_ids": pl.List(pl.String),
        }
    )


def _first_seen(client: QueryClient, params: SliceParams) -> pl.DataFrame:
    where = slice_where(params, "compiles", time_column=None, what="specializations")
    return client.query_frame(
        f"SELECT {col.MODEL}, {col.HW_POOL}, {col.GRAPH_KEY}, min({col.TS}) AS first_seen, "
        f"argMin({col.CODE_LOCATION}, {col.TS}) AS {col.CODE_LOCATION}, argMin({col.HOST}, {col.TS}) AS first_host, "
        f"argMin({col.REQUEST_ID}, {col.TS}) AS first_request_id, "
        f"countIf({col.TS} >= {{t_start:DateTime64(6, 'UTC')}}) AS compiles_in_range "
        f"FROM {client.database}.compiles WHERE {where.sql} AND {col.GRAPH_KEY} != '' "
        f"AND {col.TS} < {{t_end:DateTime64(6, 'UTC')}} GROUP BY {col.MODEL}, {col.HW_POOL}, {col.GRAPH_KEY}",
        {**where.params, "t_start": params.start, "t_end": params.end},
    ).with_columns(pl.col("compiles_in_range").cast(pl.UInt64))


def new_graph_keys(client: QueryClient, params: SliceParams) -> pl.DataFrame:
    """Graph keys first compiled in their pool inside the range (novelty rule above), newest first.

    Columns: model, hw_pool, graph_key, first_seen, code_location, first_host, first_request_id,
    compiles_in_range.
    """
    check_filter_values(client, params, ("compiles",))
    seen = _first_seen(client, params)
    return seen.filter(pl.col("first_seen") >= params.start).sort(
        ["first_seen", *_KEYS, col.GRAPH_KEY], descending=[True, False, False, False]
    )


def specializations(client: QueryClient, params: SliceParams) -> pl.DataFrame:
    """Distinct specializations (graph keys) per model × hardware pool and their growth.

    Columns: model, hw_pool, active_graph_keys (compiled at least once in the range), new_graph_keys
    (first compiled in the range), total_graph_keys (ever compiled up to the range end), growth
    (``new_graph_keys / (total_graph_keys - new_graph_keys)``; null when the pool had none before),
    compiles and compile_seconds (every compile in the range, failed ones and those outside requests or from
    imported logs too; whole-frame seconds), recompiles (the recompile records of
    :func:`~inferensics.analytics.recompile_counts.recompile_records`: every recompile event in the range but the
    recompile limit's hits, inside requests or not; null under a filter recompile events carry no column for). A pool
    whose compiles in the range all failed has no graph key: its keys read 0.
    """
    check_filter_values(client, params, ("compiles",))
    seen = _first_seen(client, params)
    out = seen.group_by(_KEYS).agg(
        (pl.col("compiles_in_range") > 0).sum().cast(pl.UInt64).alias("active_graph_keys"),
        (pl.col("first_seen") >= params.start).sum().cast(pl.UInt64).alias("new_graph_keys"),
        pl.len().cast(pl.UInt64).alias("total_graph_keys"),
    )
    before = pl.col("total_graph_keys").cast(pl.Int64) - pl.col("new_graph_keys").cast(pl.Int64)
    where = slice_where(params, "compiles", what="specializations")
    compiled = client.query_frame(
        f"SELECT {col.MODEL}, {col.HW_POOL}, count() AS compiles, sum({col.ENTIRE_FRAME_S}) AS compile_seconds "
        f"FROM {client.database}.compiles WHERE {where.sql} GROUP BY {col.MODEL}, {col.HW_POOL}",
        where.params,
    ).with_columns(pl.col("compiles").cast(pl.UInt64), pl.col("compile_seconds").cast(pl.Float64))
    keys = out.with_columns(pl.when(before > 0).then(pl.col("new_graph_keys") / before).otherwise(None).alias("growth"))
    joined = keys.filter(pl.col("active_graph_keys") > 0).join(compiled, on=_KEYS, how="full", coalesce=True)
    if filters_apply(params, "recompiles"):
        recompiled = recompile_records(client, params, params.start, params.end, what="specializations")
        joined = joined.join(recompiled, on=_KEYS, how="full", coalesce=True).with_columns(
            pl.col(col.RECOMPILES).fill_null(0)
        )
    else:
        joined = joined.with_columns(pl.lit(None, pl.UInt64).alias(col.RECOMPILES))
    return (
        joined.with_columns(pl.col(c).fill_null(0) for c in ("active_graph_keys", "new_graph_keys", "total_graph_keys"))
        .with_columns(pl.col("compiles").fill_null(0), pl.col("compile_seconds").fill_null(0.0))
        .sort(_KEYS)
    )
