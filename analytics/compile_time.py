"""Compile time over time, from the compile events themselves.

A request's ``compile_ms`` is the compile time that request paid; compiles that no request paid (a server's
warm-up, a store of imported TORCH_TRACE logs) are only in the ``compiles`` table. This series sums every
compile event, inside requests or not, as
:func:`~inferensics.analytics.storms.specializations` totals them, so a chart of it adds up to that total.
"""

from __future__ import annotations

import polars as pl

from inferensics.analytics.client import QueryClient
from inferensics.analytics.filters import SliceParams
from inferensics.analytics.overview import BucketUnit, model_pool_series
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
