"""Rendering the weekly recompilation and cache report: Markdown summary, HTML page with charts."""

from __future__ import annotations

import json
import math
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Final

import altair as alt
import polars as pl

from inferensics.analytics.cache import not_priced, unpriced_misses
from inferensics.analytics.reasons import PATTERN_NOTE
from inferensics.analytics.report import charts
from inferensics.analytics.report.page import Section, render_page
from inferensics.analytics.report.tables import cell, markdown_table
from inferensics.analytics.report.unqualified import unqualified_line, unqualified_section
from inferensics.analytics.weekly import COMPILING_REQUESTS, REQUEST_RECOMPILES, WeeklyReport
from inferensics.schema import columns as col

_COUNTED: Final = {
    col.REQUESTS: "Requests",
    COMPILING_REQUESTS: "Requests that compiled",
    REQUEST_RECOMPILES: "Recompiles requests triggered",
}
"""The week-over-week counts the summary opens with (what requests paid), and how it names each."""
_PER_FRAME: Final = (
    "one per frame compiled, as the dashboard's Compile & cache health page counts them (its Recompiles headline; "
    "Specializations: compiles, recompiles)"
)
_EVERY_COMPILE_SECONDS: Final = "Compile seconds, every compile"
"""The label of the week's seconds of every compile record (``specializations``' compile_seconds)."""
_PAID_COMPILE_SECONDS: Final = "Compile seconds paid inside requests (the serving path)"
"""The label of the week's compile time paid inside requests (the requests' compile_ms)."""
_INSIDE_OR_NOT = "inside requests or not (warm-up, imported TORCH_TRACE logs)"
BUNDLE_ID_DIGITS: Final = 12
"""Bundle ids in the report's tables are shortened to this many digits (the commands take such a prefix)."""


def _change(this: float, last: float, report: WeeklyReport) -> str:
    """This week against last (the same span of it while the week is in progress), saying beside it when last
    week holds requests in far fewer hours (:func:`partial_last_week`)."""
    if last == 0:
        return "none last week" if this else "none last week either"
    partial = partial_last_week(report)
    return f"{(this / last - 1) * 100:+.1f}% vs last week{f'; {partial}' if partial else ''}"


PARTIAL_COVERAGE: Final = 0.5
"""Last week's hours with requests, as a share of this week's, under which a change is flagged: a store that
started late last week (or a collector that was down) makes any change look huge."""


def partial_last_week(report: WeeklyReport) -> str | None:
    """``last week has requests in 3 h only, this week in 168 h`` when last week's hours with requests are fewer
    than :data:`PARTIAL_COVERAGE` of this week's; else ``None``."""
    this, last = report.hours_with_requests, report.last_hours_with_requests
    if last >= PARTIAL_COVERAGE * this:
        return None
    return f"last week has requests in {last:,} h only, this week in {this:,} h"


def _weeks(wow: pl.DataFrame, metric: str) -> tuple[float, float]:
    """``metric`` summed over the models, this week and last week."""
    rows = wow.filter(pl.col("metric") == metric)
    this, last = (float(rows.get_column(week).fill_null(0).sum()) for week in ("this_week", "last_week"))
    return this, last


def _counted(report: WeeklyReport, metric: str) -> str:
    """``metric``'s week as ``N (change)``."""
    this, last = _weeks(report.week_over_week, metric)
    return f"{this:,.0f} ({_change(this, last, report)})"


def _where(row: dict[str, object]) -> str:
    return f"{row[col.MODEL] or '(no model)'} @ {row[col.HW_POOL] or '(no pool)'}"


def _fallback_line(report: WeeklyReport) -> str:
    """Eager fallbacks: the requests that ran eagerly, their share, and the top reason with its slice's share."""
    this, last = _weeks(report.week_over_week, col.FALLBACKS)
    requests, _ = _weeks(report.week_over_week, col.REQUESTS)
    share = f", {this / requests:.1%} of requests" if requests else ""
    line = f"Eager fallbacks: {this:,.0f} requests{share} ({_change(this, last, report)})"
    if report.fallbacks.height:
        top = report.fallbacks.row(0, named=True)
        reason = top[col.FALLBACK_REASON] or "(no reason recorded)"
        of = f" of {top[col.REQUESTS]:,} {top[col.TRAFFIC_CLASS] or '(no class)'} requests"
        rate = f", {top['fallback_rate']:.1%}" if top[col.REQUESTS] else ""
        line += f"; top: {reason} ({top['fallbacks']:,}{of}{rate}, in {_where(top)})"
    return line + "."


def _records_line(report: WeeklyReport) -> str | None:
    """Compile and recompile records (``specializations``' counts, last week's beside them), the recompile
    limit's hits beside them (they are rows of the recompiles table, as ``status`` counts it, but compiled
    nothing)."""
    specs = report.specializations
    compiles = int(specs.get_column("compiles").sum() or 0) if "compiles" in specs.columns else 0
    if not compiles:
        return None
    wow = report.week_over_week

    def counted(this: int, metric: str) -> str:
        _, last = _weeks(wow, metric)
        return f"{this:,} ({_change(this, last, report)})"

    line = f"Compile records: {counted(compiles, 'compile_records')}"
    if col.RECOMPILES in specs.columns:
        recompiles = int(specs.get_column(col.RECOMPILES).sum() or 0)
        line += f"; recompile records: {counted(recompiles, 'recompile_records')}"
        if limit := report.recompile_limit_hits:
            line += (
                f", plus {limit:,} guard failure{'s' if limit != 1 else ''} at the recompile limit that compiled "
                f"nothing ({recompiles + limit:,} rows of the recompiles table)"
            )
    return f"{line}; {_INSIDE_OR_NOT}, {_PER_FRAME}."


def _failures_line(report: WeeklyReport) -> str:
    line = f"Failed compiles: {_counted(report, 'failed_compiles')}, {_INSIDE_OR_NOT}"
    if report.compile_failures.height:
        top = report.compile_failures.row(0, named=True)
        reason = f" {top['top_reasons'][0]!r}" if top["top_reasons"] else ""
        line += f"; top: {top[col.FAIL_TYPE] or '(no type)'}{reason} ({top['failures']:,} in {_where(top)})"
    return line + "."


def _misses_line(report: WeeklyReport) -> str:
    misses = report.bundle_misses
    counted = _counted(report, "bundle_misses")
    line = f"Bundle misses (graphs a host's bundle did not hold, whatever the compile cache served): {counted}"
    if misses.height:
        actions = (
            misses.group_by(col.ACTION)
            .agg(pl.col("misses").sum())
            .sort(["misses", col.ACTION], descending=[True, False])
        )
        line += ": " + ", ".join(f"{n:,} {a or '(no action)'}" for a, n in actions.iter_rows())
        differed = _differed(misses)
        if differed.height:
            line += "; what differed: " + ", ".join(f"{k} ({n:,})" for k, n in differed.iter_rows())
    return line + "."


def _differed(misses: pl.DataFrame) -> pl.DataFrame:
    """What differed from the bundle, over every row of ``bundle_misses``: name and misses, most first."""
    if misses.is_empty():
        return pl.DataFrame(schema={"differed": pl.String, "n": pl.UInt64})
    return (
        misses.select(pl.col("differed"), pl.col("differed_counts"))
        .explode("differed", "differed_counts")
        .group_by("differed")
        .agg(pl.col("differed_counts").sum().alias("n"))
        .sort(["n", "differed"], descending=[True, False])
    )


def _graph_break_label(row: dict[str, object]) -> str:
    """A graph-break group as a reader names it: its registry id and type, else (older logs name neither) its
    reason."""
    if row[col.REGISTRY_ID] or row[col.BREAK_TYPE]:
        return f"{row[col.REGISTRY_ID] or '(no id)'} {row[col.BREAK_TYPE] or '(no type)'}"
    return f"{row.get(col.REASON) or '(no reason recorded)'}"


def _so_far_line(report: WeeklyReport) -> str | None:
    """For a week in progress, how much of it the report covers and the command of the last whole week (on a
    Monday morning the week so far is a few hours, which the title's "the week so far" alone leaves to be found
    out from the figures); ``None`` for a whole week."""
    if not in_progress(report):
        return None
    minutes = int((report.end - report.start).total_seconds() // 60)
    days, rest = divmod(minutes, 24 * 60)
    hours, minutes = divmod(rest, 60)
    covered = " ".join(p for p in (f"{days} d" if days else "", f"{hours} h", f"{minutes} min") if p)
    year, week, _ = (report.start - timedelta(days=7)).isocalendar()
    last = f"{year}-W{week:02d}"
    return (
        f"This is the week so far: {covered} of its 168 h. The last whole week is {last}: `inferensics report weekly "
        f"--week {last}`, with the --dsn, --data-dir or --service this report was made with."
    )


def summary_lines(report: WeeklyReport) -> list[str]:
    """The headline figures, one sentence each (the same in Markdown, HTML and JSON)."""
    wow = report.week_over_week
    lines = [line] if (line := _so_far_line(report)) is not None else []
    lines.extend(f"{label}: {_counted(report, metric)}." for metric, label in _COUNTED.items())
    lines.append(_fallback_line(report))
    # The figures above are what requests paid; compiles outside requests have no request to count them on. The
    # week's compile seconds are every compile's, as the dashboard's headline; what requests paid is beside them.
    specs = report.specializations
    if col.COMPILE_SECONDS in specs.columns:
        every = float(specs.get_column(col.COMPILE_SECONDS).sum())
        lines.append(
            f"{_EVERY_COMPILE_SECONDS}: {every:,.1f} s, {_INSIDE_OR_NOT}, as the dashboard's Compile & cache health "
            "page totals them."
        )
    this, last = _weeks(wow, col.COMPILE_SECONDS)
    lines.append(f"{_PAID_COMPILE_SECONDS}: {this:,.1f} s ({_change(this, last, report)}).")
    if (records := _records_line(report)) is not None:
        lines.append(records)
    lines.append(_failures_line(report))
    health = report.cache_health
    lookups = int(health.get_column("lookups").sum() or 0)
    hits = int(health.get_column("hits").sum() or 0)
    ratio = f"{hits / lookups:.1%} over {lookups:,} lookups" if lookups else "no lookups"  # not "over 0 lookups"
    cost = float(health.get_column("cold_miss_cost_s").sum() or 0)  # nulls (misses not priced) are left out
    # No misses, or misses whose hits saved nothing: no cost to speak of (it read "about 0.0 s"); a cost under
    # 0.05 s keeps one significant digit, not rounded to that 0.0.
    shown = f"{cost:,.1f}" if cost >= 0.05 else f"{cost:.1g}"
    parts = [f"cold misses cost about {shown} s"] if cost > 0 else []
    if unpriced := unpriced_misses(health):
        parts.append(f"{not_priced(unpriced)} (no hit of the same model and cache)")
    lines.append(f"Compile-cache hit ratio: {ratio}{''.join(f'; {p}' for p in parts)}.")
    lines.append(_misses_line(report))
    if (unqualified := unqualified_line(report.bundle_unqualified)) is not None:
        lines.append(unqualified)
    lines.append(
        f"Recompile storms: {report.storms.height}; slow compile hours: {report.slow_compiles.height}; new "
        f"specializations: {report.new_graph_keys.height}."
    )
    if report.storms.height:
        worst = ranked_storms(report.storms).row(0, named=True)
        lines.append(
            f"Worst recompile storm: {worst[col.RECOMPILES]:,} recompiles against a baseline of "
            f"{worst['baseline_recompiles'] or 0:g} in {_where(worst)}, {worst['bucket']:%Y-%m-%d %H:00} UTC."
        )
    if report.slow_compiles.height:
        slowest = report.slow_compiles.sort(
            [col.COMPILE_SECONDS, "bucket"], descending=[True, True], maintain_order=True
        ).row(0, named=True)
        lines.append(
            f"Slowest compile hour: {_where(slowest)}, {slowest['bucket']:%Y-%m-%d %H:00} UTC: {slowest['why']}."
        )
    if report.recompile_reasons.height:
        top = report.recompile_reasons.row(0, named=True)
        limit = f" + {top['limit_hits']:,} at the recompile limit" if top["limit_hits"] else ""
        lines.append(f"Top recompile reason: {top[col.REASON]!r} ({top['recompiles']:,}{limit} in {_where(top)}).")
    if report.graph_breaks.height:
        top = report.graph_breaks.row(0, named=True)
        lines.append(f"Top graph break: {_graph_break_label(top)} ({top['events']:,} events).")
    return lines


def _short_bundles(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with its bundle ids cut to :data:`BUNDLE_ID_DIGITS` digits, as every table of the report shows
    them."""
    return frame.with_columns(pl.col(col.BUNDLE_ID).str.head(BUNDLE_ID_DIGITS))


def _growth_totals(report: WeeklyReport) -> pl.DataFrame:
    return _short_bundles(
        report.cache_growth.group_by([col.BUNDLE_ID, col.HW_POOL])
        .agg(pl.col("entries").sum(), pl.when(pl.col("bytes").is_not_null().any()).then(pl.col("bytes").sum()))
        .sort(["bytes", col.BUNDLE_ID, col.HW_POOL], descending=[True, False, False])
    )


_RATIO_METRICS = ("recompile_rate", "cache_hit_ratio")
_SECONDS_METRICS = (col.COMPILE_SECONDS, "compile_record_seconds")


def _week_over_week_shown(frame: pl.DataFrame) -> pl.DataFrame:
    """The week-over-week rows with each week's value as text: a ratio metric as a percentage, a count as a
    whole number, compile seconds with 4 significant digits (one column holds all three). The change carries its
    sign either way (``+7.3 %``: unsigned, a rise read as a level beside the weeks' own percentages); a ratio
    metric's change is the difference in percentage points (``-17.9 pp``: a hit ratio from 48.3 % to 30.4 % read
    ``-37.0 %``, which reads as the ratio's own fall)."""

    def shown(value: float | None, metric: str) -> str:
        if value is None or metric in _RATIO_METRICS:
            return cell(value, ratio=True)
        return cell(value if metric in _SECONDS_METRICS else round(value))

    def change(row: dict[str, Any]) -> str:
        if row["metric"] in _RATIO_METRICS:
            this, last = row["this_week"], row["last_week"]
            return "–" if this is None or last is None else f"{(this - last) * 100:+.1f} pp"
        return cell(row["change"], ratio=True, signed=True)

    rows = [
        {
            **r,
            "this_week": shown(r["this_week"], r["metric"]),
            "last_week": shown(r["last_week"], r["metric"]),
            "change": change(r),
        }
        for r in frame.iter_rows(named=True)
    ]
    schema = frame.schema
    schema.update({"this_week": pl.String(), "last_week": pl.String(), "change": pl.String()})
    return pl.DataFrame(rows, schema=schema)


def last_week_empty(report: WeeklyReport) -> bool:
    """Whether last week's compared span holds no request and no record at all (a store that started this
    week): every change would be empty, and the table a page of dashes."""
    last = report.week_over_week.get_column("last_week").fill_null(0)
    return report.last_hours_with_requests == 0 and not bool((last != 0).any())


def _compared_span(report: WeeklyReport) -> str:
    """Last week's compared span in words: the whole week, or the same span of it."""
    start, end = report.start - timedelta(days=7), report.end - timedelta(days=7)
    if not in_progress(report):
        return f"Monday {start:%Y-%m-%d} to Sunday {end - timedelta(days=1):%Y-%m-%d}"
    return f"{start:%Y-%m-%d} 00:00 to {end:%Y-%m-%d %H:%M} UTC, the same span of it"


def _week_over_week_section(report: WeeklyReport) -> Section:
    """The week-over-week section: the table, or one sentence where last week holds nothing to compare."""
    title_ = "Week over week"
    if last_week_empty(report):
        return Section(
            title_,
            [
                f"Nothing to compare: last week ({_compared_span(report)}) holds no request and no compile, "
                "recompile, failed-compile or bundle-miss record in this store."
                + (" This week's figures are in the table above." if report.by_model_pool.height else "")
            ],
        )
    return Section(
        title_,
        [
            "change = this week / last week - 1 (empty when last week was 0); for recompile_rate and "
            "cache_hit_ratio, this week minus last week in percentage points (pp). While the week is in progress, "
            "last week is the same span of it (Monday 00:00 to the same weekday and time). "
            "requests, compiling_requests, request_recompiles, fallbacks, compile_seconds, recompile_rate and "
            "cache_hit_ratio are what requests paid, as in the table above (rows for a model with requests); "
            "compile_records, recompile_records, compile_record_seconds, failed_compiles and bundle_misses count "
            "every record, inside requests or not (rows for a model with records, imported logs' too).",
            *([f"Read the changes with care: {partial}."] if (partial := partial_last_week(report)) else []),
        ],
        [],
        [(_week_over_week_shown(report.week_over_week), [col.MODEL, "metric", "this_week", "last_week", "change"])],
        limit=max(report.week_over_week.height, 1),  # every row is a figure of its own: none is cut
    )


def _compile_seconds_by_model(series: pl.DataFrame) -> pl.DataFrame:
    """``compile_timeseries`` summed per bucket and model, the model as ``group`` (as ``fleet_timeseries`` by
    model names it) for :func:`~inferensics.analytics.report.charts.daily_by_model`."""
    return (
        series.group_by(col.BUCKET, pl.col(col.MODEL).alias("group"))
        .agg(pl.col(col.COMPILE_SECONDS).sum())
        .sort(col.BUCKET, "group")
    )


SLOW_COMPILE_COLUMNS: Final = (
    "bucket", col.MODEL, col.HW_POOL, col.RECOMPILES, col.COMPILE_SECONDS, "baseline_compile_seconds", "why",
    "cache_lookups", "cache_misses",
)  # fmt: skip
"""The slow compile hours' columns the report shows."""


def ranked_storms(storms: pl.DataFrame) -> pl.DataFrame:
    """``recompile_storms``' hours, most severe first: by recompiles over their baseline
    (``over_baseline``), then by recompiles, then newest first."""
    over = (pl.col(col.RECOMPILES).cast(pl.Float64) - pl.col("baseline_recompiles").fill_null(0.0)).alias(
        "over_baseline"
    )
    return storms.with_columns(over).sort(
        ["over_baseline", col.RECOMPILES, "bucket", col.MODEL, col.HW_POOL],
        descending=[True, True, True, False, False],
    )


def sections(report: WeeklyReport) -> list[Section]:
    """The report's sections, charts included."""
    per = report.by_model_pool
    storms = ranked_storms(report.storms).select(
        "bucket",
        col.MODEL,
        col.HW_POOL,
        col.RECOMPILES,
        "baseline_recompiles",
        "over_baseline",
        col.COMPILE_SECONDS,
        "trigger",
        "top_reasons",
    )
    reasons = report.recompile_reasons.with_columns(
        pl.concat_str(pl.col(col.MODEL), pl.lit(" @ "), pl.col(col.HW_POOL), pl.lit(": "), pl.col(col.REASON)).alias(
            "label"
        )
    )
    breaks = report.graph_breaks.with_columns(
        pl.Series("label", [_graph_break_label(r) for r in report.graph_breaks.iter_rows(named=True)], pl.String)
    )
    misses = report.bundle_misses.with_columns(
        pl.col(col.BUNDLE_ID).str.head(BUNDLE_ID_DIGITS), pl.col(col.COMPILE_SECONDS).round(2)
    )
    return [
        Section("Summary", summary_lines(report)),
        Section(
            "Compiles and recompiles per model and pool",
            [
                "compiling_requests, request_recompiles, fallbacks and compile_seconds: what requests paid (a request "
                "that compiled counts once, however many frames it compiled; request_recompiles are the recompiles "
                "requests triggered); compile_records and recompile_records: every record of the week, one per frame "
                "compiled, inside requests or not (warm-up, imported TORCH_TRACE logs), the recompile limit's hits "
                "left out, as the dashboard's Compile & cache health page counts them (Specializations)."
            ]
            if per.height
            else [],
            [
                charts.recompiles_by_model_pool(per),
                charts.daily_by_model(report.daily, col.RECOMPILES, "Recompiles requests triggered per day"),
            ],
            [
                (
                    per,
                    [
                        col.MODEL,
                        col.HW_POOL,
                        col.REQUESTS,
                        COMPILING_REQUESTS,
                        REQUEST_RECOMPILES,
                        "recompile_rate",
                        col.FALLBACKS,
                        col.COMPILE_SECONDS,
                        "cache_hit_ratio",
                        "compile_records",
                        "recompile_records",
                    ],
                )
            ],
        ),
        _week_over_week_section(report),
        Section(
            "Failed compiles",
            [
                "Compiles whose outcome is failed, inside requests or not (imported TORCH_TRACE logs too), by "
                "exception type; top_reasons are the failure messages (on one line, cut at 200 characters), most "
                "frequent first "
                "(top_reason_counts). A frame at the recompile limit is not a failure: see Eager fallbacks and the "
                "recompile reasons' limit_hits."
            ],
            [],
            [
                (
                    report.compile_failures,
                    [
                        col.MODEL,
                        col.HW_POOL,
                        col.FAIL_TYPE,
                        "failures",
                        col.REQUESTS,
                        "top_reasons",
                        "top_reason_counts",
                    ],
                )
            ],
        ),
        Section(
            "Eager fallbacks",
            [
                "Requests that ran eagerly, by model, pool, traffic class and reason; requests is every request of "
                "that slice and fallback_rate = fallbacks / requests (as the fallback_reasons named query gives them)."
            ],
            [],
            [
                (
                    report.fallbacks,
                    [
                        col.MODEL,
                        col.HW_POOL,
                        col.TRAFFIC_CLASS,
                        col.FALLBACK_REASON,
                        "fallbacks",
                        col.REQUESTS,
                        "fallback_rate",
                    ],
                )
            ],
        ),
        Section(
            "Bundle misses",
            [
                "Graphs a host's bundle did not hold: what the host did (action), the compile seconds it spent, and "
                "what differed from the bundle (each factor's name, with the misses naming it in differed_counts). "
                f"Bundle ids show their first {BUNDLE_ID_DIGITS} digits. A bundle miss may still hit the compile "
                "cache: the hit ratio counts cache lookups, not bundle coverage."
            ],
            [],
            [
                (
                    misses,
                    [
                        col.BUNDLE_ID,
                        col.MODEL,
                        col.HW_POOL,
                        col.ACTION,
                        "misses",
                        col.REQUESTS,
                        col.COMPILE_SECONDS,
                        "differed",
                        "differed_counts",
                    ],
                )
            ],
        ),
        *unqualified_section(report.bundle_unqualified),
        Section(
            "Top recompile reasons",
            [
                *([PATTERN_NOTE] if report.recompile_reasons.height else []),
                "recompiles: the recompile records (as recompile_records above); limit_hits: guard failures at the "
                "recompile limit, which compiled nothing (the frame ran eagerly); requests and variants count both.",
            ],
            [charts.top_bars(reasons, "label", "recompiles", "Recompiles by reason")],
            [
                (
                    report.recompile_reasons,
                    [col.MODEL, col.HW_POOL, col.REASON, "recompiles", "limit_hits", "requests", "variants"],
                )
            ],
        ),
        Section(
            "Graph breaks",
            [
                "Grouped by registry id and type; a break whose message names neither (older logs) is grouped by its "
                "reason. top_user_frames are compiled frames (file:line:function) for breaks that recorded no user "
                "frame."
            ],
            [charts.top_bars(breaks, "label", "events", "Graph breaks by registry id, else reason")],
            [
                (
                    report.graph_breaks,
                    [col.REGISTRY_ID, col.BREAK_TYPE, col.REASON, "events", "requests", "top_user_frames"],
                )
            ],
        ),
        Section(
            "Recompile storms",
            [
                report.storm_rule.describe(),
                "One row per storm hour, most severe first: by over_baseline (recompiles minus their baseline).",
            ],
            [],
            [(storms, list(storms.columns))],
        ),
        Section(
            "Slow compile hours",
            [
                report.storm_rule.describe_slow(),
                "One row per hour, newest first; why says which threshold its compile seconds reached and how many "
                "recompiles it had. The compile-cache lookups of its model and pool that hour say whether a cold "
                "cache was in it.",
            ],
            [],
            [(report.slow_compiles, list(SLOW_COMPILE_COLUMNS))],
        ),
        Section(
            "Cache health",
            [
                "hit ratio = hits / lookups; cold-miss cost charges each miss the mean saving of a hit of the same "
                "model and cache."
            ],
            [charts.cache_hit_trend(report.cache_trend)],
            [
                (
                    report.cache_health,
                    [col.MODEL, col.HW_POOL, col.CACHE, "hits", "misses", "bypasses", "hit_ratio", "cold_miss_cost_s"],
                )
            ],
        ),
        Section(
            "Cache growth",
            [
                "A miss writes one entry; hits and bypasses write nothing. Bundle ids show their first "
                f"{BUNDLE_ID_DIGITS} digits."
            ],
            [charts.cache_growth(_short_bundles(report.cache_growth))],
            [(_growth_totals(report), [col.BUNDLE_ID, col.HW_POOL, "entries", "bytes"])],
        ),
        Section(
            "Compile seconds",
            [
                "compile_record_seconds: whole-frame seconds of every compile record of the week, inside requests "
                "or not (warm-up, failed compiles, imported TORCH_TRACE logs), as the dashboard's Compile & cache "
                "health page totals and charts them.",
                "compile_seconds: compile time paid inside requests, in the serving path (a request's compile_ms: "
                "the seconds of its own compile records, or its backend's compile time where none was recorded).",
            ],
            [
                charts.daily_by_model(
                    _compile_seconds_by_model(report.compiles_daily),
                    col.COMPILE_SECONDS,
                    "Compile seconds per day, every compile",
                ),
                charts.daily_by_model(
                    report.daily, col.COMPILE_SECONDS, "Compile seconds per day, paid inside requests"
                ),
            ],
            [
                (
                    per.sort(["compile_record_seconds", col.MODEL, col.HW_POOL], descending=[True, False, False]),
                    [col.MODEL, col.HW_POOL, "compile_record_seconds", col.COMPILE_SECONDS],
                )
            ],
        ),
        Section(
            "New specializations",
            ["A graph key is new when its first compile in the pool falls in the week."],
            [],
            [
                (
                    report.specializations,
                    [col.MODEL, col.HW_POOL, "active_graph_keys", "new_graph_keys", "total_graph_keys", "growth"],
                ),
                (report.new_graph_keys, [col.MODEL, col.HW_POOL, col.GRAPH_KEY, "first_seen", col.CODE_LOCATION]),
            ],
        ),
    ]


def in_progress(report: WeeklyReport) -> bool:
    """Whether the report's week was still running when it was built (it ends at that moment)."""
    return report.end - report.start < timedelta(days=7)


def title(report: WeeklyReport) -> str:
    """The report's title line: a whole week names its first and last day (Monday to Sunday, both included), a
    week in progress says up to when."""
    if in_progress(report):
        span = f"{report.start:%Y-%m-%d} to {report.end:%Y-%m-%d %H:%M} UTC, the week so far"
    else:
        last_day = report.end - timedelta(days=1)
        span = f"Monday {report.start:%Y-%m-%d} to Sunday {last_day:%Y-%m-%d} UTC, whole days"
    return f"Weekly recompilation and cache report {report.week} ({span})"


def weekly_charts(report: WeeklyReport) -> list[alt.TopLevelMixin]:
    """Every chart of the report, in page order."""
    return [c for s in sections(report) for c in s.charts]


def render_weekly_markdown(report: WeeklyReport) -> str:
    """The Markdown summary: headline figures and every table (charts are in the HTML page)."""
    out = [f"# {title(report)}\n"]
    for section in sections(report):
        out.append(f"## {section.title}\n")
        if section.title == "Summary":
            out.extend(f"- {line}" for line in section.paragraphs)
            out.append("")
            continue
        out.extend(f"{p}\n" for p in section.paragraphs)
        out.extend(markdown_table(frame, columns, section.limit) for frame, columns in section.tables)
    return "\n".join(out).rstrip() + "\n"


def render_weekly_html(report: WeeklyReport) -> str:
    """The self-contained HTML page."""
    return render_page(title(report), sections(report))


def write_weekly_report(report: WeeklyReport, out_dir: Path) -> tuple[Path, Path]:
    """Write ``weekly-<week>.md`` and ``weekly-<week>.html`` into ``out_dir``; return their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    md, page = out_dir / f"weekly-{report.week}.md", out_dir / f"weekly-{report.week}.html"
    md.write_text(render_weekly_markdown(report), encoding="utf-8")
    page.write_text(render_weekly_html(report), encoding="utf-8")
    return md, page


def _plain(value: object) -> object:
    """A cell as JSON takes it: a time as ISO 8601, a NaN or infinity as null (JSON has neither)."""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def weekly_json(report: WeeklyReport) -> dict[str, Any]:
    """The report as plain data: the figures the Markdown shows (its summary sentences, and each section's
    paragraphs and tables, every row and each value unformatted: ratios as fractions, times in ISO 8601 UTC),
    with the span (``end`` excluded) and the storm rule."""
    return {
        "week": report.week,
        "title": title(report),
        "start": report.start.isoformat(),
        "end": report.end.isoformat(),
        "end_excluded": True,
        "in_progress": in_progress(report),
        "storm_rule": report.storm_rule.model_dump(),
        "summary": summary_lines(report),
        "sections": [
            {
                "title": section.title,
                "paragraphs": list(section.paragraphs),
                "tables": [
                    {
                        "columns": columns,
                        "rows": [
                            {c: _plain(v) for c, v in row.items()}
                            for row in frame.select(columns).iter_rows(named=True)
                        ],
                    }
                    for frame, columns in section.tables
                ],
            }
            for section in sections(report)
            if section.title != "Summary"
        ],
    }


def render_weekly_json(report: WeeklyReport) -> str:
    """:func:`weekly_json` as indented JSON text."""
    return json.dumps(weekly_json(report), indent=1, ensure_ascii=False) + "\n"


def write_weekly_json(report: WeeklyReport, out_dir: Path) -> Path:
    """Write ``weekly-<week>.json`` into ``out_dir``; return its path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"weekly-{report.week}.json"
    path.write_text(render_weekly_json(report), encoding="utf-8")
    return path
