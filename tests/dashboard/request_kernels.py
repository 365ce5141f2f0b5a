"""A store where an eager request and a compiled one made kernel-registry decisions, a provider raising in each, and
a later request was served by the compiled one's graph (a cache hit decides nothing anew), for the request page's
kernel decisions (walk 41 #10).

Run as ``python -m tests.dashboard.request_kernels DSN NOW_ISO`` (chDB allows one data directory per process, so
the test process never opens the store itself).
"""

from __future__ import annotations

import sys
from datetime import datetime, timedelta
from typing import Any, Final

from inferensics.schema.events import KernelDecisionEvent, RequestEvent
from inferensics.schema.table import Event

EAGER_ID: Final = "kdec-eager"
COMPILED_ID: Final = "kdec-compiled"
HIT_ID: Final = "kdec-hit"
GRAPH: Final = "c" * 64
SIGNATURE: Final = "float32[4,64]/64,1@cpu float32[64]@cpu"
RAISED: Final = "picky: raised RuntimeError: picky kernel failed"
ON_CPU: Final = "triton: platform cpu not in ['cuda', 'interpreter']"
WHERE: Final[dict[str, Any]] = dict(host="h1", model="tinymlp", hw_pool="cpu-a")
SERVED: Final[dict[str, Any]] = dict(graph_keys=[GRAPH], graph_artifacts=["art"], graph_calls=[1], graph_us=[50])


def starts(now: datetime) -> tuple[datetime, datetime, datetime]:
    """When the eager, compiled and cache-hit requests started."""
    return now - timedelta(minutes=30), now - timedelta(minutes=20), now - timedelta(minutes=10)


def events(now: datetime) -> list[Event]:
    """The three requests and their decisions."""
    eager, compiled, hit = starts(now)
    requests = [
        RequestEvent(request_id=EAGER_ID, ts=eager, outcome="eager", traffic_class="t", **WHERE),
        RequestEvent(request_id=COMPILED_ID, ts=compiled, outcome="compile", traffic_class="t", **SERVED, **WHERE),
        RequestEvent(request_id=HIT_ID, ts=hit, outcome="hit", traffic_class="t", **SERVED, **WHERE),
    ]

    def decision(rid: str, ts: datetime, op: str, provider: str, compiled: bool, *skipped: str) -> KernelDecisionEvent:
        return KernelDecisionEvent(
            ts=ts + timedelta(milliseconds=3), request_id=rid, op=op, provider=provider, signature=SIGNATURE,
            bucket="float32/n64/t4", skipped=skipped, compiled=compiled, graph_key=GRAPH if compiled else "",
            fallback=provider in ("reference", "inductor"), **WHERE,
        )  # fmt: skip

    decisions = [
        decision(EAGER_ID, eager, "rms_norm", "reference", False, RAISED, ON_CPU),
        decision(EAGER_ID, eager, "silu_mul", "reference", False, ON_CPU),
        decision(COMPILED_ID, compiled, "rms_norm", "inductor", True, RAISED),
    ]
    return [*requests, *decisions]


def write(dsn: str, now: datetime) -> None:
    """Seed the store at ``dsn`` with :func:`events`."""
    from inferensics.schema.store import Store
    from tests.seeding import seed

    with Store.open(dsn) as store:
        seed(store, events=events(now))


if __name__ == "__main__":
    write(sys.argv[1], datetime.fromisoformat(sys.argv[2]))
