"""Bundles seen by the fleet: where each is registered (hosts, pools) and the traffic it served.

Added by the dashboard (issue 6) for its Bundles page; registered as the ``bundles`` named query.

A bundle is *seen* in a range when a host registered it before the range end or it served requests in the
range. Registrations come from the ``bundles`` table (one row per bundle × host); traffic from the request
rollup (``requests_1h``/``requests_1m``, raw rows when the range is not whole minutes), keyed by bundle.
The ``traffic_class`` filter narrows the traffic only (registrations carry no traffic class).
"""

from __future__ import annotations

import polars as pl

from inferensics.analytics._requests import aggregate_sql
from inferensics.analytics.client import QueryClient
from inferensics.analytics.filters import Filters, SliceParams, check_filter_values, slice_where
from inferensics.schema import columns as col

_LIST = pl.List(pl.String)


def bundles_seen(client: QueryClient, params: SliceParams) -> pl.DataFrame:
    """One row per bundle seen in the slice, most requests first.

    Columns: bundle_id, bundle_name, models, hosts (registered), hw_pools (registered), first_registered,
    last_registered (null when never registered), torch_version, device_name, requests, errors, fallbacks,
    recompiles, error_rate, fallback_rate, traffic_classes (with requests in the range), serving_pools
    (pools with requests in the range).
    """
    check_filter_values(client, params, ("requests_1h", "bundles"))
    db = client.database
    registry_filters = Filters(**{k: v for k, v in params.active().items() if k != "traffic_class"})
    reg_where = slice_where(registry_filters, "bundles", time_column=None)
    registered = client.query_frame(
        f"SELECT toString({col.BUNDLE_ID}) AS {col.BUNDLE_ID}, toString(argMax({col.BUNDLE_NAME}, {col.TS})) AS "
        f"{col.BUNDLE_NAME}, arraySort(groupUniqArray(toString({col.MODEL}))) AS models, "
        f"arraySort(groupUniqArray(toString({col.HOST}))) AS hosts, "
        f"arraySort(groupUniqArray(toString({col.HW_POOL}))) AS hw_pools, min({col.TS}) AS first_registered, "
        f"max({col.TS}) AS last_registered, toString(argMax({col.TORCH_VERSION}, {col.TS})) AS {col.TORCH_VERSION}, "
        f"toString(argMax({col.DEVICE_NAME}, {col.TS})) AS {col.DEVICE_NAME} "
        f"FROM {db}.bundles FINAL WHERE {reg_where.sql} AND {col.TS} < {{t_end:DateTime64(6, 'UTC')}} "
        f"GROUP BY {col.BUNDLE_ID}",
        {**reg_where.params, "t_end": params.end},
    )
    counts = (col.REQUESTS, col.ERRORS, col.FALLBACKS, col.RECOMPILES)
    dims = (col.BUNDLE_ID, col.TRAFFIC_CLASS, col.HW_POOL)
    inner, values = aggregate_sql(
        db, params, params.start, params.end, keys={d: d for d in dims}, sums=counts, quantiles=False
    )
    outer = ", ".join(f"sum({c}) AS total_{c}" for c in counts)
    traffic = client.query_frame(
        f"SELECT toString({col.BUNDLE_ID}) AS {col.BUNDLE_ID}, {outer}, "
        f"arraySort(groupUniqArrayIf(toString({col.TRAFFIC_CLASS}), {col.REQUESTS} > 0)) AS traffic_classes, "
        f"arraySort(groupUniqArrayIf(toString({col.HW_POOL}), {col.REQUESTS} > 0)) AS serving_pools "
        f"FROM ({inner}) WHERE {col.BUNDLE_ID} != '' GROUP BY {col.BUNDLE_ID}",
        values,
    )
    traffic = traffic.with_columns(*(pl.col(f"total_{c}").cast(pl.UInt64).alias(c) for c in counts)).drop(
        *(f"total_{c}" for c in counts)
    )
    out = registered.join(traffic, on=col.BUNDLE_ID, how="full", coalesce=True)
    if "traffic_class" in params.active():
        out = out.filter(pl.col(col.REQUESTS).fill_null(0) > 0)
    requests = pl.col(col.REQUESTS)
    out = out.with_columns(
        pl.col(col.BUNDLE_NAME, col.TORCH_VERSION, col.DEVICE_NAME).fill_null(""),
        pl.col("models", "hosts", "hw_pools", "traffic_classes", "serving_pools").fill_null(pl.lit([], _LIST)),
        *(pl.col(c).fill_null(0) for c in counts),
    ).with_columns(
        pl.when(requests > 0).then(pl.col(col.ERRORS) / requests).otherwise(None).alias("error_rate"),
        pl.when(requests > 0).then(pl.col(col.FALLBACKS) / requests).otherwise(None).alias("fallback_rate"),
    )
    return out.select(
        col.BUNDLE_ID, col.BUNDLE_NAME, "models", "hosts", "hw_pools", "first_registered", "last_registered",
        col.TORCH_VERSION, col.DEVICE_NAME, *counts, "error_rate", "fallback_rate", "traffic_classes",
        "serving_pools",
    ).sort([col.REQUESTS, col.BUNDLE_ID], descending=[True, False])  # fmt: skip


_FACTOR_NAME = r"(?s):\s.*$"
"""What follows a miss factor's name (``accepted_shapes: inputs ...``, ``settings.compiler.x: a → b``): the
inputs and values, left out where misses are counted by what differed."""


def bundle_misses(client: QueryClient, params: SliceParams) -> pl.DataFrame:
    """Compiles served outside their bundle (``bundle_misses`` rows) per bundle, model, hardware pool and
    action, most first.

    Columns: bundle_id, model, hw_pool, action (``compiled``, ``eager`` or ``refused``), misses, requests
    (distinct requests that met one), compile_seconds (what the compiled ones cost), differed (what differed
    from the bundle: each factor's name, e.g. ``accepted_shapes`` or ``settings.compiler.cache_key_tag``,
    most frequent first), differed_counts (misses naming each), example_reason (the latest action reason).
    Sorted by misses descending, then bundle_id, model, hw_pool, action.

    Raises:
        UnsupportedFilter: a traffic class filter (bundle misses carry none).
    """
    check_filter_values(client, params, ("bundle_misses",))
    where = slice_where(params, "bundle_misses", what="bundle misses")
    keys = [col.BUNDLE_ID, col.MODEL, col.HW_POOL, col.ACTION]
    rows = client.query_frame(
        f"SELECT {', '.join(f'toString({k}) AS {k}' for k in keys)}, {col.TS}, {col.REQUEST_ID}, "
        f"{col.FACTORS}, {col.REASON}, toFloat64({col.COMPILE_S}) AS {col.COMPILE_S} "
        f"FROM {client.database}.bundle_misses WHERE {where.sql}",
        where.params,
    )
    schema = pl.Schema({
        **dict.fromkeys(keys, pl.String()), "misses": pl.UInt64(), col.REQUESTS: pl.UInt64(),
        col.COMPILE_SECONDS: pl.Float64(), "differed": _LIST, "differed_counts": pl.List(pl.UInt64()),
        "example_reason": pl.String(),
    })  # fmt: skip
    if rows.is_empty():
        return pl.DataFrame(schema=schema)
    kinds = (
        rows.with_row_index("_miss")
        .with_columns(pl.col(col.FACTORS).list.eval(pl.element().str.replace(_FACTOR_NAME, "")).list.unique())
        .explode(col.FACTORS)
        .with_columns(pl.col(col.FACTORS).fill_null("(none recorded)"))
        .group_by([*keys, col.FACTORS])
        .agg(pl.len().cast(pl.UInt64).alias("n"))
        .sort([*keys, "n", col.FACTORS], descending=[False, False, False, False, True, False])
        .group_by(keys, maintain_order=True)
        .agg(pl.col(col.FACTORS).alias("differed"), pl.col("n").alias("differed_counts"))
    )
    out = (
        rows.sort(col.TS)
        .group_by(keys)
        .agg(
            pl.len().cast(pl.UInt64).alias("misses"),
            pl.col(col.REQUEST_ID).filter(pl.col(col.REQUEST_ID) != "").n_unique().cast(pl.UInt64).alias(col.REQUESTS),
            pl.col(col.COMPILE_S).sum().alias(col.COMPILE_SECONDS),
            pl.col(col.REASON).last().alias("example_reason"),
        )
    )
    return (
        out.join(kinds, on=keys, how="left")
        .select(list(schema))
        .sort(["misses", *keys], descending=[True, False, False, False, False])
    )
