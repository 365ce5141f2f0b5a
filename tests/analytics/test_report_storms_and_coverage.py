"""The weekly report's storm table is ranked by severity, and its changes say when last week holds little data.

A fleet's report listed its storm hours by time, 20 rows then "128 more rows not shown", so its two genuine
storms were rows 11 to 13 or not shown at all; and it read "Requests: 750,505 (+5544.6% vs last week)" against
a last week whose store held 3 hours of data, without saying so.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import polars as pl
import pytest

from inferensics.analytics import LocalRunner, build_weekly_report
from inferensics.analytics.report import render_weekly_markdown
from inferensics.analytics.report.weekly import summary_lines
from inferensics.analytics.weekly import WeeklyReport
from inferensics.schema import columns as col
from inferensics.schema.events import RequestEvent
from inferensics.schema.store import Store
from tests.analytics.fleet import W10
from tests.seeding import stop_ttl


@pytest.fixture(scope="module")
def weekly(fleet_store: Store) -> WeeklyReport:
    return build_weekly_report(LocalRunner(fleet_store), "2026-W10")


def _storm(hour: int, model: str, recompiles: int, baseline: float) -> dict[str, object]:
    return {
        "bucket": W10 + timedelta(hours=hour),
        col.MODEL: model,
        col.HW_POOL: "p",
        col.REQUESTS: recompiles,
        col.RECOMPILES: recompiles,
        col.COMPILE_SECONDS: 2.0 * recompiles,
        "baseline_recompiles": baseline,
        "baseline_compile_seconds": 0.0,
        "trigger": "recompiles",
        "top_reasons": ["tensor 'x' size mismatch at index 0"],
        "top_reason_counts": [recompiles],
        "request_ids": [],
    }


def test_the_storm_table_puts_the_worst_storm_first(weekly: WeeklyReport) -> None:
    # Newest first, as recompile_storms gives them: the worst (47 over a baseline of 2) is the oldest.
    rows = [_storm(30, "newest", 12, 1.0), _storm(20, "middle", 30, 10.0), _storm(10, "worst", 47, 2.0)]
    report = replace(weekly, storms=pl.DataFrame(rows, schema=weekly.storms.schema))

    markdown = render_weekly_markdown(report)

    table = markdown.split("\n## Recompile storms\n", 1)[1].split("\n## ", 1)[0]
    order = [m for line in table.splitlines() for m in ("worst", "middle", "newest") if f"| {m} |" in line]
    assert order == ["worst", "middle", "newest"]
    header = next(line for line in table.splitlines() if line.startswith("|"))
    assert "| over_baseline |" in header
    assert "most severe first: by over_baseline (recompiles minus their baseline)" in table
    assert "Worst recompile storm: 47 recompiles against a baseline of 2 in worst @ p, 2026-03-02 10:00 UTC." in (
        summary_lines(report)
    )


def test_a_change_against_a_last_week_with_few_hours_of_data_says_so(store: Store) -> None:
    stop_ttl(store)
    where = dict(host="h", model="m", hw_pool="p", traffic_class="t")
    this_week = [RequestEvent(request_id=f"t{h}", ts=W10 + timedelta(hours=h), **where) for h in range(48)]
    # The store started on last week's Sunday evening: three hours of data.
    sunday = W10 - timedelta(hours=3)
    last_week = [RequestEvent(request_id=f"l{h}", ts=sunday + timedelta(hours=h), **where) for h in range(3)]
    store.insert_events([*this_week, *last_week])

    report = build_weekly_report(LocalRunner(store), "2026-W10", now=datetime(2026, 3, 20, tzinfo=UTC))

    lines = summary_lines(report)
    assert "Requests: 48 (+1500.0% vs last week; last week has requests in 3 h only, this week in 48 h)." in lines
    assert (report.hours_with_requests, report.last_hours_with_requests) == (48, 3)
    week_over_week = render_weekly_markdown(report).split("\n## Week over week\n", 1)[1].split("\n## ", 1)[0]
    assert "Read the changes with care: last week has requests in 3 h only, this week in 48 h." in week_over_week


def test_a_last_week_with_as_many_hours_of_data_has_no_note(weekly: WeeklyReport) -> None:
    assert weekly.last_hours_with_requests >= weekly.hours_with_requests / 2
    assert not any("h only" in line for line in summary_lines(weekly))
