"""The request list (``request_list``, ``request_kinds``): which requests failed, how, newest first."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import polars as pl
import pytest

from inferensics.analytics import LocalRunner, UnknownFilterValue
from inferensics.analytics.request_list import RequestListParams
from inferensics.schema import columns as col
from inferensics.schema.store import Store
from tests.analytics.failing_requests import END, FAILING_NEWEST_FIRST, T, failing_requests
from tests.analytics.fleet import T0, Fleet
from tests.seeding import seed

WINDOW = {"start": T, "end": END}


@pytest.fixture
def seeded(store: Store) -> LocalRunner:
    seed(store, events=failing_requests())
    return LocalRunner(store)


def _rows(frame: pl.DataFrame) -> list[tuple[Any, ...]]:
    return list(frame.select(col.REQUEST_ID, col.MODEL, col.HW_POOL, "kind", "detail").iter_rows())


def test_failing_requests_newest_first_with_their_kind_and_detail(seeded: LocalRunner) -> None:
    got = seeded.query("request_list", **WINDOW, model="m", failing=True)
    assert _rows(got) == FAILING_NEWEST_FIRST
    assert got.columns == [
        col.TS,
        col.REQUEST_ID,
        col.MODEL,
        col.HW_POOL,
        col.HOST,
        col.TRAFFIC_CLASS,
        "kind",
        "detail",
    ]
    assert got.get_column(col.TS).to_list() == sorted(got.get_column(col.TS).to_list(), reverse=True)
    assert got.filter(pl.col(col.REQUEST_ID) == "r-nan").get_column(col.HOST).to_list() == ["h2"]
    kinds = seeded.query("request_kinds", **WINDOW, model="m", failing=True)
    assert list(kinds.iter_rows()) == [("error", 3), ("non-finite output", 2), ("eager fallback", 2)]


def test_the_limit_keeps_the_newest_and_the_counts_cover_the_whole_slice(seeded: LocalRunner) -> None:
    got = seeded.query("request_list", **WINDOW, model="m", failing=True, limit=2)
    assert _rows(got) == FAILING_NEWEST_FIRST[:2]
    kinds = seeded.query("request_kinds", **WINDOW, model="m", failing=True)
    assert int(kinds.get_column("requests").sum()) == len(FAILING_NEWEST_FIRST)


def test_without_failing_every_request_is_listed_ok_included(seeded: LocalRunner) -> None:
    got = seeded.query("request_list", **WINDOW)
    ids = got.get_column(col.REQUEST_ID).to_list()
    assert ids == [
        "r-ok-2",
        "r-fallback-no-reason",
        "r-other-model",
        *[r[0] for r in FAILING_NEWEST_FIRST[1:]],
        "r-ok-1",
    ]
    assert got.filter(pl.col("kind") == "ok").get_column("detail").to_list() == ["", ""]
    kinds = seeded.query("request_kinds", **WINDOW)
    assert list(kinds.iter_rows()) == [("error", 4), ("non-finite output", 2), ("eager fallback", 2), ("ok", 2)]


def test_filters_and_range_narrow_the_list(seeded: LocalRunner) -> None:
    pool = seeded.query("request_list", **WINDOW, model="m", hw_pool="p2", failing=True)
    assert pool.get_column(col.REQUEST_ID).to_list() == ["r-inf-and-fallback", "r-nan"]
    wider = seeded.query("request_list", start=T - timedelta(hours=1), end=END, model="m", failing=True)
    assert wider.get_column(col.REQUEST_ID).to_list()[-1] == "r-early-error"
    none = seeded.query("request_list", start=END, end=END + timedelta(hours=1), model="m", failing=True)
    assert none.is_empty()
    assert seeded.query("request_kinds", start=END, end=END + timedelta(hours=1), failing=True).is_empty()


def test_an_unknown_model_names_the_known_ones(seeded: LocalRunner) -> None:
    with pytest.raises(UnknownFilterValue, match="unknown model 'mm'"):
        seeded.query("request_list", **WINDOW, model="mm", failing=True)


@pytest.mark.parametrize("limit", [0, -1, 10_001])
def test_a_limit_out_of_range_is_refused(limit: int) -> None:
    with pytest.raises(ValueError, match="limit"):
        RequestListParams(**WINDOW, limit=limit)


def test_on_the_seeded_fleet_counts_and_order_equal_polars(fleet_store: Store, fleet: Fleet) -> None:
    """The fleet's requests, counted and ordered from its own frames."""
    start, end = T0, T0 + timedelta(days=14)
    runner = LocalRunner(fleet_store)
    r = fleet.requests.filter(pl.col(col.MODEL) == "llama")
    kind = (
        pl.when(pl.col(col.STATUS) == "error").then(pl.lit("error"))
        .when((pl.col(col.FP_NAN) + pl.col(col.FP_INF)) > 0).then(pl.lit("non-finite output"))
        .when(pl.col(col.OUTCOME) == "fallback").then(pl.lit("eager fallback"))
        .otherwise(pl.lit("ok"))
    )  # fmt: skip
    failing = r.with_columns(kind.alias("kind")).filter(pl.col("kind") != "ok")
    expected = failing.group_by("kind").len()
    want = {k: n for k, n in expected.iter_rows()}
    got = runner.query("request_kinds", start=start, end=end, model="llama", failing=True)
    assert dict(got.iter_rows()) == want
    assert sum(want.values()) > 50  # the list below is cut by its limit
    listed = runner.query("request_list", start=start, end=end, model="llama", failing=True)
    newest = failing.sort([col.TS, col.REQUEST_ID, col.HOST], descending=[True, False, False]).head(50)
    assert listed.get_column(col.REQUEST_ID).to_list() == newest.get_column(col.REQUEST_ID).to_list()
    assert listed.get_column("kind").to_list() == newest.get_column("kind").to_list()
