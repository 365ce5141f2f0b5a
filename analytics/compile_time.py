"""Compile time over time, from the compile events themselves.

A request's ``compile_ms`` is the compile time that request paid; compiles that no request paid (a server's
warm-up, a store of imported TORCH_TRACE logs) are only in the ``compiles`` table. This series sums every
compile event, inside requests or not, as
:func:`~inferensics.analytics.storms.specializations` totals them, so a chart of it adds up to that total.
"""

from __future__ import annotations

import polars as pl

from inferensics.analytics._requests import BucketUnit
from inferensics.analytics.client import QueryClient
from inferensics.analytics.filters import SliceParams, check_filter_values, slice_where
from inferensics.analytics.overview import model_pool_series
from inferensics.schema import columns as col


def compile_timeseries(client: QueryClient, params: SliceParams, *, unit: BucketUnit = "hour") -> pl.DataFrame:
    """Compiles and their whole-frame seconds per time bucket, model and hardware pool: every compile event,
    inside requests or not (warm-up, imported logs), failed ones too, counted in the bucket it started in: the
    set :func:`~inferensics.analytics.storms.specializations` sums as ``compile_seconds``. Buckets without a
    compile are absent.

    Columns: bucket, model, hw_pool, compiles, compile_seconds. Sorted by bucket, model, hw_pool.

    Raises:
        AnalyticsError: minute buckets over a range longer than
            :data:`~inferensics.analytics.overview.MAX_MINUTE_RANGE`.
        UnsupportedFilter: a traffic class filter (compile events carry none).
    """
    measures = f"toUInt64(count()) AS {col.COMPILES}, toFloat64(sum({col.ENTIRE_FRAME_S})) AS {col.COMPILE_SECONDS}"
    return model_pool_series(client, params, unit, table="compiles", what="compile time over time", measures=measures)


NO_MESSAGE = "(no message recorded)"
"""The reason of a failed compile whose record carries no message."""


def compile_failures(client: QueryClient, params: SliceParams) -> pl.DataFrame:
    """Compiles that failed (``outcome = 'failed'``: the frame ran without the graph it was compiling) per model,
    hardware pool and exception type, most first. A frame at the recompile limit is no failure here: its
    eager fallback is counted with the requests' fallbacks and the recompile reasons' limit hits.

    Columns: model, hw_pool, fail_type (empty when the record names none), failures, requests (distinct
    requests that paid for one; imported logs' failures have none), top_reasons (up to 3 most frequent
    failure messages, each on one line and cut at 200 characters, :data:`NO_MESSAGE` for none; ties in name
    order), top_reason_counts. Sorted by failures descending, then model, hw_pool, fail_type.

    Raises:
        UnsupportedFilter: a traffic class filter (compile events carry none).
    """
    check_filter_values(client, params, ("compiles",))
    where = slice_where(params, "compiles", what="failed compiles")
    keys = [col.MODEL, col.HW_POOL, col.FAIL_TYPE]
    # The message on one line, cut at 200 characters: a first line alone can be "backend='x' raised:", its cause
    # on the next.
    one_line = f"replaceRegexpAll(trimBoth({col.FAIL_REASON}), '\\\\s+', ' ')"
    first_line = (
        f"multiIf({one_line} = '', '{NO_MESSAGE}', length({one_line}) > 200, "
        f"concat(substring({one_line}, 1, 199), '…'), {one_line})"
    )
    failed = f"{where.sql} AND {col.OUTCOME} = 'failed'"
    schema = pl.Schema({
        col.MODEL: pl.String(), col.HW_POOL: pl.String(), col.FAIL_TYPE: pl.String(), "failures": pl.UInt64(),
        col.REQUESTS: pl.UInt64(), "top_reasons": pl.List(pl.String()), "top_reason_counts": pl.List(pl.UInt64()),
    })  # fmt: skip
    out = client.query_frame(
        f"SELECT {', '.join(keys)}, toUInt64(count()) AS failures, "
        f"toUInt64(uniqExactIf({col.REQUEST_ID}, {col.REQUEST_ID} != '')) AS {col.REQUESTS} "
        f"FROM {client.database}.compiles WHERE {failed} GROUP BY {', '.join(keys)}",
        where.params,
    )
    if out.is_empty():
        return pl.DataFrame(schema=schema)
    top = (
        client.query_frame(
            f"SELECT {', '.join(keys)}, {first_line} AS first_line, toUInt64(count()) AS n "
            f"FROM {client.database}.compiles WHERE {failed} GROUP BY {', '.join(keys)}, first_line",
            where.params,
        )
        .sort([*keys, "n", "first_line"], descending=[False, False, False, True, False])
        .group_by(keys, maintain_order=True)
        .agg(pl.col("first_line").head(3).alias("top_reasons"), pl.col("n").head(3).alias("top_reason_counts"))
    )
    out = out.join(top, on=keys, how="left")
    return out.select(list(schema)).sort(["failures", *keys], descending=[True, False, False, False])
