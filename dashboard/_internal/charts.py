"""Altair chart builders: a Polars frame in, a chart out; pages draw them, analytics never does.

Every builder is a pure function of its frame, so a test can snapshot ``chart.to_dict()``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import altair as alt
import polars as pl
from altair.utils import schemapi

from inferensics.analytics.report.charts import number_format
from inferensics.analytics.report.evidence import latency_ratios

HEIGHT: Final = 300
"""Chart height in pixels, title, axes and legend included (Streamlit fits the whole chart into it; at 240 the
plot itself was a strip of about 80): two charts side by side fit a laptop screen."""
TITLE_LIMIT: Final = 150
"""Longest value-axis title in pixels (about 25 characters); a longer one ends in an ellipsis."""

# Altair's debug mode validates every schema object as it is built: 0.3-0.4 s for a 1,200-record chart on
# the 2-core machine, on every page run. The specs are validated where they are made testable (the snapshot
# tests call ``to_dict()``, which validates), so the dashboard process builds without it.
schemapi.disable_debug_mode()


DATASET: Final = "records"
"""Name of the dataset a drawn chart's records travel under (see :func:`draw`)."""


def draw(container: Any, chart: alt.Chart | alt.LayerChart) -> None:
    """Draw ``chart`` in ``container`` (``st`` or a column), its records sent as an Arrow table.

    ``st.altair_chart`` validates the spec and copies every record through Altair's ``to_dict`` (0.2-0.5 s
    for 1,200 records here); this sends the spec without its data, unvalidated, and the data as a frame.
    The frame goes as a *named* dataset: Streamlit's unnamed ``data`` argument reaches Vega with an extra
    empty datum, which shows as an "undefined" entry in a colour legend.

    What the browser does per record is what the first screen waits for (measured in headless Chromium on
    the 2-core machine, the overview's two charts: 0.75-0.9 s of Vega work before, about 0.5 s after):

    * time fields travel as timestamps (the records hold them as text, which keeps specs snapshot-stable)
      and Vega-Lite's implicit parsing is off: otherwise every time string is parsed by a ``toDate``
      formula per record, and Streamlit's Vega runs expressions through an interpreter;
    * drawn on a canvas: SVG makes a DOM node per bar and point (Streamlit itself switches to canvas only
      above 2,000 records); the builders also leave out the per-mark ARIA descriptions, another
      interpreted expression per record (the chart keeps its title; the tooltips still tell each value).
    """
    data = chart.data if isinstance(chart, alt.Chart) else None
    values = getattr(data, "values", None) if isinstance(data, alt.Data) else None
    if not isinstance(values, list) or not values:
        spec = chart.to_dict(validate=False)
    else:
        bare = chart.copy(deep=False)
        bare.data = alt.Data(name=DATASET)  # type: ignore[no-untyped-call]
        spec = bare.to_dict(validate=False)
        frame, parsed = _timestamps(pl.DataFrame(values), _temporal_fields(spec))
        if parsed:
            spec["data"]["format"] = {"parse": None}
        spec["datasets"] = {DATASET: frame}
    spec["usermeta"] = {"embedOptions": {"renderer": "canvas"}}
    container.vega_lite_chart(spec=spec, width="stretch")


def _temporal_fields(spec: dict[str, Any]) -> set[str]:
    """The fields a single-view ``spec`` encodes as time (``x``, tooltips, ...)."""
    encoding = spec.get("encoding", {})
    channels = [d for v in encoding.values() for d in (v if isinstance(v, list) else [v]) if isinstance(d, dict)]
    return {d["field"] for d in channels if d.get("type") == "temporal" and isinstance(d.get("field"), str)}


def _timestamps(frame: pl.DataFrame, fields: set[str]) -> tuple[pl.DataFrame, bool]:
    """``frame`` with its text time ``fields`` as UTC timestamps in ms; whether every time field now is one
    (only then may the spec turn Vega-Lite's parsing off)."""
    text = [f for f in fields if f in frame.columns and frame.schema[f] == pl.String]
    if not fields or any(f in frame.columns and frame.schema[f] not in (pl.String, pl.Datetime) for f in fields):
        return frame, False
    try:
        parsed = frame.with_columns(pl.col(f).str.to_datetime(time_zone="UTC", time_unit="ms") for f in text)
    except pl.exceptions.PolarsError:
        return frame, False
    if any(parsed.get_column(f).null_count() != frame.get_column(f).null_count() for f in text):
        return frame, False
    return parsed, True


def _data(frame: pl.DataFrame) -> alt.Data:
    # Plain records keep the spec independent of the frame library and snapshot-stable.
    return alt.Data(values=frame.to_dicts())  # type: ignore[no-untyped-call]


WHOLE_UNIT: Final = {
    "%H:%M": "utcseconds(datum.value) == 0",
    "%m-%d %H:%M": "utcminutes(datum.value) == 0 && utcseconds(datum.value) == 0",
}
"""Label format → the Vega condition that a tick falls on a whole unit of it (other formats: whole days)."""


def _time_axis(x: str, time_format: str) -> alt.X:
    # Times are UTC everywhere in the product; the browser's zone must not shift the axis. (A labelExpr,
    # because Vega-Lite's axis ``formatType: utc`` was ignored by the renderer here.) Only ticks on a whole
    # unit of the format get a label: Vega's own ticks over a few minutes come every 15 s, which a minute
    # format labelled two to four times ("03:40 03:40 03:40").
    whole = WHOLE_UNIT.get(time_format, "utchours(datum.value) == 0 && utcminutes(datum.value) == 0")
    return alt.X(
        f"{x}:T", title=None, scale=alt.Scale(type="utc"),
        axis=alt.Axis(labelExpr=f"{whole} ? utcFormat(datum.value, '{time_format}') : ''", labelOverlap=True),
    )  # fmt: skip


def _value_axis(value_format: str | None) -> alt.Axis:
    # The title is cut at TITLE_LIMIT: a longer one made Vega shrink the plot to a strip and push the chart's
    # title out of the canvas (Streamlit fits the whole chart, axis titles included, into HEIGHT).
    if value_format:
        return alt.Axis(format=value_format, titleLimit=TITLE_LIMIT)
    return alt.Axis(titleLimit=TITLE_LIMIT)


def _tooltip_format(value_format: str | None) -> str:
    # A tooltip tells the exact value: a ratio axis labelled "3%" gets "3.23%" there.
    if value_format is None:
        return ",.3~f"
    return ".2%" if value_format.endswith("%") else value_format


def _with_tiny(frame: pl.DataFrame, columns: Sequence[str], value_format: str | None) -> str | None:
    """``value_format``, or significant digits when every value is tiny (a row of zeros otherwise)."""
    return value_format or number_format(frame, list(columns))


def time_series(
    frame: pl.DataFrame,
    x: str,
    values: Sequence[str],
    title: str,
    *,
    value_title: str | None = None,
    value_format: str | None = None,
    time_format: str = "%H:%M",
) -> alt.Chart:
    """One line per column of ``values`` over the time column ``x``.

    ``value_title`` names what the y axis counts and its unit ("requests", "latency (ms)"; the pages always
    give one, the column names are the fallback); ``value_format`` is a d3 format for its labels and tooltips
    ("%" for a ratio).
    """
    present = [v for v in values if v in frame.columns]
    value_title = value_title or ", ".join(present)
    value_format = _with_tiny(frame, present, value_format)
    long = frame.select(x, *present).unpivot(index=x, on=present, variable_name="series", value_name="value")
    long = long.with_columns(pl.col(x).cast(pl.String))
    chart: alt.Chart = (
        alt.Chart(_data(long), title=title, height=HEIGHT)
        .mark_line(point=True, aria=False)
        .encode(
            x=_time_axis(x, time_format),
            y=alt.Y("value:Q", title=value_title, axis=_value_axis(value_format)),
            color=alt.Color("series:N", title=None, legend=alt.Legend(orient="bottom")),
            tooltip=[
                alt.Tooltip(f"{x}:T", format="%Y-%m-%d %H:%M", formatType="utc"),
                "series:N",
                alt.Tooltip("value:Q", title=value_title, format=_tooltip_format(value_format)),
            ],
        )
    )
    return chart


def stacked_bars_over_time(
    frame: pl.DataFrame,
    x: str,
    value: str,
    color: str,
    title: str,
    *,
    value_title: str | None = None,
    time_format: str = "%H:%M",
) -> alt.Chart:
    """Stacked bars of ``value`` per ``color`` category over the time column ``x``; ``value_title`` names
    what the y axis counts and its unit ("recompiles", "compile time (s)"; the pages always give one, the
    column name is the fallback)."""
    value_title = value_title or value
    data = frame.select(x, value, color).with_columns(pl.col(x).cast(pl.String), pl.col(color).cast(pl.String))
    # The bars stack: their sums are tiny only when the column's total is.
    tiny = number_format(frame.select(pl.col(value).abs().sum()), [value])
    chart: alt.Chart = (
        alt.Chart(_data(data), title=title, height=HEIGHT)
        .mark_bar(aria=False)
        .encode(
            x=_time_axis(x, time_format),
            y=alt.Y(f"sum({value}):Q", title=value_title, axis=_value_axis(tiny)),
            color=alt.Color(f"{color}:N", title=None, legend=alt.Legend(orient="bottom", labelLimit=300)),
            tooltip=[
                alt.Tooltip(f"{x}:T", format="%Y-%m-%d %H:%M", formatType="utc"),
                f"{color}:N",
                alt.Tooltip(f"sum({value}):Q", title=value_title, format=_tooltip_format(tiny)),
            ],
        )
    )
    return chart


def ranked_bars(
    frame: pl.DataFrame,
    category: str,
    value: str,
    title: str,
    *,
    value_title: str | None = None,
    value_format: str | None = None,
    top: int = 10,
) -> alt.Chart:
    """Horizontal bars of the ``top`` categories by ``value``, largest first.

    ``value_title`` names what the x axis counts and its unit (the pages always give one, the column name is
    the fallback); ``value_format`` is a d3 format for its labels and tooltips ("%" for a ratio). The
    categories' axis stays untitled: its labels say what they are.
    """
    value_title = value_title or value
    data = frame.select(pl.col(category).cast(pl.String), value).sort(value, descending=True).head(top)
    value_format = _with_tiny(data, [value], value_format)
    # A count gets whole-number ticks: "0.00 0.10 ... 1.00" for one recompile reads as a fraction of one.
    axis = (
        alt.Axis(tickMinStep=1, format="d", titleLimit=TITLE_LIMIT)
        if data.schema[value].is_integer()
        else _value_axis(value_format)
    )
    chart: alt.Chart = (
        alt.Chart(_data(data), title=title, height=alt.Step(28))
        .mark_bar()
        .encode(
            x=alt.X(f"{value}:Q", title=value_title, axis=axis),
            y=alt.Y(f"{category}:N", sort="-x", title=None, axis=alt.Axis(labelLimit=360)),
            tooltip=[
                f"{category}:N",
                alt.Tooltip(f"{value}:Q", title=value_title, format=_tooltip_format(value_format)),
            ],
        )
    )
    return chart


def stacked_ranked_bars(
    frame: pl.DataFrame, category: str, stack: str, value: str, title: str, *, value_title: str
) -> alt.Chart:
    """Horizontal bars of ``value`` per ``category``, stacked by ``stack`` (a colour each), largest total first;
    ``value`` is a count (whole-number ticks)."""
    data = frame.select(pl.col(category).cast(pl.String), pl.col(stack).cast(pl.String), value)
    chart: alt.Chart = (
        alt.Chart(_data(data), title=title, height=alt.Step(28))
        .mark_bar()
        .encode(
            x=alt.X(f"{value}:Q", title=value_title, axis=alt.Axis(tickMinStep=1, format="d", titleLimit=TITLE_LIMIT)),
            y=alt.Y(f"{category}:N", sort="-x", title=None, axis=alt.Axis(labelLimit=360)),
            color=alt.Color(f"{stack}:N", title=stack.replace("_", " ")),
            tooltip=[f"{category}:N", f"{stack}:N", alt.Tooltip(f"{value}:Q", title=value_title)],
        )
    )
    return chart


LATENCY_RATIO_TITLE: Final = "Latency: candidate / baseline (95 % interval of the ratio)"
"""The canary page's latency chart: what the latency checks compare with the tolerated ratio."""


def canary_latency(evidence: pl.DataFrame) -> alt.LayerChart:
    """Canary latency as the rule reads it: per quantile the ratio candidate / baseline (a point), its 95 %
    bootstrap interval (a whisker) and the ratio tolerated (a red tick), on a log scale around 1 (no change).

    ``evidence`` holds the rows of ``canary_compare`` (its ``latency`` rows: metric, baseline and candidate in
    ms, ci_low and ci_high the ratio's interval, threshold the ratio tolerated). The interval is the ratio's,
    never the candidate's latency: drawn in ms beside the quantiles it read as one (an axis to 900,000 ms for a
    run whose longest request took 36 s).
    """
    rows = latency_ratios(evidence)
    y = alt.Y("metric:N", title=None, sort=None)
    x_title = "candidate / baseline (log scale)"
    # Log scale: 2x slower and 2x faster lie as far from 1; a short run's interval spans decades.
    x_scale = alt.Scale(type="log")
    tooltip = [
        "metric:N", alt.Tooltip("ratio:Q", format=".3~g", title="candidate / baseline"),
        alt.Tooltip("ci_low:Q", format=".3~g", title="95 % interval, low"),
        alt.Tooltip("ci_high:Q", format=".3~g", title="95 % interval, high"),
        alt.Tooltip("threshold:Q", format=".3~g", title="fails above"),
        alt.Tooltip("baseline:Q", format=",.1f", title="baseline (ms)"),
        alt.Tooltip("candidate:Q", format=",.1f", title="candidate (ms)"),
        "outcome:N",
    ]  # fmt: skip
    data = _data(rows)
    whisker = (
        alt.Chart(data, height=alt.Step(36))
        .mark_rule(strokeWidth=3, opacity=0.5)
        .encode(y=y, x=alt.X("ci_low:Q", title=x_title, scale=x_scale), x2="ci_high:Q", tooltip=tooltip)
    )
    points = (
        alt.Chart(data)
        .mark_point(filled=True, size=90)
        .encode(y=y, x=alt.X("ratio:Q", title=x_title, scale=x_scale), tooltip=tooltip)
    )
    limit = (
        alt.Chart(data)
        .mark_tick(color="#d62728", thickness=2)
        .encode(y=y, x=alt.X("threshold:Q", title=x_title, scale=x_scale), tooltip=tooltip)
    )
    same = (
        alt.Chart(_data(pl.DataFrame({"same": [1.0]})))
        .mark_rule(strokeDash=[4, 4], color="#888888")
        .encode(x=alt.X("same:Q", title=x_title, scale=x_scale))
    )
    return alt.LayerChart(layer=[same, whisker, points, limit], title=LATENCY_RATIO_TITLE)
