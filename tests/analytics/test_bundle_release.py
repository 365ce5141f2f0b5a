"""The ``bundle_release`` named query names each bundle: the Bundles page's picker of pushed bundles listed
bare 16-character ids, because the query had no name, model or push time to show beside them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from inferensics.analytics.local_runner import LocalRunner
from inferensics.schema import columns as col
from inferensics.schema.events import BundleEvent, BundleStateEvent
from inferensics.schema.store import Store

REGISTERED, PUSHED_ONLY, NEVER_PUSHED = "a" * 64, "b" * 64, "c" * 64


def test_each_bundle_has_its_name_model_and_push_time(store: Store) -> None:
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    first_push, second_push = now - timedelta(hours=2), now - timedelta(minutes=30)
    store.insert_events([
        BundleEvent(ts=now - timedelta(hours=1), bundle_id=REGISTERED, bundle_name="llama-v2", model="llama",
                    host="h1"),
        BundleEvent(ts=now - timedelta(hours=1), bundle_id=NEVER_PUSHED, bundle_name="local", model="mistral",
                    host="h2"),
    ])  # fmt: skip
    store.insert_events([
        BundleStateEvent(ts=first_push, bundle_id=REGISTERED, state="pushed", attrs={"pack_blob": "1" * 64},
                         model="model:build"),
        BundleStateEvent(ts=second_push, bundle_id=REGISTERED, state="pushed", attrs={"pack_blob": "2" * 64},
                         model="model:build"),
        BundleStateEvent(ts=now - timedelta(minutes=10), bundle_id=REGISTERED, state="promoted", channel="prod"),
        BundleStateEvent(ts=first_push, bundle_id=PUSHED_ONLY, state="pushed",
                         attrs={"pack_blob": "3" * 64, "bundle_name": "qwen-v1"}, model="model:build"),
    ])  # fmt: skip
    frame = LocalRunner(store).query("bundle_release", start=now - timedelta(hours=6), end=now + timedelta(hours=1))
    rows = {r[col.BUNDLE_ID]: r for r in frame.iter_rows(named=True)}
    # The name and model hosts registered; a bundle no host registered has the name and model its push recorded.
    assert {b: (r[col.BUNDLE_NAME], r[col.MODEL]) for b, r in rows.items()} == {
        REGISTERED: ("llama-v2", "llama"),
        PUSHED_ONLY: ("qwen-v1", "model:build"),  # the name `bundle push` recorded
        NEVER_PUSHED: ("local", "mistral"),
    }
    # The latest push (a later state change is not a push); null when never pushed.
    assert rows[REGISTERED]["pushed_at"] == second_push
    assert rows[PUSHED_ONLY]["pushed_at"] == first_push
    assert rows[NEVER_PUSHED]["pushed_at"] is None
    assert rows[REGISTERED]["pack_blob"] == "2" * 64
