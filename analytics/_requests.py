"""Where request aggregates come from: the coarsest rollup that answers each part of a range exactly.

Rule: a range ``[start, end)`` is cut into pieces, each read from the coarsest source that holds it
exactly: whole UTC days from ``requests_1d`` (only when the caller's time buckets are days or none and
nothing asks for the bundle, which that rollup does not keep), whole hours from ``requests_1h`` (buckets
of hours, days or none), whole minutes within the per-minute rollup's retention from ``requests_1m``
(when :data:`READ_MINUTE_ROLLUP`), and what is left at the ends (seconds) from raw ``requests`` rows. A
range the dashboard asks for (ending on the next whole minute) thus reads under two hours of minute rows
at its ends, a day or two of hourly rows and whole days: a 30-day overview merges about 30k daily
latency histograms instead of scanning 10^8 rows. One aggregation reads every piece's rows: rollup rows as
they are (sums and histogram), raw rows counted per latency code first; it sums per group and feeds all
histogram entries to one quantile state per group (:func:`~inferensics.schema.rollups.hist_quantiles_sql`),
so the answers
agree with one raw scan to the rollups' stated latency error (±0.9 %). A ``host`` filter (the rollups are
not keyed by host) reads raw rows only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final, Literal

from inferensics.analytics.filters import (
    FILTER_COLUMNS,
    TIME_TYPE,
    Filters,
    SliceParams,
    prefer_rollup,
    slice_where,
    time_column_sql,
)
from inferensics.schema import columns as col
from inferensics.schema.rollups import (
    HIST_CODE,
    HIST_COUNT,
    REQUESTS_1D,
    REQUESTS_1H,
    REQUESTS_1M,
    Rollup,
    hist_quantiles_sql,
    latency_code_sql,
    latency_decode_sql,
)

SUM_COLUMNS: tuple[str, ...] = tuple(v.name for v in REQUESTS_1H.values if v.name != col.LATENCY_HIST)
"""The additive request aggregates (requests, errors, fallbacks, recompiles, ...)."""


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

    def bucket(self, unit: str) -> str:
        """Expression truncating the time column to ``unit`` (``minute``, ``hour``, ``day``)."""
        return time_bucket(self.time_column, unit)


BucketUnit = Literal["minute", "hour", "day"]
"""A time bucket's length."""


def time_bucket(time_column: str, unit: str) -> str:
    """Expression truncating ``time_column`` to ``unit`` (``minute``, ``hour``, ``day``), a UTC time."""
    fn = {"minute": "toStartOfMinute", "hour": "toStartOfHour", "day": "toStartOfDay"}[unit]
    return f"toDateTime64({fn}({time_column}), 0, 'UTC')"


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
        daily = prefer_rollup(params, REQUESTS_1D.name)
        if daily and unit in (None, "day") and _aligned(start, day) and _aligned(end, day):
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


UNITS: tuple[str, ...] = ("minute", "hour", "day")
_STEPS = {"minute": timedelta(minutes=1), "hour": timedelta(hours=1), "day": timedelta(days=1)}
_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
_RAW = RequestSource("requests", col.TS, None)
READ_MINUTE_ROLLUP: Final = True
"""Whether minute-aligned parts are read from ``requests_1m`` (else from raw rows). On since schema
version 5 orders that rollup by hour first. Measured on the 10^8-row store (load 1–2, p50 of 5): the
dashboard's last-hour overview 85 ms through ``requests_1m`` against 161–176 ms through raw rows, its
last-24-hours overview 228–251 against 347–351 ms, its last-7-days 427–431 against 535–555 ms."""


@dataclass(frozen=True)
class Piece:
    """A part ``[start, end)`` of a range and the table that answers it."""

    source: RequestSource
    start: datetime
    end: datetime


def _floor(value: datetime, step: timedelta) -> datetime:
    return value - (value - _EPOCH) % step


def _ceil(value: datetime, step: timedelta) -> datetime:
    floored = _floor(value, step)
    return floored if floored == value else floored + step


def plan_pieces(
    params: Filters,
    start: datetime,
    end: datetime,
    *,
    unit: str | None = None,
    now: datetime | None = None,
    columns: tuple[str, ...] = (),
) -> list[Piece]:
    """Cut ``[start, end)`` into pieces, each served by the coarsest source that answers it exactly.

    ``unit`` is the finest time bucket the caller groups by (``None`` for no buckets): a rollup coarser
    than it is never used. ``columns`` are the dimension columns the caller groups by: a rollup without
    one of them (or without a filtered one) is skipped. Rules in the module docstring. An empty range
    gives one empty raw piece.
    """
    if unit is not None and unit not in _STEPS:
        raise ValueError(f"unknown time bucket {unit!r}: use one of {', '.join(UNITS)}")
    if end <= start or not prefer_rollup(params, REQUESTS_1H.name):
        return [Piece(_RAW, start, end)]
    horizon = _ceil((now or datetime.now(UTC)) - timedelta(days=REQUESTS_1M.ttl_days - 1), _STEPS["minute"])
    levels: list[tuple[RequestSource, timedelta]] = []
    if unit in (None, "day") and prefer_rollup(params, REQUESTS_1D.name) and set(columns) <= set(REQUESTS_1D.keys):
        levels.append((RequestSource(REQUESTS_1D.name, col.BUCKET, REQUESTS_1D), _STEPS["day"]))
    if unit in (None, "day", "hour"):
        levels.append((RequestSource(REQUESTS_1H.name, col.BUCKET, REQUESTS_1H), _STEPS["hour"]))
    if READ_MINUTE_ROLLUP:
        levels.append((RequestSource(REQUESTS_1M.name, col.BUCKET, REQUESTS_1M), _STEPS["minute"]))

    def cut(lo: datetime, hi: datetime, depth: int) -> list[Piece]:
        if hi <= lo:
            return []
        if depth == len(levels):
            return [Piece(_RAW, lo, hi)]
        source, step = levels[depth]
        first = _ceil(max(lo, horizon) if source.rollup is REQUESTS_1M else lo, step)
        last = _floor(hi, step)
        if first >= last:
            return cut(lo, hi, depth + 1)
        return [*cut(lo, first, depth + 1), Piece(source, first, last), *cut(last, hi, depth + 1)]

    return cut(start, end, 0)


def aggregate_sql(
    database: str,
    params: Filters,
    start: datetime,
    end: datetime,
    *,
    keys: Mapping[str, str],
    unit: str | None = None,
    sums: Sequence[str] = SUM_COLUMNS,
    quantiles: bool = True,
    now: datetime | None = None,
) -> tuple[str, dict[str, Any]]:
    """SQL aggregating the requests of ``params``' filters over ``[start, end)`` from the planned pieces.

    The result has columns ``bucket`` (when ``unit`` is set: the start of each bucket as
    ``DateTime64(0, 'UTC')``), each alias of ``keys`` (alias → expression over the dimension columns), each
    of ``sums`` and, when ``quantiles``, ``q``: the latency code quantiles (decode with
    :func:`quantile_columns`). Returns the SQL and its parameters.
    """
    used = tuple(d for d in FILTER_COLUMNS.values() if any(d in expr for expr in keys.values()))
    pieces = plan_pieces(params, start, end, unit=unit, now=now, columns=used)
    groups = (["bucket"] if unit is not None else []) + list(keys)
    # One scan per table: the pieces a table serves (a few minutes at each end of a range, say) are one
    # condition, not one subquery each.
    by_table: dict[str, list[tuple[int, Piece]]] = {}
    for i, piece in enumerate(pieces):
        by_table.setdefault(piece.source.table, []).append((i, piece))
    values: dict[str, Any] = {}
    selects = []
    group_by = f" GROUP BY {', '.join(groups)}" if groups else ""
    for served in by_table.values():
        source = served[0][1].source
        where = slice_where(params, source.table, time_column=None)
        values.update(where.params)
        spans = []
        when = time_column_sql(source.table, source.time_column)  # not the time-bucket alias below
        for i, piece in served:
            values[f"p{i}_lo"], values[f"p{i}_hi"] = piece.start, piece.end
            spans.append(f"({when} >= {{p{i}_lo:{TIME_TYPE}}} AND {when} < {{p{i}_hi:{TIME_TYPE}}})")
        by_name = {name: expr for expr, _, name in (s.rpartition(" AS ") for s in source.sums())}
        where_sql = f"WHERE ({where.sql}) AND ({' OR '.join(spans)})"
        exprs = [f"{source.bucket(unit)} AS bucket"] if unit is not None else []
        exprs += [f"{expr} AS {alias}" for alias, expr in keys.items()]
        table = f"{database}.{source.table}"
        if not quantiles:
            exprs += [f"{by_name[name]} AS {name}" for name in sums]
            selects.append(f"SELECT {', '.join(exprs)} FROM {table} {where_sql}{group_by}")
        elif source.rollup is not None:
            # Rollup rows go to the one aggregation below as they are: their sums and their histogram's
            # codes and counts.
            hist = col.LATENCY_HIST
            exprs += [*sums, f"mapKeys({hist}) AS {HIST_CODE}", f"mapValues({hist}) AS {HIST_COUNT}"]
            selects.append(f"SELECT {', '.join(exprs)} FROM {table} {where_sql}")
        else:
            # Raw rows are counted per latency code first: one histogram entry per code, not per row.
            code = latency_code_sql(col.LATENCY_MS)
            exprs += [f"{by_name[name]} AS {name}" for name in sums]
            exprs += [f"[{code}] AS {HIST_CODE}", f"[count()] AS {HIST_COUNT}"]
            selects.append(f"SELECT {', '.join(exprs)} FROM {table} {where_sql} GROUP BY {', '.join([*groups, code])}")
    if not quantiles:
        if len(selects) == 1:
            return selects[0], values
        outer = [*groups, *(f"sum({name}) AS {name}" for name in sums)]
        return f"SELECT {', '.join(outer)} FROM ({' UNION ALL '.join(selects)}){group_by}", values
    outer = [*groups, *(f"sum({name}) AS {name}" for name in sums), f"{hist_quantiles_sql(HIST_CODE, HIST_COUNT)} AS q"]
    return f"SELECT {', '.join(outer)} FROM ({' UNION ALL '.join(selects)}){group_by}", values
