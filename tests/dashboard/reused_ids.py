"""A store where two requests share the id ``b-002`` (a client re-run reuses its ids), each with its own
recompile, captured inputs and replay verdict, for the request page's chooser (and a third verdict of the id that
names no inputs digest, older than the replay executor's); and ``b-030``, whose recompile failed to compile: it
raised.

Run as ``python -m tests.dashboard.reused_ids DSN NOW_ISO`` (chDB allows one data directory per process, so the
test process never opens the store itself).
"""

from __future__ import annotations

import json
import sys
from datetime import datetime, timedelta

from inferensics.schema.events import RecompileEvent, ReplayResultEvent, RequestEvent

REUSED_ID = "b-002"
FIRST_REASON = "tensor 'x' size mismatch at index 0. expected 2, actual 4 (first run)"
RERUN_REASON = "tensor 'x' size mismatch at index 0. expected 2, actual 4 (re-run)"
RAISED_ID = "b-030"
RAISED_ERROR = "TorchRuntimeError: RuntimeError when making fake tensor call"
WHERE = dict(host="h1", model="tinymlp", hw_pool="cpu-a", traffic_class="t")
INPUTS = ("a1" * 32, "b2" * 32)
"""The captured inputs' sha256 of the two requests of :data:`REUSED_ID`."""
VERDICTS = ("source_op", "lowering")
"""The replay verdict of each request of :data:`REUSED_ID` (each replayed its own captured inputs)."""
UNTIED = "schedule"
"""The verdict of :data:`REUSED_ID` that names no inputs digest: either request's."""


def starts(now: datetime) -> tuple[datetime, datetime]:
    """When the two requests of :data:`REUSED_ID` started."""
    return now - timedelta(minutes=30), now - timedelta(minutes=6)


def write(dsn: str, now: datetime) -> None:
    """Seed the store at ``dsn`` with the two requests and their recompiles."""
    from inferensics.schema.store import Store
    from tests.seeding import seed

    first, rerun = starts(now)
    requests = [
        RequestEvent(request_id=REUSED_ID, ts=t, outcome="recompile", recompiles=1, capture_blob=blob, **WHERE)
        for t, blob in ((first, INPUTS[0]), (rerun, INPUTS[1]))
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
    replays = [
        ReplayResultEvent(
            ts=now - timedelta(minutes=n), replay_id=f"r{n}", request_id=REUSED_ID, attribution=attribution,
            verdict_json=json.dumps({"summary": attribution, "evidence": {"captured_inputs": {"sha256": digest}}}),
        )
        for n, attribution, digest in ((3, VERDICTS[0], INPUTS[0]), (2, VERDICTS[1], INPUTS[1]), (5, UNTIED, ""))
    ]  # fmt: skip
    with Store.open(dsn) as store:
        seed(store, events=[*requests, *recompiles, *replays])


if __name__ == "__main__":
    write(sys.argv[1], datetime.fromisoformat(sys.argv[2]))
