"""The weekly recompilation and cache report, assembled from named queries.

The report is built from a :class:`~inferensics.analytics.client.QueryRunner`, so it is the same whether
the queries run on a local store (``--dsn``) or through a collector service (``--service``). A week is an
ISO week (Monday 00:00 UTC to the next Monday); week-over-week figures compare it with the week before.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from datetime import UTC, date, datetime, timedelta

import polars as pl

from inferensics.analytics.client import QueryRunner
from inferensics.analytics.errors import AnalyticsError
from inferensics.schema import columns as col

_WEEK = re.compile(r"^(\d{4})-W(\d{2})$")
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


def parse_week(text: str) -> datetime:
    """Monday 00:00 UTC of ISO week ``YYYY-Www``.

    >>> parse_week("2026-W10").isoformat()
    '2026-03-02T00:00:00+00:00'
    """
    m = _WEEK.match(text)
    if not m:
        raise AnalyticsError(f"bad week {text!r}: write it as YYYY-Www, e.g. 2026-W10")
    try:
        day = date.fromisocalendar(int(m.group(1)), int(m.group(2)), 1)
    except ValueError:
        raise AnalyticsError(f"bad week {text!r}: {m.group(1)} has no week {m.group(2)}") from None
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


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
    """Per model × hardware pool this week: the request sums, recompile_rate, cache_hit_ratio."""
    week_over_week: pl.DataFrame
    """Per model: metric, this_week, last_week, change (relative; null when last week was 0)."""
    daily: pl.DataFrame
    """``fleet_timeseries`` by model, daily."""
    recompile_reasons: pl.DataFrame
    graph_breaks: pl.DataFrame
    cache_health: pl.DataFrame
    cache_trend: pl.DataFrame
    cache_growth: pl.DataFrame
    specializations: pl.DataFrame
    new_graph_keys: pl.DataFrame
    storms: pl.DataFrame

    def frames(self) -> dict[str, pl.DataFrame]:
        """Every frame by field name."""
        return {f.name: v for f in fields(self) if isinstance(v := getattr(self, f.name), pl.DataFrame)}


def _by_model_pool(frame: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    out = frame.group_by(keys).agg(*(pl.col(c).sum() for c in _SUMS))
    lookups = pl.col(col.CACHE_HITS) + pl.col(col.CACHE_MISSES)
    return out.with_columns(
        (pl.col(col.RECOMPILES) / pl.col(col.REQUESTS)).alias("recompile_rate"),
        pl.when(lookups > 0).then(pl.col(col.CACHE_HITS) / lookups).otherwise(None).alias("cache_hit_ratio"),
    ).sort(keys)


def _week_over_week(this: pl.DataFrame, last: pl.DataFrame) -> pl.DataFrame:
    metrics = [col.REQUESTS, col.COMPILES, col.RECOMPILES, col.COMPILE_SECONDS, "recompile_rate", "cache_hit_ratio"]

    def long(frame: pl.DataFrame, name: str) -> pl.DataFrame:
        return (
            _by_model_pool(frame, [col.MODEL])
            .select(col.MODEL, *(pl.col(m).cast(pl.Float64) for m in metrics))
            .unpivot(index=col.MODEL, variable_name="metric", value_name=name)
        )

    joined = long(this, "this_week").join(long(last, "last_week"), on=[col.MODEL, "metric"], how="full", coalesce=True)
    return joined.with_columns(
        pl.when(pl.col("last_week").fill_null(0) != 0)
        .then(pl.col("this_week").fill_null(0) / pl.col("last_week") - 1)
        .otherwise(None)
        .alias("change")
    ).sort([col.MODEL, "metric"])


def build_weekly_report(runner: QueryRunner, week: str) -> WeeklyReport:
    """Run the report's named queries for ISO ``week`` (``YYYY-Www``) and assemble the report."""
    start = parse_week(week)
    end, prev = start + timedelta(days=7), start - timedelta(days=7)
    rng = {"start": start.isoformat(), "end": end.isoformat()}
    this = runner.query("fleet_overview", **rng)
    last = runner.query("fleet_overview", start=prev.isoformat(), end=start.isoformat())
    return WeeklyReport(
        week=week,
        start=start,
        end=end,
        by_model_pool=_by_model_pool(this, [col.MODEL, col.HW_POOL]),
        week_over_week=_week_over_week(this, last),
        daily=runner.query("fleet_timeseries", **rng, unit="day", by="model"),
        recompile_reasons=runner.query("recompile_reasons", **rng).head(TOP_N),
        graph_breaks=runner.query("graph_breaks", **rng).head(TOP_N),
        cache_health=runner.query("cache_health", **rng),
        cache_trend=runner.query("cache_trend", **rng),
        cache_growth=runner.query("cache_growth", **rng),
        specializations=runner.query("specializations", **rng),
        new_graph_keys=runner.query("new_graph_keys", **rng),
        storms=runner.query("recompile_storms", **rng),
    )
