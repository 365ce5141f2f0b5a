"""The ``bundle_release`` named query on a real chDB store: signature state, promotion, misses, and a
revoked bundle still serving."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from inferensics.analytics.local_runner import LocalRunner
from inferensics.schema.events import BundleEvent, BundleMissEvent, BundleStateEvent, RequestEvent
from inferensics.schema.store import Store

GOOD, BAD = "a" * 64, "b" * 64


def test_release_state_and_revoked_serving(store: Store) -> None:
    now = datetime.now(UTC).replace(minute=30, second=0, microsecond=0)
    earlier = now - timedelta(hours=3)
    store.insert_events([
        BundleEvent(ts=earlier, bundle_id=GOOD, host="h1", signature_state="verified", builder_keyid="k1"),
        BundleEvent(ts=earlier, bundle_id=BAD, host="h2", signature_state="verified", builder_keyid="k1"),
    ])  # fmt: skip
    store.insert_events([
        BundleStateEvent(ts=earlier, bundle_id=GOOD, state="promoted", channel="prod"),
        BundleStateEvent(ts=earlier, bundle_id=BAD, state="pushed", attrs={"pack_blob": "c" * 64}),
        BundleStateEvent(ts=now - timedelta(hours=2), bundle_id=BAD, state="revoked", reason="bad silu"),
    ])  # fmt: skip
    store.insert_events([
        BundleMissEvent(ts=now - timedelta(minutes=5), bundle_id=GOOD, host="h1", action="eager",
                        factors=("accepted_shapes: inputs x",)),
    ])  # fmt: skip
    requests = [
        RequestEvent(
            request_id=f"r{i}",
            ts=now - timedelta(minutes=10 + i),
            bundle_id=bid,
            host="h",
            model="m",
            hw_pool="p",
            traffic_class="t",
        )
        for i, bid in enumerate([GOOD, GOOD, BAD])
    ]
    store.insert_events(requests)
    frame = LocalRunner(store).query("bundle_release", start=now - timedelta(hours=6), end=now + timedelta(hours=1))
    rows = {r["bundle_id"]: r for r in frame.iter_rows(named=True)}
    assert rows[GOOD]["state"] == "promoted"
    assert rows[GOOD]["channel"] == "prod"
    assert rows[GOOD]["signature_state"] == "verified"
    assert rows[GOOD]["misses_eager"] == 1
    assert not rows[GOOD]["revoked_serving"]
    assert rows[BAD]["state"] == "revoked"
    assert rows[BAD]["pack_blob"] == "c" * 64
    assert rows[BAD]["requests_after_refusal"] == 1
    assert rows[BAD]["revoked_serving"]
    assert frame.row(0, named=True)["bundle_id"] == BAD  # revoked-but-serving first
