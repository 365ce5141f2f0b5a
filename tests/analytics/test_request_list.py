"""The request list (``request_list``, ``request_kinds``): which requests failed, how, newest first."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

import polars as pl
import pytest

from inferensics.analytics import LocalRunner, UnknownFilterValue
from inferensics.analytics.request_list import RequestListParams
from inferensics.schema import columns as col
from inferensics.schema.events import ReplayResultEvent, RequestEvent
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
        "verdict",
        col.OUTCOME,
        col.LATENCY_MS,
        col.BUNDLE_ID,
        "inputs_captured",
        "ran_compiled",
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


def _verdict(request_id: str, attribution: str, minute: int, **fields: Any) -> ReplayResultEvent:
    return ReplayResultEvent(
        ts=END + timedelta(minutes=minute), replay_id=f"rp-{request_id}-{minute}", request_id=request_id,
        attribution=attribution, **fields,
    )  # fmt: skip


def _at(minute: int) -> datetime:
    return T + timedelta(minutes=minute)


LEGACY = "ab" * 32
"""The inputs digest the legacy verdict replayed: r-legacy's captured inputs (stored upper-case)."""
SHARED = [
    RequestEvent(request_id="r-shared", ts=_at(10), host="h1", model="m", hw_pool="p1", traffic_class="interactive"),
    RequestEvent(request_id="r-shared", ts=_at(11), host="h2", model="m", hw_pool="p2", traffic_class="interactive"),
    RequestEvent(
        request_id="r-legacy",
        ts=_at(12),
        host="h1",
        model="m",
        hw_pool="p1",
        traffic_class="interactive",
        capture_blob="AB" * 32,
    ),
    RequestEvent(
        request_id="r-legacy-other",
        ts=_at(13),
        host="h1",
        model="m",
        hw_pool="p1",
        traffic_class="interactive",
        capture_blob="cd" * 32,
    ),
]
"""Requests whose outputs looked fine (finite, no error, no fallback): two of one id, on two hosts."""
VERDICTS = [
    # the second r-shared's (its host and start): a fault, though another of the id is fine
    _verdict("r-shared", "decomposition", 1, op="aten.silu", fx_node="silu", source_file="model.py", source_line=26,
             request_host="h2", request_ts=_at(11)),
    _verdict("r-ok-1", "none", 2, request_host="h1", request_ts=_at(0)),  # replayed, no fault: not failing
    _verdict("r-error", "schedule", 3, request_host="h1", request_ts=_at(1)),  # failing already: its kind stays
    # stored before schema version 24 (no request host or start): told by the inputs it replayed
    _verdict("r-legacy", "lowering", 4, verdict_json=json.dumps({"evidence": {"captured_inputs": {"sha256": LEGACY}}})),
    _verdict("r-legacy-other", "lowering", 5, verdict_json='{"evidence": {"captured_inputs": {"sha256": "ee"}}}'),
    # a newer verdict of r-shared's second that found nothing: the fault one is still shown
    _verdict("r-shared", "none", 6, request_host="h2", request_ts=_at(11)),
]  # fmt: skip


def test_a_request_whose_replay_named_a_fault_is_failing_with_its_verdict(store: Store) -> None:
    """A wrong but finite output is failing once its replay verdict names a fault (attribution other than ``none``);
    the verdict is the request's when it names its host and start (or, stored before those were kept, its inputs),
    and is shown beside the request whatever its kind."""
    seed(store, events=[*failing_requests(), *SHARED, *VERDICTS])
    runner = LocalRunner(store)
    got = runner.query("request_list", **WINDOW, model="m", failing=True)
    rows = {(r[col.REQUEST_ID], r[col.HOST]): (r["kind"], r["detail"], r["verdict"]) for r in got.iter_rows(named=True)}
    assert rows[("r-shared", "h2")] == (
        "replayed fault", "decomposition · op aten.silu · node silu · model.py:26",
        "decomposition · op aten.silu · node silu · model.py:26",
    )  # fmt: skip
    assert rows[("r-legacy", "h1")] == ("replayed fault", "lowering", "lowering")
    assert rows[("r-error", "h1")] == ("error", "RuntimeError: CUDA error: an illegal memory access", "schedule")
    assert ("r-shared", "h1") not in rows  # the other request of the id: its verdict is not this one's
    assert ("r-legacy-other", "h1") not in rows  # replayed other inputs
    assert ("r-ok-1", "h1") not in rows  # replayed without a fault
    assert got.get_column(col.REQUEST_ID).to_list()[:2] == ["r-legacy", "r-shared"]  # newest first
    kinds = runner.query("request_kinds", **WINDOW, model="m", failing=True)
    assert list(kinds.iter_rows()) == [("error", 3), ("non-finite output", 2), ("eager fallback", 2),
                                       ("replayed fault", 2)]  # fmt: skip
    everything = runner.query("request_list", **WINDOW, model="m")
    ok = everything.filter(pl.col("kind") == "ok")
    assert dict(zip(ok.get_column(col.REQUEST_ID), ok.get_column("verdict"), strict=True)) == {
        "r-legacy-other": "", "r-shared": "", "r-ok-2": "", "r-ok-1": "none",
    }  # fmt: skip
    on_h2 = runner.query("request_list", **WINDOW, host="h2", failing=True)
    assert on_h2.get_column(col.REQUEST_ID).to_list() == ["r-shared", "r-nan"]


@pytest.mark.parametrize("name", ["model", "hw_pool", "traffic_class", "host", "bundle"])
def test_a_filter_value_that_is_not_utf8_is_refused(name: str, seeded: LocalRunner) -> None:
    """Lone surrogates (an argument's bytes that are not UTF-8) reached chDB, which failed with a cast error."""
    with pytest.raises(ValueError, match=f"{name}\n  Value error, not UTF-8 text"):
        seeded.query("request_list", **WINDOW, **{name: "h\udcff"})


def test_the_outcome_filter_takes_every_outcome_and_narrows_list_and_counts(seeded: LocalRunner) -> None:
    """newuser finding 7: the list could not be narrowed to the requests that recompiled."""
    from typing import get_args

    from inferensics.analytics.request_list import Outcome
    from inferensics.schema.events import OUTCOMES

    assert get_args(Outcome) == OUTCOMES
    got = seeded.query("request_list", **WINDOW, outcome=["recompile", "fallback"])
    assert got.get_column(col.REQUEST_ID).to_list() == ["r-ok-2", "r-fallback-no-reason", "r-inf-and-fallback",
                                                        "r-fallback"]  # fmt: skip
    assert got.get_column(col.OUTCOME).to_list() == ["recompile", "fallback", "fallback", "fallback"]
    kinds = seeded.query("request_kinds", **WINDOW, outcome=["recompile"])
    assert list(kinds.iter_rows()) == [("ok", 1)]
