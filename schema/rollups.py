"""Rollup tables fed by materialized views: what the dashboard and the weekly report read.

Latency is kept as a histogram: ``latency_hist`` maps a log-scaled code of the latency to the number of
requests with that code (``Map(UInt16, UInt64)``, merged with ``sumMap``). The code is
``round((ln(latency_ms) - ln(0.01)) / 0.018)`` clamped to 0..1023 (the per-minute view gathers one entry
per request, so a minute row may repeat a code until merged; every read merges with ``sumMap``, which sums
them). A quantile ``p`` of a merged histogram is the smallest code whose cumulative count reaches
``p × requests`` (the lower order statistic over the codes), decoded to the code's centre. ``sumMap``
costs about 40 ns per entry: measured on this 2-core machine, 30k daily rows of ~1.7k requests each merge
into 1k groups in 0.18–0.22 s, against 0.92 s for the ``quantilesTiming`` states the rollups kept before
schema version 4 (6.4 KB per row uncompressed, against ~1.4 KB for the histogram).

**Stated error:** for latencies between 10 µs and about 1000 s, a quantile read from a rollup is within
±0.9 % (relative) of an order statistic of the same rows between the lower and the upper one at that
level (bucket ratio e^0.018 ≈ 1.018, rounded to the nearest bucket). Latencies outside the range clamp to
its ends.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

from inferensics.schema import columns as col

LATENCY_CODE_MIN_MS: Final = 0.01
LATENCY_CODE_STEP: Final = 0.018
LATENCY_CODE_MAX: Final = 1023
LATENCY_RELATIVE_ERROR: Final = math.exp(LATENCY_CODE_STEP / 2) - 1
"""Largest relative error of a rollup latency quantile against the exact one (≈ 0.9 %)."""
QUANTILES: Final = (0.5, 0.95, 0.99)
"""The quantiles every latency state answers, in this order."""


def latency_code_sql(expr: str) -> str:
    """SQL turning a latency in milliseconds into its rollup code (UInt16, 0..1023)."""
    return (
        f"toUInt16(greatest(0, least({LATENCY_CODE_MAX}, "
        f"round((ln(greatest({expr}, 1e-9)) - ln({LATENCY_CODE_MIN_MS})) / {LATENCY_CODE_STEP}))))"
    )


def latency_decode_sql(expr: str) -> str:
    """SQL turning a latency code (or a quantile over codes) back into milliseconds."""
    return f"exp({expr} * {LATENCY_CODE_STEP} + ln({LATENCY_CODE_MIN_MS}))"


def latency_code(latency_ms: float) -> int:
    """Python twin of :func:`latency_code_sql` (used by tests and by Polars-side checks)."""
    raw = (math.log(max(latency_ms, 1e-9)) - math.log(LATENCY_CODE_MIN_MS)) / LATENCY_CODE_STEP
    return int(max(0, min(LATENCY_CODE_MAX, round(raw))))


def latency_decode(code: float) -> float:
    """Python twin of :func:`latency_decode_sql`."""
    return math.exp(code * LATENCY_CODE_STEP + math.log(LATENCY_CODE_MIN_MS))


HIST_TYPE: Final = "SimpleAggregateFunction(sumMap, Map(UInt16, UInt64))"
"""Type of a latency histogram column: request count per latency code."""
HIST_CODE: Final = "latency_code"
"""Alias of the latency code when raw rows are first counted per code (then gathered into histograms)."""
HIST_COUNT: Final = "latency_count"
"""Alias of the per-code row count in that first step."""


def latency_hist_sql(latency_ms: str) -> str:
    """SQL aggregating raw latencies (milliseconds) into a histogram, as the per-minute view does.

    The codes are gathered as they come, one entry per request, not summed: a code may appear more than
    once in the result. Every reader merges histograms with ``sumMap`` (:func:`hist_merge_sql`), which sums
    repeated codes, and the rollup's own merges fold them; gathering costs what a quantile state did
    (measured on a 100k-row, 56k-group insert block: 46–56 ms, against 42–47 ms for ``quantilesTimingState``
    and 139–155 ms for counting per code first and summing into maps)."""
    return f"CAST((groupArray({latency_code_sql(latency_ms)}), groupArray(toUInt64(1))), 'Map(UInt16, UInt64)')"


def hist_gather_sql() -> str:
    """SQL gathering rows already counted per code (``HIST_CODE``, ``HIST_COUNT``) into one histogram."""
    return f"sumMap(map({HIST_CODE}, {HIST_COUNT}))"


def hist_merge_sql(hist: str) -> str:
    """SQL merging histogram column (or expression) ``hist`` across rows."""
    return f"sumMap({hist})"


def hist_quantiles_sql(hist: str, quantiles: tuple[float, ...] = QUANTILES) -> str:
    """SQL giving the latency codes at ``quantiles`` of one merged histogram ``hist`` (sorted by code, as
    ``sumMap`` returns it): for each level ``p`` the smallest code whose cumulative count reaches
    ``p × total``. An empty histogram gives codes of 0; callers only read groups that have requests."""
    levels = ", ".join(map(str, quantiles))
    cum = f"arrayCumSum(mapValues({hist}))"
    return f"arrayMap(p -> mapKeys({hist})[greatest(1, arrayFirstIndex(c -> c >= p * {cum}[-1], {cum}))], [{levels}])"


@dataclass(frozen=True, slots=True)
class RollupColumn:
    """One column of a rollup table and the aggregates that fill it.

    ``select`` aggregates raw source rows; ``merge`` re-aggregates rows of a finer rollup of the same shape
    (so the hourly rollup is fed from the per-minute one, not from the raw rows again).
    """

    name: str
    type: str
    select: str
    merge: str


@dataclass(frozen=True, slots=True)
class Rollup:
    """A rollup table, the view that feeds it, and how long its rows live.

    ``source`` is the raw table the rows come from; when ``parent`` is set the view reads the parent
    rollup's inserts instead (its keys or a subset, coarser bucket), which costs a fraction of a second raw
    pass. ``order_prefix`` leads the sorting key: a time bucket coarser than the rollup's own, so that a
    time range reads only its own granules (keys first would spread every key's whole history over each
    granule and make any range read the whole table).
    """

    name: str
    source: str
    bucket_fn: str
    keys: tuple[str, ...]
    values: tuple[RollupColumn, ...]
    ttl_days: int
    parent: Rollup | None = None
    order_prefix: str | None = None

    @property
    def sorting_key(self) -> tuple[str, ...]:
        """The table's ORDER BY expressions."""
        return (*((self.order_prefix,) if self.order_prefix else ()), *self.keys, col.BUCKET)

    @property
    def view_name(self) -> str:
        """Name of the materialized view feeding the rollup."""
        return f"{self.name}_mv"


def _sum(name: str, expr: str, type_: str = "UInt64") -> RollupColumn:
    return RollupColumn(name, f"SimpleAggregateFunction(sum, {type_})", f"sum({expr})", f"sum({name})")


_REQUEST_VALUES: tuple[RollupColumn, ...] = (
    _sum(col.REQUESTS, "toUInt64(1)"),
    _sum(col.ERRORS, f"toUInt64({col.STATUS} = 'error')"),
    _sum(col.FALLBACKS, f"toUInt64({col.OUTCOME} = 'fallback')"),
    _sum(col.RECOMPILES, f"toUInt64({col.RECOMPILES})"),
    _sum(col.COMPILES, f"toUInt64({col.OUTCOME} IN ('compile', 'recompile'))"),
    _sum(col.COMPILE_SECONDS, f"toFloat64({col.COMPILE_MS}) / 1000", "Float64"),
    _sum(col.CACHE_HITS, f"toUInt64({col.CACHE_STATUS} = 'hit')"),
    _sum(col.CACHE_MISSES, f"toUInt64({col.CACHE_STATUS} IN ('miss', 'mixed'))"),
    _sum(col.NONFINITE, f"toUInt64(({col.FP_NAN} + {col.FP_INF}) > 0)"),
    _sum(col.LATENCY_SUM_MS, f"toFloat64({col.LATENCY_MS})", "Float64"),
    RollupColumn(col.LATENCY_HIST, HIST_TYPE, latency_hist_sql(col.LATENCY_MS), hist_merge_sql(col.LATENCY_HIST)),
)

_REQUEST_KEYS = (col.MODEL, col.HW_POOL, col.TRAFFIC_CLASS, col.BUNDLE_ID)

REQUESTS_1M = Rollup(
    name="requests_1m",
    source="requests",
    bucket_fn="toStartOfMinute",
    keys=_REQUEST_KEYS,
    values=_REQUEST_VALUES,
    ttl_days=32,
    order_prefix=f"toStartOfHour({col.BUCKET})",
)
"""Per-minute request slices by model × hardware pool × traffic class × bundle (on-call views). Kept two
days longer than raw requests (30 days): the planner trusts it back to its retention less a day, so a range
of up to 30 days ending on a whole minute, as the dashboard asks, never reads raw rows for its minute edges
(migration 7)."""

REQUESTS_1H = Rollup(
    name="requests_1h",
    source="requests",
    bucket_fn="toStartOfHour",
    keys=_REQUEST_KEYS,
    values=_REQUEST_VALUES,
    ttl_days=400,
    parent=REQUESTS_1M,
    order_prefix=f"toStartOfDay({col.BUCKET})",
)
"""Per-hour request slices (weekly report, canary, long ranges), fed from the per-minute rollup."""

REQUESTS_1D = Rollup(
    name="requests_1d",
    source="requests",
    bucket_fn="toStartOfDay",
    keys=(col.MODEL, col.HW_POOL, col.TRAFFIC_CLASS),
    values=_REQUEST_VALUES,
    ttl_days=800,
    parent=REQUESTS_1H,
)
"""Per-day request slices by model × hardware pool × traffic class (no bundle: half the rows a 30-day
overview merges; a bundle filter or grouping reads the hourly rollup), fed from the hourly rollup."""

COMPILES_1H = Rollup(
    name="compiles_1h",
    source="compiles",
    bucket_fn="toStartOfHour",
    keys=(col.MODEL, col.HW_POOL, col.OUTCOME, col.TRIGGER),
    values=(
        _sum(col.COMPILES, "toUInt64(1)"),
        _sum(col.COMPILE_SECONDS, f"toFloat64({col.ENTIRE_FRAME_S})", "Float64"),
    ),
    ttl_days=400,
    order_prefix=f"toStartOfDay({col.BUCKET})",
)
"""Per-hour compiles by outcome and trigger."""

CACHE_EVENTS_1H = Rollup(
    name="cache_events_1h",
    source="cache_events",
    bucket_fn="toStartOfHour",
    keys=(col.MODEL, col.HW_POOL, col.BUNDLE_ID, col.CACHE, col.RESULT),
    values=(
        _sum(col.REQUESTS, "toUInt64(1)"),
        _sum(col.TIME_SAVED_MS, f"toFloat64({col.TIME_SAVED_MS})", "Float64"),
        _sum(col.ENTRY_BYTES, f"toUInt64({col.ENTRY_BYTES})"),
    ),
    ttl_days=400,
    order_prefix=f"toStartOfDay({col.BUCKET})",
)
"""Per-hour cache lookups by cache and result (``requests`` counts lookups here)."""

ROLLUPS: tuple[Rollup, ...] = (REQUESTS_1M, REQUESTS_1H, REQUESTS_1D, COMPILES_1H, CACHE_EVENTS_1H)
