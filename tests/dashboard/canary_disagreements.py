"""A canary that fails argmax agreement on one hardware pool, in known events (the on-call walk's FAIL on
``argmax_agreement`` that named no request).

A baseline and a candidate bundle each serve :data:`PER_SIDE` requests of the same inputs on two pools, alike in
every measure but the output's argmax: on :data:`AGREEING_POOL` the candidate agrees on every input; on
:data:`DISAGREEING_POOL` it disagrees on every tenth input (90 % agreement: a FAIL), input ``10k``'s first argmax
ids differing in ``k + 1`` positions, so the worst pair is that of input 90. Times lie in the hour before ``now``.

Run as ``python -m tests.dashboard.canary_disagreements DSN NOW_ISO`` (chDB allows one data directory per process,
so a test process beside a service never opens the service's store itself).
"""

from __future__ import annotations

import hashlib
import sys
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Final

from inferensics.schema import BundleEvent, RequestEvent
from inferensics.schema.events import FP_OK
from inferensics.schema.table import Event
from tests.seeding import seed

MODEL: Final = "agree-decoder"
AGREEING_POOL: Final = "cpu-b"
DISAGREEING_POOL: Final = "cpu-c"
BASELINE: Final = "b" * 8 + hashlib.sha256(b"agree-baseline").hexdigest()[8:40]
CANDIDATE: Final = "c" * 8 + hashlib.sha256(b"agree-candidate").hexdigest()[8:40]
PER_SIDE: Final = 100
"""Requests of each bundle on each pool: the analytics' default ``min_requests``, so a verdict is given."""
HEAD: Final = tuple(range(16))


def disagrees(i: int) -> bool:
    """Whether the candidate's output on input ``i`` of :data:`DISAGREEING_POOL` disagrees."""
    return i % 10 == 0


def differing(i: int) -> int:
    """How many of the candidate's first argmax ids differ on disagreeing input ``i``."""
    return i // 10 + 1


def request_id(pool: str, i: int, bundle: str) -> str:
    """The id of ``bundle``'s request of input ``i`` on ``pool``."""
    return f"req-{pool}-{i:03d}" + ("-c" if bundle == CANDIDATE else "")


def input_digest(pool: str, i: int) -> str:
    return hashlib.sha256(f"{pool}-{i}".encode()).hexdigest()


@dataclass
class DisagreementFacts:
    """What was seeded."""

    now: datetime
    requests: list[RequestEvent] = field(default_factory=list)
    others: list[Event] = field(default_factory=list)

    def worst(self, n: int) -> list[tuple[str, str, str, int]]:
        """The ``n`` worst disagreeing pairs: candidate id, baseline id, input digest, first argmax ids differing."""
        wrong = sorted((i for i in range(PER_SIDE) if disagrees(i)), key=lambda i: -differing(i))[:n]
        pool = DISAGREEING_POOL
        return [
            (request_id(pool, i, CANDIDATE), request_id(pool, i, BASELINE), input_digest(pool, i), differing(i))
            for i in wrong
        ]


def build(now: datetime) -> DisagreementFacts:
    """The seeded events for ``now`` (a minute boundary)."""
    facts = DisagreementFacts(now=now)
    start = now - timedelta(minutes=50)
    for pool in (AGREEING_POOL, DISAGREEING_POOL):
        for bundle in (BASELINE, CANDIDATE):
            for i in range(PER_SIDE):
                wrong = bundle == CANDIDATE and pool == DISAGREEING_POOL and disagrees(i)
                head = [x + 100 if wrong and j < differing(i) else x for j, x in enumerate(HEAD)]
                facts.requests.append(RequestEvent.model_validate({
                    "request_id": request_id(pool, i, bundle), "ts": start + timedelta(minutes=i * 0.4),
                    "host": f"{pool}-{bundle[0]}-0", "model": MODEL, "hw_pool": pool, "traffic_class": "interactive",
                    "bundle_id": bundle, "latency_ms": 20.0, "input_digest": input_digest(pool, i),
                    "fp_argmax_digest": hashlib.sha256(repr(head).encode()).hexdigest(), "fp_argmax_head": head,
                    "fp_status": FP_OK, "fp_rate": 1.0, "fp_mean": 0.1 * (i % 7), "fp_std": 1.0,
                }))  # fmt: skip
        for bundle, name, when in ((BASELINE, "baseline", start - timedelta(days=1)), (CANDIDATE, "candidate", start)):
            facts.others.append(BundleEvent(
                ts=when, bundle_id=bundle, bundle_name=name, model=MODEL, host=f"{pool}-{bundle[0]}-0", hw_pool=pool,
                torch_version="2.13.0", device_name="cpu",
            ))  # fmt: skip
    return facts


def write(dsn: str, now: datetime) -> None:
    """Seed the store at ``dsn`` with the events of :func:`build` for ``now``."""
    from inferensics.schema.store import Store

    facts = build(now)
    with Store.open(dsn) as store:
        seed(store, events=[*facts.requests, *facts.others])


if __name__ == "__main__":
    write(sys.argv[1], datetime.fromisoformat(sys.argv[2]))
