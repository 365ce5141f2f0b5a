"""A recompile whose compile failed is a recompile of its storm hour.

The request that triggered it raised, and its row counts no recompile (``recompiles = 0``); its recompile
record names it. The storm counts the hour's recompile records, inside requests or not, as the Compile & cache
health page's count and the storm's own help text do, and lists the requests that raised among its triggers;
the overview's request-side count stays what requests triggered.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from inferensics.analytics import SliceParams, StormParams, fleet_overview, recompile_storms, specializations
from inferensics.schema import columns as col
from inferensics.schema.events import CompileEvent, RecompileEvent, RequestEvent
from inferensics.schema.store import Store
from tests.seeding import stop_ttl

HOUR = datetime(2026, 3, 4, 10, tzinfo=UTC)
WHERE = dict(host="h1", model="m", hw_pool="p")


def _seed(store: Store) -> None:
    stop_ttl(store)
    requests: list[RequestEvent] = []
    records: list[RecompileEvent] = []
    compiles = [CompileEvent(ts=HOUR, graph_key="gk-0", entire_frame_s=1.0, **WHERE)]  # the first, at warm-up
    for i in range(3):  # recompiled and served
        rid = f"ok-{i}"
        ts = HOUR + timedelta(minutes=5 + i)
        requests.append(
            RequestEvent(request_id=rid, ts=ts, traffic_class="t", outcome="recompile", recompiles=1, **WHERE)
        )
        records.append(RecompileEvent(ts=ts, request_id=rid, reason="tensor 'x' size mismatch at index 0", **WHERE))
        compiles.append(CompileEvent(ts=ts, request_id=rid, graph_key=f"gk-{i + 1}", entire_frame_s=1.0, **WHERE))
    for i in range(2):  # the recompile's compile failed: the request raised, its row counts none
        rid = f"raised-{i}"
        ts = HOUR + timedelta(minutes=20 + i)
        requests.append(
            RequestEvent(
                request_id=rid,
                ts=ts,
                traffic_class="t",
                status="error",
                outcome="error",
                fallback_reason="compile_error",
                error="TorchRuntimeError: boom",
                **WHERE,
            )
        )
        records.append(RecompileEvent(ts=ts, request_id=rid, reason="tensor 'x' size mismatch at index 1", **WHERE))
        compiles.append(CompileEvent(ts=ts, request_id=rid, outcome="failed", fail_type="TorchRuntimeError", **WHERE))
    # A warm-up recompile, outside any request.
    records.append(
        RecompileEvent(ts=HOUR + timedelta(minutes=1), reason="tensor 'x' size mismatch at index 0", **WHERE)
    )
    store.insert_events(requests)
    store.insert_events(records)
    store.insert_events(compiles)


def test_a_storm_counts_the_recompiles_whose_compile_failed(store: Store) -> None:
    _seed(store)
    window = dict(start=HOUR, end=HOUR + timedelta(hours=1))

    storms = recompile_storms(store, StormParams(**window, min_recompiles=6))
    overview = fleet_overview(store, SliceParams(**window))
    specs = specializations(store, SliceParams(**window))

    assert storms.height == 1
    storm = storms.row(0, named=True)
    # 3 served + 2 raised + 1 warm-up: the records of the hour, as the Compile & cache health page counts them.
    assert storm[col.RECOMPILES] == 6
    assert specs.get_column(col.RECOMPILES).sum() == 6
    assert storm["request_ids"] == ["ok-0", "ok-1", "ok-2", "raised-0", "raised-1"]
    assert sum(storm["top_reason_counts"]) == 6
    # What requests triggered (their rows' counts): the overview's request-side figure.
    assert overview.get_column(col.RECOMPILES).sum() == 3
    # One fewer record is below the floor: the count is of records, not of requests.
    assert recompile_storms(store, StormParams(**window, min_recompiles=7)).is_empty()
