"""The storm rule's range and floor edges: a range from 1970, a range starting mid-hour, one cold compile.

A range from 1970 once built a dense hour grid of every model × pool over 500,000 hours (the collector was
OOM-killed on one read-token query); a range starting at 09:30 counted its 09:00 hour whole; an hour with one
recompile and one slow cold compile was a storm by its compile seconds.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import polars as pl
from polars.testing import assert_frame_equal

from inferensics.analytics import StormParams, recompile_storms, slow_compiles
from inferensics.analytics.storms import _hours  # pyright: ignore[reportPrivateUsage]
from inferensics.schema import columns as col
from inferensics.schema.events import CompileEvent, RecompileEvent, RequestEvent
from inferensics.schema.store import Store
from tests.analytics.fleet import STORM_HOUR, W10, Fleet
from tests.seeding import stop_ttl

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
WEEK = dict(start=W10, end=W10 + timedelta(days=7))


def _hours_with_data(fleet: Fleet, start: datetime, end: datetime) -> int:
    """Model × pool × hour groups of ``[start, end)`` holding a request, a recompile or a compile."""
    frames = [fleet.requests, fleet.recompiles, fleet.compiles]
    keys = pl.concat([f.select(col.MODEL, col.HW_POOL, col.TS) for f in frames])
    inside = keys.filter((pl.col(col.TS) >= start) & (pl.col(col.TS) < end))
    return inside.select(col.MODEL, col.HW_POOL, pl.col(col.TS).dt.truncate("1h")).unique().height


def test_a_range_from_1970_finds_the_storms_of_a_two_day_range_and_builds_only_hours_with_data(
    fleet_store: Store, fleet: Fleet
) -> None:
    end = W10 + timedelta(days=7)
    since_1970 = StormParams(start=EPOCH, end=end)
    two_days = StormParams(start=STORM_HOUR - timedelta(days=1), end=STORM_HOUR + timedelta(days=1))

    got = recompile_storms(fleet_store, since_1970)

    assert got.height == 1
    assert_frame_equal(got, recompile_storms(fleet_store, two_days))
    assert_frame_equal(slow_compiles(fleet_store, since_1970), slow_compiles(fleet_store, StormParams(**WEEK)))
    # One row per model × pool × hour with data: a dense grid from 1970 would hold 2 pools × 493,000 hours a model.
    hours = _hours(fleet_store, since_1970)
    assert hours is not None
    assert hours.height == _hours_with_data(fleet, EPOCH, end)
    assert hours.height < 5_000


def test_a_range_starting_mid_hour_counts_only_its_part_of_the_first_hour(fleet_store: Store, fleet: Fleet) -> None:
    start = STORM_HOUR + timedelta(minutes=30)
    params = StormParams(start=start, end=STORM_HOUR + timedelta(hours=2), min_recompiles=2)
    storm_pool = (pl.col(col.MODEL) == "qwen") & (pl.col(col.HW_POOL) == "h200-a")
    inside = fleet.recompiles.filter(
        storm_pool & (pl.col(col.TS) >= start) & (pl.col(col.TS) < STORM_HOUR + timedelta(hours=1))
    )
    whole_hour = fleet.recompiles.filter(storm_pool & (pl.col(col.TS).dt.truncate("1h") == STORM_HOUR))
    assert 2 <= inside.height < whole_hour.height  # the seeded storm spans the hour's both halves

    got = recompile_storms(fleet_store, params).filter(storm_pool)

    assert got.height == 1
    row = got.row(0, named=True)
    assert row["bucket"] == STORM_HOUR  # listed under its hour's start
    assert row[col.RECOMPILES] == inside.height
    assert sum(row["top_reason_counts"]) == inside.height
    inside_ids = set(inside.get_column(col.REQUEST_ID).to_list())
    assert row["request_ids"] == sorted(inside_ids)[:10]  # no request from before the range
    paid = fleet.requests.filter(
        storm_pool & (pl.col(col.TS) >= start) & (pl.col(col.TS) < STORM_HOUR + timedelta(hours=1))
    )
    assert row[col.REQUESTS] == paid.height


HOUR = datetime(2026, 3, 4, 10, tzinfo=UTC)
WHERE = dict(host="h1", model="big", hw_pool="p")


def _cold_start(store: Store, recompiles: int) -> None:
    """A large model's cold start: one 93 s first compile, then ``recompiles`` recompiling requests of 2 s."""
    stop_ttl(store)
    requests = [
        RequestEvent(request_id="cold", ts=HOUR, traffic_class="t", outcome="compile", compile_ms=93_000.0, **WHERE)
    ]
    records: list[RecompileEvent] = []
    compiles = [CompileEvent(ts=HOUR, request_id="cold", graph_key="gk-0", entire_frame_s=93.0, **WHERE)]
    for i in range(recompiles):
        rid, ts = f"r-{i}", HOUR + timedelta(minutes=10 + i)
        requests.append(
            RequestEvent(
                request_id=rid, ts=ts, traffic_class="t", outcome="recompile", recompiles=1, compile_ms=2000.0, **WHERE
            )
        )
        records.append(RecompileEvent(ts=ts, request_id=rid, reason="tensor 'x' size mismatch at index 0", **WHERE))
        compiles.append(
            CompileEvent(
                ts=ts, request_id=rid, graph_key=f"gk-{i + 1}", entire_frame_s=2.0, trigger="recompile", **WHERE
            )
        )
    store.insert_events(requests)
    if records:
        store.insert_events(records)
    store.insert_events(compiles)


def test_one_recompile_beside_a_cold_compile_is_no_storm(store: Store) -> None:
    _cold_start(store, recompiles=1)
    window = dict(start=HOUR - timedelta(hours=1), end=HOUR + timedelta(hours=1))

    assert recompile_storms(store, StormParams(**window)).is_empty()


def test_the_recompile_floor_binds_the_compile_seconds_condition_too(store: Store) -> None:
    _cold_start(store, recompiles=10)
    window = dict(start=HOUR - timedelta(hours=1), end=HOUR + timedelta(hours=1))

    storms = recompile_storms(store, StormParams(**window, factor=3.0))

    assert storms.height == 1
    assert storms.row(0, named=True)["trigger"] == "both"
    # The floor is part of the compile-seconds condition: 10 recompiles under a floor of 11 make no storm.
    assert recompile_storms(store, StormParams(**window, min_recompiles=11)).is_empty()


def test_the_rule_text_names_the_recompile_floor_of_the_compile_seconds_condition() -> None:
    rule = StormParams(start=HOUR, end=HOUR + timedelta(hours=1))
    assert "or they reach 10 and its compile seconds reach max(60" in rule.describe()
    assert "or recompiles ≥ 10 and compile seconds ≥ max(60" in rule.thresholds()
