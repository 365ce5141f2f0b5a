"""Where request aggregates come from: the hourly or per-minute rollup when the slice allows, else raw rows.

Rule: an aggregate with no time buckets finer than a day, over a range whose ends both fall on whole UTC
days, reads ``requests_1d``; a range whose ends both fall on whole hours reads ``requests_1h``; on whole
minutes (and within the
per-minute rollup's 7-day retention) ``requests_1m``; anything else, or a ``host`` filter (the rollups are
not keyed by host), reads the raw ``requests`` table with the same aggregate expressions, so the answers
agree to the rollup's stated latency error (±0.9 %).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from inferensics.analytics.filters import Filters, SliceParams, prefer_rollup
from inferensics.schema import columns as col
from inferensics.schema.rollups import (
    QUANTILE_MERGE_FN,
    REQUESTS_1D,
    REQUESTS_1H,
    REQUESTS_1M,
    Rollup,
    latency_code_sql,
    latency_decode_sql,
)

SUM_COLUMNS: tuple[str, ...] = tuple(v.name for v in REQUESTS_1H.values if v.name != col.LATENCY_STATE)
"""The additive request aggregates (requests, errors, fallbacks, recompiles, ...)."""
QUANTILE_FN = QUANTILE_MERGE_FN.replace("Merge", "")


@dataclass(frozen=True)
class RequestSource:
    """A table to aggregate requests from and how to aggregate it."""

    table: str
    time_column: str
    rollup: Rollup | None

    def sums(self) -> list[str]:
        """``sum(...) AS name`` for every additive aggregate."""
        if self.rollup is not None:
            return [f"sum({name}) AS {name}" for name in SUM_COLUMNS]
        by_name = {v.name: v.select for v in REQUESTS_1H.values}
        return [f"{by_name[name]} AS {name}" for name in SUM_COLUMNS]

    def quantiles(self, alias: str = "q") -> str:
        """The latency quantile array (codes) for (p50, p95, p99)."""
        if self.rollup is not None:
            return f"{QUANTILE_MERGE_FN}({col.LATENCY_STATE}) AS {alias}"
        return f"{QUANTILE_FN}({latency_code_sql(col.LATENCY_MS)}) AS {alias}"

    def bucket(self, unit: str) -> str:
        """Expression truncating the time column to ``unit`` (``minute``, ``hour``, ``day``)."""
        fn = {"minute": "toStartOfMinute", "hour": "toStartOfHour", "day": "toStartOfDay"}[unit]
        return f"toDateTime64({fn}({self.time_column}), 0, 'UTC')"


def quantile_columns(alias: str = "q") -> list[str]:
    """``p50_ms``, ``p95_ms``, ``p99_ms`` decoded from the quantile array ``alias``."""
    return [f"{latency_decode_sql(f'{alias}[{i}]')} AS p{name}_ms" for i, name in ((1, "50"), (2, "95"), (3, "99"))]


def _aligned(value: datetime, step: timedelta) -> bool:
    return (value - datetime(2000, 1, 1, tzinfo=UTC)) % step == timedelta(0)


def request_source(
    params: Filters, start: datetime, end: datetime, *, now: datetime | None = None, unit: str | None = None
) -> RequestSource:
    """Pick the rollup (or raw table) that answers a request aggregate over ``[start, end)`` exactly.

    ``unit`` is the finest time bucket the caller groups by (``None`` for no buckets).
    """
    if prefer_rollup(params, REQUESTS_1H.name):
        day = timedelta(days=1)
        if unit in (None, "day") and _aligned(start, day) and _aligned(end, day):
            return RequestSource(REQUESTS_1D.name, col.BUCKET, REQUESTS_1D)
        if _aligned(start, timedelta(hours=1)) and _aligned(end, timedelta(hours=1)):
            return RequestSource(REQUESTS_1H.name, col.BUCKET, REQUESTS_1H)
        horizon = (now or datetime.now(UTC)) - timedelta(days=REQUESTS_1M.ttl_days - 1)
        if _aligned(start, timedelta(minutes=1)) and _aligned(end, timedelta(minutes=1)) and start >= horizon:
            return RequestSource(REQUESTS_1M.name, col.BUCKET, REQUESTS_1M)
    return RequestSource("requests", col.TS, None)


def slice_source(params: SliceParams, unit: str | None = None) -> RequestSource:
    """:func:`request_source` for a slice's own range."""
    return request_source(params, params.start, params.end, unit=unit)
