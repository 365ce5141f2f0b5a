"""The weekly report page: no report yet, then one produced through the service and shown; the storm rule's
floors as inputs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from inferensics.analytics.report import STORE_FILE, store_folder
from inferensics.analytics.storms import StormRule
from inferensics.analytics.weekly import current_week
from inferensics.dashboard._internal.filters import NOW_KEY
from inferensics.dashboard._internal.settings import REPORT_DIR_STATE_KEY
from inferensics.dashboard._internal.storm_rule import floor_key
from inferensics.dashboard.views.weekly_report import (
    FLOORS_PAGE,
    PRODUCE_KEY,
    REPORT_KEY,
    WEEK_KEY,
)
from inferensics.schema import CompileEvent, RequestEvent
from tests.dashboard.apptest import assert_clean, metric, open_page
from tests.dashboard.conftest import SeededService
from tests.dashboard.seed import MISTRAL, POOL_B, SeedFacts

PAGE = "views/weekly_report.py"
pytestmark = pytest.mark.slow


def summary_of(at: AppTest) -> str:
    """The shown report's Markdown summary."""
    return next(m.value for m in at.markdown if m.value.startswith("# Weekly recompilation and cache report"))


def test_weekly_report_is_produced_and_shown(seeded: SeededService, tmp_path: Path) -> None:
    folder = tmp_path / "reports"
    at = open_page(seeded, PAGE, **{REPORT_DIR_STATE_KEY: str(folder)})
    assert_clean(at)
    assert any("No weekly report" in i.value for i in at.info)

    year, number, weekday = seeded.facts.now.isocalendar()
    week = f"{year}-W{number:02d}"
    at.selectbox(key="weekly.week").select(week).run()
    at.button(key="weekly.produce").click().run()
    assert_clean(at)
    kept = store_folder(folder, seeded.service.dsn)
    assert [p.name for p in folder.iterdir()] == [kept.name]
    assert sorted(p.name for p in kept.iterdir()) == [STORE_FILE, f"weekly-{week}.html", f"weekly-{week}.md"]
    assert (kept / STORE_FILE).read_text() == f"{seeded.service.dsn}\n"
    assert at.selectbox(key="weekly.report").value == f"weekly-{week}.html"

    monday = (seeded.facts.now - timedelta(days=weekday - 1)).replace(hour=0, minute=0)
    in_week = [r for r in seeded.facts.requests if monday <= r.ts < monday + timedelta(days=7)]
    summary = summary_of(at)
    assert week in summary
    assert f"- Requests: {len(in_week):,} " in summary
    assert f"- Recompiles requests triggered: {sum(r.recompiles for r in in_week):,} " in summary
    assert len(at.get("iframe")) == 1  # the self-contained HTML page with its charts

    # A new session shows the latest report without producing one.
    again = open_page(seeded, PAGE, **{REPORT_DIR_STATE_KEY: str(folder)})
    assert again.selectbox(key="weekly.report").value == f"weekly-{week}.html"
    assert not [i for i in again.info if "No weekly report" in i.value]


def week_of(facts: SeedFacts) -> tuple[str, list[RequestEvent]]:
    """The ISO week of the seed's clock and the seeded requests in it."""
    year, number, weekday = facts.now.isocalendar()
    monday = (facts.now - timedelta(days=weekday - 1)).replace(hour=0, minute=0)
    return f"{year}-W{number:02d}", [r for r in facts.requests if monday <= r.ts < monday + timedelta(days=7)]


def produce_week(at: AppTest, week: str) -> None:
    """Pick ``week`` and press **Produce report**."""
    at.selectbox(key=WEEK_KEY).select(week).run()
    at.button(key=PRODUCE_KEY).click().run()
    assert_clean(at)


def test_two_stores_sharing_a_report_folder_each_show_their_own(
    seeded: SeededService, small_storm: SeededService, tmp_path: Path
) -> None:
    """Two services over two stores, their dashboards writing into one report folder (the default one, or one
    ``$INFERENSICS_REPORT_DIR``): both wrote ``weekly-<week>.html``, and the page over one store showed the report
    of the other. Reports are kept per store; the page names its store and lists that store's reports only."""
    folder = tmp_path / "reports"
    week, in_week = week_of(seeded.facts)
    if week_of(small_storm.facts)[0] != week:
        pytest.skip("the two seeds' clocks lie on either side of a week's start")
    stormless = len(week_of(small_storm.facts)[1])
    assert stormless != len(in_week)  # the two stores' reports differ in what they count

    at = open_page(seeded, PAGE, **{REPORT_DIR_STATE_KEY: str(folder)})
    produce_week(at, week)
    assert f"- Requests: {len(in_week):,} " in summary_of(at)

    other = open_page(small_storm, PAGE, **{REPORT_DIR_STATE_KEY: str(folder)})
    assert_clean(other)
    assert not [s for s in other.selectbox if s.key == REPORT_KEY], "another store's report is offered"
    assert any(seeded.service.dsn in str(c.value) for c in at.caption), [c.value for c in at.caption]
    (none,) = [str(i.value) for i in other.info if "No weekly report" in str(i.value)]
    assert small_storm.service.dsn in none
    produce_week(other, week)
    assert f"- Requests: {stormless:,} " in summary_of(other)
    assert other.selectbox(key=REPORT_KEY).options == [f"weekly-{week}.html"]

    # The first store's report is still its own.
    again = open_page(seeded, PAGE, **{REPORT_DIR_STATE_KEY: str(folder)})
    assert_clean(again)
    assert again.selectbox(key=REPORT_KEY).options == [f"weekly-{week}.html"]
    assert f"- Requests: {len(in_week):,} " in summary_of(again)


def test_the_weekly_reports_compile_seconds_are_the_compile_health_headlines(
    seeded: SeededService, tmp_path: Path
) -> None:
    """The report's compile seconds were only what requests paid, while the Compile & cache health page's
    "Compile seconds" counts every compile (the seed's warm-up compiles, which no request paid, too). The report
    now gives the week's seconds of every compile, the headline's figure, and beside them what requests paid in
    the serving path, each labelled."""
    year, number, weekday = seeded.facts.now.isocalendar()
    monday = (seeded.facts.now - timedelta(days=weekday - 1)).replace(hour=0, minute=0)
    compiled = [e for e in seeded.facts.others if isinstance(e, CompileEvent)]
    every = sum(e.entire_frame_s for e in compiled if monday <= e.ts < monday + timedelta(days=7))
    paid = sum(r.compile_ms for r in seeded.facts.requests if monday <= r.ts < monday + timedelta(days=7)) / 1000

    folder = tmp_path / "reports"
    at = open_page(seeded, PAGE, **{REPORT_DIR_STATE_KEY: str(folder)})
    at.selectbox(key=WEEK_KEY).select(f"{year}-W{number:02d}").run()
    at.button(key=PRODUCE_KEY).click().run()
    assert_clean(at)
    summary = summary_of(at)
    assert f"- Compile seconds, every compile: {every:,.1f} s, inside requests or not (" in summary
    assert f"- Compile seconds paid inside requests (the serving path): {paid:,.1f} s (" in summary
    assert "| model | hw_pool | compile_record_seconds | compile_seconds |" in summary

    # The page's default range, the last hour, holds every seeded compile; the week does too unless it began
    # within that hour.
    if all(monday <= e.ts for e in compiled):
        assert every > paid  # the warm-up compiles
        health = open_page(seeded, "views/compile_health.py")
        assert metric(health, "Compile seconds") == f"{every:,.1f} s"


def test_weekly_report_takes_the_storm_rule(small_storm: SeededService, tmp_path: Path) -> None:
    """A storm under the default floors: the inputs start at the rule's defaults and the report finds no storm;
    the recompile floor lowered to the storm's size (as the demo's printed command does) finds it, and the
    report states the rule with that floor. A floor the rule refuses is named and produces nothing."""
    storm = [r for r in small_storm.facts.requests if r.recompiles]
    default = StormRule()
    assert 0 < len(storm) < default.min_recompiles
    hour = storm[0].ts.replace(minute=0, second=0, microsecond=0)
    assert all(r.ts - hour < timedelta(hours=1) for r in storm)
    # The hour's compile seconds: what the storm's requests paid and the compiles of no request (warm-up).
    unpaid = sum(
        e.entire_frame_s
        for e in small_storm.facts.others
        if isinstance(e, CompileEvent)
        and not e.request_id
        and (e.model, e.hw_pool) == (MISTRAL, POOL_B)
        and hour <= e.ts < hour + timedelta(hours=1)
    )
    seconds = sum(r.compile_ms for r in storm) / 1000 + unpaid
    assert seconds < default.min_compile_seconds
    year, number, _ = hour.isocalendar()
    week = f"{year}-W{number:02d}"
    folder = tmp_path / "reports"
    at = open_page(small_storm, PAGE, **{REPORT_DIR_STATE_KEY: str(folder)})
    assert_clean(at)
    recompiles = at.number_input(key=floor_key(FLOORS_PAGE, "min_recompiles"))
    assert recompiles.value == default.min_recompiles
    assert recompiles.min == StormRule.model_json_schema()["properties"]["min_recompiles"]["minimum"]
    assert at.number_input(key=floor_key(FLOORS_PAGE, "min_compile_seconds")).value == default.min_compile_seconds

    at.selectbox(key=WEEK_KEY).select(week).run()
    at.button(key=PRODUCE_KEY).click().run()
    assert_clean(at)
    summary = summary_of(at)
    assert "Recompile storms: 0;" in summary
    assert default.describe() in summary

    at.number_input(key=floor_key(FLOORS_PAGE, "min_recompiles")).set_value(len(storm)).run()
    at.button(key=PRODUCE_KEY).click().run()
    assert_clean(at)
    summary = summary_of(at)
    assert "Recompile storms: 1;" in summary
    assert f"An hour is a storm when its recompiles reach max({len(storm)}, 3 × the median" in summary
    assert StormRule(min_recompiles=len(storm)).describe() in summary
    # recompiles, baseline_recompiles, over_baseline (the table's rank), compile_seconds, trigger
    row = (
        f"| {hour:%Y-%m-%d %H:%M} | {MISTRAL} | {POOL_B} | {len(storm)} | 0 | {len(storm)} | {seconds:g} | recompiles |"
    )
    assert row in summary

    written = (store_folder(folder, small_storm.service.dsn) / f"weekly-{week}.md").stat().st_mtime_ns
    at.number_input(key=floor_key(FLOORS_PAGE, "min_compile_seconds")).set_value(0.0).run()
    at.button(key=PRODUCE_KEY).click().run()
    assert_clean(at)
    assert [e.value for e in at.error] == [
        "Min compile seconds an hour: input should be greater than 0. Change it and press **Produce report**."
    ]
    assert (store_folder(folder, small_storm.service.dsn) / f"weekly-{week}.md").stat().st_mtime_ns == written


def test_the_week_so_far_ends_no_later_than_the_clock(seeded: SeededService, tmp_path: Path) -> None:
    """The page's "now" is the minute after the clock (so the last hour holds the newest events): a report of the
    week so far produced at 09:43 said "to 09:44 UTC", a minute that had not come. It now ends at the clock."""
    folder = tmp_path / "reports"
    at = open_page(seeded, PAGE, **{REPORT_DIR_STATE_KEY: str(folder)})
    at.session_state[NOW_KEY] = datetime.now(UTC) + timedelta(minutes=10)  # the page's "now", ahead of the clock
    at.run()
    week = current_week(datetime.now(UTC))
    produce_week(at, week)
    written = store_folder(folder, seeded.service.dsn) / f"weekly-{week}.md"
    produced = datetime.fromtimestamp(written.stat().st_mtime, UTC).replace(second=0, microsecond=0)
    title = written.read_text().splitlines()[0]
    end = datetime.strptime(title.split(" to ")[1].split(" UTC")[0], "%Y-%m-%d %H:%M").replace(tzinfo=UTC)
    assert end <= produced, title
