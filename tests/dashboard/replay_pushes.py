"""Seed for the replay command of a request whose bundle was or was not pushed to the service, and for the request
page's words on a request served without a bundle or with its inputs not captured (session 45, newuser D1: the
printed ``inferensics replay ID --service URL --keyring BUILDER.pub`` stopped with "bundle ... is not available
here (not pushed to the service)").

Run as ``python -m tests.dashboard.replay_pushes DSN NOW_ISO`` (:func:`tests.dashboard.conftest.seed_store`).
"""

from __future__ import annotations

import sys
from datetime import datetime, timedelta
from typing import Any

from inferensics.schema.events import BundleEvent, BundleStateEvent, RequestEvent
from inferensics.schema.table import Event

UNPUSHED = "5c" * 32
"""A bundle hosts registered and served from, never pushed (``inferensics bundle build`` wrote it; no ``push``)."""
UNPUSHED_NAME = "scorer-v1"
PUSHED = "7e" * 32
"""A bundle pushed to the service (its ``pushed`` state with the pack's blob, as ``inferensics bundle push``)."""
PUSHED_NAME = "scorer-v2"
UNREGISTERED = "9d" * 32
"""A bundle id a request names that no host registered."""
R_UNPUSHED = "nu-b-2"
"""Failing (NaN output), served from :data:`UNPUSHED`, inputs captured."""
R_PUSHED = "nu-p-1"
"""Failing (NaN output), served from :data:`PUSHED`, inputs captured."""
R_NO_BUNDLE = "nu-req-2"
"""Failing (NaN output), served without a bundle, its inputs passed but not captured (capture off on its host)."""
R_NO_INPUTS = "nu-req-3"
"""Served without a bundle, completed fine, no inputs passed to the tracker."""
R_NOT_CHOSEN = "nu-req-4"
"""Served from :data:`UNREGISTERED`, completed fine, its inputs passed but not chosen by the capture rule."""
WHERE = {"model": "scorer", "hw_pool": "cpu-a", "traffic_class": "chat"}
INPUTS = "ab" * 32


def events(now: datetime) -> list[Event]:
    """The two bundles' registrations, the push of one, and the requests."""
    t = now - timedelta(minutes=20)

    def req(rid: str, minute: int, bundle: str, **kw: Any) -> RequestEvent:
        return RequestEvent(request_id=rid, ts=t + timedelta(minutes=minute), host="h1", bundle_id=bundle,
                            latency_ms=12.0, **WHERE, **kw)  # fmt: skip

    nan: dict[str, Any] = {"fp_status": "ok", "fp_nan": 4, "input_digest": "cd" * 32}
    return [
        *(
            BundleEvent(
                ts=t,
                bundle_id=b,
                bundle_name=name,
                host="h1",
                signature_state="verified",
                model=WHERE["model"],
                hw_pool=WHERE["hw_pool"],
            )
            for b, name in ((UNPUSHED, UNPUSHED_NAME), (PUSHED, PUSHED_NAME))
        ),
        BundleStateEvent(
            ts=t,
            bundle_id=PUSHED,
            state="pushed",
            model=WHERE["model"],
            attrs={"pack_blob": "ef" * 32, "bundle_name": PUSHED_NAME},
        ),
        req(R_PUSHED, 1, PUSHED, capture_blob=INPUTS, **nan),
        req(R_UNPUSHED, 2, UNPUSHED, capture_blob=INPUTS, **nan),
        req(R_NO_BUNDLE, 3, "", **nan),
        req(R_NO_INPUTS, 4, ""),
        req(R_NOT_CHOSEN, 5, UNREGISTERED, input_digest="cd" * 32),
    ]


def write(dsn: str, now: datetime) -> None:
    """Seed the store at ``dsn`` with :func:`events`."""
    from inferensics.schema.store import Store
    from tests.seeding import seed

    with Store.open(dsn) as store:
        seed(store, events=events(now))


if __name__ == "__main__":
    write(sys.argv[1], datetime.fromisoformat(sys.argv[2]))
