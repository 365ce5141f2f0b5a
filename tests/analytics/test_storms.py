"""Recompile storms, new graph keys and specializations against Polars/Python over the same rows."""

from __future__ import annotations

import statistics
from datetime import UTC, datetime, timedelta

import polars as pl
import pytest

from inferensics.analytics import (
    SliceParams,
    StormParams,
    UnknownFilterValue,
    new_graph_keys,
    recompile_storms,
    specializations,
)
from inferensics.schema import columns as col
from inferensics.schema.store import Store
from tests.analytics.fleet import STORM_HOUR, W10, Fleet

WEEK = dict(start=W10, end=W10 + timedelta(days=7))


def expected_storms(fleet: Fleet, p: StormParams) -> set[tuple[datetime, str, str]]:
    """The storm rule written out plainly: per model × pool and hour, the recompile records (inside requests or
    not) and the compile seconds requests paid plus those of no request, against the median of the preceding
    hours."""
    by_hour = pl.col(col.TS).dt.truncate("1h").alias("h")
    paid = fleet.requests.select(
        col.MODEL,
        col.HW_POOL,
        by_hour,
        pl.lit(0).alias("r"),
        (pl.col(col.COMPILE_MS).cast(pl.Float64) / 1000).alias("s"),
    )
    no_request = pl.col(col.REQUEST_ID).fill_null("") == ""
    unpaid_r = fleet.recompiles.select(col.MODEL, col.HW_POOL, by_hour, pl.lit(1).alias("r"))
    unpaid_s = fleet.compiles.filter(no_request).select(
        col.MODEL, col.HW_POOL, by_hour, pl.col(col.ENTIRE_FRAME_S).cast(pl.Float64).fill_null(0.0).alias("s")
    )
    hourly = (
        pl.concat([paid, unpaid_r, unpaid_s], how="diagonal_relaxed")
        .group_by(col.MODEL, col.HW_POOL, "h")
        .agg(pl.col("r").fill_null(0).sum(), pl.col("s").fill_null(0.0).sum())
    )
    table = {(m, hp, h): (r, s) for m, hp, h, r, s in hourly.select(col.MODEL, col.HW_POOL, "h", "r", "s").iter_rows()}
    pairs = {(m, hp) for m, hp, _ in table}
    out = set()
    hour = p.start
    while hour < p.end:
        for m, hp in pairs:
            r, s = table.get((m, hp, hour), (0, 0.0))
            before = [table.get((m, hp, hour - timedelta(hours=k)), (0, 0.0)) for k in range(1, p.baseline_hours + 1)]
            base_r = statistics.median(b[0] for b in before)
            base_s = statistics.median(b[1] for b in before)
            by_seconds = r >= p.min_recompiles and s >= max(p.min_compile_seconds, p.factor * base_s)
            if r >= max(p.min_recompiles, p.factor * base_r) or by_seconds:  # compile seconds alone: no storm
                out.add((hour, m, hp))
        hour += timedelta(hours=1)
    return out


@pytest.mark.parametrize(
    "knobs",
    [{}, {"min_recompiles": 3, "min_compile_seconds": 15.0, "baseline_hours": 6}, {"factor": 1.0, "min_recompiles": 2}],
)
def test_storms_follow_the_rule(fleet_store: Store, fleet: Fleet, knobs: dict[str, float]) -> None:
    params = StormParams(**WEEK, **knobs)
    got = recompile_storms(fleet_store, params)
    want = expected_storms(fleet, params)
    assert {(b, m, hp) for b, m, hp in got.select("bucket", col.MODEL, col.HW_POOL).iter_rows()} == want
    assert got.get_column("bucket").is_sorted(descending=True)


def test_storm_lists_reasons_and_requests(fleet_store: Store, fleet: Fleet) -> None:
    got = recompile_storms(fleet_store, StormParams(**WEEK))
    assert got.height == 1
    row = got.row(0, named=True)
    assert (row["bucket"], row[col.MODEL], row[col.HW_POOL], row["trigger"]) == (STORM_HOUR, "qwen", "h200-a", "both")
    assert row["baseline_recompiles"] == 0.0
    rec = fleet.recompiles.filter(
        (pl.col(col.TS).dt.truncate("1h") == STORM_HOUR)
        & (pl.col(col.MODEL) == "qwen")
        & (pl.col(col.HW_POOL) == "h200-a")
    )
    counts = rec.group_by(col.REASON).len().sort(["len", col.REASON], descending=[True, False])
    assert row["top_reasons"] == counts.get_column(col.REASON).head(3).to_list()
    assert row["top_reason_counts"] == counts.get_column("len").head(3).to_list()
    assert row["request_ids"] == sorted(rec.get_column(col.REQUEST_ID).unique().to_list())[:10]


def test_storms_empty_range_and_unknown_pool(fleet_store: Store) -> None:
    assert recompile_storms(
        fleet_store, StormParams(start=datetime(2025, 1, 1, tzinfo=UTC), end=datetime(2025, 1, 2, tzinfo=UTC))
    ).is_empty()
    with pytest.raises(UnknownFilterValue, match="unknown hw_pool 'h100'"):
        recompile_storms(fleet_store, StormParams(**WEEK, hw_pool="h100"))


def _first_seen(fleet: Fleet) -> pl.DataFrame:
    return (
        fleet.compiles.filter((pl.col(col.GRAPH_KEY) != "") & (pl.col(col.TS) < WEEK["end"]))
        .group_by(col.MODEL, col.HW_POOL, col.GRAPH_KEY)
        .agg(pl.col(col.TS).min().alias("first_seen"), (pl.col(col.TS) >= WEEK["start"]).sum().alias("in_range"))
    )


def test_new_graph_keys(fleet_store: Store, fleet: Fleet) -> None:
    got = new_graph_keys(fleet_store, SliceParams(**WEEK))
    want = _first_seen(fleet).filter(pl.col("first_seen") >= WEEK["start"])
    assert sorted(got.select(col.HW_POOL, col.GRAPH_KEY).iter_rows()) == sorted(
        want.select(col.HW_POOL, col.GRAPH_KEY).iter_rows()
    )
    assert {"gk-mistral-new-0", "gk-mistral-new-1", "gk-mistral-new-2"} <= set(got.get_column(col.GRAPH_KEY))
    assert got.get_column("first_seen").is_sorted(descending=True)


def test_specializations(fleet_store: Store, fleet: Fleet) -> None:
    got = specializations(fleet_store, SliceParams(**WEEK))
    seen = _first_seen(fleet)
    want = (
        seen.group_by(col.MODEL, col.HW_POOL)
        .agg(
            (pl.col("in_range") > 0).sum().cast(pl.UInt64).alias("active_graph_keys"),
            (pl.col("first_seen") >= WEEK["start"]).sum().cast(pl.UInt64).alias("new_graph_keys"),
            pl.len().cast(pl.UInt64).alias("total_graph_keys"),
        )
        .filter(pl.col("active_graph_keys") > 0)
        .sort(col.MODEL, col.HW_POOL)
    )
    assert got.drop("growth", "compiles", "compile_seconds", col.RECOMPILES).to_dicts() == want.to_dicts()
    recompiled = (
        fleet.recompiles.filter((pl.col(col.TS) >= WEEK["start"]) & (pl.col(col.TS) < WEEK["end"]))
        .group_by(col.MODEL, col.HW_POOL)
        .len()
    )
    assert dict(
        got.select(pl.concat_str(col.MODEL, col.HW_POOL), col.RECOMPILES).filter(pl.col(col.RECOMPILES) > 0).iter_rows()
    ) == dict(recompiled.select(pl.concat_str(col.MODEL, col.HW_POOL), "len").iter_rows())
    in_range = fleet.compiles.filter((pl.col(col.TS) >= WEEK["start"]) & (pl.col(col.TS) < WEEK["end"]))
    compiled = in_range.group_by(col.MODEL, col.HW_POOL).agg(
        pl.len().alias("compiles"), pl.col(col.ENTIRE_FRAME_S).cast(pl.Float64).sum().alias("compile_seconds")
    )
    by_pool = {(m, hp): (n, sec) for m, hp, n, sec in compiled.iter_rows()}
    assert {(m, hp) for m, hp in got.select(col.MODEL, col.HW_POOL).iter_rows()} == set(by_pool)
    for m, hp, n, sec in got.select(col.MODEL, col.HW_POOL, "compiles", "compile_seconds").iter_rows():
        assert n == by_pool[(m, hp)][0]
        assert sec == pytest.approx(by_pool[(m, hp)][1], rel=1e-5)  # Float32 column, summed by the engine
    mistral_b = got.filter((pl.col(col.MODEL) == "mistral") & (pl.col(col.HW_POOL) == "h200-b")).row(0, named=True)
    assert mistral_b["growth"] == pytest.approx(
        mistral_b["new_graph_keys"] / (mistral_b["total_graph_keys"] - mistral_b["new_graph_keys"])
    )
