"""A handful of requests with known failures, for the request list's tests (analytics, CLI, service).

Model ``m`` in pools ``p1`` and ``p2``, one request a minute from :data:`T`; model ``other`` has one error of its
own, and one error of ``m`` lies before the window the tests ask for.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from inferensics.schema.events import RequestEvent

T = datetime(2026, 3, 3, 12, tzinfo=UTC)
"""The first request of the window (the tests' ``start``)."""
END = T + timedelta(hours=1)
"""The end of the tests' window."""


def failing_requests(start: datetime = T) -> list[RequestEvent]:
    """The seeded requests, in time order, the window's first at ``start``."""

    def _request(request_id: str, minute: int, **fields: Any) -> RequestEvent:
        base: dict[str, Any] = {"host": "h1", "model": "m", "hw_pool": "p1", "traffic_class": "interactive"}
        return RequestEvent(request_id=request_id, ts=start + timedelta(minutes=minute), **{**base, **fields})

    return [
        _request("r-early-error", -5, status="error", error="ValueError: before the window", outcome="error"),
        _request("r-ok-1", 0),
        _request("r-error", 1, status="error", outcome="error",
                 error="RuntimeError: CUDA error: an illegal memory access\nTraceback (most recent call last):\n  x"),
        _request("r-nan", 2, hw_pool="p2", host="h2", fp_nan=12, fp_status="ok"),
        _request("r-fallback", 3, outcome="fallback", fallback_reason="recompile_limit"),
        _request("r-error-and-nan", 4, status="error", outcome="error", error="  OverflowError: big  ", fp_nan=3),
        _request("r-inf-and-fallback", 5, hw_pool="p2", fp_inf=2, outcome="fallback", fallback_reason="policy"),
        _request("r-error-no-message", 6, status="error", outcome="error"),
        _request("r-other-model", 7, model="other", status="error", outcome="error", error="KeyError: 'x'"),
        _request("r-fallback-no-reason", 8, outcome="fallback"),
        _request("r-ok-2", 9, outcome="recompile", recompiles=1),
    ]  # fmt: skip


FAILING_NEWEST_FIRST: list[tuple[str, str, str, str, str]] = [
    # (request_id, model, hw_pool, kind, detail) of the window's failing requests of model m, newest first
    ("r-fallback-no-reason", "m", "p1", "eager fallback", "(no reason recorded)"),
    ("r-error-no-message", "m", "p1", "error", "(no error message recorded)"),
    ("r-inf-and-fallback", "m", "p2", "non-finite output", "NaN 0, inf 2"),
    ("r-error-and-nan", "m", "p1", "error", "OverflowError: big"),
    ("r-fallback", "m", "p1", "eager fallback", "recompile_limit"),
    ("r-nan", "m", "p2", "non-finite output", "NaN 12, inf 0"),
    ("r-error", "m", "p1", "error", "RuntimeError: CUDA error: an illegal memory access"),
]
"""What the failing list of model ``m`` over ``[start, start + 1 h)`` holds, in order."""
