"""The store exporter keeps the good rows of a batch the store refuses and counts the rows it drops."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime

import pytest

from inferensics.collector.host import SdkConfig, instrument
from inferensics.collector.host.store_exporter import StoreExporter
from inferensics.schema import CacheEvent, CompileEvent, RequestEvent
from inferensics.schema.store import Store
from inferensics.schema.table import Event

TS = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
BAD: dict[int, dict[str, object]] = {
    7: {"reason": "lone surrogate \udc80"},  # no UTF-8 form
    8: {"entry_bytes": -1},  # UInt64 column
    30: {"entry_bytes": 2**64},  # UInt64 column
}
"""Row index → the field values that validate but cannot be written."""


def _lookup(i: int, request_id: str = "") -> CacheEvent:
    fields: dict[str, object] = {"cache_key": f"k{i:03d}", "request_id": request_id, **BAD.get(i, {})}
    return CacheEvent.model_validate({"ts": TS, "host": "h", "cache": "fx_graph", "result": "hit", **fields})


def _stored_keys(store: Store) -> list[str]:
    return sorted(e.cache_key for e in store.select_events(CacheEvent))


@pytest.fixture
def insert_calls(store: Store, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The row count of every ``insert_events`` call the store receives."""
    calls: list[int] = []
    real = store.insert_events

    def counting(events: list[Event]) -> int:
        calls.append(len(events))
        return real(events)

    monkeypatch.setattr(store, "insert_events", counting)
    return calls


def test_mixed_batch_keeps_the_good_rows(store: Store, insert_calls: list[int]) -> None:
    exporter = StoreExporter(store, host="h", batch_rows=1000)
    exporter.export_records([_lookup(i) for i in range(40)])
    exporter.export_records([CompileEvent(ts=TS, host="h", compile_id="0/0")])
    exporter.flush()

    assert _stored_keys(store) == [f"k{i:03d}" for i in range(40) if i not in BAD]
    assert exporter.rejected == Counter({"cache_events": 3})
    assert exporter.inserted == 37 + 1
    # the value that does not fit is named with its column type (pa.array said "OverflowError: Python int too large")
    assert "cache_events: row rejected: ArrowInvalid: a value too large to fit in uint64" in exporter.last_error
    assert [c.compile_id for c in store.select_events(CompileEvent)] == ["0/0"]  # the other table is untouched
    assert sorted(insert_calls) == [1, 37, 40]  # the refused batch, its good rows, the compile


def test_a_full_buffer_inserts_its_good_rows(store: Store) -> None:
    exporter = StoreExporter(store, host="h", batch_rows=10)
    exporter.export_records([_lookup(i) for i in range(35)])  # three full batches insert as they fill
    assert exporter.rejected == Counter({"cache_events": 2})
    assert exporter.inserted == 28
    exporter.flush()
    assert exporter.rejected == Counter({"cache_events": 3})
    assert _stored_keys(store) == [f"k{i:03d}" for i in range(35) if i not in BAD]


def test_a_request_with_a_bad_child_keeps_the_request(store: Store) -> None:
    exporter = StoreExporter(store, host="h")
    request = RequestEvent(ts=TS, host="h", model="m", hw_pool="cpu", traffic_class="batch", request_id="r-1")
    exporter.export_request(request, [_lookup(1, "r-1"), _lookup(7, "r-1")])
    exporter.shutdown()

    assert [r.request_id for r in store.select_events(RequestEvent)] == ["r-1"]
    assert _stored_keys(store) == ["k001"]
    assert exporter.rejected == Counter({"cache_events": 1})
    assert exporter.last_error.startswith("cache_events: row (request r-1) rejected: UnicodeEncodeError")


def test_all_good_batch_is_one_insert(store: Store, insert_calls: list[int]) -> None:
    exporter = StoreExporter(store, host="h")
    exporter.export_records([_lookup(i) for i in range(100) if i not in BAD])
    exporter.flush()
    assert insert_calls == [97]
    assert (exporter.inserted, exporter.rejected) == (97, Counter())


def test_a_store_that_refuses_every_row_still_raises(store_dsn: str) -> None:
    """Rows that convert but meet no table: nothing row-specific to keep, the batch error reaches the caller."""
    unmigrated = Store.open(store_dsn)
    try:
        exporter = StoreExporter(unmigrated, host="h")  # creates the empty store's tables
        unmigrated.client.command(f"DROP TABLE {unmigrated.database}.cache_events SYNC")
        exporter.export_records([_lookup(i) for i in range(5)])
        with pytest.raises(Exception, match="cache_events"):
            exporter.flush()
        assert exporter.rejected == Counter()
        assert exporter.inserted == 0
    finally:
        unmigrated.client.command(f"DROP DATABASE IF EXISTS {unmigrated.database} SYNC")
        unmigrated.close()


def test_tracker_stats_count_the_rows_the_exporter_dropped(store: Store) -> None:
    exporter = StoreExporter(store, host="h")
    tracker = instrument(exporter=exporter, host="h", model="m", config=SdkConfig(trace_compiles=False))
    try:
        exporter.export_records([_lookup(i) for i in (1, 7, 8)])
        exporter.flush()
        stats = tracker.stats()
    finally:
        tracker.shutdown()
    assert stats["export_rejected_cache_events"] == 2
    assert _stored_keys(store) == ["k001"]


def test_instrument_on_a_fresh_store_creates_its_tables(store_dsn: str) -> None:
    """The README's single-process form, ``instrument(store=Store.open("chdb:///dir"))``, on a new directory."""
    fresh = Store.open(store_dsn)
    try:
        assert fresh.schema_version() == 0
        tracker = instrument(store=fresh, host="h", model="m")
        with tracker.request("r1"):
            pass
        tracker.shutdown()
        assert [r.request_id for r in fresh.select_events(RequestEvent)] == ["r1"]
    finally:
        fresh.client.command(f"DROP DATABASE IF EXISTS {fresh.database} SYNC")
        fresh.close()
