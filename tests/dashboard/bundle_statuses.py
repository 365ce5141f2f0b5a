"""Requests served under a release bundle, one of each bundle status the host SDK records
(``collector/host/bundle_guard.py``): a verified hit, a hit at a shape the bundle never qualified, a miss with its
``bundle_misses`` row, a later request served by the graph that missed (no miss of its own), a request no graph of
the bundle served (no status), and a hit on a host whose registration of the bundle was refused.

Run as ``python -m tests.dashboard.bundle_statuses DSN NOW_ISO`` (chDB allows one data directory per process, so the
dashboard test process never opens the store itself); the drill-down and CLI tests insert :func:`events` directly.
"""

from __future__ import annotations

import sys
from datetime import datetime, timedelta
from typing import Any

from inferensics.schema.events import BundleEvent, BundleMissEvent, CompileEvent, RequestEvent
from inferensics.schema.table import Event

BUNDLE = "b0" * 32
BUNDLE_NAME = "baseline"
WHERE = dict(model="tiny-decoder", hw_pool="cpu-a", traffic_class="chat")
HIT, SHAPE, MISS, LATER, NONE, UNTRUSTED = "bs-hit", "bs-shape", "bs-miss", "bs-later", "bs-none", "bs-untrusted"
UNQUALIFIED = "[8,128], [8,1];[2,8,4,128,16]"
"""Two calls' graph sizes the bundle never qualified, as the host SDK joins them
(``attrs['bundle_unqualified_shape']``): a prefill graph's (one input with a symbol) and a decode step's (two)."""
UNQUALIFIED_SHOWN = "[8,128], ([8,1], [2,8,4,128,16])"
""":data:`UNQUALIFIED` as people read it: each call's sizes apart, a tuple of one list per input."""
REQUEST_SHAPE = "7x120"
"""The request's own input shape (the model padded it to the graph sizes above)."""
UNQUALIFIED_CALLS = 6
"""The request's calls at them (``attrs['bundle_unqualified_calls']``)."""
MISS_FACTOR = "accepted_shapes: 1x7 not in [1x16, 1x32]"
LONG_FACTOR = "accepted_shapes: inputs " + ";".join(["float32[176,64]/64,1@cpu"] * 40) + " not qualified"
"""A differing factor as long as the demo's (every input of the graph): shown cut to ``FACTOR_SHOWN`` characters."""
MISS_REASON = "on_bundle_miss=compile"
MISSED_ARTIFACT = "a1" * 32
MISSED_FX_KEY = "fxmissedkey"
REFUSED_STATE = "untrusted_builder"


def events(now: datetime) -> list[Event]:
    """The seeded requests, the bundle's registrations, the miss and the compile of the graph that missed."""
    t = now - timedelta(minutes=20)

    def req(rid: str, minute: int, host: str = "h1", attrs: dict[str, str] | None = None, **kw: Any) -> RequestEvent:
        return RequestEvent(
            request_id=rid, ts=t + timedelta(minutes=minute), host=host, bundle_id=BUNDLE, attrs=attrs or {},
            latency_ms=12.0, **WHERE, **kw,
        )  # fmt: skip

    missed: dict[str, Any] = dict(
        graph_keys=("g-missed",), graph_artifacts=(MISSED_ARTIFACT,), graph_calls=(1,), graph_us=(40,)
    )
    return [
        BundleEvent(ts=t - timedelta(minutes=1), bundle_id=BUNDLE, bundle_name=BUNDLE_NAME, host="h1",
                    signature_state="verified", **{k: WHERE[k] for k in ("model", "hw_pool")}),
        # A later registration elsewhere, refused: the request's own host's registration is the one that counts.
        BundleEvent(ts=t, bundle_id=BUNDLE, bundle_name=BUNDLE_NAME, host="h2", signature_state=REFUSED_STATE,
                    **{k: WHERE[k] for k in ("model", "hw_pool")}),
        req(HIT, 1, attrs={"bundle_status": "hit"}),
        req(SHAPE, 2, attrs={"bundle_status": "hit", "bundle_unqualified_shape": UNQUALIFIED,
                             "bundle_unqualified_calls": str(UNQUALIFIED_CALLS)}, shape=REQUEST_SHAPE),
        req(MISS, 3, attrs={"bundle_status": "miss"}, outcome="compile", compile_ms=900.0, **missed),
        BundleMissEvent(ts=t + timedelta(minutes=3, milliseconds=5), bundle_id=BUNDLE, host="h1", request_id=MISS,
                        graph_signature="s1", graph_key=MISSED_FX_KEY, action="compiled",
                        factors=(MISS_FACTOR, LONG_FACTOR), reason=MISS_REASON, compile_s=0.9,
                        **{k: WHERE[k] for k in ("model", "hw_pool")}),
        CompileEvent(ts=t + timedelta(minutes=3, milliseconds=6), host="h1", model=WHERE["model"],
                     request_id=MISS, artifact_id=MISSED_ARTIFACT, fx_cache_key=MISSED_FX_KEY, graph_key="g-missed"),
        req(LATER, 4, attrs={"bundle_status": "miss"}, **missed),
        req(NONE, 5, outcome="eager"),
        req(UNTRUSTED, 6, host="h2", attrs={"bundle_status": "hit"}),
    ]  # fmt: skip


def write(dsn: str, now: datetime) -> None:
    """Seed the store at ``dsn`` with :func:`events`."""
    from inferensics.schema.store import Store
    from tests.seeding import seed

    with Store.open(dsn) as store:
        seed(store, events=events(now))


if __name__ == "__main__":
    write(sys.argv[1], datetime.fromisoformat(sys.argv[2]))
