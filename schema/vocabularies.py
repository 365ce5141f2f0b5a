"""Closed vocabularies: the words each enum-like column takes, defined once for every part that writes or checks them.

The collector's decoders refuse a row with another word (``collector/service/value_checks.py``); the writers of
those words (replay's verdict categories, the bundle CLI's states, the kernel qualifier's decisions) can import
them from here instead of spelling them again. The request and cache words that the event models' own docstrings
and the analytics use (:data:`~inferensics.schema.events.OUTCOMES` and its neighbours) stay in ``events.py``;
:data:`VOCABULARIES` names them too. Every list holds its column's default, since a column left out of a span
gets it. ``tests/collector/service/test_vocabularies.py`` checks both.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from inferensics.schema import columns as col
from inferensics.schema.events import (
    CACHE_RESULTS,
    CACHE_STATUSES,
    CACHES,
    FP_STATUSES,
    GUARD_OUTCOMES,
    OUTCOMES,
    BundleMissEvent,
    BundleStateEvent,
    CacheEvent,
    CanaryVerdictEvent,
    CompileEvent,
    GraphBreakEvent,
    KernelQualificationEvent,
    ReplayResultEvent,
    RequestEvent,
    ShapeGuardEvent,
)
from inferensics.schema.table import Event

REQUEST_STATUSES: Final = ("ok", "error")
"""A request's ``status``."""
REQUEST_FP_STATUSES: Final = ("", *FP_STATUSES)
"""A request's ``fp_status``; empty from a sender older than the column."""
COMPILE_OUTCOMES: Final = ("ok", "failed", "recompile_limit", "incomplete")
"""A compile's ``outcome``."""
COMPILE_TRIGGERS: Final = ("", "first", "recompile", "import")
"""What started a compile (``trigger``); empty when unknown."""
SOURCES: Final = ("live", "trace")
"""Where a compile-side row came from: the host SDK (``live``) or an imported TORCH_TRACE log (``trace``)."""
BUNDLE_STATES: Final = ("promoted", "demoted", "revoked", "quarantined", "released", "pushed")
"""The states ``inferensics bundle`` records (``bundle_states.state``)."""
MISS_ACTIONS: Final = ("", "compiled", "eager", "refused")
"""What a host did on a bundle miss (``bundle_misses.action``)."""
ATTRIBUTIONS: Final = (
    "",
    "source_op",
    "kernel_provider",
    "decomposition",
    "lowering",
    "graph_pass",
    "schedule",
    "shape_specialization",
    "artifact_mismatch",
    "inputs",
    "none",
)
"""Replay's fault categories (ARCHITECTURE decision 11), and empty before a verdict (``replay_results.attribution``)."""
CANARY_VERDICTS: Final = ("pass", "fail", "inconclusive")
"""A canary comparison's ``verdict``."""
QUALIFICATION_STATUSES: Final = ("", "measured", "unsupported", "refused", "error")
"""A kernel qualification's ``status``."""
QUALIFICATION_DECISIONS: Final = ("", "incumbent", "promoted", "demoted", "kept", "refused")
"""What the kernel qualifier decided for a provider (``kernel_qualifications.decision``); empty: not measured."""
QUALIFICATION_TIMINGS: Final = ("", "cuda_graph", "events", "wall")
"""How a qualification's median was timed (``kernel_qualifications.timing``); empty: not measured."""

VOCABULARIES: Final[Mapping[type[Event], Mapping[str, tuple[str, ...]]]] = {
    RequestEvent: {
        col.STATUS: REQUEST_STATUSES,
        col.OUTCOME: OUTCOMES,
        col.GUARD_OUTCOME: GUARD_OUTCOMES,
        col.CACHE_STATUS: CACHE_STATUSES,
        col.FP_STATUS: REQUEST_FP_STATUSES,
    },
    CompileEvent: {
        col.TRIGGER: COMPILE_TRIGGERS,
        col.OUTCOME: COMPILE_OUTCOMES,
        col.CACHE_STATUS: CACHE_STATUSES,
        col.SOURCE: SOURCES,
    },
    GraphBreakEvent: {col.SOURCE: SOURCES},
    ShapeGuardEvent: {col.SOURCE: SOURCES},
    CacheEvent: {col.CACHE: CACHES, col.RESULT: CACHE_RESULTS, col.SOURCE: SOURCES},
    BundleStateEvent: {col.STATE: BUNDLE_STATES},
    BundleMissEvent: {col.ACTION: MISS_ACTIONS},
    ReplayResultEvent: {col.ATTRIBUTION: ATTRIBUTIONS},
    CanaryVerdictEvent: {col.VERDICT: CANARY_VERDICTS},
    KernelQualificationEvent: {
        col.STATUS: QUALIFICATION_STATUSES,
        col.DECISION: QUALIFICATION_DECISIONS,
        col.TIMING: QUALIFICATION_TIMINGS,
    },
}
"""Columns with a closed vocabulary, per model: the words their docstrings list and their writers write. The
dashboards, views and reports classify rows by these words: another word would fall out of every count. Columns
whose words are open (a kernel's backend is whatever ``async_compile`` names, a bundle's ``signature_state`` any
refusal cause, a request's ``fallback_reason`` a graph-break id, a blob's ``kind`` its uploader's name) are not
listed."""
