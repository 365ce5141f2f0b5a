"""Event models, column names, DDL and migrations of inferensics.

This package imports nothing else of inferensics and needs only pydantic, numpy and (for Arrow) pyarrow,
so it runs on a bare GPU host. The store (``inferensics.schema.store``) needs clickhouse-connect and is
imported on its own.
"""

from inferensics.schema import columns
from inferensics.schema.events import (
    CACHE_RESULTS,
    CACHE_STATUSES,
    CACHES,
    EVENT_MODELS,
    GUARD_OUTCOMES,
    MODELS_BY_TABLE,
    OUTCOMES,
    BlobContentEvent,
    BlobIndexEvent,
    BundleEvent,
    BundleMissEvent,
    BundleStateEvent,
    CacheEvent,
    CanaryVerdictEvent,
    CompileEvent,
    GraphBreakEvent,
    GuardFailureEvent,
    KernelInventoryEvent,
    KernelTimingEvent,
    RecompileEvent,
    ReplayResultEvent,
    RequestEvent,
)
from inferensics.schema.rollups import (
    CACHE_EVENTS_1H,
    COMPILES_1H,
    REQUESTS_1D,
    REQUESTS_1H,
    REQUESTS_1M,
    ROLLUPS,
    Rollup,
)
from inferensics.schema.table import Event, TableSpec

__all__ = [
    "CACHES",
    "CACHE_EVENTS_1H",
    "CACHE_RESULTS",
    "CACHE_STATUSES",
    "COMPILES_1H",
    "EVENT_MODELS",
    "GUARD_OUTCOMES",
    "MODELS_BY_TABLE",
    "OUTCOMES",
    "REQUESTS_1D",
    "REQUESTS_1H",
    "REQUESTS_1M",
    "ROLLUPS",
    "BlobContentEvent",
    "BlobIndexEvent",
    "BundleEvent",
    "BundleMissEvent",
    "BundleStateEvent",
    "CacheEvent",
    "CanaryVerdictEvent",
    "CompileEvent",
    "Event",
    "GraphBreakEvent",
    "GuardFailureEvent",
    "KernelInventoryEvent",
    "KernelTimingEvent",
    "RecompileEvent",
    "ReplayResultEvent",
    "RequestEvent",
    "Rollup",
    "TableSpec",
    "columns",
]
