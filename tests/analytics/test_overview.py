"""Fleet overview, time series and fallback reasons against Polars over the same rows."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from inferensics.analytics import (
    AnalyticsError,
    SliceParams,
    UnknownFilterValue,
    UnsupportedFilter,
    fallback_reasons,
    fleet_overview,
    fleet_timeseries,
    graph_breaks,
)
from inferensics.analytics._requests import READ_MINUTE_ROLLUP, Piece, plan_pieces
from inferensics.analytics.filters import Filters, check_filter_values
from inferensics.schema import columns as col
from inferensics.schema.events import FP_COMPARABLE, FP_FAILED, FP_NONE, FP_OK, FP_UNSAMPLED, RequestEvent
from inferensics.schema.rollups import latency_code, latency_decode
from inferensics.schema.store import Store
from tests.analytics.fleet import W10, Fleet
from tests.seeding import stop_ttl

DIMS = [col.MODEL, col.HW_POOL, col.TRAFFIC_CLASS]
WEEK = SliceParams(start=W10, end=W10 + timedelta(days=7))


def _in(frame: pl.DataFrame, start: datetime, end: datetime) -> pl.DataFrame:
    return frame.filter((pl.col(col.TS) >= start) & (pl.col(col.TS) < end))


def expected_overview(requests: pl.DataFrame, seconds: float) -> pl.DataFrame:
    """The overview's sums and rates computed directly from request rows."""
    compiled = pl.col(col.OUTCOME).is_in(["compile", "recompile"])
    return (
        requests.group_by(DIMS)
        .agg(
            pl.len().cast(pl.UInt64).alias(col.REQUESTS),
            (pl.col(col.STATUS) == "error").sum().cast(pl.UInt64).alias(col.ERRORS),
            (pl.col(col.OUTCOME) == "fallback").sum().cast(pl.UInt64).alias(col.FALLBACKS),
            pl.col(col.RECOMPILES).cast(pl.UInt64).sum().alias(col.RECOMPILES),
            compiled.sum().cast(pl.UInt64).alias(col.COMPILES),
            (pl.col(col.COMPILE_MS).cast(pl.Float64) / 1000).sum().alias(col.COMPILE_SECONDS),
            (pl.col(col.CACHE_STATUS) == "hit").sum().cast(pl.UInt64).alias(col.CACHE_HITS),
            pl.col(col.CACHE_STATUS).is_in(["miss", "mixed"]).sum().cast(pl.UInt64).alias(col.CACHE_MISSES),
            ((pl.col(col.FP_NAN) + pl.col(col.FP_INF)) > 0).sum().cast(pl.UInt64).alias(col.NONFINITE),
            pl.col(col.FP_STATUS).is_in(list(FP_COMPARABLE)).sum().cast(pl.UInt64).alias(col.FINGERPRINTED),
            pl.col(col.LATENCY_MS).cast(pl.Float64).sum().alias(col.LATENCY_SUM_MS),
        )
        .with_columns(
            (pl.col(col.REQUESTS) / seconds).alias("request_rate_per_s"),
            (pl.col(col.ERRORS) / pl.col(col.REQUESTS)).alias("error_rate"),
            (pl.col(col.FALLBACKS) / pl.col(col.REQUESTS)).alias("fallback_rate"),
            (pl.col(col.RECOMPILES) / pl.col(col.REQUESTS)).alias("recompile_rate"),
            pl.when(pl.col(col.FINGERPRINTED) > 0)
            .then(pl.col(col.NONFINITE) / pl.col(col.FINGERPRINTED))
            .alias("nonfinite_rate"),
            pl.when(pl.col(col.CACHE_HITS) + pl.col(col.CACHE_MISSES) > 0)
            .then(pl.col(col.CACHE_HITS) / (pl.col(col.CACHE_HITS) + pl.col(col.CACHE_MISSES)))
            .alias("cache_hit_ratio"),
        )
        .sort(DIMS)
    )


def assert_quantiles_bracketed(got: pl.DataFrame, rows: pl.DataFrame, keys: list[str]) -> None:
    """Each p50/p95/p99 decodes a latency code between the lower and the upper order statistic of the
    exact codes."""
    codes = rows.with_columns(pl.col(col.LATENCY_MS).map_elements(latency_code, return_dtype=pl.Int64).alias("code"))
    for row in got.iter_rows(named=True):
        mine = codes.filter(pl.all_horizontal(pl.col(k) == row[k] for k in keys)).get_column("code").sort()
        for q, name in ((0.5, "p50_ms"), (0.95, "p95_ms"), (0.99, "p99_ms")):
            lower = mine.quantile(q, "lower")
            assert lower is not None
            lo = latency_decode(lower)
            hi = latency_decode(mine[min(int(q * mine.len()), mine.len() - 1)])
            assert lo * (1 - 1e-6) <= row[name] <= hi * (1 + 1e-6), (row, name, lo, hi)


def test_fleet_overview_matches_polars(fleet_store: Store, fleet: Fleet) -> None:
    got = fleet_overview(fleet_store, WEEK)
    rows = _in(fleet.requests, WEEK.start, WEEK.end)
    want = expected_overview(rows, WEEK.seconds)
    assert_frame_equal(got.select(want.columns).sort(DIMS), want, check_exact=False, rel_tol=1e-9)
    assert got.get_column(col.REQUESTS).is_sorted(descending=True)
    assert_quantiles_bracketed(got, rows, DIMS)


def test_unaligned_range_read_in_pieces_agrees(fleet_store: Store, fleet: Fleet) -> None:
    params = SliceParams(start=W10 + timedelta(minutes=17, seconds=3), end=W10 + timedelta(days=2, seconds=11))
    got = fleet_overview(fleet_store, params)
    rows = _in(fleet.requests, params.start, params.end)
    want = expected_overview(rows, params.seconds)
    assert_frame_equal(got.select(want.columns).sort(DIMS), want, check_exact=False, rel_tol=1e-9)
    assert_quantiles_bracketed(got, rows, DIMS)


def test_host_filter_uses_raw_rows(fleet_store: Store, fleet: Fleet) -> None:
    params = SliceParams(start=WEEK.start, end=WEEK.end, host="host-a1", model="llama")
    got = fleet_overview(fleet_store, params)
    rows = _in(fleet.requests, params.start, params.end).filter(
        (pl.col(col.HOST) == "host-a1") & (pl.col(col.MODEL) == "llama")
    )
    want = expected_overview(rows, params.seconds)
    assert_frame_equal(got.select(want.columns).sort(DIMS), want, check_exact=False, rel_tol=1e-9)


def _daily_by_model(rows: pl.DataFrame) -> pl.DataFrame:
    """Requests and recompiles per UTC day and model, as ``fleet_timeseries(unit="day", by="model")`` gives them."""
    return (
        rows.group_by(
            pl.col(col.TS).dt.truncate("1d").dt.cast_time_unit("ms").alias("bucket"), pl.col(col.MODEL).alias("group")
        )
        .agg(pl.len().cast(pl.UInt64).alias(col.REQUESTS), pl.col(col.RECOMPILES).cast(pl.UInt64).sum())
        .sort("bucket", "group")
    )


def test_timeseries_by_model_daily(fleet_store: Store, fleet: Fleet) -> None:
    got = fleet_timeseries(fleet_store, WEEK, unit="day", by="model")
    want = _daily_by_model(_in(fleet.requests, WEEK.start, WEEK.end))
    assert_frame_equal(got.select(want.columns), want)
    assert got.get_column("request_rate_per_s").to_list() == pytest.approx((want[col.REQUESTS] / 86400).to_list())


@pytest.mark.parametrize("hours", [(13, 3 * 24 + 5), (1, 23)])
def test_daily_buckets_of_whole_hours_starting_after_midnight(
    fleet_store: Store, fleet: Fleet, hours: tuple[int, int]
) -> None:
    # Read from the hourly rollup, whose time column is named bucket, like the day alias: the alias must not be what
    # WHERE filters on (ClickHouse resolves aliases first), or each row is kept by its day's midnight.
    params = SliceParams(start=W10 + timedelta(hours=hours[0]), end=W10 + timedelta(hours=hours[1]))
    got = fleet_timeseries(fleet_store, params, unit="day", by="model")
    want = _daily_by_model(_in(fleet.requests, params.start, params.end))
    assert want.height
    assert_frame_equal(got.select(want.columns), want)


def test_timeseries_gives_the_buckets_asked_for_on_an_hour_aligned_range(fleet_store: Store, fleet: Fleet) -> None:
    params = SliceParams(start=W10 + timedelta(days=2), end=W10 + timedelta(days=2, hours=3))
    got = fleet_timeseries(fleet_store, params, unit="minute")
    rows = _in(fleet.requests, params.start, params.end)
    want = (
        rows.group_by(pl.col(col.TS).dt.truncate("1m").dt.cast_time_unit("ms").alias("bucket"))
        .agg(pl.len().cast(pl.UInt64).alias(col.REQUESTS))
        .sort("bucket")
    )
    assert want.height > 3  # more buckets than hours: minutes, not hours
    assert_frame_equal(got.select(want.columns), want)
    assert got.get_column("request_rate_per_s").to_list() == pytest.approx((want[col.REQUESTS] / 60).to_list())


def test_minute_buckets_over_more_than_a_week_are_refused(fleet_store: Store) -> None:
    with pytest.raises(AnalyticsError, match=r"minute buckets over 8 days.*unit='hour'"):
        fleet_timeseries(fleet_store, SliceParams(start=W10, end=W10 + timedelta(days=8)), unit="minute")


def test_plan_reads_each_part_of_a_range_from_the_coarsest_exact_source() -> None:
    now = datetime(2026, 11, 30, 14, 38, tzinfo=UTC)
    start, end = now - timedelta(days=30), now
    got = [(p.source.table, p.start, p.end) for p in plan_pieces(Filters(), start, end, now=now)]
    day, hour = datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 10, 31, 15, tzinfo=UTC)
    minutes = "requests_1m" if READ_MINUTE_ROLLUP else "requests"
    assert got == [
        (minutes, start, hour),  # 22 minutes before the first whole hour: within the per-minute rollup's reach
        ("requests_1h", hour, day),
        ("requests_1d", day, datetime(2026, 11, 30, tzinfo=UTC)),
        ("requests_1h", datetime(2026, 11, 30, tzinfo=UTC), datetime(2026, 11, 30, 14, tzinfo=UTC)),
        (minutes, datetime(2026, 11, 30, 14, tzinfo=UTC), now),
    ]
    # A range starting before the per-minute rollup's horizon (its retention less a day) reads raw rows there.
    old = now - timedelta(days=40)
    first = plan_pieces(Filters(), old, end, now=now)[0]
    assert (first.source.table, first.start, first.end) == ("requests", old, old.replace(minute=0) + timedelta(hours=1))
    seconds = now + timedelta(seconds=7)
    assert [(p.source.table, p.start, p.end) for p in plan_pieces(Filters(), now, seconds, now=now)] == [
        ("requests", now, seconds)
    ]
    # hour buckets never read the daily rollup; minute buckets no hourly or daily one
    hourly = plan_pieces(Filters(), start, end, unit="hour", now=now)
    assert {p.source.table for p in hourly} == {"requests_1h", minutes}
    six_hours = plan_pieces(Filters(), now - timedelta(hours=6, seconds=30), now, unit="minute", now=now)
    assert {p.source.table for p in six_hours} == {"requests", minutes}
    # a host filter: the rollups carry no host
    raw = plan_pieces(Filters(), now, seconds, now=now)[0].source
    assert plan_pieces(Filters(host="h1"), start, end, now=now) == [Piece(raw, start, end)]
    # the pieces tile the range
    pieces = plan_pieces(Filters(), start + timedelta(seconds=1), end, now=now)
    assert pieces[0].start == start + timedelta(seconds=1)
    assert pieces[-1].end == end
    assert all(a.end == b.start for a, b in itertools.pairwise(pieces))


def test_fallback_reasons(fleet_store: Store, fleet: Fleet) -> None:
    got = fallback_reasons(fleet_store, WEEK)
    rows = _in(fleet.requests, WEEK.start, WEEK.end)
    totals = rows.group_by(DIMS).agg(pl.len().cast(pl.UInt64).alias(col.REQUESTS))
    want = (
        rows.filter(pl.col(col.OUTCOME) == "fallback")
        .group_by([*DIMS, col.FALLBACK_REASON])
        .agg(pl.len().cast(pl.UInt64).alias("fallbacks"))
        .join(totals, on=DIMS)
        .with_columns((pl.col("fallbacks") / pl.col(col.REQUESTS)).alias("fallback_rate"))
    )
    keys = [*DIMS, col.FALLBACK_REASON]
    assert_frame_equal(got.sort(keys), want.select(got.columns).sort(keys))
    assert "" in got.get_column(col.FALLBACK_REASON).to_list()  # missing reasons are kept, not dropped


def test_empty_range_gives_empty_frames_with_columns(fleet_store: Store) -> None:
    params = SliceParams(start=datetime(2025, 1, 6, tzinfo=UTC), end=datetime(2025, 1, 13, tzinfo=UTC))
    got = fleet_overview(fleet_store, params)
    assert got.is_empty()
    assert {"p95_ms", "error_rate", "cache_hit_ratio", col.MODEL}.issubset(got.columns)
    assert fallback_reasons(fleet_store, params).is_empty()
    assert fleet_timeseries(fleet_store, params).is_empty()


def test_zero_length_range_is_empty(fleet_store: Store) -> None:
    assert fleet_overview(fleet_store, SliceParams(start=W10, end=W10)).is_empty()


def test_unknown_filter_value_is_an_error(fleet_store: Store) -> None:
    with pytest.raises(UnknownFilterValue, match=r"unknown model 'lama'.*'llama'") as info:
        fleet_overview(fleet_store, WEEK.model_copy(update={"model": "lama"}))
    assert info.value.known[:3] == ["llama", "mistral", "qwen"]
    with pytest.raises(UnknownFilterValue, match="unknown host"):
        fleet_overview(fleet_store, WEEK.model_copy(update={"host": "no-such-host"}))
    assert isinstance(info.value, ValueError)


def test_known_value_without_rows_in_range_is_empty_not_error(fleet_store: Store) -> None:
    params = SliceParams(start=datetime(2025, 1, 6, tzinfo=UTC), end=datetime(2025, 1, 13, tzinfo=UTC), model="qwen")
    assert fleet_overview(fleet_store, params).is_empty()


def test_filter_without_column_is_refused(fleet_store: Store) -> None:
    with pytest.raises(UnsupportedFilter, match="traffic_class filter does not apply to graph breaks"):
        graph_breaks(fleet_store, WEEK.model_copy(update={"traffic_class": "batch"}))


def test_end_before_start_is_rejected() -> None:
    with pytest.raises(ValueError, match="before start"):
        SliceParams(start=W10, end=W10 - timedelta(hours=1))


def test_single_row_with_missing_values(store: Store) -> None:
    ts = datetime(2026, 3, 3, 10, 30, tzinfo=UTC)
    stop_ttl(store)
    store.insert_events(
        [RequestEvent(request_id="only", ts=ts, host="h", model="m", hw_pool="p", traffic_class="t", latency_ms=12.5)]
    )
    got = fleet_overview(store, SliceParams(start=ts.replace(minute=0), end=ts.replace(minute=0) + timedelta(hours=1)))
    assert got.height == 1
    row = got.row(0, named=True)
    assert (row[col.REQUESTS], row[col.ERRORS], row["error_rate"]) == (1, 0, 0.0)
    assert row["cache_hit_ratio"] is None  # no compile: no lookups, no ratio
    for name in ("p50_ms", "p95_ms", "p99_ms"):
        assert row[name] == pytest.approx(latency_decode(latency_code(12.5)), rel=1e-6)
        assert row[name] == pytest.approx(12.5, rel=0.009)


def test_filter_value_missing_from_the_rollup_is_looked_up_in_raw_rows(store: Store) -> None:
    # The value is checked in the rollup first; a row the rollup never received (its view dropped here)
    # is still found in the raw table, and a value in neither is an error naming the known ones.
    ts = datetime(2026, 3, 3, 10, 30, tzinfo=UTC)
    stop_ttl(store)
    store.insert_events(
        [RequestEvent(request_id="a", ts=ts, host="h", model="in-both", hw_pool="p", traffic_class="t")]
    )
    store.client.command(f"DROP VIEW {store.database}.requests_1m_mv")
    store.insert_events(
        [RequestEvent(request_id="b", ts=ts, host="h", model="raw-only", hw_pool="p", traffic_class="t")]
    )
    tables = ("requests_1h", "requests")
    assert store.query_rows(f"SELECT DISTINCT model FROM {store.database}.requests_1h") == [("in-both",)]
    check_filter_values(store, Filters(model="raw-only", traffic_class="t"), tables)
    with pytest.raises(UnknownFilterValue, match=r"unknown model 'nowhere'.*'in-both', 'raw-only'"):
        check_filter_values(store, Filters(model="nowhere", traffic_class="t"), tables)


def test_nonfinite_rate_is_over_the_fingerprinted_requests(store: Store) -> None:
    # A CPU host fingerprints one output in 32: of 64 requests 2 were fingerprinted and 1 of those held NaN.
    # The rate is 1/2 whether read through the rollups (an hour-aligned range) or raw rows (a host filter),
    # never 1/64; a failed or absent fingerprint is no measurement either.
    ts = datetime(2026, 3, 3, 10, 30, tzinfo=UTC)
    stop_ttl(store)
    statuses = [FP_OK, FP_OK, FP_FAILED, FP_NONE, *[FP_UNSAMPLED] * 60]
    common = {"host": "cpu-1", "model": "m", "hw_pool": "cpu", "traffic_class": "t", "fp_rate": 1 / 32}
    store.insert_events(
        [
            RequestEvent(request_id=f"r{i}", ts=ts + timedelta(seconds=i), fp_status=status, fp_nan=int(i == 0) * 3,
                         **common)
            for i, status in enumerate(statuses)
        ]
    )  # fmt: skip
    hour = SliceParams(start=ts.replace(minute=0), end=ts.replace(minute=0) + timedelta(hours=1))
    assert [p.source.rollup is not None for p in plan_pieces(hour, hour.start, hour.end)] == [True]
    raw = SliceParams(start=hour.start, end=hour.end, host="cpu-1")
    assert [p.source.rollup for p in plan_pieces(raw, raw.start, raw.end)] == [None]
    for params in (hour, raw):
        (row,) = fleet_overview(store, params).iter_rows(named=True)
        assert (row[col.REQUESTS], row[col.FINGERPRINTED], row[col.NONFINITE]) == (64, 2, 1), params
        assert row["nonfinite_rate"] == 0.5, params
        (bucket,) = fleet_timeseries(store, params, unit="hour").iter_rows(named=True)
        assert (bucket[col.FINGERPRINTED], bucket["nonfinite_rate"]) == (2, 0.5), params
    # A slice none of whose outputs was fingerprinted has no rate, not a rate of 0.
    store.insert_events(
        [RequestEvent(request_id="u", ts=ts, host="cpu-2", model="m2", hw_pool="cpu", traffic_class="t",
                      fp_status=FP_UNSAMPLED, fp_rate=1 / 32)]
    )  # fmt: skip
    got = fleet_overview(store, SliceParams(start=hour.start, end=hour.end, model="m2"))
    assert got.select(col.REQUESTS, col.FINGERPRINTED, "nonfinite_rate").rows() == [(1, 0, None)]
