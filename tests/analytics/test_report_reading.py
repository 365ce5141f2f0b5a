"""The weekly report as a lead reads it on a Monday: the changes' signs and units, a week after an empty one, the
week so far and the command of the last whole week, bundle ids as every table shows them."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from inferensics.analytics import LocalRunner, build_weekly_report
from inferensics.analytics.report import render_weekly_markdown
from inferensics.analytics.report.weekly import summary_lines
from inferensics.analytics.weekly import WeeklyReport, parse_week
from inferensics.cli.app import app
from inferensics.schema import columns as col
from inferensics.schema.events import CompileEvent, RequestEvent
from inferensics.schema.store import Store


@pytest.fixture(scope="module")
def weekly(fleet_store: Store) -> WeeklyReport:
    return build_weekly_report(LocalRunner(fleet_store), "2026-W10")


def _section(markdown: str, title: str) -> str:
    return markdown.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_week_over_week_changes_carry_their_sign_and_ratios_change_in_points(weekly: WeeklyReport) -> None:
    """A rise read ``0.5 %`` beside the weeks' own percentages, and a hit ratio that went from 48.3 % to 30.4 % read
    ``-37.0 %`` (its relative change), which reads as 37 points lost. A change now carries its sign, and a ratio's
    change is the difference in percentage points."""
    section = _section(render_weekly_markdown(weekly), "Week over week")
    assert "| qwen | requests | 1,029 | 1,024 | +0.5 % |" in section
    assert "| llama | requests | 988 | 1,018 | -2.9 % |" in section
    assert "| llama | cache_hit_ratio | 30.4 % | 48.3 % | -17.9 pp |" in section
    assert "| qwen | recompile_rate | 9.4 % | 7.6 % | +1.8 pp |" in section
    assert "in percentage points (pp)" in section
    # The data keeps the relative change; only its text changed.
    row = weekly.week_over_week.filter((pl.col(col.MODEL) == "llama") & (pl.col("metric") == "cache_hit_ratio"))
    assert row.item(0, "change") == pytest.approx(0.304 / 0.483 - 1, abs=0.01)


def test_cache_growth_shows_bundle_ids_as_every_table_does(weekly: WeeklyReport) -> None:
    """The Bundle misses table cut bundle ids to 12 digits while Cache growth showed the whole 64-digit digest of the
    same bundle; both now show 12."""
    digest = "d566b031f73bb59c88f36888f3fa965c13693f244005121a16f72368af4a0dce"
    growth = weekly.cache_growth.with_columns(pl.lit(digest).alias(col.BUNDLE_ID))
    section = _section(render_weekly_markdown(replace(weekly, cache_growth=growth)), "Cache growth")
    assert f"| {digest[:12]} |" in section
    assert digest not in section
    assert "Bundle ids show their first 12 digits." in section


def _seed_this_week(store: Store, at: datetime) -> None:
    store.insert_events(
        [
            RequestEvent(request_id=f"r{i}", ts=at, host="h", model="m", hw_pool="p", traffic_class="t",
                         outcome="compile" if i == 0 else "hit", compile_ms=3000.0 if i == 0 else 0.0)
            for i in range(4)
        ]
    )  # fmt: skip
    store.insert_events(
        [CompileEvent(ts=at, host="h", model="m", hw_pool="p", request_id="r0", graph_key="g", entire_frame_s=3.0)]
    )


def test_a_week_after_an_empty_one_has_nothing_to_compare(store: Store) -> None:
    """A store that started this week showed a week-over-week table of 24 rows whose every last week and change
    read "–", under "Read the changes with care: last week has requests in 0 h only". It now says in one sentence
    that there is nothing to compare, naming last week's span."""
    now = datetime.now(UTC).replace(microsecond=0)
    week = f"{now.isocalendar()[0]}-W{now.isocalendar()[1]:02d}"
    _seed_this_week(store, max(now - timedelta(minutes=5), parse_week(week)))
    report = build_weekly_report(LocalRunner(store), week, now)
    section = _section(render_weekly_markdown(report), "Week over week")
    monday = parse_week(week) - timedelta(days=7)
    assert section.strip() == (
        f"Nothing to compare: last week ({monday:%Y-%m-%d} 00:00 to {now - timedelta(days=7):%Y-%m-%d %H:%M} UTC, "
        "the same span of it) holds no request and no compile, recompile, failed-compile or bundle-miss record in "
        "this store. This week's figures are in the table above."
    )
    assert "| model | metric |" not in section
    assert "Read the changes with care" not in section


def test_the_week_so_far_says_how_much_of_it_and_names_the_last_whole_week(
    store: Store, store_dsn: str, tmp_path: Path
) -> None:
    """On a Monday morning the default report is a few hours of the new week, which only the title's "the week so
    far" said. The summary now opens with how much of the week it covers and the command of the last whole week,
    which runs as printed (with the report's store); a whole week has no such line."""
    now = datetime(2026, 12, 7, 9, 35, tzinfo=UTC)  # a Monday, 9 h 35 min into 2026-W50
    _seed_this_week(store, now - timedelta(minutes=5))
    report = build_weekly_report(LocalRunner(store), "2026-W50", now)
    first = summary_lines(report)[0]
    assert first == (
        "This is the week so far: 9 h 35 min of its 168 h. The last whole week is 2026-W49: `inferensics report "
        "weekly --week 2026-W49`, with the --dsn, --data-dir or --service this report was made with."
    )
    assert "- This is the week so far: 9 h 35 min" in render_weekly_markdown(report)
    later = build_weekly_report(LocalRunner(store), "2026-W50", now + timedelta(days=2, hours=1))
    assert summary_lines(later)[0].startswith("This is the week so far: 2 d 10 h 35 min of its 168 h.")
    whole = build_weekly_report(LocalRunner(store), "2026-W49", now)
    assert not any(line.startswith("This is the week so far") for line in summary_lines(whole))

    command = first.split("`")[1].split()
    assert command[:2] == ["inferensics", "report"]
    ran = CliRunner().invoke(app, [*command[1:], "--dsn", store_dsn, "--out", str(tmp_path)])
    assert ran.exit_code == 0, ran.output
    assert (tmp_path / "weekly-2026-W49.md").read_text().startswith("# Weekly recompilation and cache report 2026-W49")
