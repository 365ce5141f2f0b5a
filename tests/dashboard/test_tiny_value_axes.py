"""A value axis of tiny numbers reads in significant digits, never as a row of zeros (issue 20: a chart read
"0.000000"): Vega picks an axis's decimals from its tick step, so costs of a few microseconds counted in
seconds were labelled "0.0000000 0.0000005 ...". Rendered by Vega itself (vl-convert), as the page draws."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import altair as alt
import polars as pl
import pytest
import vl_convert

from inferensics.analytics.report import charts as report_charts
from inferensics.dashboard._internal import charts

ZEROS = re.compile(r"^-?0\.0{4,}$")
"""A label that is nothing but zeros after the point ("0.0000", "0.000000")."""


def _labels(chart: alt.Chart) -> list[str]:
    svg = vl_convert.vegalite_to_svg(chart.to_dict())
    return re.findall(r"<text[^>]*>([^<]*)</text>", svg)


def _times(n: int) -> list[datetime]:
    start = datetime(2026, 12, 1, 10, tzinfo=UTC)
    return [start + timedelta(minutes=i) for i in range(n)]


TINY = [0.0, 1.5e-6, 4e-6, 5.2e-6]


@pytest.mark.parametrize("kind", ["ranked", "series", "stacked"])
def test_dashboard_axes_of_tiny_values_are_not_zeros(kind: str) -> None:
    frame = pl.DataFrame({"bucket": _times(4), "slice": ["a", "b", "c", "d"], "cost_s": TINY})
    if kind == "ranked":
        chart = charts.ranked_bars(frame, "slice", "cost_s", "Cold-miss cost", value_title="compile time (s)")
    elif kind == "series":
        chart = charts.time_series(frame, "bucket", ["cost_s"], "Cost", value_title="compile time (s)")
    else:
        chart = charts.stacked_bars_over_time(frame, "bucket", "cost_s", "slice", "Cost", value_title="s")
    labels = _labels(chart)
    numbers = [t for t in labels if re.fullmatch(r"[-0-9.,e+]+", t)]
    assert numbers, labels
    assert not [t for t in numbers if ZEROS.match(t)], numbers
    assert "5e-6" in numbers or "0.000005" in numbers, numbers


def test_report_axis_of_tiny_values_is_not_zeros() -> None:
    frame = pl.DataFrame({"bucket": _times(4), "group": ["m"] * 4, "compile_s_per_request": TINY})
    labels = _labels(report_charts.daily_by_model(frame, "compile_s_per_request", "Compile s per request"))
    numbers = [t for t in labels if re.fullmatch(r"[-0-9.,e+]+", t)]
    assert numbers, labels
    assert not [t for t in numbers if ZEROS.match(t)], numbers


def test_ordinary_values_keep_vegas_own_labels() -> None:
    frame = pl.DataFrame({"slice": ["a", "b"], "cost_s": [0.5, 12.25]})
    chart = charts.ranked_bars(frame, "slice", "cost_s", "Cold-miss cost", value_title="compile time (s)")
    assert "format" not in chart.to_dict()["encoding"]["x"].get("axis", {})
