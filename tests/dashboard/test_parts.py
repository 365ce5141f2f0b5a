"""The dashboard's pure parts: kernel lines in generated code, range pinning, charts, launcher."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from inferensics import dashboard
from inferensics.analytics import canary as canary_rules
from inferensics.analytics.report.evidence import SHOWN, evidence_kind, evidence_table
from inferensics.analytics.storms import StormRule
from inferensics.collector.service_url import SERVICE_URL_ENV, TOKEN_ENV
from inferensics.dashboard._internal import charts
from inferensics.dashboard._internal.codemap import kernel_lines
from inferensics.dashboard._internal.filters import Filters, _parse_end, bucket_unit, describe
from inferensics.dashboard._internal.storm_rule import started_rule
from inferensics.dashboard._internal.tables import MISSING, byte_size, column_config
from inferensics.dashboard.launcher import STORM_FLOOR_ENV
from inferensics.schema import columns as col
from tests.dashboard.seed import KERNELS, OUTPUT_CODE

SNAPSHOTS = Path(__file__).parent / "snapshots"
T0 = datetime(2026, 11, 30, 18, 0, tzinfo=UTC)


def assert_snapshot(name: str, text: str) -> None:
    """``text`` equals the committed snapshot (``INFERENSICS_UPDATE_SNAPSHOTS=1`` rewrites it)."""
    path = SNAPSHOTS / name
    if os.environ.get("INFERENSICS_UPDATE_SNAPSHOTS") == "1":
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"missing snapshot {path}: run with INFERENSICS_UPDATE_SNAPSHOTS=1 and review it"
    assert text == path.read_text(encoding="utf-8"), f"{name} differs from its snapshot"


def test_public_api_is_pinned() -> None:
    assert sorted(dashboard.__all__) == [
        "APP_FILE", "DEFAULT_PORT", "dashboard_env", "start_dashboard", "streamlit_argv", "wait_until_up",
    ]  # fmt: skip
    assert dashboard.APP_FILE.is_file()


def test_kernel_lines_find_definitions_and_launches() -> None:
    names = [k[0] for k in KERNELS]
    found = {r[col.KERNEL_NAME]: r for r in kernel_lines(OUTPUT_CODE, names).iter_rows(named=True)}
    lines = OUTPUT_CODE.splitlines()
    assert found["extern_kernels.mm"]["defined_at"] is None
    assert [lines[n - 1].strip() for n in found["extern_kernels.mm"]["launched_at"]] == [
        "extern_kernels.mm(arg0_1, arg1_1, out=buf0)"
    ]
    gelu = found["triton_poi_fused_addmm_gelu_0"]
    assert lines[gelu["defined_at"] - 1].startswith("triton_poi_fused_addmm_gelu_0 = async_compile.triton(")
    assert len(gelu["launched_at"]) == 1
    missing = kernel_lines(OUTPUT_CODE, ["not_in_this_file"]).row(0, named=True)
    assert missing["defined_at"] is None
    assert missing["launched_at"] == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-30T19:00Z", datetime(2026, 11, 30, 19, 0, tzinfo=UTC)),
        ("2026-11-30T19:00:00 00:00", datetime(2026, 11, 30, 19, 0, tzinfo=UTC)),  # "+" arrives as a space
        ("2026-11-30T20:00+01:00", datetime(2026, 11, 30, 19, 0, tzinfo=UTC)),
        ("2026-11-30T19:00", datetime(2026, 11, 30, 19, 0, tzinfo=UTC)),
        ("yesterday", None),
    ],
)
def test_end_pin_of_the_url(text: str, expected: datetime | None) -> None:
    assert _parse_end(text) == expected


def test_range_description_and_bucket_unit() -> None:
    hour = Filters(start=T0, end=T0 + timedelta(hours=1), model="llama")
    assert describe(hour) == "2026-11-30 18:00 – 19:00 UTC · model **llama**"
    assert bucket_unit(hour) == "minute"
    assert bucket_unit(Filters(start=T0, end=T0 + timedelta(days=1))) == "hour"
    assert bucket_unit(Filters(start=T0, end=T0 + timedelta(days=30))) == "day"
    assert Filters(start=T0, end=T0, bundle="b1").params() == {"start": T0, "end": T0, "bundle": "b1"}


def test_table_columns_are_formatted_in_their_units() -> None:
    frame = pl.DataFrame(
        {
            "request_rate_per_s": [0.0814],
            "p95_ms": [65.3],
            "compile_seconds": [90.0],
            "cold_miss_cost_s": [240.0],
            "error_rate": [0.0887],
            "hit_ratio": [0.5],
            "growth": [1.5],
            col.REQUESTS: [293],
            "bytes": [1_200_000],
            "cumulative_bytes": [3_400_000],
            col.TOTAL_US: [300.0],
            col.GRAPH_US: [900],
        }
    )
    formats = {name: c["type_config"]["format"] for name, c in column_config(frame).items()}
    assert formats == {
        "request_rate_per_s": "%.3g /s",  # a rate, not a duration: it ends with "_s" too
        "p95_ms": "%.1f ms",
        "compile_seconds": "%.2f s",
        "cold_miss_cost_s": "%.2f s",
        "error_rate": "percent",
        "hit_ratio": "percent",
        "growth": "%.3g",
        # Sizes stay numbers (the column sorts by size) shown as "1.2MB"; microseconds say so.
        "bytes": "bytes",
        "cumulative_bytes": "bytes",
        col.TOTAL_US: "%.0f µs",
        col.GRAPH_US: "%.0f µs",
    }


@pytest.mark.parametrize(
    ("size", "shown"),
    [(None, "–"), (0, "0 bytes"), (80, "80 bytes"), (999, "999 bytes"), (1000, "1.0 kB"), (1_200_000, "1.2 MB"),
     (5.5e9, "5.5 GB"), (3e12, "3.0 TB"), (7e15, "7,000.0 TB")],
)  # fmt: skip
def test_byte_sizes_read_in_powers_of_a_thousand_like_the_tables(size: float | None, shown: str) -> None:
    assert byte_size(size) == shown


def test_chart_specs_match_their_snapshots() -> None:
    frame = pl.DataFrame(
        {
            col.BUCKET: [T0, T0, T0 + timedelta(minutes=1)],
            col.MODEL: ["a", "b", "a"],
            col.REQUESTS: [3, 4, 5],
            col.ERRORS: [0, 1, 2],
        }
    )
    specs = {
        "time_series": charts.time_series(
            frame, col.BUCKET, (col.REQUESTS, col.ERRORS), "Trend", value_title="requests"
        ).to_dict(),
        "stacked": charts.stacked_bars_over_time(
            frame, col.BUCKET, col.REQUESTS, col.MODEL, "By model", value_title="requests"
        ).to_dict(),
        "ranked": charts.ranked_bars(frame, col.MODEL, col.REQUESTS, "Top", value_title="requests").to_dict(),
        "ranked_ratio": charts.ranked_bars(
            pl.DataFrame({col.CACHE: ["fx_graph", "triton"], "hit_ratio": [0.25, 1.0]}),
            col.CACHE,
            "hit_ratio",
            "Hit ratio per cache",
            value_title="hit ratio",
            value_format="%",
        ).to_dict(),
    }
    for spec in specs.values():
        spec.pop("$schema", None)
    assert_snapshot("charts.json", json.dumps(specs, indent=1, sort_keys=True) + "\n")


class _Container:
    """Stands in for ``st`` or a column: keeps what ``vega_lite_chart`` was given."""

    def __init__(self) -> None:
        self.specs: list[dict[str, Any]] = []

    def vega_lite_chart(self, *, spec: dict[str, Any], width: str) -> None:
        self.specs.append(spec)


def test_drawn_charts_send_times_as_timestamps_on_a_canvas() -> None:
    frame = pl.DataFrame({col.BUCKET: [T0, T0 + timedelta(minutes=1)], col.REQUESTS: [3, 5], col.ERRORS: [0, 1]})
    box = _Container()
    charts.draw(box, charts.time_series(frame, col.BUCKET, (col.REQUESTS, col.ERRORS), "Trend"))
    (spec,) = box.specs
    assert spec["data"] == {"name": charts.DATASET, "format": {"parse": None}}
    assert spec["usermeta"] == {"embedOptions": {"renderer": "canvas"}}
    sent = spec["datasets"][charts.DATASET]
    assert sent.schema[col.BUCKET] == pl.Datetime("ms", "UTC")
    t1 = T0 + timedelta(minutes=1)
    assert sorted(sent.get_column(col.BUCKET).to_list()) == [T0, T0, t1, t1]
    assert spec["mark"]["aria"] is False


def test_drawn_charts_keep_parsing_when_a_time_is_not_one() -> None:
    frame = pl.DataFrame({col.BUCKET: ["2026-11-30 18:00", "later"], col.MODEL: ["a", "b"], col.REQUESTS: [3, 5]})
    box = _Container()
    charts.draw(box, charts.stacked_bars_over_time(frame, col.BUCKET, col.REQUESTS, col.MODEL, "By model"))
    (spec,) = box.specs
    assert spec["data"] == {"name": charts.DATASET}
    assert spec["datasets"][charts.DATASET].schema[col.BUCKET] == pl.String


def test_launcher_runs_streamlit_headless_and_passes_the_token_by_environment() -> None:
    argv = dashboard.streamlit_argv(port=9999, address="0.0.0.0")
    assert argv[1:5] == ["-P", "-m", "streamlit", "run"]
    assert argv[5] == str(dashboard.APP_FILE)
    flags = dict(zip(argv[6::2], argv[7::2], strict=True))
    assert flags["--server.headless"] == "true"
    assert flags["--server.port"] == "9999"
    assert flags["--browser.gatherUsageStats"] == "false"
    assert flags["--runner.magicEnabled"] == "false"
    assert "secret" not in " ".join(argv)
    env = dashboard.dashboard_env("http://svc:4318", "secret", base={"PATH": "/bin"})
    assert env == {
        "PATH": "/bin", SERVICE_URL_ENV: "http://svc:4318", TOKEN_ENV: "secret",
        "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false",
    }  # fmt: skip


def test_charts_title_their_value_axis_with_the_column_when_the_caller_gives_none() -> None:
    frame = pl.DataFrame({col.BUCKET: [T0], col.MODEL: ["a"], col.REQUESTS: [3], col.ERRORS: [1]})
    series = charts.time_series(frame, col.BUCKET, (col.REQUESTS, col.ERRORS), "Trend").to_dict()
    stacked = charts.stacked_bars_over_time(frame, col.BUCKET, col.REQUESTS, col.MODEL, "By model").to_dict()
    ranked = charts.ranked_bars(frame, col.MODEL, col.ERRORS, "Top").to_dict()
    assert series["encoding"]["y"]["title"] == "requests, errors"
    assert stacked["encoding"]["y"]["title"] == col.REQUESTS
    assert ranked["encoding"]["x"]["title"] == col.ERRORS


def _evidence(*rows: tuple[Any, ...]) -> pl.DataFrame:
    """Evidence rows in ``canary_compare``'s own schema (check, metric, baseline, candidate, ci_low, ci_high,
    p_value, threshold, outcome)."""
    return pl.DataFrame([(*r, "the rule") for r in rows], schema=canary_rules.EVIDENCE_SCHEMA, orient="row")


def test_canary_evidence_shows_every_value_in_its_unit() -> None:
    nan = float("nan")
    frame = _evidence(
        ("latency", "p95_ms", 38.74, 67.68, 1.685, 1.811, nan, 1.1, "fail"),
        ("rate", "error_rate", 0.0124, 0.1818, 0.1253, 0.2563, 1.95e-7, 0.01, "fail"),
        ("rate", "fallback_rate", 0.02, 0.0, 0.0, 0.0283, 1.0, 0.01, "pass"),
        ("output", "argmax_agreement", 50.0, 0.8, 0.6696, 0.8876, nan, 0.99, "fail"),
        ("output", "fp_mean_ks", 0.01234, 0.01311, 0.052, 0.052, 0.3, 0.1, "pass"),
        ("verdict", "requests", 161.0, 132.0, None, None, None, None, "fail"),
    )
    shown = evidence_table(frame)
    assert shown.columns == list(SHOWN)
    assert shown.select("baseline", "candidate", "interval", "threshold").rows() == [
        ("38.7 ms", "67.7 ms", "1.69 – 1.81 × baseline", "1.1 × baseline"),  # the ratio's interval
        ("1.24 %", "18.18 %", "12.53 – 25.63 %", "p < 0.01"),
        ("2.00 %", "0.00 %", "0.00 – 2.83 %", "p < 0.01"),  # a rate of 0.02 that no one reads as 0.02 ms
        ("50 pairs", "80.00 %", "66.96 – 88.76 %", "≥ 99.00 %"),
        ("median 0.01234", "median 0.01311", "D = 0.052", "D ≤ 0.1"),
        ("161 requests", "132 requests", "–", "–"),
    ]
    assert shown.get_column("p_value").to_list()[1] == pytest.approx(1.95e-7)
    assert shown.get_column("outcome").to_list() == frame.get_column("outcome").to_list()


def test_canary_evidence_of_an_unknown_check_shows_the_metric_name_not_a_guessed_unit() -> None:
    frame = _evidence(("memory", "peak_gib", 1.5, 2.25, None, None, None, 3.0, "pass"))
    assert evidence_kind("memory", "peak_gib") is None
    assert evidence_table(frame).select("baseline", "candidate", "interval", "threshold").row(0) == (
        "1.5 (peak_gib)", "2.25 (peak_gib)", "– – –", "3 (peak_gib)",
    )  # fmt: skip


def test_a_miss_without_a_hit_to_price_it_is_left_off_the_cold_miss_chart() -> None:
    """The chart drew an unpriced miss (``cold_miss_cost_s`` empty) as a 0 s bar labelled ``/ / aot_autograd``
    (imported rows carry no model or pool); it now leaves it off and counts it for the caption."""
    from inferensics.dashboard.views.compile_health import priced_misses

    health = pl.DataFrame(
        {
            col.MODEL: ["", "llama"],
            col.HW_POOL: ["", "h200-a"],
            col.CACHE: ["aot_autograd", "fx_graph"],
            "misses": [3, 2],
            "cold_miss_cost_s": [None, 4.5],
        }
    )
    priced, unpriced = priced_misses(health)
    assert priced.select("slice", "cold_miss_cost_s").rows() == [("llama / h200-a / fx_graph", 4.5)]
    assert unpriced == 3
    labelled, _ = priced_misses(health.with_columns(pl.lit(1.0).alias("cold_miss_cost_s")))
    assert labelled.get_column("slice").to_list()[0] == "(no model) / (no pool) / aot_autograd"


def test_recompiles_over_time_name_a_missing_model() -> None:
    """Recompiles of an imported log without a model label are charted as "(no model)", as the rest of the
    dashboard names it, not as a blank series; the pools of a model add up."""
    from inferensics.dashboard.views.compile_health import sum_by_model

    series = pl.DataFrame(
        {
            col.BUCKET: [T0, T0, T0, T0 + timedelta(hours=1)],
            col.MODEL: ["", "llama", "llama", "llama"],
            col.HW_POOL: ["", "h200-a", "h200-b", "h200-a"],
            col.RECOMPILES: [3, 1, 2, 5],
        }
    )
    assert sum_by_model(series, col.RECOMPILES).sort(col.BUCKET, col.MODEL).rows() == [
        (T0, "(no model)", 3), (T0, "llama", 3), (T0 + timedelta(hours=1), "llama", 5),
    ]  # fmt: skip


def test_every_recorded_field_of_a_request_reads_a_missing_value_as_a_dash() -> None:
    """The request page's "Every recorded field" turned each value into text first: a null read "None", an
    empty list "[]" and an empty string nothing. Each now reads "–" as the rest of the page shows an empty
    value; a zero and a false stay what they are."""
    from inferensics.dashboard.views.request import recorded_fields

    d = {
        col.MODEL: "llama",
        "capture_bytes": None,
        col.FALLBACK_REASON: "",
        col.TRAFFIC_CLASS: " ",
        "recompile_reasons": [],
        "guard_failure_reasons": ["L['x'].size()[0] == 2"],
        col.FP_NAN: 0,
        "inputs_captured": False,
    }
    assert recorded_fields(d).rows() == [
        (col.MODEL, "llama"), ("capture_bytes", "–"), (col.FALLBACK_REASON, "–"), (col.TRAFFIC_CLASS, "–"),
        ("recompile_reasons", "–"), ("guard_failure_reasons", "[\"L['x'].size()[0] == 2\"]"), (col.FP_NAN, "0"),
        ("inputs_captured", "False"),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("value", "bold", "code"),
    [(0, "**0**", "`0`"), (0.0, "**0.0**", "`0.0`"), (False, "**False**", "`False`"), ("a_b", r"**a\_b**", "`a_b`"),
     (None, MISSING, MISSING), ("", MISSING, MISSING), ("  ", MISSING, MISSING), ([], MISSING, MISSING)],
)  # fmt: skip
def test_the_request_headline_reads_a_zero_as_a_value_and_only_nothing_as_missing(
    value: object, bold: str, code: str
) -> None:
    """The request page's headline helpers tested truthiness: a recorded 0 read "–" as if nothing was there.
    Only a null, a blank string or an empty list is missing, as the recorded-fields table reads them."""
    from inferensics.dashboard.views.request import _bold, _code

    assert (_bold(value), _code(value)) == (bold, code)


def test_the_dashboard_starts_with_the_storm_floors_it_was_given(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """``inferensics dashboard --min-recompiles 3`` (the demo's printed command): the pages' storm rule starts
    there; a floor the rule refuses keeps its default, with one line in the log, and the good one holds."""
    default = StormRule()
    try:
        monkeypatch.setenv(STORM_FLOOR_ENV["min_recompiles"], "3")
        started_rule.cache_clear()
        assert started_rule() == StormRule(min_recompiles=3)
        monkeypatch.setenv(STORM_FLOOR_ENV["min_compile_seconds"], "-1")
        started_rule.cache_clear()
        assert started_rule() == StormRule(min_recompiles=3)
        assert STORM_FLOOR_ENV["min_compile_seconds"] in caplog.text
        assert f"keeps its default {default.min_compile_seconds:g}" in caplog.text
        monkeypatch.delenv(STORM_FLOOR_ENV["min_recompiles"])
        monkeypatch.delenv(STORM_FLOOR_ENV["min_compile_seconds"])
        started_rule.cache_clear()
        assert started_rule() == default
    finally:
        started_rule.cache_clear()
