"""Names of the service's named queries the pages call (``GET /api/v1/queries`` lists them)."""

from __future__ import annotations

from typing import Final

FLEET: Final = "fleet_overview"
FLEET_TIMESERIES: Final = "fleet_timeseries"
FALLBACK_REASONS: Final = "fallback_reasons"
STORMS: Final = "recompile_storms"
NEW_GRAPH_KEYS: Final = "new_graph_keys"
SPECIALIZATIONS: Final = "specializations"
DIMENSION_VALUES: Final = "dimension_values"
BUNDLES: Final = "bundles"
BUNDLES_SEEN: Final = "bundles_seen"
CANARY: Final = "canary_compare"
REQUEST_DETAIL: Final = "request_detail"
REQUEST_GRAPHS: Final = "request_graphs"
REQUEST_KERNELS: Final = "request_kernels"
REQUEST_REPLAYS: Final = "request_replays"
RECOMPILE_REASONS: Final = "recompile_reasons"
GRAPH_BREAKS: Final = "graph_breaks"
GRAPH_BREAK_SITES: Final = "graph_break_sites"
GUARD_FAILURES: Final = "guard_failures"
CACHE_HEALTH: Final = "cache_health"
CACHE_TREND: Final = "cache_trend"
CACHE_REASONS: Final = "cache_reasons"
CACHE_GROWTH: Final = "cache_growth"
