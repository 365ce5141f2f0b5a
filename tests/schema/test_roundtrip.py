"""Every event model survives insert → select unchanged, on the real embedded engine."""

from __future__ import annotations

import pytest

from inferensics.schema import EVENT_MODELS
from inferensics.schema.store import Store
from inferensics.schema.table import Event

from .samples import comparable, sample


@pytest.mark.parametrize("model", EVENT_MODELS, ids=lambda m: m.TABLE.name)
def test_every_model_round_trips(store: Store, model: type[Event]) -> None:
    # TTL would drop the far-past rows on the next merge; stop TTL merges so the read sees what was written.
    store.client.command(f"SYSTEM STOP TTL MERGES {store.database}.{model.TABLE.name}")
    events = [sample(model, v) for v in ("typical", "edge", "empty")]
    for i, ev in enumerate(events):  # one insert per event, so the read order is the insert order
        assert store.insert_events([ev], dedup_token=f"rt-{i}") == 1
    back = store.select_events(model, order_by="_part, _part_offset")
    assert len(back) == len(events)
    got = sorted((comparable(e) for e in back), key=repr)
    want = sorted((comparable(e) for e in events), key=repr)
    assert got == want


def test_same_dedup_token_is_written_once(store: Store) -> None:
    model = EVENT_MODELS[0]
    ev = sample(model, "typical")
    store.insert_events([ev], dedup_token="tok-1")
    store.insert_events([ev], dedup_token="tok-1")
    store.insert_events([ev], dedup_token="tok-2")
    n = store.query_rows(f"SELECT count() FROM {store.database}.{model.TABLE.name}")[0][0]
    assert n == 2


def test_blob_is_stored_once_and_verified(store: Store) -> None:
    data = b"def call(args):\n    return args\n" * 50
    h1 = store.put_blob(data, "output_code")
    h2 = store.put_blob(data, "output_code")
    assert h1 == h2
    assert store.get_blob(h1) == data
    assert store.get_blob("0" * 64) is None
    assert store.query_rows(f"SELECT count() FROM {store.database}.blobs")[0][0] == 1
