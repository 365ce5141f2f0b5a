"""Altair chart specs for the weekly report and the canary page, built from analytics frames.

Data goes inline as plain values (datetimes as ISO strings, floats rounded to 6 significant digits) so a
spec is byte-stable for a given frame and can be snapshot-tested with ``chart.to_dict()``.
"""

from __future__ import annotations

import math
from typing import Any, Final

import altair as alt
import polars as pl

from inferensics.analytics.report.evidence import LATENCY_RATIO_COLUMNS, latency_ratios
from inferensics.analytics.weekly import COMPILING_REQUESTS, REQUEST_RECOMPILES
from inferensics.schema import columns as col

WIDTH = 560


def values(frame: pl.DataFrame, columns: list[str]) -> list[dict[str, Any]]:
    """Rows of ``frame``'s ``columns`` as JSON-ready dicts (ISO datetimes, rounded floats, no NaN)."""
    out = frame.select(columns).with_columns(
        pl.col(pl.Datetime).dt.strftime("%Y-%m-%dT%H:%M:%SZ"), pl.col(pl.List(pl.String)).list.join(", ")
    )
    rows = out.to_dicts()
    for row in rows:
        for k, v in row.items():
            if isinstance(v, float):
                row[k] = None if math.isnan(v) or math.isinf(v) else float(f"{v:.6g}")
    return rows


TINY: Final = 1e-3
"""Below this largest magnitude a value axis is labelled in significant digits (:func:`number_format`)."""


def number_format(frame: pl.DataFrame, columns: list[str]) -> str | None:
    """A d3 format for a value axis of ``columns`` whose values are all tiny (``~g``: ``5e-7``, ``0.000001``),
    else ``None`` (Vega's own). Vega picks the decimals from the tick step, so an axis up to 5e-6 read
    "0.0000000 0.0000005 ..." and a cost of a few microseconds in seconds read as a row of zeros."""
    present = [c for c in columns if c in frame.columns and frame.schema[c].is_numeric()]
    tops = [frame.get_column(c).cast(pl.Float64).abs().max() for c in present]
    top = max((t for t in tops if isinstance(t, float) and math.isfinite(t)), default=0.0)
    return "~g" if 0.0 < top < TINY else None


def _data(frame: pl.DataFrame, columns: list[str]) -> alt.Data:
    return alt.Data(values=values(frame, columns))  # type: ignore[no-untyped-call]


def count_axis(frame: pl.DataFrame, columns: list[str], title: str) -> alt.Axis:
    """An axis for counts: whole-number ticks only (Vega's own ticks for a maximum of 1 are 0, 0.5, 1, which
    a whole-number format labels "0 1 1")."""
    present = [c for c in columns if c in frame.columns]
    tops = [frame.get_column(c).cast(pl.Float64).max() for c in present]
    top = int(max((t for t in tops if isinstance(t, float)), default=0.0))
    step = max(1, math.ceil(top / 8))
    return alt.Axis(values=list(range(0, top + step, step)), format="d", title=title)


def _top(chart: object) -> alt.Chart:
    assert isinstance(chart, alt.Chart)
    return chart


def recompiles_by_model_pool(frame: pl.DataFrame) -> alt.Chart:
    """Requests that compiled and the recompiles requests triggered per model × hardware pool (grouped bars along
    the page, one row of them per pool), as requests paid them
    (:data:`~inferensics.analytics.weekly.COMPILING_REQUESTS`,
    :data:`~inferensics.analytics.weekly.REQUEST_RECOMPILES`).

    The models name the rows, level and whole (``labelLimit=0``): under upright bars, a third of the page wide per
    pool, their names stood on end and were read cut ("a-tiny", "coder-")."""
    counted = [COMPILING_REQUESTS, REQUEST_RECOMPILES]
    return _top(
        alt.Chart(
            _data(frame, [col.MODEL, col.HW_POOL, *counted]), title="Compiling requests and recompiles they triggered"
        )
        .transform_fold([COMPILING_REQUESTS, REQUEST_RECOMPILES], as_=["kind", "count"])
        .mark_bar()
        .encode(
            y=alt.Y(f"{col.MODEL}:N", title="model", axis=alt.Axis(labelLimit=0, labelAngle=0)),
            yOffset=alt.YOffset("kind:N"),
            x=alt.X("count:Q", axis=count_axis(frame, counted, "count")),
            color=alt.Color("kind:N", title=""),
            row=alt.Row(f"{col.HW_POOL}:N", title="hardware pool", header=alt.Header(labelAngle=0, labelAlign="left")),
            tooltip=[f"{col.MODEL}:N", f"{col.HW_POOL}:N", "kind:N", "count:Q"],
        )
        .properties(width=WIDTH // 2, height=alt.Step(12))
    )


def daily_by_model(frame: pl.DataFrame, metric: str, title: str) -> alt.Chart:
    """One line per model of ``metric`` per day (from ``fleet_timeseries`` with ``by=model``)."""
    counted = metric in frame.columns and frame.schema[metric].is_integer()
    tiny = number_format(frame, [metric])
    axis = (
        count_axis(frame, [metric], metric.replace("_", " "))
        if counted
        else alt.Axis(title=metric.replace("_", " "), format=tiny or alt.Undefined)
    )
    return _top(
        alt.Chart(_data(frame, ["bucket", "group", metric]), title=title)
        .mark_line(point=True)
        .encode(
            x=alt.X("bucket:T", title="day (UTC)"),
            y=alt.Y(f"{metric}:Q", axis=axis),
            color=alt.Color("group:N", title="model"),
            tooltip=["bucket:T", "group:N", f"{metric}:Q"],
        )
        .properties(width=WIDTH, height=220)
    )


def top_bars(frame: pl.DataFrame, label: str, value: str, title: str) -> alt.Chart:
    """Horizontal bars of ``value`` (a count) by ``label``, largest first; one bar per row, labels in full
    (rows whose labels would be equal once cut short are not merged into one bar)."""
    return _top(
        alt.Chart(_data(frame, [label, value]), title=title)
        .mark_bar()
        .encode(
            y=alt.Y(f"{label}:N", sort="-x", title=None, axis=alt.Axis(labelLimit=0)),
            x=alt.X(f"{value}:Q", axis=count_axis(frame, [value], value.replace("_", " "))),
            tooltip=[f"{label}:N", f"{value}:Q"],
        )
        .properties(width=WIDTH, height=alt.Step(18))
    )


def cache_hit_trend(frame: pl.DataFrame) -> alt.Chart:
    """Daily hit ratio per cache (from ``cache_trend``)."""
    return _top(
        alt.Chart(_data(frame, ["bucket", col.CACHE, "hit_ratio", "lookups"]), title="Cache hit ratio per day")
        .mark_line(point=True)
        .encode(
            x=alt.X("bucket:T", title="day (UTC)"),
            y=alt.Y("hit_ratio:Q", title="hit ratio", scale=alt.Scale(domain=[0, 1])),
            color=alt.Color(f"{col.CACHE}:N", title="cache"),
            tooltip=["bucket:T", f"{col.CACHE}:N", "hit_ratio:Q", "lookups:Q"],
        )
        .properties(width=WIDTH, height=220)
    )


def cache_growth(frame: pl.DataFrame) -> alt.Chart:
    """Cumulative bytes written per bundle × pool (from ``cache_growth``)."""
    data = frame.with_columns(
        pl.concat_str(pl.col(col.BUNDLE_ID).replace("", "(none)"), pl.lit(" @ "), pl.col(col.HW_POOL)).alias("series")
    )
    return _top(
        alt.Chart(_data(data, ["bucket", "series", "cumulative_bytes", "cumulative_entries"]), title="Cache growth")
        .mark_line(point=True)
        .encode(
            x=alt.X("bucket:T", title="day (UTC)"),
            y=alt.Y("cumulative_bytes:Q", title="bytes written (cumulative)"),
            color=alt.Color("series:N", title="bundle @ pool"),
            tooltip=["bucket:T", "series:N", "cumulative_bytes:Q", "cumulative_entries:Q"],
        )
        .properties(width=WIDTH, height=220)
    )


def canary_latency(evidence: pl.DataFrame) -> alt.LayerChart:
    """Per latency quantile the ratio candidate / baseline with its 95 % bootstrap interval, and the ratio
    tolerated: what the latency checks decide on. (Drawn in ms beside the two quantiles, the ratio's interval
    passed for an interval of the candidate's latency.)"""
    ratios = latency_ratios(evidence)
    data = _data(ratios, list(LATENCY_RATIO_COLUMNS))
    base = alt.Chart(data, title="Latency: candidate / baseline, with the ratio's 95 % bootstrap interval")
    # Log scale: a ratio of 2 and one of 0.5 lie as far from 1; a short run's interval spans decades.
    x_title, scale = "candidate / baseline (log scale)", alt.Scale(type="log")
    tooltip = ["metric:N", "ratio:Q", "ci_low:Q", "ci_high:Q", "baseline:Q", "candidate:Q", "outcome:N"]
    bars = base.mark_rule(strokeWidth=2).encode(
        y="metric:N", x=alt.X("ci_low:Q", title=x_title, scale=scale), x2="ci_high:Q", tooltip=tooltip
    )
    points = base.mark_point(filled=True, size=80).encode(
        y=alt.Y("metric:N", title="quantile"), x=alt.X("ratio:Q", title=x_title, scale=scale), tooltip=tooltip
    )
    limit = base.mark_tick(color="firebrick", thickness=2).encode(
        y="metric:N", x=alt.X("threshold:Q", title=x_title, scale=scale), tooltip=["metric:N", "threshold:Q"]
    )
    layered = alt.layer(bars, points, limit).properties(width=WIDTH, height=120)
    assert isinstance(layered, alt.LayerChart)
    return layered


def canary_rates(evidence: pl.DataFrame) -> alt.Chart:
    """Baseline and candidate rates side by side."""
    rates = evidence.filter(pl.col("check") == "rate")
    return _top(
        alt.Chart(_data(rates, ["metric", "baseline", "candidate", "p_value", "outcome"]), title="Rates")
        .transform_fold(["baseline", "candidate"], as_=["side", "rate"])
        .mark_bar()
        .encode(
            y=alt.Y("metric:N", title=""),
            yOffset="side:N",
            x=alt.X("rate:Q", title="share of requests", axis=alt.Axis(format="%")),
            color=alt.Color("side:N"),
            tooltip=["metric:N", "side:N", alt.Tooltip("rate:Q", format=".3%"), "p_value:Q", "outcome:N"],
        )
        .properties(width=WIDTH, height=alt.Step(14))
    )
