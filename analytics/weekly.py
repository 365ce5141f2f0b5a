"""The weekly recompilation and cache report, assembled from named queries.

The report is built from a :class:`~inferensics.analytics.client.QueryRunner`, so it is the same whether
the queries run on a local store (``--dsn``) or through a collector service (``--service``). A week is an
ISO week (Monday 00:00 UTC to the next Monday); the current week ends now (the week so far).
Week-over-week figures compare it with the same span of the week before (the week so far against the same
days and hours of last week), so a week in progress is not measured against a whole one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from datetime import UTC, date, datetime, timedelta
from typing import Final

import polars as pl

from inferensics.analytics.bundle_unqualified import SCHEMA as UNQUALIFIED_SCHEMA
from inferensics.analytics.cache import hit_ratio
from inferensics.analytics.client import QueryRunner
from inferensics.analytics.errors import AnalyticsError
from inferensics.analytics.recompile_counts import recompile_rate
from inferensics.analytics.storms import StormRule
from inferensics.schema import columns as col

_WEEK = re.compile(r"([0-9]{4})-W([0-9]{2})")
"""ASCII digits only, matched whole: ``\\d`` takes any Unicode digit and ``$`` a final newline, and the week
names the report's files."""
_SUMS = [
    col.REQUESTS,
    col.ERRORS,
    col.FALLBACKS,
    col.RECOMPILES,
    col.COMPILES,
    col.COMPILE_SECONDS,
    col.CACHE_HITS,
    col.CACHE_MISSES,
]
TOP_N = 10
COMPILING_REQUESTS: Final = "compiling_requests"
"""The requests' ``compiles`` as the report names them: requests that compiled (outcome ``compile`` or
``recompile``), each counted once however many frames it compiled. Not the compile records (one per frame
compiled, inside requests or not) that the dashboard's Specializations tab counts, which the report gives as
``compile_records``."""
REQUEST_RECOMPILES: Final = "request_recompiles"
"""The requests' ``recompiles`` as the report names them: the request recompiles of
:func:`~inferensics.analytics.recompile_counts.request_recompiles` (a request's count of the recompiles it triggered
and compiled). Not the recompile records (:func:`~inferensics.analytics.recompile_counts.recompile_records`: every
recompile, inside requests or not, the recompile limit's hits left out) that the dashboard's Recompiles headline
and Specializations tab count, which the report gives as ``recompile_records``."""
RECORD_METRICS: Final = (
    "compile_records", "recompile_records", "compile_record_seconds", "failed_compiles", "bundle_misses",
)  # fmt: skip
"""The week-over-week metrics counted from the records themselves, inside requests or not: a fleet that only
imports TORCH_TRACE logs has these and no request figures."""


UNQUALIFIED_QUERY: Final = "bundle_unqualified_sizes"
"""The named query of :func:`~inferensics.analytics.bundle_unqualified.bundle_unqualified_sizes`."""


def parse_week(text: str, *, now: datetime | None = None) -> datetime:
    """Monday 00:00 UTC of ISO week ``YYYY-Www``; with ``now``, refused when the week has not started by then
    (its report would be all zeros; the week in progress is the week so far).

    >>> parse_week("2026-W10").isoformat()
    '2026-03-02T00:00:00+00:00'

    Raises:
        AnalyticsError: ``text`` is no ISO week, or one that starts after ``now``.
    """
    m = _WEEK.fullmatch(text)
    if not m:
        raise AnalyticsError(f"bad week {text!r}: write it as YYYY-Www, e.g. 2026-W10")
    try:
        day = date.fromisocalendar(int(m.group(1)), int(m.group(2)), 1)
    except ValueError:
        raise AnalyticsError(f"bad week {text!r}: {m.group(1)} has no week {m.group(2)}") from None
    start = datetime(day.year, day.month, day.day, tzinfo=UTC)
    if now is not None and start > now:
        current = current_week(now)
        raise AnalyticsError(
            f"week {text} has not started yet (it starts on {day:%Y-%m-%d}; the current week is {current}): "
            f"give a week up to {current}"
        )
    return start


def current_week(now: datetime) -> str:
    """The ISO week containing ``now`` (the default week of every report: the week so far).

    >>> current_week(datetime(2026, 3, 4, 12, tzinfo=UTC))
    '2026-W10'
    """
    year, week, _ = now.astimezone(UTC).isocalendar()
    return f"{year}-W{week:02d}"


def last_full_week(now: datetime) -> str:
    """The ISO week before the one containing ``now``."""
    year, week, _ = (now.astimezone(UTC) - timedelta(days=7)).isocalendar()
    return f"{year}-W{week:02d}"


@dataclass(frozen=True)
class WeeklyReport:
    """The frames of one weekly report (each documented by the named query it comes from)."""

    week: str
    start: datetime
    end: datetime
    by_model_pool: pl.DataFrame
    """Per model × hardware pool this week: the request sums (their ``compiles`` named
    :data:`COMPILING_REQUESTS`, their ``recompiles`` :data:`REQUEST_RECOMPILES`), recompile_rate,
    cache_hit_ratio (compile-cache hits / lookups, as
    ``cache_health``), compile_records, compile_record_seconds and recompile_records (every compile and
    recompile record and every compile's whole-frame seconds, inside requests or not, as ``specializations``
    counts them: a model and pool with imported logs only has a row, its request figures 0). Its
    compile_seconds is what requests paid (their compile_ms)."""
    week_over_week: pl.DataFrame
    """Per model: metric (what requests paid: requests, compiling_requests, request_recompiles, fallbacks,
    compile_seconds, recompile_rate, cache_hit_ratio; for a model with requests in either week. Every record's,
    inside requests or not: :data:`RECORD_METRICS`, for a model with records in either week), this_week,
    last_week, change (relative; null when last week was 0)."""
    daily: pl.DataFrame
    """``fleet_timeseries`` by model, daily."""
    compiles_daily: pl.DataFrame
    """``compile_timeseries``, daily: every compile's seconds per day, model and pool, inside requests or not
    (they add up to ``specializations``' compile_seconds)."""
    recompile_reasons: pl.DataFrame
    """``recompile_reasons``, its first :data:`TOP_N` rows."""
    recompile_limit_hits: int
    """Recompile events of the week at the recompile limit (they compiled nothing: the frame ran eagerly), every
    reason's, not only the top ones'."""
    graph_breaks: pl.DataFrame
    """``graph_breaks``, its first :data:`TOP_N` rows."""
    compile_failures: pl.DataFrame
    """``compile_failures``: failed compiles per model, pool and exception type."""
    fallbacks: pl.DataFrame
    """``fallback_reasons``: requests that ran eagerly, per model, pool, traffic class and reason."""
    bundle_misses: pl.DataFrame
    """``bundle_misses``: compiles served outside their bundle, per bundle, model, pool and action."""
    bundle_unqualified: pl.DataFrame
    """``bundle_unqualified_sizes``: per model and bundle, requests a bundle hit served at sizes the bundle was never
    qualified at, and the most common of those sizes (empty where the runner does not know the query)."""
    cache_health: pl.DataFrame
    cache_trend: pl.DataFrame
    cache_growth: pl.DataFrame
    specializations: pl.DataFrame
    new_graph_keys: pl.DataFrame
    storms: pl.DataFrame
    slow_compiles: pl.DataFrame
    """``slow_compiles``: hours whose compile seconds reach the storm rule's compile-time threshold with too few
    recompiles for a storm (a cold compile of a new graph), each with why it is listed."""
    storm_rule: StormRule
    """The storm rule ``storms`` and ``slow_compiles`` were found with (the report states it)."""
    hours_with_requests: int
    """Hours of the week (``fleet_timeseries``' hourly buckets) holding a request."""
    last_hours_with_requests: int
    """Hours of last week's compared span holding a request: far fewer than this week's (a store that started
    late last week) makes every change look huge, and the report says so beside it."""

    def frames(self) -> dict[str, pl.DataFrame]:
        """Every frame by field name."""
        return {f.name: v for f in fields(self) if isinstance(v := getattr(self, f.name), pl.DataFrame)}


def _by_model_pool(frame: pl.DataFrame, health: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """The request sums per ``keys`` (their ``compiles`` as :data:`COMPILING_REQUESTS`), their recompile rate,
    and the compile-cache hit ratio as ``cache_health`` defines it (hits / lookups over every compile cache's
    lookups), the one definition the report's summary and the dashboard use too."""
    out = frame.group_by(keys).agg(*(pl.col(c).sum() for c in _SUMS))
    cache = health.group_by(keys).agg(pl.col("hits").sum().alias("_hits"), pl.col("lookups").sum().alias("_lookups"))
    return (
        out.join(cache, on=keys, how="left")
        .with_columns(
            recompile_rate(),
            hit_ratio(pl.col("_hits"), pl.col("_lookups")).alias("cache_hit_ratio"),
        )
        .drop("_hits", "_lookups")
        .rename({col.COMPILES: COMPILING_REQUESTS, col.RECOMPILES: REQUEST_RECOMPILES})
        .sort(keys)
    )


def _with_records(per: pl.DataFrame, specs: pl.DataFrame) -> pl.DataFrame:
    """``per`` (request sums per model × pool) with the compile and recompile records of ``specializations``
    and the seconds of its compile records."""
    keys = [col.MODEL, col.HW_POOL]
    records = specs.select(
        *keys,
        pl.col("compiles").cast(pl.UInt64).alias("compile_records"),
        pl.col(col.COMPILE_SECONDS).cast(pl.Float64).alias("compile_record_seconds"),
        pl.col(col.RECOMPILES).cast(pl.UInt64).alias("recompile_records"),
    )
    counted = [c for c in per.columns if c not in keys and per.schema[c].is_integer()]
    return (
        per.join(records, on=keys, how="full", coalesce=True)
        .with_columns(pl.col(c).fill_null(0) for c in [*counted, "compile_records"])
        .with_columns(pl.col(col.COMPILE_SECONDS, "compile_record_seconds").fill_null(0.0))
        .sort(keys)
    )


def _records_by_model(specs: pl.DataFrame, failures: pl.DataFrame, misses: pl.DataFrame) -> pl.DataFrame:
    """:data:`RECORD_METRICS` per model: ``specializations``' compile and recompile records and seconds, the
    failed compiles and the bundle misses."""
    keys = [col.MODEL]
    parts = [
        specs.group_by(keys).agg(
            pl.col("compiles").sum().cast(pl.Float64).alias("compile_records"),
            pl.col(col.RECOMPILES).fill_null(0).sum().cast(pl.Float64).alias("recompile_records"),
            pl.col(col.COMPILE_SECONDS).sum().cast(pl.Float64).alias("compile_record_seconds"),
        ),
        failures.group_by(keys).agg(pl.col("failures").sum().cast(pl.Float64).alias("failed_compiles")),
        misses.group_by(keys).agg(pl.col("misses").sum().cast(pl.Float64).alias("bundle_misses")),
    ]
    out = pl.concat([p.select(keys) for p in parts]).unique()
    for part in parts:
        out = out.join(part, on=keys, how="left")
    return out.with_columns(pl.col(m).fill_null(0.0) for m in RECORD_METRICS).select(*keys, *RECORD_METRICS)


@dataclass(frozen=True)
class _Week:
    """One week's (or span's) frames that week over week compares."""

    requests: pl.DataFrame
    cache: pl.DataFrame
    records: pl.DataFrame


def _week_over_week(this: _Week, last: _Week) -> pl.DataFrame:
    metrics = [
        col.REQUESTS, COMPILING_REQUESTS, REQUEST_RECOMPILES, col.FALLBACKS, col.COMPILE_SECONDS, "recompile_rate",
        "cache_hit_ratio",
    ]  # fmt: skip

    def long(week: _Week, name: str) -> pl.DataFrame:
        paid = (
            _by_model_pool(week.requests, week.cache, [col.MODEL])
            .select(col.MODEL, *(pl.col(m).cast(pl.Float64) for m in metrics))
            .unpivot(index=col.MODEL, variable_name="metric", value_name=name)
        )
        records = week.records.unpivot(index=col.MODEL, variable_name="metric", value_name=name)
        return pl.concat([paid, records])

    joined = long(this, "this_week").join(long(last, "last_week"), on=[col.MODEL, "metric"], how="full", coalesce=True)
    # A model with records but no requests in one of the weeks: its record metrics read 0 that week, not null.
    joined = joined.with_columns(
        pl.when(pl.col("metric").is_in(RECORD_METRICS)).then(pl.col(w).fill_null(0.0)).otherwise(pl.col(w)).alias(w)
        for w in ("this_week", "last_week")
    )
    return joined.with_columns(
        pl.when(pl.col("last_week").fill_null(0) != 0)
        .then(pl.col("this_week").fill_null(0) / pl.col("last_week") - 1)
        .otherwise(None)
        .alias("change")
    ).sort([col.MODEL, "metric"])


def build_weekly_report(
    runner: QueryRunner, week: str, now: datetime | None = None, storm_rule: StormRule | None = None
) -> WeeklyReport:
    """Run the report's named queries for ISO ``week`` (``YYYY-Www``) and assemble the report.

    The week ends at ``now`` (default: the current time) when ``now`` falls inside it: the current week is
    the week so far, and week over week compares it with the same span of the week before. ``storm_rule``
    (default: the analytics defaults) is the rule the storm section applies.

    Raises:
        AnalyticsError: ``week`` is no ISO week, or one that has not started at ``now``.
    """
    rule = storm_rule or StormRule()
    at = (now or datetime.now(UTC)).astimezone(UTC)
    start = parse_week(week, now=at)
    end = min(start + timedelta(days=7), max(at, start))
    prev = start - timedelta(days=7)
    rng = {"start": start.isoformat(), "end": end.isoformat()}
    last_rng = {"start": prev.isoformat(), "end": (prev + (end - start)).isoformat()}
    this = runner.query("fleet_overview", **rng)
    last = runner.query("fleet_overview", **last_rng)
    health = runner.query("cache_health", **rng)
    specs = runner.query("specializations", **rng)
    failures = runner.query("compile_failures", **rng)
    misses = runner.query("bundle_misses", **rng)
    records = _records_by_model(specs, failures, misses)
    last_records = _records_by_model(
        runner.query("specializations", **last_rng),
        runner.query("compile_failures", **last_rng),
        runner.query("bundle_misses", **last_rng),
    )
    reasons = runner.query("recompile_reasons", **rng)
    from inferensics.analytics.registry import NAMED_QUERIES  # here: the registry imports every query module

    unqualified = (
        runner.query(UNQUALIFIED_QUERY, **rng)
        if UNQUALIFIED_QUERY in NAMED_QUERIES
        else pl.DataFrame(schema=UNQUALIFIED_SCHEMA)
    )
    return WeeklyReport(
        week=week,
        start=start,
        end=end,
        by_model_pool=_with_records(_by_model_pool(this, health, [col.MODEL, col.HW_POOL]), specs),
        week_over_week=_week_over_week(
            _Week(this, health, records), _Week(last, runner.query("cache_health", **last_rng), last_records)
        ),
        daily=runner.query("fleet_timeseries", **rng, unit="day", by="model"),
        compiles_daily=runner.query("compile_timeseries", **rng, unit="day"),
        recompile_reasons=reasons.head(TOP_N),
        recompile_limit_hits=int(reasons.get_column("limit_hits").sum() or 0),
        graph_breaks=runner.query("graph_breaks", **rng).head(TOP_N),
        compile_failures=failures,
        fallbacks=runner.query("fallback_reasons", **rng),
        bundle_misses=misses,
        bundle_unqualified=unqualified,
        cache_health=health,
        cache_trend=runner.query("cache_trend", **rng),
        cache_growth=runner.query("cache_growth", **rng),
        specializations=specs,
        new_graph_keys=runner.query("new_graph_keys", **rng),
        storms=runner.query("recompile_storms", **rng, **rule.model_dump()),
        slow_compiles=runner.query("slow_compiles", **rng, **rule.model_dump()),
        storm_rule=rule,
        hours_with_requests=runner.query("fleet_timeseries", **rng, unit="hour").height,
        last_hours_with_requests=runner.query("fleet_timeseries", **last_rng, unit="hour").height,
    )
