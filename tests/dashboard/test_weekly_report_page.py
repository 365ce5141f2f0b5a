"""The weekly report page: no report yet, then one produced through the service and shown."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from inferensics.dashboard._internal.settings import REPORT_DIR_STATE_KEY
from tests.dashboard.apptest import assert_clean, open_page
from tests.dashboard.conftest import SeededService

PAGE = "views/weekly_report.py"
pytestmark = pytest.mark.slow


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
    assert sorted(p.name for p in folder.iterdir()) == [f"weekly-{week}.html", f"weekly-{week}.md"]
    assert at.selectbox(key="weekly.report").value == f"weekly-{week}.html"

    monday = (seeded.facts.now - timedelta(days=weekday - 1)).replace(hour=0, minute=0)
    in_week = [r for r in seeded.facts.requests if monday <= r.ts < monday + timedelta(days=7)]
    summary = next(m.value for m in at.markdown if m.value.startswith("# Weekly recompilation and cache report"))
    assert week in summary
    assert f"- Requests: {len(in_week):,} " in summary
    assert f"- Recompiles: {sum(r.recompiles for r in in_week):,} " in summary
    assert len(at.get("iframe")) == 1  # the self-contained HTML page with its charts

    # A new session shows the latest report without producing one.
    again = open_page(seeded, PAGE, **{REPORT_DIR_STATE_KEY: str(folder)})
    assert again.selectbox(key="weekly.report").value == f"weekly-{week}.html"
    assert not [i for i in again.info if "No weekly report" in i.value]
