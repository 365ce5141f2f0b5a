"""Every chart the pages draw says what its value axis counts, and in which unit (against the seeded service)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from inferensics.dashboard._internal.charts import LATENCY_RATIO_TITLE, TITLE_LIMIT
from inferensics.dashboard.views.kernels import SIGNATURES_TITLE
from inferensics.dashboard.views.request import ID_KEY
from tests.dashboard.apptest import assert_clean, open_page
from tests.dashboard.conftest import SeededService
from tests.dashboard.seed import DRILL_ID

pytestmark = pytest.mark.slow

POSITION = ("x", "y")


def value_axes(spec: dict[str, Any]) -> list[str | None]:
    """The titles of the quantitative position axes of a drawn spec (of each layer's, for a layered one)."""
    views = spec.get("layer", [spec])
    return [
        view["encoding"][channel].get("title")
        for view in views
        for channel in POSITION
        if view.get("encoding", {}).get(channel, {}).get("type") == "quantitative"
    ]


def drawn(at: AppTest) -> dict[str, list[str | None]]:
    """Chart title → the titles of its value axes, for every chart on the page."""
    specs = [json.loads(c.proto.spec) for c in at.get("vega_lite_chart")]
    return {str(s.get("title")): value_axes(s) for s in specs}


@pytest.mark.parametrize(
    ("page", "state", "expected"),
    [
        ("views/overview.py", {}, {
            "Requests per minute by model": ["requests"],
            "Trouble per minute": ["count"],
        }),
        ("views/bundles.py", {}, {"Requests per bundle": ["requests"]}),
        ("views/compile_health.py", {}, {
            "Recompiles by model": ["recompiles"],
            "Compile seconds by model": ["compile time (s)"],
            "Top recompile reasons": ["recompiles"],
            "Hit ratio per cache": ["hit ratio"],
            "Cold-miss cost (compile s a warm cache would save)": ["compile time (s)"],
            "Daily hit ratio per cache": ["hit ratio"],
            "New specializations (graph keys first seen)": ["new graph keys"],
        }),
        ("views/canary.py", {}, {
            LATENCY_RATIO_TITLE: ["candidate / baseline (log scale)"] * 4,
            "Rates": ["share of requests"],
        }),
        ("views/kernels.py", {}, {SIGNATURES_TITLE: ["op signatures served"]}),
        ("views/request.py", {ID_KEY: DRILL_ID}, {"Sampled kernel time": ["kernel time (µs)"]}),
    ],
)  # fmt: skip
def test_every_value_axis_says_what_it_counts(
    seeded: SeededService, page: str, state: dict[str, Any], expected: dict[str, list[str]]
) -> None:
    at = open_page(seeded, page, **state)
    assert_clean(at)
    assert drawn(at) == expected
    # A vertical value-axis title longer than the plot made Vega shrink the plot to a strip and push the chart's
    # title out of the canvas (the overview's "errors, fallbacks, recompiles"): every such title is capped.
    for spec in (json.loads(c.proto.spec) for c in at.get("vega_lite_chart")):
        for view in spec.get("layer", [spec]):
            y = view.get("encoding", {}).get("y", {})
            if y.get("type") == "quantitative":
                assert y.get("axis", {}).get("titleLimit") == TITLE_LIMIT, spec.get("title")


def test_ratio_axes_are_labelled_in_percent(seeded: SeededService) -> None:
    at = open_page(seeded, "views/compile_health.py")
    specs = {s["title"]: s for s in (json.loads(c.proto.spec) for c in at.get("vega_lite_chart"))}
    assert specs["Hit ratio per cache"]["encoding"]["x"]["axis"]["format"] == "%"
    assert specs["Daily hit ratio per cache"]["encoding"]["y"]["axis"]["format"] == "%"
