"""Rollup tables fed by materialized views: what the dashboard and the weekly report read.

Latency is kept as a histogram: ``latency_hist`` maps a log-scaled code of the latency to the number of
requests with that code (``Map(UInt16, UInt64)``, folded with ``sumMap`` when rollup rows merge). The code
is ``round((ln(latency_ms) - ln(0.01)) / 0.018)`` clamped to 0..1023 (the per-minute view gathers one
entry per request, so a minute row may repeat a code until merged; readers add repeated codes up). A
quantile ``p`` of the requests a read covers is the smallest code whose cumulative count over all their
histograms reaches ``p × requests`` (the lower order statistic over the codes), decoded to the code's
centre: readers feed every histogram's codes and counts to one
``quantilesTimingWeightedArray`` per group (:func:`hist_quantiles_sql`), exact on codes under 1024. The
histograms replaced the ``quantilesTiming`` states the rollups kept before schema version 4 (6.4 KB per
row uncompressed, against ~1.4 KB for the histogram, and 0.92 s against 0.18–0.22 s to merge 30k daily
rows into 1k groups).

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
from inferensics.schema.events import FP_COMPARABLE

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
"""Alias of the histogram codes a read feeds to :func:`hist_quantiles_sql` (an array per row)."""
HIST_COUNT: Final = "latency_count"
"""Alias of the matching counts (an array per row)."""


def latency_hist_sql(latency_ms: str) -> str:
    """SQL aggregating raw latencies (milliseconds) into a histogram, as the per-minute view does.

    The codes are gathered as they come, one entry per request, not summed: a code may appear more than
    once in the result. Readers add repeated codes up (:func:`hist_quantiles_sql`) and the rollup's own
    merges (:func:`hist_merge_sql`) fold them; gathering costs what a quantile state did
    (measured on a 100k-row, 56k-group insert block: 46–56 ms, against 42–47 ms for ``quantilesTimingState``
    and 139–155 ms for counting per code first and summing into maps)."""
    return f"CAST((groupArray({latency_code_sql(latency_ms)}), groupArray(toUInt64(1))), 'Map(UInt16, UInt64)')"


def hist_merge_sql(hist: str) -> str:
    """SQL merging histogram column (or expression) ``hist`` across rows (how rollup rows are folded)."""
    return f"sumMap({hist})"


def hist_gather_sql(hist: str) -> str:
    """SQL gathering the histograms of the rows it reads into one, entries as they come (not summed).

    What the hourly and daily views do with the finer rollup's inserted rows, as the per-minute view does
    with raw latencies: a code may repeat until the rollup's own merges fold it (:func:`hist_merge_sql`),
    and readers add repeated codes up. Summing on insert (``sumMap`` keeps a state per distinct code and
    group) made the two views cost more than the per-minute view itself; gathering took the store API's
    1e6-row insert (benchmarks/bench_store_insert.py, 100k-row batches) from 4.1–5.7 s to 3.6–4.6 s
    (interleaved runs on the 2-core machine). The folding then happens in merges, but it is not just moved
    there: with an ``OPTIMIZE ... FINAL`` of the three request rollups after the inserts counted in, the
    process CPU went from 8.3 to 7.1 s (2-second batches) and from 10.0 to 8.4 s (hour-wide batches)."""
    return f"CAST((groupArrayArray(mapKeys({hist})), groupArrayArray(mapValues({hist}))), 'Map(UInt16, UInt64)')"


if LATENCY_CODE_MAX >= 1024:  # pragma: no cover - guards an edit of the code range
    raise RuntimeError("quantileTiming is exact below 1024 only: hist_quantiles_sql needs codes under 1024")

RANK_EPSILON: Final = 1e-12
"""Taken off every level :func:`hist_quantiles_sql` asks ``quantileTiming`` for, so that it answers the
smallest code whose cumulative count reaches ``p × total`` in all of its modes (its small-count mode picks
the element after that one when ``p × total`` is whole: for two requests, the slower as p50). Exact while a
group has fewer than 10^10 requests (``p × total`` of the levels here is a multiple of 0.01)."""


def hist_quantiles_sql(codes: str, counts: str, quantiles: tuple[float, ...] = QUANTILES) -> str:
    """SQL aggregate giving the latency codes at ``quantiles`` of the histograms of the rows it reads.

    ``codes`` and ``counts`` are array columns (a histogram's ``mapKeys`` and ``mapValues``, or one code
    and its count): one ``quantilesTimingWeightedArray`` per group folds every row's entries into a
    1024-slot counter array (exact for values under 1024, which every code is) and answers, for each level
    ``p``, the smallest code whose cumulative count reaches ``p × total`` (see :data:`RANK_EPSILON`), as
    Float32 (exact for codes). Reading histograms this way costs about half of merging them with ``sumMap``
    first (whose ``-Map`` state allocates a nested state per distinct code and group): on the 10^8-row
    store, 29 days of daily rows into 1k groups 71 against 134 ms, 21 hours of hourly rows 43 against 93 ms.
    """
    levels = ", ".join(repr(q - RANK_EPSILON) for q in quantiles)
    return f"quantilesTimingWeightedArray({levels})({codes}, {counts})"


@dataclass(frozen=True, slots=True)
class RollupColumn:
    """One column of a rollup table and the aggregates that fill it.

    ``select`` aggregates raw source rows; ``merge`` re-aggregates rows of a finer rollup of the same shape
    into folded values (a copy or a rebuild); ``feed``, when set, is what a coarser rollup's view uses on
    the finer one's inserted rows instead of ``merge`` (so the hourly rollup is fed from the per-minute
    one, not from the raw rows again).
    """

    name: str
    type: str
    select: str
    merge: str
    feed: str | None = None
    default: str | None = None
    """``DEFAULT`` expression of the column: what rows stored before it existed read (see migrations)."""

    @property
    def definition(self) -> str:
        """The column's definition in a ``CREATE TABLE`` or an ``ADD COLUMN``: name, type, default."""
        return f"`{self.name}` {self.type}" + (f" DEFAULT {self.default}" if self.default else "")

    @property
    def child_select(self) -> str:
        """The aggregate a view fed from a finer rollup computes for this column."""
        return self.feed or self.merge


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


def _sum(name: str, expr: str, type_: str = "UInt64", default: str | None = None) -> RollupColumn:
    return RollupColumn(name, f"SimpleAggregateFunction(sum, {type_})", f"sum({expr})", f"sum({name})", default=default)


FINGERPRINTED_SQL: Final = f"{col.FP_STATUS} IN ({', '.join(repr(v) for v in FP_COMPARABLE)})"
"""Condition of a raw request row whose ``fp_*`` columns hold its output's fingerprint: ``fp_status`` ``ok``,
or empty in rows written before the column existed (every request with an output was fingerprinted then).
The host SDK fingerprints only a sample of CPU outputs (one request in 32 by default) and marks the others
``unsampled``: a rate of non-finite outputs is taken over these rows, never over all requests."""


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
    # Rollup rows stored before this column (schema version 17) counted every request as fingerprinted.
    _sum(col.FINGERPRINTED, f"toUInt64({FINGERPRINTED_SQL})", default=col.REQUESTS),
    _sum(col.LATENCY_SUM_MS, f"toFloat64({col.LATENCY_MS})", "Float64"),
    RollupColumn(
        col.LATENCY_HIST,
        HIST_TYPE,
        latency_hist_sql(col.LATENCY_MS),
        hist_merge_sql(col.LATENCY_HIST),
        hist_gather_sql(col.LATENCY_HIST),
    ),
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
