"""Compile time over time, from the compile events themselves.

A request's ``compile_ms`` is the compile time that request paid; compiles that no request paid (a server's
warm-up, a store of imported TORCH_TRACE logs) are only in the ``compiles`` table. This series sums every
compile event, inside requests or not, as
:func:`~inferensics.analytics.storms.specializations` totals them, so a chart of it adds up to that total.
"""

from __future__ import annotations

import polars as pl

from inferensics.analytics._requests import time_bucket
from inferensics.analytics.client import QueryClient
from inferensics.analytics.filters import SliceParams, check_filter_values, slice_where
from inferensics.analytics.overview import BucketUnit, check_bucket_unit
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
    check_bucket_unit(params, unit)
    check_filter_values(client, params, ("compiles",))
    where = slice_where(params, "compiles", what="compile time over time")
    keys = f"{col.BUCKET}, {col.MODEL}, {col.HW_POOL}"
    return client.query_frame(
        f"SELECT {time_bucket(col.TS, unit)} AS {col.BUCKET}, {col.MODEL}, {col.HW_POOL}, "
        f"toUInt64(count()) AS {col.COMPILES}, toFloat64(sum({col.ENTIRE_FRAME_S})) AS {col.COMPILE_SECONDS} "
        f"FROM {client.database}.compiles WHERE {where.sql} GROUP BY {keys} ORDER BY {keys}",
        where.params,
    ).with_columns(pl.col(col.BUCKET).dt.cast_time_unit("ms"))
