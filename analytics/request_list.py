"""The newest requests of a slice, each with what went wrong: the on-call list of ``inferensics requests``.

A request failed when it errored (``status`` ``error``), produced non-finite output (NaN or inf counted by its
output fingerprint) or fell back to eager (``outcome`` ``fallback``). Each request is listed once, under the first
of those that applies in that order, so the counts per kind add up to the requests listed. Reads raw ``requests``
rows (the rollups count errors and fallbacks, not which request they were), narrowed by the slice's filters and
range.
"""

from __future__ import annotations

from typing import Final

import polars as pl
from pydantic import Field

from inferensics.analytics.client import QueryClient
from inferensics.analytics.filters import SliceParams, check_filter_values, slice_where
from inferensics.schema import columns as col

ERRORED: Final = f"{col.STATUS} = 'error'"
"""SQL over raw ``requests`` rows: the request failed (its ``status`` is ``error``)."""
NONFINITE: Final = f"({col.FP_NAN} + {col.FP_INF}) > 0"
"""SQL over raw ``requests`` rows: its output fingerprint counted NaN or inf values (only a fingerprinted output
can: a rate of these is taken over :data:`~inferensics.schema.rollups.FINGERPRINTED_SQL` rows)."""
FELL_BACK: Final = f"{col.OUTCOME} = 'fallback'"
"""SQL over raw ``requests`` rows: the request ran eagerly (a graph break, the recompile limit or an error)."""

KIND_ERROR: Final = "error"
"""``kind`` of a request whose ``status`` is ``error``; its detail is the error's first line."""
KIND_NON_FINITE: Final = "non-finite output"
"""``kind`` of a request whose output fingerprint counted NaN or inf values; its detail gives both counts."""
KIND_FALLBACK: Final = "eager fallback"
"""``kind`` of a request that ran eagerly after a graph break, the recompile limit or an error; its detail is
the reason."""
KIND_OK: Final = "ok"
"""``kind`` of any other request (listed only when not asking for failing requests)."""
KINDS: Final = (KIND_ERROR, KIND_NON_FINITE, KIND_FALLBACK, KIND_OK)
"""Every kind, in the order a request is tested for them (the first that applies is its kind)."""

DEFAULT_LIMIT: Final = 50
"""Requests :func:`request_list` returns unless told otherwise."""
MAX_LIMIT: Final = 10_000
"""Requests :func:`request_list` returns at most."""


class RequestKindParams(SliceParams):
    """A slice and whether only failing requests count."""

    failing: bool = False
    """Only requests that errored, produced non-finite output or fell back to eager."""


class RequestListParams(RequestKindParams):
    """A slice, whether only failing requests are listed, and how many at most."""

    limit: int = Field(DEFAULT_LIMIT, ge=1, le=MAX_LIMIT)
    """The newest this many requests are listed."""


_KIND_SQL = (
    f"multiIf({ERRORED}, {{k_error:String}}, {NONFINITE}, {{k_non_finite:String}}, "
    f"{FELL_BACK}, {{k_fallback:String}}, {{k_ok:String}})"
)
_KIND_VALUES = {"k_error": KIND_ERROR, "k_non_finite": KIND_NON_FINITE, "k_fallback": KIND_FALLBACK, "k_ok": KIND_OK}
_DETAIL_SQL = (
    f"multiIf(kind = {{k_error:String}}, "
    f"if(trimBoth({col.ERROR}) = '', '(no error message recorded)', "
    f"trimBoth(splitByChar('\\n', trimLeft({col.ERROR}))[1])), "
    f"kind = {{k_non_finite:String}}, concat('NaN ', toString({col.FP_NAN}), ', inf ', toString({col.FP_INF})), "
    f"kind = {{k_fallback:String}}, if({col.FALLBACK_REASON} = '', '(no reason recorded)', {col.FALLBACK_REASON}), "
    f"'')"
)


def _slice(client: QueryClient, params: RequestKindParams) -> tuple[str, dict[str, object]]:
    """The WHERE condition of the slice's requests (only failing ones when ``params.failing``) and its values."""
    check_filter_values(client, params, ("requests_1h", "requests"))
    where = slice_where(params, "requests", what="the request list")
    sql = where.sql + (" AND kind != {k_ok:String}" if params.failing else "")
    return sql, {**where.params, **_KIND_VALUES}


def request_list(client: QueryClient, params: RequestListParams) -> pl.DataFrame:
    """The slice's newest requests (only failing ones when ``failing``), newest first, at most ``limit``.

    Columns: ts, request_id, model, hw_pool, host, traffic_class, kind (``error``, ``non-finite output``,
    ``eager fallback``: the first that applies, in that order; else ``ok``), detail (the error's first line, the
    NaN and inf counts, or the fallback reason; empty for ``ok``). Ties in time are ordered by request id, then
    host.
    """
    where, values = _slice(client, params)
    return client.query_frame(
        f"SELECT {col.TS}, {col.REQUEST_ID}, toString({col.MODEL}) AS {col.MODEL}, "
        f"toString({col.HW_POOL}) AS {col.HW_POOL}, toString({col.HOST}) AS {col.HOST}, "
        f"toString({col.TRAFFIC_CLASS}) AS {col.TRAFFIC_CLASS}, {_KIND_SQL} AS kind, {_DETAIL_SQL} AS detail "
        f"FROM {client.database}.requests WHERE {where} "
        f"ORDER BY {col.TS} DESC, {col.REQUEST_ID}, {col.HOST} LIMIT {int(params.limit)}",
        values,
    )


def request_kinds(client: QueryClient, params: RequestKindParams) -> pl.DataFrame:
    """How many of the slice's requests (only failing ones when ``failing``) are of each kind, over the whole
    slice (not only the newest that :func:`request_list` returns).

    Columns: kind, requests. One row per kind that occurs, in :data:`KINDS` order.
    """
    where, values = _slice(client, params)
    counts = client.query_frame(
        f"SELECT {_KIND_SQL} AS kind, toUInt64(count()) AS requests FROM {client.database}.requests "
        f"WHERE {where} GROUP BY kind",
        values,
    )
    order = {kind: i for i, kind in enumerate(KINDS)}
    return (
        counts.with_columns(pl.col("kind").replace_strict(order, return_dtype=pl.UInt8).alias("_order"))
        .sort("_order")
        .drop("_order")
    )
