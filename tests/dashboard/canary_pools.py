"""The demo walk's canary, in known events: a baseline serving two hardware pools, its canary serving one.

The baseline bundle serves ``cpu-a`` (fast hardware: every request 10 ms) and ``cpu-b`` (20 ms); the candidate
serves ``cpu-b`` only, as fast as the baseline there. Over every pool the baseline's p50 is cpu-a's 10 ms and the
candidate "fails" p50 at twice it, on hardware alone; on cpu-b, where both served, every check passes. One
failed request of the baseline had its inputs captured and was never replayed (the request page's replay
command). Times lie in the hour before ``now``.

Run as ``python -m tests.dashboard.canary_pools DSN NOW_ISO`` (chDB allows one data directory per process, so the
test process never opens the store itself).
"""

from __future__ import annotations

import hashlib
import sys
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Final

from inferensics.schema import BundleEvent, RequestEvent
from inferensics.schema.table import Event
from tests.seeding import seed

MODEL: Final = "tiny-decoder"
SHARED_POOL: Final = "cpu-b"
"""The pool both bundles served."""
BASELINE_ONLY_POOL: Final = "cpu-a"
"""The pool only the baseline served (faster hardware)."""
BASELINE: Final = "b" * 8 + hashlib.sha256(b"walk-baseline").hexdigest()[8:40]
CANDIDATE: Final = "c" * 8 + hashlib.sha256(b"walk-candidate").hexdigest()[8:40]
PER_SIDE: Final = 100
"""Requests of each bundle on the shared pool: the analytics' default ``min_requests``, so a verdict is given."""
BASELINE_ONLY: Final = 200
"""The baseline's requests on the faster pool (more than on the shared one: they set its p50 over all pools)."""
LATENCY_MS: Final = {BASELINE_ONLY_POOL: 10.0, SHARED_POOL: 20.0}
FAILED_ID: Final = "req-walk-failed"
"""The baseline's failed request with captured inputs, never replayed."""
INPUTS_BLOB: Final = b"captured-inputs:walk" + bytes(range(32))


@dataclass
class PoolFacts:
    """What was seeded."""

    now: datetime
    requests: list[RequestEvent] = field(default_factory=list)
    others: list[Event] = field(default_factory=list)

    def served(self, bundle: str, pool: str | None = None) -> int:
        """Requests ``bundle`` served (in ``pool`` when given)."""
        return sum(r.bundle_id == bundle and pool in (None, r.hw_pool) for r in self.requests)


def build(now: datetime) -> PoolFacts:
    """The seeded events for ``now`` (a minute boundary)."""
    facts = PoolFacts(now=now)
    start = now - timedelta(minutes=50)

    def req(rid: str, at: float, pool: str, bundle: str, **kw: object) -> RequestEvent:
        host = f"{pool}-{'baseline' if bundle == BASELINE else 'candidate'}-0"
        fields = {
            "request_id": rid, "ts": start + timedelta(minutes=at), "host": host, "model": MODEL, "hw_pool": pool,
            "traffic_class": "interactive", "bundle_id": bundle, "latency_ms": LATENCY_MS[pool], **kw,
        }  # fmt: skip
        return RequestEvent.model_validate(fields)

    for i in range(BASELINE_ONLY):
        facts.requests.append(req(f"req-walk-a{i:03d}", i * 40 / BASELINE_ONLY, BASELINE_ONLY_POOL, BASELINE))
    for i in range(PER_SIDE):
        facts.requests.append(req(f"req-walk-b{i:03d}", i * 40 / PER_SIDE, SHARED_POOL, BASELINE))
        facts.requests.append(req(f"req-walk-b{i:03d}-c", i * 40 / PER_SIDE, SHARED_POOL, CANDIDATE))
    facts.requests.append(req(
        FAILED_ID, 45, BASELINE_ONLY_POOL, BASELINE, status="error", outcome="error",
        error="InvalidRequestError: token id 263 at [0, 20] is outside the vocabulary (0..255)",
        capture_blob=hashlib.sha256(INPUTS_BLOB).hexdigest(),
    ))  # fmt: skip
    for bundle, name, pool, when in (
        (BASELINE, "baseline", BASELINE_ONLY_POOL, start - timedelta(days=1)),
        (BASELINE, "baseline", SHARED_POOL, start - timedelta(days=1)),
        (CANDIDATE, "candidate", SHARED_POOL, start),  # registered last: the page's default candidate
    ):
        host = f"{pool}-{name}-0"
        facts.others.append(BundleEvent(
            ts=when, bundle_id=bundle, bundle_name=name, model=MODEL, host=host, hw_pool=pool, torch_version="2.13.0",
            device_name="cpu",
        ))  # fmt: skip
    return facts


def write(dsn: str, now: datetime) -> None:
    """Seed the store at ``dsn`` with the events of :func:`build` for ``now``."""
    from inferensics.schema.store import Store

    facts = build(now)
    with Store.open(dsn) as store:
        seed(
            store, events=[*facts.requests, *facts.others], blobs=[(INPUTS_BLOB, "inputs", "application/octet-stream")]
        )


if __name__ == "__main__":
    write(sys.argv[1], datetime.fromisoformat(sys.argv[2]))
