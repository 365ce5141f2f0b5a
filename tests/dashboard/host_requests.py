"""Two serving hosts of one pool, each with its SDK's health records and requests (some failing), and a replay verdict
that named a fault in one host's request whose output looked fine: the seed of the host filter's tests.

Run as ``python -m tests.dashboard.host_requests DSN NOW_ISO`` (:func:`tests.dashboard.conftest.seed_store`).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from inferensics.schema.events import ReplayResultEvent, RequestEvent, SdkHealthEvent

HOSTS = ("h200-b-07", "h200-b-08")
WRONG_ID = "req-b07-wrong"
"""A request of the first host whose output was wrong but finite; its replay named a decomposition."""
VERDICT = "decomposition · op aten.silu · node silu · model.py:26"
"""How the request list shows its verdict."""


@dataclass
class HostFacts:
    """What was seeded, for the assertions."""

    now: datetime
    requests: list[RequestEvent] = field(default_factory=list)
    others: list[Any] = field(default_factory=list)

    def failing(self, host: str) -> list[str]:
        """The ids of ``host``'s failing requests, newest first (the wrong one included)."""
        bad = [r for r in self.requests if r.host == host and (r.status == "error" or r.outcome == "fallback"
                                                               or r.fp_nan or r.request_id == WRONG_ID)]  # fmt: skip
        return [r.request_id for r in sorted(bad, key=lambda r: r.ts, reverse=True)]


def build(now: datetime) -> HostFacts:
    """The events, the newest a minute before ``now``."""
    facts = HostFacts(now=now)
    for h, host in enumerate(HOSTS):
        for i in range(12):
            kw: dict[str, Any] = {}
            if i % 4 == 1:
                kw = {"status": "error", "outcome": "error", "error": f"RuntimeError: boom on {host}"}
            elif i % 4 == 2 and h == 0:
                kw = {"outcome": "fallback", "fallback_reason": "recompile_limit"}
            elif i == 3 and h == 1:
                kw = {"fp_nan": 4, "fp_status": "ok"}
            facts.requests.append(RequestEvent(
                request_id=f"req-b0{7 + h}-{i:02d}", ts=now - timedelta(minutes=50 - 4 * i, seconds=h), host=host,
                model="llama", hw_pool="h200", traffic_class="interactive", latency_ms=20.0 + i, **kw,
            ))  # fmt: skip
        for m in range(55):
            facts.others.append(SdkHealthEvent(ts=now - timedelta(minutes=55 - m), host=host, model="llama",
                                               hw_pool="h200", interval_s=60.0, requests_seen=m))  # fmt: skip
    wrong = RequestEvent(request_id=WRONG_ID, ts=now - timedelta(minutes=3), host=HOSTS[0], model="llama",
                         hw_pool="h200", traffic_class="interactive", latency_ms=21.0)  # fmt: skip
    facts.requests.append(wrong)
    facts.others.append(ReplayResultEvent(
        ts=now - timedelta(minutes=2), replay_id="rp-1", request_id=WRONG_ID, attribution="decomposition",
        op="aten.silu", fx_node="silu", source_file="model.py", source_line=26, request_host=wrong.host,
        request_ts=wrong.ts,
    ))  # fmt: skip
    return facts


def write(dsn: str, now: datetime) -> None:
    """Seed the store at ``dsn`` with the events of :func:`build` for ``now``."""
    from inferensics.schema.store import Store
    from tests.seeding import seed

    facts = build(now)
    with Store.open(dsn) as store:
        seed(store, events=[*facts.requests, *facts.others])


if __name__ == "__main__":
    write(sys.argv[1], datetime.fromisoformat(sys.argv[2]))
