"""The two recompile counts, defined once in :mod:`inferensics.analytics.recompile_counts`, read the same wherever
they are shown: the storm view, the Compile & cache health page's queries, the overview's and the weekly report.

The store holds what makes the two differ: recompiles whose compile failed (a record each, their requests count
none), a warm-up recompile (a record, no request), a request that recompiled two frames (two of each: one request
of outcome ``recompile``) and a recompile-limit hit (neither).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import polars as pl
import pytest

from inferensics.analytics import LocalRunner, SliceParams, build_weekly_report, recompile_records, request_recompiles
from inferensics.analytics.recompile_counts import RECOMPILE_LIMIT
from inferensics.analytics.report.weekly import summary_lines
from inferensics.schema import columns as col
from inferensics.schema.events import CompileEvent, RecompileEvent, RequestEvent
from inferensics.schema.store import Store
from tests.seeding import seed

HOUR = datetime(2026, 3, 4, 10, tzinfo=UTC)  # in 2026-W10
WEEK, NOW = "2026-W10", datetime(2026, 3, 9, tzinfo=UTC)
WINDOW = {"start": HOUR, "end": HOUR + timedelta(hours=1)}
BUNDLE = "b" * 64
RECORDS = {"p": 8, "q": 1}
"""Recompile records per pool: 3 served + 2 of one request + 2 failed + 1 warm-up in p; 1 warm-up in q."""
REQUESTS = {"p": 5, "q": 0}
"""Request recompiles per pool: 3 served + 2 of one request (4 requests of outcome recompile)."""


def _events() -> list[RequestEvent | RecompileEvent | CompileEvent]:
    out: list[RequestEvent | RecompileEvent | CompileEvent] = []

    def request(rid: str, minute: int, pool: str = "p", **kw: object) -> None:
        ts = HOUR + timedelta(minutes=minute)
        out.append(
            RequestEvent(
                request_id=rid, ts=ts, host="h", model="m", hw_pool=pool, traffic_class="t", bundle_id=BUNDLE, **kw
            )
        )

    def record(rid: str, minute: int, pool: str = "p", **kw: object) -> None:
        ts = HOUR + timedelta(minutes=minute, seconds=1)
        where = {"request_id": rid, "host": "h", "model": "m", "hw_pool": pool}
        out.append(RecompileEvent(ts=ts, reason=f"size {minute}", **where, **kw))
        if not kw:  # its compile (a limit hit compiled nothing); the failed ones' failed
            failed = rid.startswith("raised")
            out.append(CompileEvent(ts=ts, graph_key=f"gk-{len(out)}", outcome="failed" if failed else "ok", **where))

    for i in range(3):  # recompiled and served
        request(f"ok-{i}", i, outcome="recompile", recompiles=1)
        record(f"ok-{i}", i)
    request("two", 5, outcome="recompile", recompiles=2)  # two frames recompiled: two of each, one request
    record("two", 5)
    record("two", 5)
    for i in range(2):  # the recompile's compile failed: the request raised, its row counts none
        request(f"raised-{i}", 10 + i, status="error", outcome="error", fallback_reason="compile_error")
        record(f"raised-{i}", 10 + i)
    record("", 20)  # warm-up, outside any request
    record("", 21, pool="q")
    request("q-hit", 22, pool="q", outcome="hit")
    # At the recompile limit: no recompile at all, in neither count.
    request("limit", 30, outcome="fallback", fallback_reason=RECOMPILE_LIMIT)
    record("limit", 30, attrs={col.OUTCOME: RECOMPILE_LIMIT})
    return out


@pytest.fixture
def runner(store: Store) -> LocalRunner:
    seed(store, events=_events())
    return LocalRunner(store)


def _by_pool(frame: pl.DataFrame, column: str = col.RECOMPILES) -> dict[str, int]:
    sums = frame.group_by(col.HW_POOL).agg(pl.col(column).sum())
    return {pool: int(n) for pool, n in sums.iter_rows() if n}


def _of(counts: dict[str, int]) -> dict[str, int]:
    return {pool: n for pool, n in counts.items() if n}


def test_the_definitions_count_what_their_docstrings_say(runner: LocalRunner) -> None:
    params = SliceParams(**WINDOW)
    assert _by_pool(recompile_records(runner.client, params, params.start, params.end)) == RECORDS
    assert _by_pool(request_recompiles(runner.client, params, params.start, params.end)) == _of(REQUESTS)
    hourly = recompile_records(runner.client, params, params.start, params.end, unit="hour")
    assert hourly.get_column(col.BUCKET).unique().to_list() == [HOUR]


def test_every_view_of_recompile_records_reads_the_same_numbers(runner: LocalRunner) -> None:
    # The storm view (Overview's highlights, the weekly report's storms).
    assert _by_pool(runner.query("recompile_storms", **WINDOW, min_recompiles=1)) == RECORDS
    # The Compile & cache health page: headline and Specializations table, Recompiles chart, reasons table.
    assert _by_pool(runner.query("specializations", **WINDOW)) == RECORDS
    assert _by_pool(runner.query("recompile_timeseries", **WINDOW, unit="hour")) == RECORDS
    assert _by_pool(runner.query("recompile_reasons", **WINDOW)) == RECORDS
    # The weekly report: per model and pool, week over week, and its summary sentence.
    report = build_weekly_report(runner, WEEK, now=NOW)
    assert _by_pool(report.by_model_pool, "recompile_records") == RECORDS
    wow = report.week_over_week.filter(pl.col("metric") == "recompile_records")
    assert wow.get_column("this_week").sum() == sum(RECORDS.values())
    assert any(f"recompile records: {sum(RECORDS.values())} " in line for line in summary_lines(report))


def test_every_view_of_request_recompiles_reads_the_same_numbers(runner: LocalRunner) -> None:
    requests = _of(REQUESTS)
    # The Overview's headline and trend.
    assert _by_pool(runner.query("fleet_overview", **WINDOW)) == requests
    assert _by_pool(runner.query("fleet_timeseries", **WINDOW, by="hw_pool").rename({"group": col.HW_POOL})) == requests
    # Under a bundle filter (recompile records carry no bundle): the storm view and the Compile & cache health
    # page's headline (the fleet totals of the bundle).
    assert _by_pool(runner.query("recompile_storms", **WINDOW, bundle=BUNDLE, min_recompiles=1)) == requests
    assert _by_pool(runner.query("fleet_overview", **WINDOW, bundle=BUNDLE)) == requests
    # The weekly report: per model and pool, week over week, and its summary sentence.
    report = build_weekly_report(runner, WEEK, now=NOW)
    assert _by_pool(report.by_model_pool, "request_recompiles") == requests
    wow = report.week_over_week.filter(pl.col("metric") == "request_recompiles")
    assert wow.get_column("this_week").sum() == sum(REQUESTS.values())
    assert f"Recompiles requests triggered: {sum(REQUESTS.values())} (none last week)." in summary_lines(report)


def test_a_storm_under_a_bundle_filter_names_the_reasons_and_requests_of_the_bundle(
    store: Store, runner: LocalRunner
) -> None:
    """Recompile records carry no bundle: the storm's reasons and requests are the records of the bundle's
    requests (the warm-up's and other bundles' left out). It raised UnsupportedFilter for the records' query."""
    other = RequestEvent(
        request_id="other", ts=HOUR, host="h", model="m", hw_pool="p", traffic_class="t", bundle_id="c" * 64,
        outcome="recompile", recompiles=1,
    )  # fmt: skip
    seed(store, events=[other, RecompileEvent(ts=HOUR, request_id="other", host="h", model="m", hw_pool="p")])
    storms = runner.query("recompile_storms", **WINDOW, bundle=BUNDLE, min_recompiles=1)
    assert storms.height == 1
    storm = storms.row(0, named=True)
    assert storm[col.RECOMPILES] == REQUESTS["p"]
    assert storm["request_ids"] == ["ok-0", "ok-1", "ok-2", "raised-0", "raised-1", "two"]
    assert sum(storm["top_reason_counts"]) == 7  # the records of those requests, the failed recompiles' too
