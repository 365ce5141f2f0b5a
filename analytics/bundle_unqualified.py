"""Requests a release bundle served at sizes it was never qualified at, per model and bundle.

A bundle hit at an unqualified size ran a graph whose accuracy and latency nobody checked at that size: the host SDK
puts those sizes on the request (``attrs['bundle_unqualified_shape']``, ``attrs['bundle_unqualified_calls']``:
:mod:`inferensics.schema.request_attrs`). The cure is a bundle built with those sizes in its shape distribution.
"""

from __future__ import annotations

from typing import Final

import polars as pl

from inferensics.analytics.client import QueryClient
from inferensics.analytics.filters import SliceParams, check_filter_values, slice_where
from inferensics.schema import columns as col
from inferensics.schema.events import RequestEvent
from inferensics.schema.request_attrs import BUNDLE_STATUS, BUNDLE_UNQUALIFIED_CALLS, BUNDLE_UNQUALIFIED_SHAPE
from inferensics.schema.shape_text import MORE_SIZES, SIZES_SEPARATOR

TOP_SHAPES: Final = 3
"""The most common unqualified sizes listed per model and bundle."""
UNQUALIFIED_REQUESTS: Final = "unqualified_requests"
"""Column: requests served (in part) at sizes their bundle was not qualified at."""
BUNDLE_REQUESTS: Final = "bundle_requests"
"""Column: every request a graph of the bundle served (``attrs['bundle_status']`` set)."""
UNQUALIFIED_CALLS: Final = "unqualified_calls"
"""Column: the graph calls of those requests that ran at unqualified sizes."""
TOP_SIZES: Final = "top_sizes"
"""Column: the most common unqualified sizes, most requests first: one call's sizes each, as the host stored them
(``[9,8]``; ``[9,1];[2,9,4,64,16]`` for a graph with several inputs with a symbol: a report shows them with
:func:`~inferensics.schema.shape_text.graph_size_text`)."""
TOP_SIZE_REQUESTS: Final = "top_size_requests"
"""Column: the requests at each of :data:`TOP_SIZES`."""
SCHEMA: Final = pl.Schema(
    {col.MODEL: pl.String(), col.BUNDLE_ID: pl.String(), UNQUALIFIED_REQUESTS: pl.UInt64(),
     BUNDLE_REQUESTS: pl.UInt64(), UNQUALIFIED_CALLS: pl.UInt64(), TOP_SIZES: pl.List(pl.String()),
     TOP_SIZE_REQUESTS: pl.List(pl.UInt64())}
)  # fmt: skip
"""The columns of :func:`bundle_unqualified_sizes`' answer."""
_MORE: Final = MORE_SIZES.pattern.replace("\\", "\\\\")
""":data:`~inferensics.schema.shape_text.MORE_SIZES` as a ClickHouse string literal's content."""


def bundle_unqualified_sizes(client: QueryClient, params: SliceParams) -> pl.DataFrame:
    """Per model and bundle, the requests served at sizes the bundle was never qualified at.

    Columns: model, bundle_id, unqualified_requests, bundle_requests (every request a graph of the bundle served),
    unqualified_calls, top_sizes (the :data:`TOP_SIZES` most common, most requests first), top_size_requests. Only
    bundles with such requests; most unqualified requests first, then model and bundle_id.
    """
    check_filter_values(client, params, (RequestEvent.TABLE.name,))
    where = slice_where(params, RequestEvent.TABLE.name, what="requests")
    shape, calls, status = (f"{col.ATTRS}['{k}']" for k in (BUNDLE_UNQUALIFIED_SHAPE, BUNDLE_UNQUALIFIED_CALLS,
                                                              BUNDLE_STATUS))  # fmt: skip
    keys = f"toString({col.MODEL}) AS {col.MODEL}, toString({col.BUNDLE_ID}) AS {col.BUNDLE_ID}"
    db, table = client.database, RequestEvent.TABLE.name
    totals = client.query_frame(
        f"SELECT {keys}, toUInt64(countIf({shape} != '')) AS {UNQUALIFIED_REQUESTS}, "
        f"toUInt64(count()) AS {BUNDLE_REQUESTS}, toUInt64(sum(toUInt64OrZero({calls}))) AS {UNQUALIFIED_CALLS} "
        f"FROM {db}.{table} WHERE ({where.sql}) AND {status} != '' GROUP BY {col.MODEL}, {col.BUNDLE_ID} "
        f"HAVING {UNQUALIFIED_REQUESTS} > 0",
        where.params,
    )
    sizes = client.query_frame(
        f"SELECT {keys}, arrayJoin(arrayDistinct(splitByString('{SIZES_SEPARATOR}', "
        f"replaceRegexpOne({shape}, '{_MORE}', '')))) "
        f"AS size, toUInt64(count()) AS n FROM {db}.{table} WHERE ({where.sql}) AND {shape} != '' "
        f"GROUP BY {col.MODEL}, {col.BUNDLE_ID}, size",
        where.params,
    )
    schema = SCHEMA
    if totals.is_empty():
        return pl.DataFrame(schema=schema)
    top = (
        sizes.sort([col.MODEL, col.BUNDLE_ID, "n", "size"], descending=[False, False, True, False])
        .group_by([col.MODEL, col.BUNDLE_ID], maintain_order=True)
        .agg(pl.col("size").head(TOP_SHAPES).alias(TOP_SIZES), pl.col("n").head(TOP_SHAPES).alias(TOP_SIZE_REQUESTS))
    )
    return (
        totals.join(top, on=[col.MODEL, col.BUNDLE_ID], how="left")
        .select(list(schema))
        .cast(pl.Schema(schema))
        .sort([UNQUALIFIED_REQUESTS, col.MODEL, col.BUNDLE_ID], descending=[True, False, False])
    )
