"""The named queries the collector service exposes (``POST /api/v1/query/<name>``).

Each :class:`NamedQuery` pairs a pydantic parameter model (``extra`` keys are rejected) with a ``run`` that
takes a :class:`~inferensics.analytics.client.QueryClient` and the validated parameters and returns a
Polars frame. Errors a caller can fix raise :class:`~inferensics.analytics.errors.AnalyticsError`
(a ``ValueError``; the service answers 400).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, cast

import polars as pl
from pydantic import BaseModel

from inferensics.analytics import (
    breaks,
    bundle_release,
    bundle_unqualified,
    bundles,
    cache,
    canary,
    canary_history,
    canary_pools,
    catalog,
    compile_time,
    drilldown,
    host_health,
    kernel_fleet,
    overview,
    request_list,
    storms,
)
from inferensics.analytics.client import QueryClient
from inferensics.analytics.filters import SliceParams


@dataclass(frozen=True)
class NamedQuery:
    """A query the service runs by name."""

    name: str
    params: type[BaseModel]
    run: Callable[[QueryClient, BaseModel], pl.DataFrame]
    description: str


class BucketParams(SliceParams):
    """A slice and the bucket length."""

    unit: Literal["minute", "hour", "day"] = "hour"
    """Bucket length (minute buckets need a range on whole minutes within 7 days, else raw rows)."""


class TimeseriesParams(BucketParams):
    """A slice, the bucket length and the dimension to split series by."""

    by: Literal["model", "hw_pool", "traffic_class", "bundle", "none"] = "none"
    """Dimension whose values become separate series."""


def _timeseries(client: QueryClient, params: BaseModel) -> pl.DataFrame:
    p = cast(TimeseriesParams, params)
    return overview.fleet_timeseries(client, p, unit=p.unit, by=p.by)


def _recompile_timeseries(client: QueryClient, params: BaseModel) -> pl.DataFrame:
    """Recompiles per time bucket, model and hardware pool, inside requests or not: every recompile event but
    the recompile limit's hits, as the recompile reasons and specializations count them.

    Columns: bucket, model, hw_pool, recompiles.
    """
    p = cast(BucketParams, params)
    return breaks.recompile_timeseries(client, p, unit=p.unit)


def _compile_timeseries(client: QueryClient, params: BaseModel) -> pl.DataFrame:
    """Compiles and their whole-frame seconds per time bucket, model and hardware pool, inside requests or not:
    every compile event, failed ones too, as the specializations' compile_seconds sum them.

    Columns: bucket, model, hw_pool, compiles, compile_seconds.
    """
    p = cast(BucketParams, params)
    return compile_time.compile_timeseries(client, p, unit=p.unit)


def _canary_compare(client: QueryClient, params: BaseModel) -> pl.DataFrame:
    """The evidence rows and a final ``verdict`` row."""
    return canary.canary_compare(client, cast(canary.CanaryParams, params)).to_frame()


def _q(name: str, params: type[BaseModel], fn: Callable[[QueryClient, Any], pl.DataFrame], what: str) -> NamedQuery:
    doc = (fn.__doc__ or "").strip()
    return NamedQuery(name, params, fn, f"{what} {doc}".strip())


_ALL = "Filters: model, hw_pool, traffic_class, host, bundle."
_NO_TC = "Filters: model, hw_pool, host, bundle (no traffic_class)."
_POOL = "Filters: model, hw_pool, host (no traffic_class, no bundle)."
_NO_BUNDLE = "Filters: model, hw_pool, traffic_class, host."
_LIST = (
    _ALL + " For `inferensics requests` and the dashboard's Requests page: each request's kind is `error`, "
    "`non-finite output`, `eager fallback`, `replayed fault` (its replay verdict named a fault: wrong though "
    "finite) or `ok`; `failing` keeps all but `ok`, `outcome` and `min_latency_ms` narrow by how it was served "
    "and how long it took; a unique bundle-id prefix names its bundle."
)

NAMED_QUERIES: Mapping[str, NamedQuery] = {
    q.name: q
    for q in (
        _q(
            "dimension_values",
            catalog.CatalogParams,
            catalog.dimension_values,
            "For filter pickers: models, pools, traffic classes, bundles and hosts.",
        ),
        _q("bundles", catalog.CatalogParams, catalog.bundles, "Bundle pickers."),
        _q("recorded_compiles", catalog.ProcessParams, catalog.recorded_compiles, "For import-trace."),
        _q("bundles_seen", SliceParams, bundles.bundles_seen, _ALL + " For the dashboard's Bundles page."),
        _q("bundle_release", SliceParams, bundle_release.bundle_release, "No filters (the range only)."),
        _q("fleet_overview", SliceParams, overview.fleet_overview, _ALL),
        _q("fleet_timeseries", TimeseriesParams, _timeseries, _ALL),
        _q("fallback_reasons", SliceParams, overview.fallback_reasons, _ALL),
        _q(
            "recompile_storms",
            storms.StormParams,
            storms.recompile_storms,
            "Filters: model, hw_pool, traffic_class, host.",
        ),
        _q("slow_compiles", storms.StormParams, storms.slow_compiles, "Filters: model, hw_pool, traffic_class, host."),
        _q("new_graph_keys", SliceParams, storms.new_graph_keys, _NO_TC),
        _q("specializations", SliceParams, storms.specializations, _NO_TC),
        _q("graph_breaks", SliceParams, breaks.graph_breaks, _POOL),
        _q("graph_break_sites", SliceParams, breaks.graph_break_sites, _POOL),
        _q("guard_failures", SliceParams, breaks.guard_failures, _POOL),
        _q("recompile_reasons", SliceParams, breaks.recompile_reasons, _NO_BUNDLE),
        _q("recompile_timeseries", BucketParams, _recompile_timeseries, _NO_BUNDLE),
        _q("compile_timeseries", BucketParams, _compile_timeseries, _NO_TC),
        _q("compile_failures", SliceParams, compile_time.compile_failures, _NO_TC),
        _q("bundle_misses", SliceParams, bundles.bundle_misses, _NO_TC),
        _q("bundle_unqualified_sizes", SliceParams, bundle_unqualified.bundle_unqualified_sizes, _ALL),
        _q("cache_health", SliceParams, cache.cache_health, _NO_TC),
        _q("cache_trend", SliceParams, cache.cache_trend, _NO_TC),
        _q("cache_reasons", SliceParams, cache.cache_reasons, _NO_TC),
        _q("cache_growth", SliceParams, cache.cache_growth, _NO_TC),
        _q(
            "host_health",
            host_health.HostHealthParams,
            host_health.host_health,
            "Filters: model, hw_pool, host (health records carry no traffic_class, no bundle). For the Hosts page.",
        ),
        _q("kernel_providers", SliceParams, kernel_fleet.kernel_providers, _POOL + " For the Kernels page."),
        _q("kernel_skips", SliceParams, kernel_fleet.kernel_skips, _POOL + " For the Kernels page."),
        _q(
            "kernel_qualifications",
            SliceParams,
            kernel_fleet.kernel_qualifications,
            "Filters: host only (qualification records name no model or pool). For the Kernels page.",
        ),
        _q("request_detail", drilldown.RequestParams, drilldown.request_detail, "Drill-down, one request id."),
        _q("request_graphs", drilldown.RequestParams, drilldown.request_graphs, "Drill-down, one request id."),
        _q("request_kernels", drilldown.RequestParams, drilldown.request_kernels, "Drill-down, one request id."),
        _q(
            "request_graph_calls",
            drilldown.RequestParams,
            drilldown.request_graph_calls,
            "Drill-down, one request id: profiled whole compiled-graph calls.",
        ),
        _q(
            "request_kernel_decisions",
            drilldown.RequestParams,
            drilldown.request_kernel_decisions,
            "Drill-down, one request id: the kernel-registry decisions behind it (eager and compiled) and the skips.",
        ),
        _q(
            "notable_requests",
            SliceParams,
            drilldown.notable_requests,
            _ALL + " For the drill-down's picker: failed, non-finite, eager fallback, replayed fault (a replay verdict "
            "named a fault), recompile, first compile.",
        ),
        _q("request_replays", drilldown.RequestParams, drilldown.request_replays, "Replay verdicts of one request id."),
        _q("request_list", request_list.RequestListParams, request_list.request_list, _LIST),
        _q("request_kinds", request_list.RequestKindParams, request_list.request_kinds, _LIST),
        _q(
            "canary_verdicts",
            canary_history.VerdictHistoryParams,
            canary_history.recorded_verdicts,
            "Filters: model, candidate; the range is when they were recorded.",
        ),
        _q(
            "canary_compare",
            canary.CanaryParams,
            _canary_compare,
            canary.__doc__.split("\n\n")[1].strip() if canary.__doc__ else "",
        ),
        _q(
            canary_pools.QUERY_NAME,
            canary_pools.CanaryPoolsParams,
            canary_pools.canary_compare_pools_frame,
            "canary_compare of each of hw_pools alone, from the queries of one comparison:",
        ),
    )
}
"""Every named query by name."""
