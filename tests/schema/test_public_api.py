"""The schema package's public API is pinned: changing it is a deliberate act."""

from __future__ import annotations

from inferensics import schema


def test_all_is_pinned() -> None:
    assert sorted(schema.__all__) == sorted(
        [
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
            "KernelDecisionEvent",
            "KernelInventoryEvent",
            "KernelQualificationEvent",
            "KernelTimingEvent",
            "RecompileEvent",
            "ReplayResultEvent",
            "RequestEvent",
            "SdkHealthEvent",
            "ShapeGuardEvent",
            "Rollup",
            "TableSpec",
            "columns",
        ]
    )
    for name in schema.__all__:
        assert getattr(schema, name) is not None


def test_schema_imports_nothing_else_of_ours() -> None:
    import subprocess
    import sys

    code = (
        "import sys, inferensics.schema, inferensics.schema.otlp, inferensics.schema.ddl;"
        "bad = sorted(m for m in sys.modules"
        " if m.startswith('inferensics.') and not m.startswith('inferensics.schema'));"
        "heavy = sorted(m for m in ('clickhouse_connect', 'chdb', 'torch', 'streamlit', 'opentelemetry')"
        " if m in sys.modules);"
        "print(bad, heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[] []"
