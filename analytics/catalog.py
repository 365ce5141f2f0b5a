"""What exists in the store: dimension values for filter pickers, and the registered bundles."""

from __future__ import annotations

from datetime import datetime

import polars as pl
from pydantic import BaseModel, ConfigDict, Field

from inferensics.analytics.client import QueryClient
from inferensics.analytics.filters import TIME_TYPE
from inferensics.schema import columns as col
from inferensics.schema.events import SdkHealthEvent
from inferensics.schema.processes import recorded_compiles_sql
from inferensics.schema.rollups import REQUESTS_1H
from inferensics.schema.types import as_utc

_DIMENSIONS = {"model": col.MODEL, "hw_pool": col.HW_POOL, "traffic_class": col.TRAFFIC_CLASS, "bundle": col.BUNDLE_ID}


class CatalogParams(BaseModel):
    """An optional time range (``None``: all time)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    start: datetime | None = None
    """Start of the range (inclusive, UTC)."""
    end: datetime | None = None
    """End of the range (exclusive, UTC)."""


def dimension_values(client: QueryClient, params: CatalogParams) -> pl.DataFrame:
    """Values of each filter dimension with their request counts: models, pools, classes and bundles from the hourly
    rollup; hosts (which the rollups are not keyed by) from the serving processes' health records, each with the
    requests its processes reported seeing (a host is a value of the fleet once its SDK reported, as
    :func:`~inferensics.analytics.filters.check_filter_values` knows it), a far lighter read than the Hosts page's
    ``host_health``.

    Columns: dimension (``bundle``, ``host``, ``hw_pool``, ``model``, ``traffic_class``), value, requests. Sorted by
    dimension, then requests descending, then value.
    """
    rollup, health, values = "1", "1", {}
    if params.start is not None and params.end is not None:
        rollup = f"{col.BUCKET} >= {{s:{TIME_TYPE}}} AND {col.BUCKET} < {{e:{TIME_TYPE}}}"
        health = f"{col.TS} >= {{s:{TIME_TYPE}}} AND {col.TS} < {{e:{TIME_TYPE}}}"
        values = {"s": as_utc(params.start), "e": as_utc(params.end)}
    union = " UNION ALL ".join(
        f"SELECT '{name}' AS dimension, toString({column}) AS value, toUInt64(sum({col.REQUESTS})) AS requests "
        f"FROM {client.database}.{REQUESTS_1H.name} WHERE {rollup} GROUP BY value"
        for name, column in _DIMENSIONS.items()
    )
    # requests_seen is a process's running count: its latest (largest) value is what the process saw.
    hosts = (
        f"SELECT 'host' AS dimension, value, toUInt64(sum(seen)) AS requests FROM (SELECT toString({col.HOST}) AS "
        f"value, max({col.REQUESTS_SEEN}) AS seen FROM {client.database}.{SdkHealthEvent.TABLE.name} "
        f"WHERE {health} AND {col.HOST} != '' GROUP BY value, {col.PROCESS}) GROUP BY value"
    )
    return client.query_frame(
        f"SELECT * FROM ({union} UNION ALL {hosts}) ORDER BY dimension, requests DESC, value", values
    )


def bundles(client: QueryClient, params: CatalogParams) -> pl.DataFrame:
    """Registered bundles: bundle_id, bundle_name, model, first_seen, hosts, torch_version, device_name."""
    return client.query_frame(
        f"SELECT {col.BUNDLE_ID}, argMin({col.BUNDLE_NAME}, {col.TS}) AS {col.BUNDLE_NAME}, "
        f"argMin({col.MODEL}, {col.TS}) AS {col.MODEL}, min({col.TS}) AS first_seen, "
        f"toUInt64(uniqExact({col.HOST})) AS hosts, argMax({col.TORCH_VERSION}, {col.TS}) AS {col.TORCH_VERSION}, "
        f"argMax({col.DEVICE_NAME}, {col.TS}) AS {col.DEVICE_NAME} FROM {client.database}.bundles "
        f"GROUP BY {col.BUNDLE_ID} ORDER BY first_seen DESC, {col.BUNDLE_ID}"
    )


class ProcessParams(BaseModel):
    """The keys of one or more serving processes (``inferensics.schema.processes``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    processes: list[str] = Field(min_length=1, max_length=1000)
    """Process keys, as a tracker writes them into its trace log."""


def recorded_compiles(client: QueryClient, params: ProcessParams) -> pl.DataFrame:
    """What these processes have stored (kind, compile_id, seq): the compiles ``import-trace`` skips."""
    return client.query_frame(recorded_compiles_sql(client.database), {"processes": list(params.processes)})
