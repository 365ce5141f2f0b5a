"""A store where two requests share the id ``b-002`` (a client re-run reuses its ids), each with its own
recompile, for the request page's chooser; and ``b-030``, whose recompile failed to compile: it raised.

Run as ``python -m tests.dashboard.reused_ids DSN NOW_ISO`` (chDB allows one data directory per process, so the
test process never opens the store itself).
"""

from __future__ import annotations

import sys
from datetime import datetime, timedelta

from inferensics.schema.events import RecompileEvent, RequestEvent

REUSED_ID = "b-002"
FIRST_REASON = "tensor 'x' size mismatch at index 0. expected 2, actual 4 (first run)"
RERUN_REASON = "tensor 'x' size mismatch at index 0. expected 2, actual 4 (re-run)"
RAISED_ID = "b-030"
RAISED_ERROR = "TorchRuntimeError: RuntimeError when making fake tensor call"
WHERE = dict(host="h1", model="tinymlp", hw_pool="cpu-a", traffic_class="t")


def starts(now: datetime) -> tuple[datetime, datetime]:
    """When the two requests of :data:`REUSED_ID` started."""
    return now - timedelta(minutes=30), now - timedelta(minutes=6)


def write(dsn: str, now: datetime) -> None:
    """Seed the store at ``dsn`` with the two requests and their recompiles."""
    from inferensics.schema.store import Store
    from tests.seeding import seed

    first, rerun = starts(now)
    requests = [
        RequestEvent(request_id=REUSED_ID, ts=t, outcome="recompile", recompiles=1, **WHERE) for t in (first, rerun)
    ]
    requests.append(
        RequestEvent(
            request_id=RAISED_ID,
            ts=rerun + timedelta(seconds=1),
            status="error",
            outcome="error",
            fallback_reason="compile_error",
            error=RAISED_ERROR,
            **WHERE,
        )
    )
    recompiles = [
        RecompileEvent(ts=t + timedelta(milliseconds=4), request_id=REUSED_ID, reason=r, **WHERE)
        for t, r in ((first, FIRST_REASON), (rerun, RERUN_REASON))
    ]
    with Store.open(dsn) as store:
        seed(store, events=[*requests, *recompiles])


if __name__ == "__main__":
    write(sys.argv[1], datetime.fromisoformat(sys.argv[2]))
