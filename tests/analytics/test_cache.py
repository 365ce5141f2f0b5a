"""Cache health, trend, reasons and growth against Polars over the same rows."""

from __future__ import annotations

from datetime import timedelta

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from inferensics.analytics import (
    SliceParams,
    UnknownFilterValue,
    UnsupportedFilter,
    cache_growth,
    cache_health,
    cache_reasons,
    cache_trend,
)
from inferensics.schema import columns as col
from inferensics.schema.store import Store
from tests.analytics.fleet import W10, Fleet

WEEK = SliceParams(start=W10, end=W10 + timedelta(days=7))
UNALIGNED = SliceParams(start=W10 + timedelta(minutes=30), end=W10 + timedelta(days=3, minutes=5))
MIDDAY = SliceParams(start=W10 + timedelta(hours=13), end=W10 + timedelta(days=3, hours=5))
"""Whole hours (read from the hourly rollup) starting after midnight: the dashboard's range at the top of an hour.
Before, the daily series of such a range were empty: the day alias shadowed the rollup's bucket column in WHERE,
so rows were filtered by their day's midnight (seen in CI at 04:00 UTC)."""


def _in(frame: pl.DataFrame, p: SliceParams) -> pl.DataFrame:
    rows = frame.filter((pl.col(col.TS) >= p.start) & (pl.col(col.TS) < p.end))
    return rows.filter(pl.col(col.HOST) == p.host) if p.host else rows


def _n(result: str) -> pl.Expr:
    return (pl.col(col.RESULT) == result).sum().cast(pl.UInt64)


@pytest.mark.parametrize("params", [WEEK, UNALIGNED, WEEK.model_copy(update={"host": "host-b1"})])
def test_cache_health(fleet_store: Store, fleet: Fleet, params: SliceParams) -> None:
    rows = _in(fleet.cache_events, params)
    keys = [col.MODEL, col.HW_POOL, col.CACHE]
    per = rows.group_by(keys).agg(
        _n("hit").alias("hits"),
        _n("miss").alias("misses"),
        _n("bypass").alias("bypasses"),
        pl.len().cast(pl.UInt64).alias("lookups"),
        (pl.col(col.TIME_SAVED_MS).cast(pl.Float64).filter(pl.col(col.RESULT) == "hit").sum() / 1000).alias(
            "time_saved_s"
        ),
    )
    # Saving per hit learned per model × cache over all pools; no hit → unknown (null) cost.
    saving = {
        (m, c): (s / h if h else None)
        for m, c, s, h in per.group_by(col.MODEL, col.CACHE)
        .agg(pl.col("time_saved_s").sum(), pl.col("hits").sum())
        .iter_rows()
    }
    want = per.with_columns(
        (pl.col("hits") / pl.col("lookups")).alias("hit_ratio"),
        pl.struct(col.MODEL, col.CACHE, "misses")
        .map_elements(
            lambda r: (
                0.0
                if r["misses"] == 0
                else (
                    None
                    if saving[(r[col.MODEL], r[col.CACHE])] is None
                    else r["misses"] * saving[(r[col.MODEL], r[col.CACHE])]
                )
            ),
            return_dtype=pl.Float64,
        )
        .alias("cold_miss_cost_s"),
    ).sort(keys)
    got = cache_health(fleet_store, params)
    assert_frame_equal(got, want.select(got.columns), check_exact=False, rel_tol=1e-6)
    if params.host is None:
        llama_triton = got.filter((pl.col(col.MODEL) == "llama") & (pl.col(col.CACHE) == "triton"))
        assert llama_triton.get_column("cold_miss_cost_s").null_count() == llama_triton.height > 0


@pytest.mark.parametrize("params", [WEEK, MIDDAY, UNALIGNED])
def test_cache_trend(fleet_store: Store, fleet: Fleet, params: SliceParams) -> None:
    rows = _in(fleet.cache_events, params)
    assert rows.height
    want = (
        rows.group_by(pl.col(col.TS).dt.truncate("1d").dt.cast_time_unit("ms").alias("bucket"), col.CACHE)
        .agg(_n("hit").alias("hits"), pl.len().cast(pl.UInt64).alias("lookups"))
        .with_columns((pl.col("hits") / pl.col("lookups")).alias("hit_ratio"))
        .sort("bucket", col.CACHE)
    )
    got = cache_trend(fleet_store, params)
    assert_frame_equal(got.select(want.columns), want)


def test_cache_reasons(fleet_store: Store, fleet: Fleet) -> None:
    rows = _in(fleet.cache_events, WEEK).filter(pl.col(col.RESULT) != "hit")
    want = rows.group_by(col.CACHE, col.RESULT, col.REASON).agg(pl.len().cast(pl.UInt64).alias("lookups"))
    got = cache_reasons(fleet_store, WEEK)
    keys = [col.CACHE, col.RESULT, col.REASON]
    assert got.select(want.columns).sort(keys).to_dicts() == want.sort(keys).to_dicts()
    assert "" in got.get_column(col.REASON).to_list()  # a miss without a reason is reported as such


@pytest.mark.parametrize("params", [WEEK, MIDDAY, UNALIGNED])
def test_cache_growth(fleet_store: Store, fleet: Fleet, params: SliceParams) -> None:
    rows = _in(fleet.cache_events, params).filter(pl.col(col.RESULT) == "miss")
    assert rows.height
    keys = [col.BUNDLE_ID, col.HW_POOL]
    want = (
        rows.group_by(pl.col(col.TS).dt.truncate("1d").dt.cast_time_unit("ms").alias("bucket"), *keys)
        .agg(pl.len().cast(pl.UInt64).alias("entries"), pl.col(col.ENTRY_BYTES).sum().cast(pl.UInt64).alias("bytes"))
        .sort([*keys, "bucket"])
        .with_columns(pl.col("bytes").cum_sum().over(keys).alias("cumulative_bytes"))
        .sort(["bucket", *keys])
    )
    got = cache_growth(fleet_store, params)
    assert_frame_equal(got.select(want.columns), want)


def test_cache_errors_and_empty(fleet_store: Store, fleet: Fleet) -> None:
    with pytest.raises(UnknownFilterValue, match="unknown bundle"):
        cache_health(fleet_store, WEEK.model_copy(update={"bundle": "bundle-nope"}))
    # A bundle that serves requests but never looked a cache up is a value of the fleet: an empty answer.
    served = set(fleet.requests.get_column(col.BUNDLE_ID).unique()) - set(fleet.cache_events.get_column(col.BUNDLE_ID))
    assert "bundle-base" in served
    assert cache_health(fleet_store, WEEK.model_copy(update={"bundle": "bundle-base"})).is_empty()
    assert cache_reasons(fleet_store, WEEK.model_copy(update={"bundle": "bundle-base"})).is_empty()
    with pytest.raises(UnsupportedFilter):
        cache_health(fleet_store, WEEK.model_copy(update={"traffic_class": "batch"}))
    empty = WEEK.model_copy(update={"start": W10 - timedelta(days=300), "end": W10 - timedelta(days=299)})
    assert cache_health(fleet_store, empty).is_empty()
    assert cache_growth(fleet_store, empty).is_empty()


def test_cache_growth_leaves_unmeasured_bytes_empty(store: Store) -> None:
    """Only the host SDK measures what a miss wrote (an imported log does not say): bytes are the measured
    entries' sum, and empty where none was measured, not 0."""
    from inferensics.schema import CacheEvent

    def miss(pool: str, size: int) -> CacheEvent:
        return CacheEvent(ts=W10, host="h", model="m", hw_pool=pool, cache="fx_graph", result="miss", entry_bytes=size)

    store.insert_events([miss("imported", 0), miss("imported", 0), miss("mixed", 1000), miss("mixed", 0)])
    got = cache_growth(store, WEEK).sort(col.HW_POOL)
    assert got.select(col.HW_POOL, "entries", "bytes", "cumulative_bytes").rows() == [
        ("imported", 2, None, None),
        ("mixed", 2, 1000, 1000),
    ]
