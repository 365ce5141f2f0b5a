"""Rendering the weekly recompilation and cache report: Markdown summary, HTML page with charts."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Final

import altair as alt
import polars as pl

from inferensics.analytics.cache import not_priced, unpriced_misses
from inferensics.analytics.reasons import PATTERN_NOTE
from inferensics.analytics.report import charts
from inferensics.analytics.report.page import Section, render_page
from inferensics.analytics.report.tables import cell, markdown_table
from inferensics.analytics.weekly import COMPILING_REQUESTS, WeeklyReport
from inferensics.schema import columns as col

_COUNTED: Final = {
    col.REQUESTS: "Requests",
    COMPILING_REQUESTS: "Requests that compiled",
    col.RECOMPILES: "Recompiles",
}
"""The week-over-week counts the summary opens with, and how it names each."""
_PER_FRAME: Final = (
    "one per frame compiled, as the dashboard's Compile & cache health page counts them (Specializations: "
    "compile_records)"
)
_EVERY_COMPILE_SECONDS: Final = "Compile seconds, every compile"
"""The label of the week's seconds of every compile record (``specializations``' compile_seconds)."""
_PAID_COMPILE_SECONDS: Final = "Compile seconds paid inside requests (the serving path)"
"""The label of the week's compile time paid inside requests (the requests' compile_ms)."""
_INSIDE_OR_NOT = "inside requests or not (warm-up, imported TORCH_TRACE logs)"


def _change(this: float, last: float) -> str:
    if last == 0:
        return "new" if this else "no change"
    return f"{(this / last - 1) * 100:+.1f}% vs last week"


def _weeks(wow: pl.DataFrame, metric: str) -> tuple[float, float]:
    """``metric`` summed over the models, this week and last week."""
    rows = wow.filter(pl.col("metric") == metric)
    this, last = (float(rows.get_column(week).fill_null(0).sum()) for week in ("this_week", "last_week"))
    return this, last


def summary_lines(report: WeeklyReport) -> list[str]:
    """The headline figures, one sentence each (the same in Markdown and HTML)."""
    wow = report.week_over_week
    lines = []
    for metric, label in _COUNTED.items():
        this, last = _weeks(wow, metric)
        lines.append(f"{label}: {this:,.0f} ({_change(this, last)}).")
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
    lines.append(f"{_PAID_COMPILE_SECONDS}: {this:,.1f} s ({_change(this, last)}).")
    if "compiles" in specs.columns and int(specs.get_column("compiles").sum() or 0):
        recompiles = specs.get_column(col.RECOMPILES).sum() if col.RECOMPILES in specs.columns else None
        also = f" and {int(recompiles):,} recompile records" if recompiles is not None else ""
        lines.append(
            f"Compile records: {int(specs.get_column('compiles').sum()):,}{also}, {_INSIDE_OR_NOT}, {_PER_FRAME}."
        )
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
    lines.append(f"Recompile storms: {report.storms.height}; new specializations: {report.new_graph_keys.height}.")
    if report.recompile_reasons.height:
        top = report.recompile_reasons.row(0, named=True)
        limit = f" + {top['limit_hits']:,} at the recompile limit" if top["limit_hits"] else ""
        lines.append(
            f"Top recompile reason: {top[col.REASON]!r} "
            f"({top['recompiles']:,}{limit} in {top[col.MODEL] or '(no model)'} @ {top[col.HW_POOL] or '(no pool)'})."
        )
    if report.graph_breaks.height:
        top = report.graph_breaks.row(0, named=True)
        lines.append(
            f"Top graph break: {top[col.REGISTRY_ID] or '(no id)'} {top[col.BREAK_TYPE] or '(no type)'} "
            f"({top['events']:,} events)."
        )
    return lines


def _growth_totals(report: WeeklyReport) -> pl.DataFrame:
    return (
        report.cache_growth.group_by([col.BUNDLE_ID, col.HW_POOL])
        .agg(pl.col("entries").sum(), pl.when(pl.col("bytes").is_not_null().any()).then(pl.col("bytes").sum()))
        .sort(["bytes", col.BUNDLE_ID, col.HW_POOL], descending=[True, False, False])
    )


_RATIO_METRICS = ("recompile_rate", "cache_hit_ratio")


def _week_over_week_shown(frame: pl.DataFrame) -> pl.DataFrame:
    """The week-over-week rows with each week's value as text: a ratio metric as a percentage, a count as a
    whole number, compile seconds with 4 significant digits (one column holds all three)."""

    def shown(value: float | None, metric: str) -> str:
        if value is None or metric in _RATIO_METRICS:
            return cell(value, ratio=True)
        return cell(value if metric == col.COMPILE_SECONDS else round(value))

    rows = [
        {**r, "this_week": shown(r["this_week"], r["metric"]), "last_week": shown(r["last_week"], r["metric"])}
        for r in frame.iter_rows(named=True)
    ]
    schema = frame.schema
    schema.update({"this_week": pl.String(), "last_week": pl.String()})
    return pl.DataFrame(rows, schema=schema)


def _compile_seconds_by_model(series: pl.DataFrame) -> pl.DataFrame:
    """``compile_timeseries`` summed per bucket and model, the model as ``group`` (as ``fleet_timeseries`` by
    model names it) for :func:`~inferensics.analytics.report.charts.daily_by_model`."""
    return (
        series.group_by(col.BUCKET, pl.col(col.MODEL).alias("group"))
        .agg(pl.col(col.COMPILE_SECONDS).sum())
        .sort(col.BUCKET, "group")
    )


def sections(report: WeeklyReport) -> list[Section]:
    """The report's sections, charts included."""
    per = report.by_model_pool
    storms = report.storms.select(
        "bucket",
        col.MODEL,
        col.HW_POOL,
        col.RECOMPILES,
        "baseline_recompiles",
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
        pl.concat_str(pl.col(col.REGISTRY_ID).replace("", "(no id)"), pl.lit(" "), pl.col(col.BREAK_TYPE)).alias(
            "label"
        )
    )
    return [
        Section("Summary", summary_lines(report)),
        Section(
            "Compiles and recompiles per model and pool",
            [
                "compiling_requests, recompiles and compile_seconds: what requests paid (a request that compiled "
                "counts once, however many frames it compiled); compile_records and recompile_records: every record "
                "of the week, one per frame compiled, inside requests or not (warm-up, imported TORCH_TRACE logs), as "
                "the dashboard's Compile & cache health page counts them (Specializations)."
            ]
            if per.height
            else [],
            [
                charts.recompiles_by_model_pool(per),
                charts.daily_by_model(report.daily, col.RECOMPILES, "Recompiles per day"),
            ],
            [
                (
                    per,
                    [
                        col.MODEL,
                        col.HW_POOL,
                        col.REQUESTS,
                        COMPILING_REQUESTS,
                        col.RECOMPILES,
                        "recompile_rate",
                        col.COMPILE_SECONDS,
                        "cache_hit_ratio",
                        "compile_records",
                        "recompile_records",
                    ],
                )
            ],
        ),
        Section(
            "Week over week",
            [
                "change = this week / last week - 1 (empty when last week was 0). While the week is in progress, "
                "last week is the same span of it (Monday 00:00 to the same weekday and time). "
                "compiling_requests, recompiles and compile_seconds are what requests paid, as in the table above."
            ],
            [],
            [(_week_over_week_shown(report.week_over_week), [col.MODEL, "metric", "this_week", "last_week", "change"])],
        ),
        Section(
            "Top recompile reasons",
            [PATTERN_NOTE] if report.recompile_reasons.height else [],
            [charts.top_bars(reasons, "label", "recompiles", "Recompiles by reason")],
            [(report.recompile_reasons, [col.MODEL, col.HW_POOL, col.REASON, "recompiles", "requests", "variants"])],
        ),
        Section(
            "Graph breaks",
            [],
            [charts.top_bars(breaks, "label", "events", "Graph breaks by registry id")],
            [(report.graph_breaks, [col.REGISTRY_ID, col.BREAK_TYPE, "events", "requests", "top_user_frames"])],
        ),
        Section(
            "Recompile storms",
            [report.storm_rule.describe()],
            [],
            [(storms, list(storms.columns))],
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
            ["A miss writes one entry; hits and bypasses write nothing."],
            [charts.cache_growth(report.cache_growth)],
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


def title(report: WeeklyReport) -> str:
    """The report's title line (a week in progress says up to when)."""
    if report.end - report.start < timedelta(days=7):
        span = f"{report.start:%Y-%m-%d} to {report.end:%Y-%m-%d %H:%M} UTC, the week so far"
    else:
        span = f"{report.start:%Y-%m-%d} to {report.end:%Y-%m-%d} UTC"
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
        out.extend(markdown_table(frame, columns) for frame, columns in section.tables)
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
