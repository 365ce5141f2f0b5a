"""The weekly report names what went wrong, not only what compiled: failed compiles, eager fallbacks, bundle
misses, unnamed graph breaks by their reason, each recompile count by what it counts, and a JSON form.

One store holds a week like the ones a user found silent: an imported log's two ``BackendCompilerFailed``
compiles and two graph breaks of an older log (no registry id, no type, no user frame) at two frames, a
served model's eager fallbacks at the recompile limit, recompiles with one recompile-limit hit, and bundle
misses that differ from their bundle in shapes and a setting.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from inferensics.analytics import LocalRunner, build_weekly_report
from inferensics.analytics.report import render_weekly_markdown
from inferensics.analytics.report.weekly import summary_lines, title
from inferensics.analytics.storms import StormRule
from inferensics.analytics.weekly import WeeklyReport
from inferensics.cli.app import app
from inferensics.schema import columns as col
from inferensics.schema.events import (
    BundleMissEvent,
    CompileEvent,
    GraphBreakEvent,
    RecompileEvent,
    RequestEvent,
)
from inferensics.schema.store import Store

WEEK = "2026-W49"
MONDAY = datetime(2026, 11, 30, tzinfo=UTC)
AT = MONDAY + timedelta(days=6, hours=15)
NOW = MONDAY + timedelta(days=7, hours=1)  # the week is over: the report covers all of it
LOG = "/src/test_misc.py"
BUNDLE = "da75b8788edbb7248b394083a4acf3fa6ed113c069eb295a911f9eb982f7ca2e"


def _seed(store: Store) -> None:
    reason = "tensor 'tokens' size mismatch at index 1. expected 3, actual 4"
    requests = [
        RequestEvent(request_id=f"a{i}", ts=AT, host="h1", model="dec", hw_pool="cpu-a", traffic_class="agent",
                     outcome="fallback" if i < 5 else "hit", fallback_reason="recompile_limit" if i < 5 else "")
        for i in range(27)
    ]  # fmt: skip
    requests += [
        RequestEvent(request_id=f"r{i}", ts=AT, host="h1", model="dec", hw_pool="cpu-a", traffic_class="agent",
                     outcome="recompile", recompiles=1)
        for i in range(3)
    ]  # fmt: skip
    store.insert_events(requests)
    store.insert_events(
        [
            *(RecompileEvent(ts=AT, host="h1", model="dec", hw_pool="cpu-a", request_id=f"r{i}", reason=reason,
                             code_location="dec.py:10:fwd") for i in range(3)),
            RecompileEvent(ts=AT, host="h1", model="dec", hw_pool="cpu-a", request_id="a0", reason=reason,
                           code_location="dec.py:10:fwd", attrs={"outcome": "recompile_limit"}),
        ]
    )  # fmt: skip
    store.insert_events(
        [
            *(CompileEvent(ts=AT, host="h1", model="dec", hw_pool="cpu-a", request_id=f"r{i}", graph_key=f"g{i}",
                           code_location="dec.py:10:fwd", entire_frame_s=1.0, trigger="recompile") for i in range(3)),
            *(CompileEvent(ts=AT, host="log", graph_key="", code_location=f"{LOG}:9549:fn", outcome="failed",
                           fail_type="BackendCompilerFailed", source="trace",
                           fail_reason="backend='broken_backend' raised:\nRuntimeError: broken backend")
              for _ in range(2)),
        ]
    )  # fmt: skip
    store.insert_events(
        [
            GraphBreakEvent(ts=AT, host="log", code_location=f"{LOG}:{where}", source="trace",
                            reason="'skip function graph_break in file /src/torch/_dynamo/decorators.py'")
            for where in ("9549:fn", "9551:torch_dynamo_resume_in_fn_at_9551")
        ]
    )  # fmt: skip
    setting = "settings.compiler.cache_key_tag: None → 'providers:ecf35'"
    store.insert_events(
        [
            *(BundleMissEvent(ts=AT, bundle_id=BUNDLE, host="h1", hw_pool="cpu-a", model="dec", request_id=f"m{i}",
                              action="compiled", compile_s=0.5, reason="on_bundle_miss=compile",
                              factors=[f"accepted_shapes: inputs int64[s0,{i}] not qualified", setting])
              for i in range(3)),
            BundleMissEvent(ts=AT, bundle_id=BUNDLE, host="h2", hw_pool="cpu-b", model="llama", action="compiled",
                            factors=["code: a graph the bundle does not hold"], reason="on_bundle_miss=compile"),
        ]
    )  # fmt: skip


@pytest.fixture
def report(store: Store) -> WeeklyReport:
    _seed(store)
    return build_weekly_report(LocalRunner(store), WEEK, NOW)


def test_the_report_names_failed_compiles_fallbacks_and_bundle_misses(report: WeeklyReport) -> None:
    """Two failed compiles, five eager fallbacks (5 of one model's 30 agent requests on one pool) and four
    bundle misses: the report mentioned none of them, and headlined its cache hit ratio beside the misses."""
    lines = summary_lines(report)
    assert (
        "Failed compiles: 2 (none last week), inside requests or not (warm-up, imported TORCH_TRACE logs); top: "
        "BackendCompilerFailed \"backend='broken_backend' raised: RuntimeError: broken backend\" "
        "(2 in (no model) @ (no pool))." in lines
    )
    assert (
        "Eager fallbacks: 5 requests, 16.7% of requests (none last week); top: recompile_limit (5 of 30 agent "
        "requests, 16.7%, in dec @ cpu-a)." in lines
    )
    assert (
        "Bundle misses (graphs a host's bundle did not hold, whatever the compile cache served): 4 (none last week): "
        "4 compiled; what differed: accepted_shapes (3), settings.compiler.cache_key_tag (3), code (1)." in lines
    )
    markdown = render_weekly_markdown(report)
    failures = markdown.split("\n## Failed compiles\n", 1)[1].split("\n## ", 1)[0]
    assert (
        "| (none) | (none) | BackendCompilerFailed | 2 | 0 | backend='broken_backend' raised: RuntimeError:" in failures
    )
    fallbacks = markdown.split("\n## Eager fallbacks\n", 1)[1].split("\n## ", 1)[0]
    assert "| dec | cpu-a | agent | recompile_limit | 5 | 30 | 16.7 % |" in fallbacks
    misses = markdown.split("\n## Bundle misses\n", 1)[1].split("\n## ", 1)[0]
    assert (
        f"| {BUNDLE[:12]} | dec | cpu-a | compiled | 3 | 3 | 1.5 | accepted_shapes, "
        "settings.compiler.cache_key_tag | 3, 3 |" in misses
    )
    assert f"| {BUNDLE[:12]} | llama | cpu-b | compiled | 1 | 0 | 0 | code | 1 |" in misses

    wow = report.week_over_week.filter(pl.col(col.MODEL) == "")
    assert dict(zip(wow["metric"], wow["this_week"], strict=True)) == {
        "bundle_misses": 0.0, "compile_record_seconds": 0.0, "compile_records": 2.0, "failed_compiles": 2.0,
        "recompile_records": 0.0,
    }  # fmt: skip


def test_graph_breaks_that_name_no_id_or_type_are_told_by_their_reason(report: WeeklyReport, store: Store) -> None:
    """An older log's breaks carry neither registry id nor type: the report read "Top graph break: (no id)
    (no type) (2 events)" and ``graph_break_sites`` merged the breaks at two frames into one row named after
    the first."""
    lines = summary_lines(report)
    assert "Top graph break: 'skip function graph_break in file /src/torch/_dynamo/decorators.py' (2 events)." in lines
    section = render_weekly_markdown(report).split("\n## Graph breaks\n", 1)[1].split("\n## ", 1)[0]
    assert (
        "| (none) | (none) | 'skip function graph_break in file /src/torch/_dynamo/decorators.py' | 2 | 0 | "
        f"{LOG}:9549:fn, {LOG}:9551:torch_dynamo_resume_in_fn_at_9551 |" in section
    )
    sites = LocalRunner(store).query("graph_break_sites", start=report.start, end=report.end)
    assert sites.select(col.CODE_LOCATION, "events").rows() == [
        (f"{LOG}:9549:fn", 1),
        (f"{LOG}:9551:torch_dynamo_resume_in_fn_at_9551", 1),
    ]


def test_each_recompile_count_says_what_it_counts(report: WeeklyReport, store: Store) -> None:
    """The store holds 4 recompile rows, one a recompile-limit hit. The summary said "Recompiles: N" of the
    requests' count beside "3 recompile records", the reasons table gave recompiles 3 beside requests 4, and
    ``recompile_storms`` gave top_reason_counts [4] beside recompiles 3."""
    lines = summary_lines(report)
    assert "Recompiles requests triggered: 3 (none last week)." in lines
    assert not any(line.startswith("Recompiles:") for line in lines)
    records = next(line for line in lines if line.startswith("Compile records:"))
    assert records.startswith(
        "Compile records: 5 (none last week); recompile records: 3 (none last week), plus 1 guard failure at the "
        "recompile limit that compiled nothing (4 rows of the recompiles table);"
    )
    assert store.query_rows(f"SELECT count() FROM {store.database}.recompiles")[0][0] == 4
    section = render_weekly_markdown(report).split("\n## Top recompile reasons\n", 1)[1].split("\n## ", 1)[0]
    assert "| model | hw_pool | reason | recompiles | limit_hits | requests | variants |" in section
    assert "| dec | cpu-a | tensor 'tokens' size mismatch at index 1. expected N, actual N | 3 | 1 | 4 | 1 |" in section
    assert "limit_hits: guard failures at the recompile limit" in section

    rule = StormRule(min_recompiles=1, min_compile_seconds=1.0)
    storms = LocalRunner(store).query("recompile_storms", start=report.start, end=report.end, **rule.model_dump())
    assert storms.select(col.RECOMPILES, "top_reason_counts").rows() == [(3, [3])]


def test_a_quiet_last_week_reads_plainly_and_imported_fleets_get_week_over_week(report: WeeklyReport) -> None:
    """ "(new)" and "(no change)" said nothing of last week; week over week was only request figures, so a
    fleet that imports logs read ``_none_``."""
    lines = summary_lines(report)
    assert "Requests: 30 (none last week)." in lines
    empty = replace(report, week_over_week=report.week_over_week.clear())
    assert "Requests: 0 (none last week either)." in summary_lines(empty)
    assert not any("(new)" in line or "(no change)" in line for line in lines)

    def section_of(shown: WeeklyReport) -> str:
        return render_weekly_markdown(shown).split("\n## Week over week\n", 1)[1].split("\n## ", 1)[0]

    # Last week holds nothing at all: one sentence, not a table whose every change is empty.
    assert section_of(report).strip().startswith("Nothing to compare: last week (Monday 2026-11-23 to Sunday")
    # With anything last week, the record metrics have their rows, an imported fleet's too.
    wow = report.week_over_week.with_columns(
        pl.when(pl.col("metric") == "requests").then(pl.lit(1.0)).otherwise(pl.col("last_week")).alias("last_week")
    )
    section = section_of(replace(report, week_over_week=wow, last_hours_with_requests=1))
    assert "| (none) | failed_compiles | 2 | 0 | – |" in section
    assert "more rows not shown" not in section


def test_a_whole_week_names_its_last_day_and_the_json_holds_the_markdowns_figures(
    report: WeeklyReport, store: Store, chdb_dir: Path, tmp_path: Path
) -> None:
    """The title read "2026-11-30 to 2026-12-07 UTC" without saying the end is excluded; there was no JSON."""
    from inferensics.analytics.report import render_weekly_json  # new with this test

    assert title(report) == (
        f"Weekly recompilation and cache report {WEEK} (Monday 2026-11-30 to Sunday 2026-12-06 UTC, whole days)"
    )
    data = json.loads(render_weekly_json(report))
    assert data["start"] == "2026-11-30T00:00:00+00:00"
    assert (data["end"], data["end_excluded"], data["in_progress"]) == ("2026-12-07T00:00:00+00:00", True, False)
    assert data["summary"] == summary_lines(report)
    fallbacks = next(s for s in data["sections"] if s["title"] == "Eager fallbacks")
    assert fallbacks["tables"][0]["rows"] == [
        {"model": "dec", "hw_pool": "cpu-a", "traffic_class": "agent", "fallback_reason": "recompile_limit",
         "fallbacks": 5, "requests": 30, "fallback_rate": pytest.approx(5 / 30)}
    ]  # fmt: skip
    markdown = render_weekly_markdown(report)
    for section in data["sections"]:
        assert f"\n## {section['title']}\n" in markdown
        for table in section["tables"]:
            if table["rows"]:
                assert "| " + " | ".join(table["columns"]) + " |" in markdown

    dsn = f"chdb://{chdb_dir}?database={store.database}"
    result = CliRunner().invoke(
        app, ["report", "weekly", "--week", WEEK, "--format", "json", "--out", str(tmp_path), "--dsn", dsn]
    )
    assert result.exit_code == 0, result.output
    written = json.loads((tmp_path / f"weekly-{WEEK}.json").read_text())
    assert written["summary"][0] == "Requests: 30 (none last week)."
    assert not (tmp_path / f"weekly-{WEEK}.md").exists()
    bad = CliRunner().invoke(app, ["report", "weekly", "--format", "pdf", "--dsn", dsn])
    assert bad.exit_code == 2
    assert "pdf" in bad.output
