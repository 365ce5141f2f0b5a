"""Analytics over the inferensics store: functions that take a query client, a time range and filters and
return Polars frames. They never draw; ``inferensics.analytics.report`` renders pages from their frames.

>>> from inferensics.analytics import SliceParams, fleet_overview     # doctest: +SKIP
>>> fleet_overview(store, SliceParams(start="2026-03-02", end="2026-03-09", model="llama"))  # doctest: +SKIP
"""

from inferensics.analytics.breaks import (
    graph_break_sites,
    graph_breaks,
    guard_failures,
    recompile_reasons,
    recompile_timeseries,
)
from inferensics.analytics.cache import cache_growth, cache_health, cache_reasons, cache_trend
from inferensics.analytics.canary import CanaryParams, CanaryResult, canary_compare
from inferensics.analytics.client import QueryClient, QueryRunner
from inferensics.analytics.compile_time import compile_timeseries
from inferensics.analytics.drilldown import (
    RequestDrillDown,
    RequestParams,
    drill_down,
    notable_requests,
    request_detail,
    request_graph_calls,
    request_graphs,
    request_kernel_decisions,
    request_kernels,
)
from inferensics.analytics.errors import AnalyticsError, NotFound, UnknownFilterValue, UnsupportedFilter
from inferensics.analytics.filters import Filters, SliceParams
from inferensics.analytics.local_runner import LocalRunner
from inferensics.analytics.overview import fallback_reasons, fleet_overview, fleet_timeseries
from inferensics.analytics.recompile_counts import recompile_records, request_recompiles
from inferensics.analytics.storms import (
    StormParams,
    new_graph_keys,
    recompile_storms,
    slow_compiles,
    specializations,
)
from inferensics.analytics.weekly import WeeklyReport, build_weekly_report, current_week, last_full_week, parse_week

__all__ = [
    "AnalyticsError",
    "CanaryParams",
    "CanaryResult",
    "Filters",
    "LocalRunner",
    "NotFound",
    "QueryClient",
    "QueryRunner",
    "RequestDrillDown",
    "RequestParams",
    "SliceParams",
    "StormParams",
    "UnknownFilterValue",
    "UnsupportedFilter",
    "WeeklyReport",
    "build_weekly_report",
    "cache_growth",
    "cache_health",
    "cache_reasons",
    "cache_trend",
    "canary_compare",
    "compile_timeseries",
    "current_week",
    "drill_down",
    "fallback_reasons",
    "fleet_overview",
    "fleet_timeseries",
    "graph_break_sites",
    "graph_breaks",
    "guard_failures",
    "last_full_week",
    "new_graph_keys",
    "notable_requests",
    "parse_week",
    "recompile_reasons",
    "recompile_records",
    "recompile_storms",
    "recompile_timeseries",
    "request_detail",
    "request_graph_calls",
    "request_graphs",
    "request_kernel_decisions",
    "request_kernels",
    "request_recompiles",
    "slow_compiles",
    "specializations",
]
