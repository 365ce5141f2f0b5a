"""Weekly report and canary page: snapshot-tested text and chart specs, the CLI, and a real browser."""

from __future__ import annotations

import functools
import io
import shutil
import typing
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from playwright.sync_api import ConsoleMessage, Request
from playwright.sync_api import Error as PlaywrightError
from typer.testing import CliRunner

from inferensics.analytics import AnalyticsError, CanaryParams, LocalRunner, build_weekly_report, canary_compare
from inferensics.analytics.report import (
    canary_charts,
    render_canary_markdown,
    render_canary_text,
    render_weekly_markdown,
    weekly_charts,
    write_canary_report,
    write_weekly_report,
)
from inferensics.analytics.report.weekly import summary_lines
from inferensics.analytics.storms import StormRule
from inferensics.analytics.weekly import WeeklyReport, last_full_week, parse_week
from inferensics.cli import report_commands
from inferensics.cli.app import app
from inferensics.schema import columns as col
from inferensics.schema.dsn import DATA_DIR_ENV, REPORT_DIR_ENV
from inferensics.schema.store import Store
from tests.analytics.fleet import BASELINE, CANDIDATE, W10
from tests.analytics.snapshot import assert_json_snapshot, assert_snapshot

CHROMIUM = "/usr/bin/chromium"
BROWSER_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture(scope="module")
def weekly(fleet_store: Store) -> WeeklyReport:
    return build_weekly_report(LocalRunner(fleet_store), "2026-W10")


@pytest.fixture(scope="module")
def canary_frame(fleet_store: Store) -> pl.DataFrame:
    return canary_compare(
        fleet_store,
        CanaryParams(model="llama", baseline=BASELINE, candidate=CANDIDATE, start=W10, end=W10 + timedelta(days=7)),
    ).to_frame()


def test_weeks() -> None:
    assert parse_week("2026-W01").isoformat() == "2025-12-29T00:00:00+00:00"
    assert last_full_week(W10 + timedelta(days=3)) == "2026-W09"
    with pytest.raises(ValueError, match="YYYY-Www"):
        parse_week("2026-10")


def test_a_week_that_has_not_started_is_refused() -> None:
    """A future week gave a report of zeros; the week in progress is the week so far."""
    now = W10 + timedelta(days=6, hours=23)  # Sunday night of 2026-W10
    assert parse_week("2026-W10", now=now) == W10
    assert parse_week("2026-W11", now=W10 + timedelta(days=7)) == W10 + timedelta(days=7)  # its first instant
    message = (
        "week 2026-W11 has not started yet (it starts on 2026-03-09; the current week is 2026-W10): "
        "give a week up to 2026-W10"
    )
    with pytest.raises(AnalyticsError) as refused:
        parse_week("2026-W11", now=now)
    assert str(refused.value) == message
    with pytest.raises(AnalyticsError) as built:
        build_weekly_report(_NoQueries(), "2026-W11", now)
    assert str(built.value) == message


class _NoQueries:
    """A runner that a refused report must never reach."""

    def query(self, name: str, **params: object) -> pl.DataFrame:
        raise AssertionError(f"queried {name} for a week that has not started")


def test_weekly_markdown_snapshot(weekly: WeeklyReport) -> None:
    assert_snapshot("weekly-2026-W10.md", render_weekly_markdown(weekly))


def test_weekly_chart_specs_snapshot(weekly: WeeklyReport) -> None:
    assert_json_snapshot("weekly-2026-W10.charts.json", [c.to_dict() for c in weekly_charts(weekly)])


def test_weekly_report_frames_agree_with_queries(weekly: WeeklyReport, fleet_store: Store) -> None:
    runner = LocalRunner(fleet_store)
    overview = runner.query("fleet_overview", start=weekly.start, end=weekly.end)
    assert int(weekly.by_model_pool.get_column("requests").sum()) == int(overview.get_column("requests").sum())
    requests = weekly.week_over_week.filter(pl.col("metric") == "requests")
    last = runner.query("fleet_overview", start=weekly.start - timedelta(days=7), end=weekly.start)
    assert requests.get_column("last_week").sum() == last.get_column("requests").sum()


def test_canary_text_and_markdown_snapshots(canary_frame: pl.DataFrame) -> None:
    assert_snapshot("canary-llama.txt", render_canary_text(canary_frame))
    assert_snapshot("canary-llama.md", render_canary_markdown(canary_frame, "llama: bundle-base → bundle-cand"))
    assert_json_snapshot("canary-llama.charts.json", [c.to_dict() for c in canary_charts(canary_frame)])


def _dsn(chdb_dir: Path, store: Store) -> str:
    return f"chdb://{chdb_dir}?database={store.database}"


def test_cli_report_weekly(fleet_store: Store, chdb_dir: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["report", "weekly", "--week", "2026-W10", "--out", str(tmp_path), "--dsn", _dsn(chdb_dir, fleet_store)]
    )
    assert result.exit_code == 0, result.output
    assert "Recompile storms: 1; slow compile hours: 0; new specializations: 3." in result.output
    md = (tmp_path / "weekly-2026-W10.md").read_text()
    assert md.startswith("# Weekly recompilation and cache report 2026-W10")
    assert (tmp_path / "weekly-2026-W10.html").stat().st_size > 500_000  # the Vega libraries are inlined
    bad = CliRunner().invoke(app, ["report", "weekly", "--week", "2026-W60", "--dsn", _dsn(chdb_dir, fleet_store)])
    assert bad.exit_code == 2
    assert "has no week 60" in bad.output


def test_cli_report_weekly_writes_where_the_dashboard_lists_reports(
    fleet_store: Store, chdb_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without --out the report goes to the folder the dashboard's Weekly report page lists
    ($INFERENSICS_REPORT_DIR, else reports/ beside the default store), in that folder the store's own
    (``store_folder``, as the page keeps them); it went to ./reports, so the report the demo's printed command made
    never showed on the page."""
    from inferensics.analytics.report import store_folder
    from inferensics.dashboard._internal.settings import current_settings
    from inferensics.schema.dsn import resolve_dsn

    monkeypatch.delenv(REPORT_DIR_ENV, raising=False)
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    argv = ["report", "weekly", "--week", "2026-W10", "--dsn", _dsn(chdb_dir, fleet_store)]
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 0, result.output
    listed = current_settings().report_dir
    assert listed == tmp_path / "xdg" / "inferensics" / "reports"
    own = str(resolve_dsn(_dsn(chdb_dir, fleet_store)))
    assert (store_folder(listed, own) / "weekly-2026-W10.md").is_file(), result.output
    assert not (tmp_path / "cwd" / "reports").exists()
    monkeypatch.setenv(REPORT_DIR_ENV, str(tmp_path / "team-reports"))
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 0, result.output
    assert current_settings().report_dir == tmp_path / "team-reports"
    assert (store_folder(tmp_path / "team-reports", own) / "weekly-2026-W10.html").is_file()


def test_cli_report_weekly_takes_the_storm_rule(fleet_store: Store, chdb_dir: Path, tmp_path: Path) -> None:
    """The storm floors are options; the report applies and states the rule it was given, and refuses a
    floor below 1 with a usage error."""
    dsn = _dsn(chdb_dir, fleet_store)
    base = ["report", "weekly", "--week", "2026-W10", "--out", str(tmp_path), "--dsn", dsn]
    raised = CliRunner().invoke(app, [*base, "--min-recompiles", "100000", "--min-compile-seconds", "1e9"])
    assert raised.exit_code == 0, raised.output
    assert "Recompile storms: 0; slow compile hours: 0; new specializations: 3." in raised.output  # 1 at the defaults
    md = (tmp_path / "weekly-2026-W10.md").read_text()
    assert "recompiles reach max(100000, 3 × the median of the 24 hours before)" in md
    assert "compile seconds reach max(1e+09, 3 × their median)" in md
    bad = CliRunner().invoke(app, [*base, "--min-recompiles", "0"])
    assert bad.exit_code == 2
    assert "--min-recompiles" in bad.output


def test_cli_report_weekly_help_states_the_rules_defaults() -> None:
    """The floors' help names their defaults (the CLI module cannot import the analytics rule: it must load
    without the dashboard extra), so this pins those numbers and the options' bounds to StormRule's."""
    hints = typing.get_type_hints(report_commands.weekly, include_extras=True)
    rule = StormRule()
    schema = StormRule.model_json_schema()["properties"]
    for name, fmt in (("min_recompiles", "{:d}"), ("min_compile_seconds", "{:g}")):
        option = hints[name].__metadata__[0]
        assert f"[default: {fmt.format(getattr(rule, name))}]" in option.help
        bound = schema[name].get("minimum", schema[name].get("exclusiveMinimum"))
        assert option.min >= bound
        assert option.min > bound or "minimum" in schema[name]


def test_cli_canary_compare(fleet_store: Store, chdb_dir: Path, tmp_path: Path) -> None:
    dsn = _dsn(chdb_dir, fleet_store)
    window = ["--start", "2026-03-02T00:00:00", "--end", "2026-03-09T00:00:00"]
    result = CliRunner().invoke(
        app,
        [
            "canary",
            "compare",
            "--baseline",
            BASELINE,
            "--candidate",
            CANDIDATE,
            *window,
            "--dsn",
            dsn,
            "--out",
            str(tmp_path),
        ],
    )
    assert result.exit_code == 1, result.output  # model taken from the candidate bundle; verdict fail → 1
    # Both bundles served h200-a and h200-b: each pool is judged alone, the worst verdict decides (walk 42).
    assert (
        "verdict: FAIL on hardware pools h200-a (failed: p50_ms, error_rate, nonfinite_rate, argmax_agreement, "
        "fp_mean_ks; p Holm–Bonferroni-adjusted for the 2 hardware pools judged); h200-b (failed: p50_ms, "
        "error_rate, nonfinite_rate" in result.output
    )
    assert len(list(tmp_path.glob("canary-llama-h200-*.html"))) == 2
    assert f"2 verdicts (one per hardware pool) recorded in {fleet_store.database}.canary_verdicts" in result.output
    recorded = fleet_store.query_frame(
        f"SELECT {col.MODEL}, {col.TRAFFIC_CLASS}, {col.BASELINE}, {col.CANDIDATE}, {col.WINDOW_START}, "
        f"{col.WINDOW_END}, {col.VERDICT}, {col.RULE}, {col.EVIDENCE}, attrs['hw_pool'] AS pool "
        f"FROM {fleet_store.database}.canary_verdicts "
        f"WHERE {col.CANDIDATE} = {{c:String}} AND {col.WINDOW_END} = {{e:DateTime64(6, 'UTC')}} ORDER BY pool",
        {"c": CANDIDATE, "e": datetime(2026, 3, 9, tzinfo=UTC)},
    )
    assert recorded.get_column("pool").to_list() == ["h200-a", "h200-b"]
    row = recorded.row(0, named=True)
    assert (row[col.MODEL], row[col.TRAFFIC_CLASS], row[col.BASELINE], row[col.VERDICT]) == (
        "llama",
        "",
        BASELINE,
        "fail",
    )
    assert row[col.RULE].startswith("failed: p50_ms, error_rate, nonfinite_rate")
    assert row[col.WINDOW_START] == datetime(2026, 3, 2, tzinfo=UTC)
    evidence = pl.read_json(io.StringIO(row[col.EVIDENCE]))
    assert "verdict" not in evidence.get_column("check").to_list()
    assert evidence.filter(pl.col("metric") == "error_rate").item(0, "outcome") == "fail"
    few = CliRunner().invoke(
        app,
        [
            "canary",
            "compare",
            "--baseline",
            BASELINE,
            "--candidate",
            CANDIDATE,
            "--model",
            "llama",
            "--traffic-class",
            "batch",
            "--start",
            "2026-03-02T00:00:00",
            "--end",
            "2026-03-02T06:00:00",
            "--dsn",
            dsn,
        ],
    )
    assert few.exit_code == 3
    assert "verdict: INCONCLUSIVE (fewer than 100 requests on a side)" in few.output
    typo = CliRunner().invoke(
        app,
        [
            "canary",
            "compare",
            "--baseline",
            BASELINE,
            "--candidate",
            "bundle-x",
            "--model",
            "llama",
            *window,
            "--dsn",
            dsn,
        ],
    )
    assert typo.exit_code == 2
    assert "unknown bundle 'bundle-x'" in typo.output


def _on_console(out: list[str], message: ConsoleMessage) -> None:
    if message.type in ("error", "warning"):
        out.append(message.text)


def _on_page_error(out: list[str], error: PlaywrightError) -> None:
    out.append(str(error))


def _on_request(out: list[str], request: Request) -> None:
    out.append(request.url)


@pytest.mark.browser
@pytest.mark.slow
def test_pages_render_in_headless_chromium(weekly: WeeklyReport, canary_frame: pl.DataFrame, tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    assert shutil.which(CHROMIUM), f"{CHROMIUM} is missing: run deploy/install-browser.sh"
    _, weekly_page = write_weekly_report(weekly, tmp_path)
    _, canary_page = write_canary_report(canary_frame, "llama", tmp_path, "canary")
    expected = {weekly_page: len(weekly_charts(weekly)), canary_page: len(canary_charts(canary_frame))}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
        try:
            for path, charts in expected.items():
                page = browser.new_page()
                problems: list[str] = []
                requested: list[str] = []
                page.on("console", functools.partial(_on_console, problems))
                page.on("pageerror", functools.partial(_on_page_error, problems))
                page.on("request", functools.partial(_on_request, requested))
                page.goto(path.as_uri())
                page.wait_for_function(
                    f"window.__chartsRendered + window.__chartErrors.length >= {charts}", timeout=60_000
                )
                assert page.evaluate("window.__chartErrors") == []
                assert page.evaluate("window.__chartsRendered") == charts
                assert page.locator("div.chart svg.marks").count() == charts  # every chart drew its SVG
                assert problems == []
                assert all(u.startswith("file:") for u in requested), requested  # works offline
                shown = page.inner_text("body")  # Markdown of the rules is rendered, never shown literally
                assert "**" not in shown
                assert "``" not in shown
                page.close()
        finally:
            browser.close()


def test_weekly_summary_names_limit_hits_and_a_missing_model(weekly: WeeklyReport) -> None:
    """A reason whose guard failures all found the recompile limit compiled nothing: the summary says so
    instead of "0 in", and a row with no model label reads "(no model)" instead of a blank."""
    row = {col.MODEL: "", col.HW_POOL: "cpu-a", col.REASON: "L['x'].size()[0] == 2", "recompiles": 0, "limit_hits": 3}
    reasons = pl.DataFrame([{**row, "requests": 3, "code_locations": 1}])
    line = next(x for x in summary_lines(replace(weekly, recompile_reasons=reasons)) if x.startswith("Top recompile"))
    expected = "Top recompile reason: \"L['x'].size()[0] == 2\" (0 + 3 at the recompile limit in (no model) @ cpu-a)."
    assert line == expected


def test_weekly_summary_prices_only_the_misses_it_can(weekly: WeeklyReport) -> None:
    """A miss is priced by the hits of its model and cache; with none, the summary said "cold misses cost
    about 0.0 s". It now counts the misses it could not price, beside the cost of those it could."""
    base = {col.MODEL: "m", col.HW_POOL: "cpu-a", "hits": 0, "bypasses": 0, "hit_ratio": 0.0, "time_saved_s": 0.0}
    unpriced = {**base, col.CACHE: "fx_graph", "misses": 8, "lookups": 8, "cold_miss_cost_s": None}
    priced = {**base, col.CACHE: "aot_autograd", "hits": 2, "misses": 3, "lookups": 5, "cold_miss_cost_s": 1.5}

    def line(rows: list[dict[str, object]]) -> str:
        health = pl.DataFrame(rows, schema_overrides={"cold_miss_cost_s": pl.Float64})
        return next(x for x in summary_lines(replace(weekly, cache_health=health)) if x.startswith("Compile-cache"))

    assert line([unpriced]) == (
        "Compile-cache hit ratio: 0.0% over 8 lookups; 8 misses not priced (no hit of the same model and cache)."
    )
    assert line([unpriced, priced]) == (
        "Compile-cache hit ratio: 15.4% over 13 lookups; cold misses cost about 1.5 s; "
        "8 misses not priced (no hit of the same model and cache)."
    )


def test_weekly_summary_says_nothing_of_a_cold_miss_cost_that_is_not_there(weekly: WeeklyReport) -> None:
    """Every lookup a hit, or misses whose hits saved nothing: the summary read "cold misses cost about 0.0 s"
    of a cost there was none of. It now gives the hit ratio alone, and a tiny cost is not rounded to 0.0."""
    base = {col.MODEL: "m", col.HW_POOL: "cpu-a", col.CACHE: "fx_graph", "bypasses": 0, "time_saved_s": 0.0}
    all_hits = {**base, "hits": 5, "misses": 0, "lookups": 5, "hit_ratio": 1.0, "cold_miss_cost_s": 0.0}
    free = {**base, col.CACHE: "aot_autograd", "hits": 3, "misses": 2, "lookups": 5, "hit_ratio": 0.6}

    def line(rows: list[dict[str, object]]) -> str:
        health = pl.DataFrame(rows, schema=weekly.cache_health.schema)
        return next(x for x in summary_lines(replace(weekly, cache_health=health)) if x.startswith("Compile-cache"))

    assert line([all_hits]) == "Compile-cache hit ratio: 100.0% over 5 lookups."
    assert line([all_hits, {**free, "cold_miss_cost_s": 0.0}]) == "Compile-cache hit ratio: 80.0% over 10 lookups."
    tiny = "Compile-cache hit ratio: 80.0% over 10 lookups; cold misses cost about 0.01 s."
    assert line([all_hits, {**free, "cold_miss_cost_s": 0.012}]) == tiny


def test_weekly_summary_of_a_week_without_cache_lookups_is_one_plain_sentence(weekly: WeeklyReport) -> None:
    """A week with no compile-cache lookup read "no lookups over 0 lookups"; it now says "no lookups" once."""
    health = weekly.cache_health.clear()
    lines = summary_lines(replace(weekly, cache_health=health))
    assert next(x for x in lines if x.startswith("Compile-cache")) == "Compile-cache hit ratio: no lookups."


def test_weekly_summary_counts_compiles_no_request_paid_for(weekly: WeeklyReport) -> None:
    """A store of imported TORCH_TRACE logs read "Compiles: 0" and nothing else of its 15 compiles: the
    request figures count what requests paid. The summary now also gives every compile record of the week and
    their seconds, and a graph break without a type reads "(no type)" rather than a double space."""
    specs = pl.DataFrame(
        {col.MODEL: ["", "m"], "compiles": [15, 3], "compile_seconds": [17.5, 2.25], col.RECOMPILES: [13, 0]}
    )
    breaks = weekly.graph_breaks.head(1).with_columns(
        pl.lit("").alias(col.REGISTRY_ID), pl.lit("").alias(col.BREAK_TYPE), pl.lit("").alias(col.REASON)
    )
    lines = summary_lines(replace(weekly, specializations=specs, graph_breaks=breaks))
    records = next(x for x in lines if x.startswith("Compile records"))
    assert records.startswith("Compile records: 18 (")
    assert "; recompile records: 13 (" in records
    assert records.endswith(
        "; inside requests or not (warm-up, imported TORCH_TRACE logs), one per frame compiled, as the dashboard's "
        "Compile & cache health page counts them (its Recompiles headline; Specializations: compiles, recompiles)."
    )
    assert (
        "Compile seconds, every compile: 19.8 s, inside requests or not (warm-up, imported TORCH_TRACE logs), as "
        "the dashboard's Compile & cache health page totals them." in lines
    )
    # Neither id nor type, nor a reason: it says so (a break with a reason is told by it: test_report_failures.py).
    assert next(x for x in lines if x.startswith("Top graph break")).startswith(
        "Top graph break: (no reason recorded) ("
    )
    assert "Compile records" in " ".join(summary_lines(weekly))  # the fleet's own compiles


def test_weekly_report_gives_every_compiles_seconds_beside_what_requests_paid(
    weekly: WeeklyReport, fleet_store: Store
) -> None:
    """The report's compile seconds were only what requests paid in the serving path (their compile_ms), while
    the dashboard's Compile & cache health page totals and charts every compile event (warm-up and imported
    logs too). The report now gives the week's seconds of every compile, as that page counts them, and beside
    them the seconds paid inside requests, each labelled; its daily chart of every compile adds up to the total."""
    runner = LocalRunner(fleet_store)
    week = {"start": weekly.start, "end": weekly.end}
    specs = runner.query("specializations", **week)
    every = float(specs.get_column("compile_seconds").sum())
    paid = float(runner.query("fleet_overview", **week).get_column(col.COMPILE_SECONDS).sum())
    assert every != pytest.approx(paid)  # the fleet has compiling requests without compile records

    lines = summary_lines(weekly)
    assert (
        f"Compile seconds, every compile: {every:,.1f} s, inside requests or not (warm-up, imported TORCH_TRACE "
        "logs), as the dashboard's Compile & cache health page totals them." in lines
    )
    assert next(x for x in lines if x.startswith("Compile seconds paid inside requests")).startswith(
        f"Compile seconds paid inside requests (the serving path): {paid:,.1f} s ("
    )

    per = weekly.by_model_pool.select(col.MODEL, col.HW_POOL, "compile_record_seconds")
    assert per.rows() == specs.select(col.MODEL, col.HW_POOL, "compile_seconds").sort(col.MODEL, col.HW_POOL).rows()
    section = render_weekly_markdown(weekly).split("\n## Compile seconds\n", 1)[1].split("\n## ", 1)[0]
    assert "| model | hw_pool | compile_record_seconds | compile_seconds |" in section
    assert "compile_record_seconds: whole-frame seconds of every compile record" in section
    assert "compile_seconds: compile time paid inside requests" in section

    drawn = {c.to_dict()["title"]: c.to_dict()["data"]["values"] for c in weekly_charts(weekly)}
    every_day = drawn["Compile seconds per day, every compile"]
    assert sum(v[col.COMPILE_SECONDS] for v in every_day) == pytest.approx(every, rel=1e-5)
    paid_day = drawn["Compile seconds per day, paid inside requests"]
    assert sum(v[col.COMPILE_SECONDS] for v in paid_day) == pytest.approx(paid, rel=1e-5)


def test_the_report_names_requests_that_compiled_apart_from_compile_records(store: Store) -> None:
    """The summary's "Compiles: 4" and the table's ``compiles`` counted requests that compiled, while the
    dashboard's Specializations tab showed ``compiles`` 6 for the same slice: every compile record, one per frame
    (the demo's decoder compiles its prefill and decode frames in one request). The report now calls the first
    compiling_requests ("Requests that compiled") and gives the second as compile_records, the count the
    Specializations tab shows under that name."""
    from inferensics.analytics import SliceParams, specializations
    from inferensics.analytics.weekly import current_week
    from inferensics.schema.events import CompileEvent, RequestEvent

    now = datetime.now(UTC).replace(microsecond=0)
    week = current_week(now)
    at = max(now - timedelta(minutes=5), parse_week(week))
    store.insert_events(
        [
            RequestEvent(request_id=f"r{i}", ts=at, host="h", model="m", hw_pool="p", traffic_class="t",
                         outcome="compile", compile_ms=3000.0, cache_status="miss")
            for i in range(3)
        ]
    )  # fmt: skip
    store.insert_events(
        [
            *(
                CompileEvent(ts=at, host="h", model="m", hw_pool="p", request_id=f"r{i}", graph_key=f"{frame}-{i}",
                             code_location=f"decoder.py:{n}:{frame}", entire_frame_s=1.5)
                for i in range(3)
                for n, frame in ((10, "prefill"), (20, "decode_step"))
            ),
            CompileEvent(ts=at, host="h", model="m", hw_pool="p", graph_key="warm-up", entire_frame_s=2.0),
        ]
    )  # fmt: skip
    report = build_weekly_report(LocalRunner(store), week, now)
    specs = specializations(store, SliceParams(start=report.start, end=report.end))
    assert specs.select(col.MODEL, "compiles").rows() == [("m", 7)]
    row = report.by_model_pool.row(0, named=True)
    assert (row["compiling_requests"], row["compile_records"]) == (3, 7)
    assert col.COMPILES not in report.by_model_pool.columns

    lines = summary_lines(report)
    assert "Requests that compiled: 3 (none last week)." in lines
    assert not any(line.startswith("Compiles:") for line in lines)
    assert (
        "Compile records: 7 (none last week); recompile records: 0 (none last week either); inside requests or not "
        "(warm-up, imported TORCH_TRACE logs), one per frame compiled, as the dashboard's Compile & cache health page "
        "counts them (its Recompiles headline; Specializations: compiles, recompiles)." in lines
    )
    markdown = render_weekly_markdown(report)
    table = markdown.split("\n## Compiles and recompiles per model and pool\n", 1)[1].split("\n## ", 1)[0]
    assert "| model | hw_pool | requests | compiling_requests | request_recompiles |" in table
    assert "| compiles |" not in table
    assert "compiling_requests" in report.week_over_week.get_column("metric").to_list()
