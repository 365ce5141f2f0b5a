"""Time ranges and slice filters shared by every analytics query, and the SQL they turn into.

A slice is a half-open UTC time range ``[start, end)`` plus optional equality filters on the fleet
dimensions. Filter values travel as query parameters, never formatted into SQL. A filter value that exists
nowhere in the store raises :class:`~inferensics.analytics.errors.UnknownFilterValue` (a typo must not look
like a quiet fleet); a known value with no rows in the range gives an empty frame.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, field_validator, model_validator

from inferensics.analytics.client import QueryClient
from inferensics.analytics.errors import AnalyticsError, UnknownFilterValue, UnsupportedFilter
from inferensics.schema import columns as col
from inferensics.schema.events import MODELS_BY_TABLE
from inferensics.schema.rollups import ROLLUPS
from inferensics.schema.types import as_utc

FILTER_COLUMNS: Final[Mapping[str, str]] = {
    "model": col.MODEL,
    "hw_pool": col.HW_POOL,
    "traffic_class": col.TRAFFIC_CLASS,
    "host": col.HOST,
    "bundle": col.BUNDLE_ID,
}
"""Filter name → column it compares."""

FLEET_TABLES: Final = ("requests_1d", "requests_1h", "sdk_health")
"""The request rollups and the serving processes' health records: a filter value some request carries, or a serving
process reports, is a value of the fleet, known to every query (:func:`check_filter_values`); the daily rollup holds
model, pool and class, the hourly one the bundle too, the health records the host (the Hosts page links each host
to its requests: one that served none in the store is an empty list, not an unknown host)."""

TIME_TYPE: Final = "DateTime64(6, 'UTC')"

BUNDLE_PREFIX: Final = re.compile(r"[0-9a-f]{4,63}")
"""A ``bundle`` filter value read as a prefix of bundle ids (hex digits, shorter than a sha256's 64), as the bundle
commands take one (``bundle promote b1045dcf``); a whole id, or any other text, is compared whole. A prefix must
name one bundle: :func:`check_filter_values` refuses one that names several, naming them."""


class AmbiguousFilterValue(AnalyticsError):  # noqa: N818 (named as UnknownFilterValue)
    """A bundle-id prefix that names several bundles.

    Attributes:
        dimension: The filter (``bundle``).
        value: The prefix given.
        candidates: The ids it names.
    """

    def __init__(self, dimension: str, value: str, candidates: list[str]) -> None:
        shown = ", ".join(repr(c) for c in candidates[:20]) + (" ..." if len(candidates) > 20 else "")
        super().__init__(f"{dimension} id prefix {value!r} names {len(candidates)} bundles: {shown}; give more digits")
        self.dimension = dimension
        self.value = value
        self.candidates = candidates


def bundle_prefix(filter_name: str, value: str) -> bool:
    """Whether filter ``filter_name``'s ``value`` is read as a bundle-id prefix (:data:`BUNDLE_PREFIX`).

    >>> bundle_prefix("bundle", "b1045dcf"), bundle_prefix("bundle", "bnd-canary"), bundle_prefix("model", "beef")
    (True, False, False)
    """
    return filter_name == "bundle" and BUNDLE_PREFIX.fullmatch(value) is not None


class Filters(BaseModel):
    """Equality filters on the fleet dimensions; ``None`` means all."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str | None = None
    """Model name."""
    hw_pool: str | None = None
    """Hardware pool."""
    traffic_class: str | None = None
    """Traffic class."""
    host: str | None = None
    """Serving host (forces raw-table reads: the rollups are not keyed by host)."""
    bundle: str | None = None
    """Bundle id."""

    @field_validator(*FILTER_COLUMNS)
    @classmethod
    def _text(cls, value: str | None) -> str | None:
        # A command-line argument whose bytes are not UTF-8 reaches Python as lone surrogates: no query can carry
        # them (chDB failed with a cast error, an HTTP server with a 500), so they are refused as the caller's error.
        if value is not None:
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise ValueError("not UTF-8 text: filter values are the store's UTF-8 text") from None
        return value

    def active(self) -> dict[str, str]:
        """The filters that are set, by filter name."""
        return {name: v for name in FILTER_COLUMNS if (v := getattr(self, name)) is not None}


class SliceParams(Filters):
    """A half-open UTC time range ``[start, end)`` and filters: the parameters of most named queries.

    Naive datetimes are read as UTC.
    """

    start: datetime
    """Start of the range (inclusive, UTC)."""
    end: datetime
    """End of the range (exclusive, UTC)."""

    @field_validator("start", "end")
    @classmethod
    def _as_utc(cls, value: datetime) -> datetime:
        return as_utc(value)

    @model_validator(mode="after")
    def _ordered(self) -> SliceParams:
        if self.end < self.start:
            raise ValueError(f"end {self.end.isoformat()} is before start {self.start.isoformat()}")
        return self

    @property
    def seconds(self) -> float:
        """Length of the range in seconds."""
        return (self.end - self.start).total_seconds()


def table_columns(table: str) -> frozenset[str]:
    """Column names of a raw or rollup table."""
    if table in MODELS_BY_TABLE:
        return frozenset(MODELS_BY_TABLE[table].model_fields)
    for rollup in ROLLUPS:
        if rollup.name == table:
            return frozenset((col.BUCKET, *rollup.keys, *(v.name for v in rollup.values)))
    raise KeyError(table)


@dataclass(frozen=True)
class Where:
    """A SQL condition and its parameters."""

    sql: str
    params: dict[str, Any]

    def __and__(self, other: Where) -> Where:
        return Where(f"({self.sql}) AND ({other.sql})", {**self.params, **other.params})


def time_column_sql(table: str, time_column: str) -> str:
    """``time_column`` qualified by its ``table``, as a time condition must name it: a rollup's time column is
    ``bucket``, the name queries give their time-bucket alias, and ClickHouse resolves an alias before a column (a
    day bucket's alias would filter each hour row by its day's midnight)."""
    return f"{table}.{time_column}"


def slice_where(
    params: Filters,
    table: str,
    *,
    time_column: str | None = col.TS,
    start: datetime | None = None,
    end: datetime | None = None,
    what: str = "",
) -> Where:
    """The WHERE condition selecting ``params``' slice of ``table``.

    ``time_column`` (``ts`` for raw tables, ``bucket`` for rollups) is compared with the range of
    ``params`` (or ``start``/``end`` when given); ``None`` skips the time condition.

    Raises:
        UnsupportedFilter: a filter is set that ``table`` has no column for.
    """
    columns = table_columns(table)
    parts: list[str] = []
    values: dict[str, Any] = {}
    for name, value in params.active().items():
        column = FILTER_COLUMNS[name]
        if column not in columns:
            raise UnsupportedFilter(
                f"the {name} filter does not apply to {what or table}: those events carry no {column}; "
                "drop the filter for this view"
            )
        if bundle_prefix(name, value):
            parts.append(f"startsWith({column}, {{f_{name}:String}})")
        else:
            parts.append(f"{column} = {{f_{name}:String}}")
        values[f"f_{name}"] = value
    lo = start if start is not None else getattr(params, "start", None)
    hi = end if end is not None else getattr(params, "end", None)
    if time_column is not None and lo is not None and hi is not None:
        when = time_column_sql(table, time_column)
        parts.append(f"{when} >= {{t_start:{TIME_TYPE}}} AND {when} < {{t_end:{TIME_TYPE}}}")
        values["t_start"] = lo
        values["t_end"] = hi
    return Where(" AND ".join(parts) or "1", values)


def check_filter_values(
    client: QueryClient,
    params: Filters,
    tables: Iterable[str],
    *,
    also: Iterable[tuple[str, str]] = (),
) -> None:
    """Raise :class:`UnknownFilterValue` for a set filter whose value no row of ``tables`` carries, nor
    any request of the fleet.

    ``also`` adds (filter name, value) pairs to check beside ``params``' own (the canary's two bundles).
    Existence is checked over all time (a known value with no rows in the range is an empty slice, not an
    error). ``tables`` come cheapest first: every value is looked up in the first of them that has its
    column, all in one round trip (a rollup answers in milliseconds); only a value missing there is looked
    up in the others, then in the request rollups (:data:`FLEET_TABLES`), before it is reported. So a model
    that serves requests but never broke a graph is an empty answer of the graph-break queries, not an
    unknown model; a typo is still reported, with the values the queried tables know (empty ones left out).
    ``host`` is checked on the raw tables, then on the health records. A ``bundle`` given as a prefix of hex digits
    (:data:`BUNDLE_PREFIX`) must name exactly one bundle id: none is unknown, several raise
    :class:`AmbiguousFilterValue` naming them.
    """
    tables = list(tables)
    checks: list[tuple[str, str, str, list[str]]] = []  # (filter, value, column, tables holding it)
    own = params.active().items()
    for i, (name, value) in enumerate([*own, *also]):
        column = FILTER_COLUMNS[name]
        holders = [t for t in tables if column in table_columns(t)]
        if holders and i < len(own) and bundle_prefix(name, value):  # the slice's own bundle, not a canary's two
            _check_unique_prefix(client, value, column, holders)
        elif holders:
            checks.append((name, value, column, holders))
    first = _found(client, [(value, column, holders[:1]) for _, value, column, holders in checks])
    known = {i for i, hit in enumerate(first) if hit}
    stages: tuple[Callable[[int], list[str]], ...] = (
        lambda i: checks[i][3][1:],  # the other queried tables
        lambda i: [t for t in FLEET_TABLES if t not in checks[i][3] and checks[i][2] in table_columns(t)],
    )
    for where in stages:
        ids = [i for i in range(len(checks)) if i not in known and where(i)]
        hits = _found(client, [(checks[i][1], checks[i][2], where(i)) for i in ids])
        known.update(i for i, hit in zip(ids, hits, strict=True) if hit)
    for i, (name, value, column, holders) in enumerate(checks):
        if i in known:
            continue
        known_sql = " UNION DISTINCT ".join(
            f"SELECT DISTINCT toString({column}) AS v FROM {client.database}.{t} WHERE {column} != ''" for t in holders
        )
        values = client.query_frame(f"SELECT v FROM ({known_sql}) ORDER BY v LIMIT 100")
        raise UnknownFilterValue(name, value, [str(v) for v in values.get_column("v").to_list()])


def _check_unique_prefix(client: QueryClient, prefix: str, column: str, tables: Sequence[str]) -> None:
    """Raise :class:`UnknownFilterValue` unless exactly one bundle id of ``tables`` starts with ``prefix``: none (the
    known ids named), or several (those named: give more digits). The first table and the fleet's rollups are read
    first (milliseconds); the others only when they name none."""
    cheap = [t for t in dict.fromkeys([*tables[:1], *FLEET_TABLES]) if column in table_columns(t)]
    every = [t for t in dict.fromkeys([*cheap, *tables]) if column in table_columns(t)]
    for holders in (cheap, every) if len(every) > len(cheap) else (every,):
        ids_sql = " UNION DISTINCT ".join(
            f"SELECT DISTINCT toString({column}) AS v FROM {client.database}.{t} WHERE {column} != ''" for t in holders
        )
        ids = client.query_frame(
            f"SELECT v, startsWith(v, {{p:String}}) AS hit FROM ({ids_sql}) ORDER BY hit DESC, v LIMIT 100",
            {"p": prefix},
        )
        matched = [str(v) for v, hit in ids.iter_rows() if hit]
        if len(matched) == 1:
            return
        if matched:
            raise AmbiguousFilterValue("bundle", prefix, matched)
    raise UnknownFilterValue("bundle", prefix, [str(v) for v in ids.get_column("v").to_list()])


def _found(client: QueryClient, lookups: list[tuple[str, str, list[str]]]) -> list[bool]:
    """For each (value, column, tables): whether a row of those tables carries the value (one round trip)."""
    if not lookups:
        return []
    exists = ", ".join(
        "("
        + " + ".join(
            f"(SELECT count() FROM (SELECT 1 FROM {client.database}.{t} WHERE {column} = {{v{i}:String}} LIMIT 1))"
            for t in tables
        )
        + f") AS f{i}"
        for i, (_, column, tables) in enumerate(lookups)
    )
    found = client.query_frame(f"SELECT {exists}", {f"v{i}": value for i, (value, _, _) in enumerate(lookups)})
    return [int(found.item(0, i)) > 0 for i in range(len(lookups))]


def prefer_rollup(params: Filters, rollup: str) -> bool:
    """Whether every set filter is a key of ``rollup`` (else the raw table must answer)."""
    return filters_apply(params, rollup)


def filters_apply(params: Filters, table: str) -> bool:
    """Whether ``table`` has a column for every set filter (else :func:`slice_where` refuses it)."""
    columns = table_columns(table)
    return all(FILTER_COLUMNS[name] in columns for name in params.active())
