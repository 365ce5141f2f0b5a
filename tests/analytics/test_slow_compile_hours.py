"""An hour with a few recompiles and a slow cold compile: too few recompiles for a storm, so it is a slow compile
hour, listed with why, in the analytics list and in the weekly report.

Three hours of model ``m`` on pool ``p`` in ISO week 2026-W10, nothing compiled before them (baselines 0):

* 10:00, **few**: 3 recompiles (2 s each) and one 60 s cold compile of a new graph: 66 compile seconds. Before,
  it was in neither list: a storm needs 10 recompiles, and a slow compile hour needed none.
* 12:00, **cold**: one 65 s first compile, no recompile: a slow compile hour (as before).
* 14:00, **storm**: 12 recompiles (6 s each): 72 compile seconds, a storm by both conditions, not a slow hour.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from inferensics.analytics import LocalRunner, StormParams, build_weekly_report, recompile_storms, slow_compiles
from inferensics.analytics.report import render_weekly_json, render_weekly_markdown
from inferensics.schema import columns as col
from inferensics.schema.events import RecompileEvent, RequestEvent
from inferensics.schema.store import Store
from inferensics.schema.table import Event
from tests.seeding import scratch_store, seed

W10 = datetime(2026, 3, 2, tzinfo=UTC)
FEW, COLD, STORM = (W10 + timedelta(hours=h) for h in (10, 12, 14))
WEEK = dict(start=W10, end=W10 + timedelta(days=7))
FEW_WHY = "66.0 compile s reach max(60, 3 × baseline 0.0) = 60.0 s, with 3 recompiles: under the storm floor of 10"
COLD_WHY = "65.0 compile s reach max(60, 3 × baseline 0.0) = 60.0 s, without a recompile (first compiles)"


def _request(rid: str, at: datetime, **fields: object) -> RequestEvent:
    return RequestEvent(request_id=rid, ts=at, host="h", model="m", hw_pool="p", traffic_class="c", **fields)


def _recompiles(prefix: str, at: datetime, n: int, compile_ms: float) -> list[Event]:
    """``n`` requests that recompiled, a minute apart from ``at``, each with its recompile record."""
    events: list[Event] = []
    for i in range(n):
        rid, ts = f"{prefix}-{i}", at + timedelta(minutes=i)
        events.append(_request(rid, ts, outcome="recompile", recompiles=1, compile_ms=compile_ms))
        events.append(RecompileEvent(ts=ts, host="h", model="m", hw_pool="p", request_id=rid, reason=f"size {i}"))
    return events


@pytest.fixture(scope="module")
def hours(chdb_dir: Path) -> Iterator[Store]:
    with scratch_store(chdb_dir, "slow") as store:
        seed(
            store,
            events=[
                *_recompiles("few", FEW, 3, 2_000.0),
                _request("few-cold", FEW + timedelta(minutes=30), outcome="compile", compile_ms=60_000.0),
                _request("cold", COLD, outcome="compile", compile_ms=65_000.0),
                *_recompiles("storm", STORM, 12, 6_000.0),
            ],
        )
        yield store


def test_few_recompiles_and_a_slow_cold_compile_make_a_slow_compile_hour(hours: Store) -> None:
    params = StormParams(**WEEK)
    storms = recompile_storms(hours, params)
    assert storms.select("bucket", col.RECOMPILES, "trigger").rows() == [(STORM, 12, "both")]
    slow = slow_compiles(hours, params)
    assert slow.select("bucket", col.RECOMPILES, col.COMPILE_SECONDS, "why").rows() == [
        (COLD, 0, 65.0, COLD_WHY),
        (FEW, 3, 66.0, FEW_WHY),
    ]
    # Every hour over the compile-time threshold is in exactly one list.
    assert not set(slow.get_column("bucket")) & set(storms.get_column("bucket"))
    # With a floor of 3 the few recompiles are a storm, and no longer a slow hour.
    low = params.model_copy(update={"min_recompiles": 3})
    assert recompile_storms(hours, low).select("bucket", "trigger").rows() == [(STORM, "both"), (FEW, "both")]
    assert slow_compiles(hours, low).get_column("bucket").to_list() == [COLD]


def test_the_weekly_report_lists_slow_compile_hours_with_why(hours: Store) -> None:
    report = build_weekly_report(LocalRunner(hours), "2026-W10", now=W10 + timedelta(days=8))
    assert report.slow_compiles.select("bucket", "why").rows() == [(COLD, COLD_WHY), (FEW, FEW_WHY)]
    markdown = render_weekly_markdown(report)
    assert "Recompile storms: 1; slow compile hours: 2; new specializations: 0." in markdown
    assert f"Slowest compile hour: m @ p, 2026-03-02 10:00 UTC: {FEW_WHY}." in markdown
    section = markdown.split("## Slow compile hours\n", 1)[1].split("\n## ", 1)[0]
    assert report.storm_rule.describe_slow() in section
    assert FEW_WHY in section
    assert COLD_WHY in section
    assert "| bucket | model | hw_pool | recompiles | compile_seconds |" in section
    assert '"title": "Slow compile hours"' in render_weekly_json(report)
