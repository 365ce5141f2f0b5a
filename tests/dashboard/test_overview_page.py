"""The on-call overview page against the seeded service."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import polars as pl
import pyarrow as pa
import pytest
from streamlit.testing.v1 import AppTest
from streamlit.testing.v1.element_tree import Title

from inferensics.analytics.storms import StormRule
from inferensics.dashboard._internal import charts
from inferensics.dashboard._internal.filters import (
    BUNDLE_KEY,
    MODEL_KEY,
    NOW_KEY,
    PENDING_KEY,
    POOL_KEY,
    RANGE_KEY,
    TRAFFIC_KEY,
    with_quiet_buckets,
)
from inferensics.dashboard._internal.storm_rule import floor_key
from inferensics.dashboard.views import overview, weekly_report
from inferensics.schema import RequestEvent
from inferensics.schema.events import FP_COMPARABLE
from tests.dashboard.apptest import assert_clean, metric, open_page, texts
from tests.dashboard.conftest import SeededService
from tests.dashboard.expected import spikes, storm_hours
from tests.dashboard.seed import (
    BATCH,
    CANDIDATE,
    GB_ID,
    LLAMA,
    MISTRAL,
    POOL_A,
    POOL_B,
    STORM_PATTERN,
    STORM_RECOMPILES,
)

pytestmark = pytest.mark.slow


def assert_headline(at: AppTest, requests: list[RequestEvent]) -> None:
    """The headline metrics are those of ``requests``."""
    n = len(requests)
    assert metric(at, "Requests") == f"{n:,}"
    assert metric(at, "Error rate") == f"{100 * sum(r.status == 'error' for r in requests) / n:.2f} %"
    assert metric(at, "Eager fallback rate") == f"{100 * sum(r.outcome == 'fallback' for r in requests) / n:.2f} %"
    assert metric(at, "Request recompiles") == f"{sum(r.recompiles for r in requests):,}"
    seconds = sum(r.compile_ms for r in requests) / 1000
    shown = f"{seconds:,.1f} s" if seconds < 60 else f"{seconds / 60:,.1f} min" if seconds < 3600 else None
    assert metric(at, "Compile time") == (shown or f"{seconds / 3600:,.1f} h")


def test_overview_headline_matches_the_seed(seeded: SeededService) -> None:
    at = open_page(seeded)
    assert_clean(at)
    assert_headline(at, seeded.facts.requests)
    assert metric(at, "Request recompiles") == f"{STORM_RECOMPILES}"
    # Non-finite outputs, and their share of the requests whose output was fingerprinted (not of all).
    requests = seeded.facts.requests
    bad = sum(r.fp_nan + r.fp_inf > 0 for r in requests)
    fingerprinted = sum(r.fp_status in FP_COMPARABLE for r in requests)
    (nonfinite,) = [m for m in at.metric if m.label == "Non-finite"]
    assert (nonfinite.value, nonfinite.delta) == (
        f"{bad:,}",
        f"{100 * bad / fingerprinted:.2f} % of {fingerprinted:,}",
    )


def _fleet_scale_headline() -> None:
    import polars as pl

    from inferensics.dashboard.views.overview import headline
    from inferensics.schema import columns as col

    headline(pl.DataFrame({
        col.REQUESTS: [1_534_210], col.ERRORS: [1_811], col.FALLBACKS: [402], col.RECOMPILES: [12_345],
        "p95_ms": [122.6], col.COMPILE_SECONDS: [10_034.8], col.NONFINITE: [37], col.FINGERPRINTED: [47_900],
    }))  # fmt: skip


def test_headline_values_fit_a_laptop_at_fleet_scale() -> None:
    """Walk 42 (fleet D4): seven metrics in one row were cut at 1440 px ("Compile time 10,03…", "Request recom…"),
    hiding the magnitude. Two rows of four, and compile time in hours past one (the exact seconds in its help)."""
    at = AppTest.from_function(_fleet_scale_headline, default_timeout=60).run()
    assert_clean(at)
    assert [len(row.children) for row in at.main.children.values()] == [4, 4]  # two rows of st.columns(4)
    assert [(m.label, m.value) for m in at.metric] == [
        ("Requests", "1,534,210"), ("Error rate", "0.12 %"), ("Eager fallback rate", "0.03 %"),
        ("Request recompiles", "12,345"), ("Worst slice p95", "122.6 ms"), ("Compile time", "2.8 h"),
        ("Non-finite", "37"),
    ]  # fmt: skip
    (compile_time,) = [m for m in at.metric if m.label == "Compile time"]
    assert "10,034.8 s" in compile_time.proto.help


def test_overview_draws_its_title_first_and_charts_with_named_records(seeded: SeededService) -> None:
    at = open_page(seeded)
    first = next(iter(at.main.children.values()))
    assert isinstance(first, Title), first
    assert first.value == "On-call overview"
    drawn = at.get("vega_lite_chart")
    assert len(drawn) == 2
    for chart in drawn:
        # Records as a named Arrow dataset: Streamlit's unnamed chart data gave the legend an "undefined" entry;
        # times as timestamps, so the browser parses none, and drawn on a canvas.
        assert not chart.proto.data.data
        spec = json.loads(chart.proto.spec)
        assert spec["data"] == {"name": charts.DATASET, "format": {"parse": None}}
        assert spec["usermeta"]["embedOptions"]["renderer"] == "canvas"
        assert [d.name for d in chart.proto.datasets] == [charts.DATASET]
        assert len(chart.proto.datasets[0].data.data) > 0


def test_overview_highlights_the_storm_and_the_spikes(seeded: SeededService) -> None:
    at = open_page(seeded)
    storms = [e.value for e in at.error if "Recompile storm" in e.value]
    assert storms, [e.value for e in at.error]
    # The storm lies in one hour or straddles two; each hour reaching the floor is one storm.
    expected = storm_hours(seeded.facts.requests)
    assert len(storms) == len(expected)
    for (model, pool, hour), n in expected.items():
        line = (
            f"**Recompile storm** · {model} / {pool} · hour of {hour:%Y-%m-%d %H:%M} UTC: "
            f"{n:,} recompiles (records, failed compiles too),"
        )
        assert any(s.startswith(line) and STORM_PATTERN in s for s in storms), (line, storms)
    # The rule it applies, stated by the rule itself (the weekly report states the same sentence).
    assert StormRule().describe() in texts(at)
    alerts = [w.value for w in at.warning]
    for kind, counted in (("Error spike", "errors"), ("Fallback spike", "fallbacks")):
        shown = [a for a in alerts if a.startswith(f"**{kind}**")]
        windows = spikes(seeded.facts.requests, counted)
        assert len(shown) == len(windows) >= 1
        for model, window, events, total in windows:
            line = f"**{kind}** · {model} · {window:%H:%M}–"
            match = next(a for a in shown if a.startswith(line))
            assert f"{events:,} {kind.split()[0].lower()}s in {total:,} requests" in match


def test_overview_tables(seeded: SeededService) -> None:
    at = open_page(seeded)
    frames = {tuple(d.value.columns): d.value for d in at.dataframe}
    fleet = next(v for cols, v in frames.items() if "recompile_rate" in cols)
    got = {(r.model, r.hw_pool, r.traffic_class): r.requests for r in fleet.itertuples()}
    want: dict[tuple[str, str, str], int] = {}
    for r in seeded.facts.requests:
        key = (r.model, r.hw_pool, r.traffic_class)
        want[key] = want.get(key, 0) + 1
    assert got == want
    reasons = next(v for cols, v in frames.items() if "fallback_reason" in cols)
    assert reasons["fallback_reason"].tolist() == [f"graph_break:{GB_ID}"]
    assert reasons["fallbacks"].tolist() == [sum(r.outcome == "fallback" for r in seeded.facts.requests)]
    triggered = next(v for cols, v in frames.items() if "drill_down" in cols)
    # Each storm hour lists its first ten triggering requests (analytics ``recompile_storms``).
    want_ids: list[str] = []
    for model, pool, hour in storm_hours(seeded.facts.requests):
        ids = sorted(
            r.request_id
            for r in seeded.facts.requests
            if r.recompiles
            and (r.model, r.hw_pool, r.ts.replace(minute=0, second=0, microsecond=0)) == (model, pool, hour)
        )
        want_ids.extend(ids[:10])
    assert sorted(triggered["request_id"]) == sorted(want_ids)
    assert all(
        link == f"request?request_id={rid}"
        for rid, link in zip(triggered["request_id"], triggered["drill_down"], strict=True)
    )


def test_overview_filter_narrows_every_number(seeded: SeededService) -> None:
    at = open_page(seeded)
    at.selectbox(key=MODEL_KEY).select(MISTRAL).run()
    assert_clean(at)
    mistral = [r for r in seeded.facts.requests if r.model == MISTRAL]
    assert_headline(at, mistral)
    fleet = next(d.value for d in at.dataframe if "recompile_rate" in d.value.columns)
    assert set(fleet["model"]) == {MISTRAL}
    # One cache hit ratio, the lookups' (Compile & cache health, weekly report): not a per-request one here.
    assert "cache_hit_ratio" not in fleet.columns
    # The error spike is llama's; mistral's storm and fallback spike stay.
    assert not [w.value for w in at.warning if w.value.startswith("**Error spike**")]
    assert [w.value for w in at.warning if w.value.startswith(f"**Fallback spike** · {MISTRAL}")]
    assert [e.value for e in at.error if "Recompile storm" in e.value]


def test_click_through_sets_the_filters_on_the_next_run(seeded: SeededService) -> None:
    at = open_page(seeded, None, **{PENDING_KEY: {"model": MISTRAL, "hw_pool": POOL_B}})
    assert_clean(at)
    assert at.selectbox(key=MODEL_KEY).value == MISTRAL
    assert metric(at, "Requests") == f"{sum(r.model == MISTRAL for r in seeded.facts.requests):,}"


@pytest.mark.parametrize(
    ("key", "value", "dimension"),
    [
        (POOL_KEY, POOL_A, "hw_pool"),
        (TRAFFIC_KEY, BATCH, "traffic_class"),
        (BUNDLE_KEY, CANDIDATE, "bundle_id"),
    ],
)
def test_each_sidebar_filter_narrows_the_numbers(seeded: SeededService, key: str, value: str, dimension: str) -> None:
    at = open_page(seeded)
    at.selectbox(key=key).select(value).run()
    assert_clean(at)
    shown = [r for r in seeded.facts.requests if getattr(r, dimension) == value]
    assert 0 < len(shown) < len(seeded.facts.requests)
    assert_headline(at, shown)
    fleet = next(d.value for d in at.dataframe if "recompile_rate" in d.value.columns)
    assert int(fleet["requests"].sum()) == len(shown)


def test_time_range_filter_narrows_the_numbers(seeded: SeededService) -> None:
    at = open_page(seeded)
    at.selectbox(key=RANGE_KEY).select("Last 15 minutes").run()
    assert_clean(at)
    end = seeded.facts.now + timedelta(minutes=1)
    shown = [r for r in seeded.facts.requests if end - timedelta(minutes=15) <= r.ts < end]
    assert 0 < len(shown) < len(seeded.facts.requests)
    assert_headline(at, shown)
    # Spikes are judged against the range's own rates: the error burst (minute 20 of the seed's 50) lies
    # before the last 15 minutes; the fallback burst (minute 40) is inside but is most of mistral's range.
    for kind, counted in (("Error spike", "errors"), ("Fallback spike", "fallbacks")):
        shown_spikes = [w.value for w in at.warning if w.value.startswith(f"**{kind}**")]
        assert len(shown_spikes) == len(spikes(shown, counted)), (kind, shown_spikes)


def test_a_range_without_requests_says_where_they_come_from(seeded: SeededService) -> None:
    """A store of imported TORCH_TRACE logs alone has compiles and no requests: the overview said only
    "Nothing in this range."; it now says what records requests and where imported compiles are."""
    state: dict[str, object] = {NOW_KEY: seeded.facts.now - timedelta(days=2)}  # "last hour" before the seed
    at = open_page(seeded, None, **state)
    assert_clean(at)
    assert metric(at, "Requests") == "0"
    (empty,) = [i.value for i in at.info if i.value.startswith("No requests in this range")]
    assert "host SDK" in empty
    assert "Compile & cache health" in empty


def storm_alerts(at: AppTest) -> list[str]:
    """The texts of the page's storm alerts."""
    return [e.value for e in at.error if "Recompile storm" in e.value]


def test_the_overview_finds_the_storms_the_weekly_report_finds(small_storm: SeededService) -> None:
    """The demo's case, a storm of a few recompiles: the Weekly report page with its recompile floor lowered to
    the storm found it, while the overview kept the default floors and showed none. The storm rule is one per
    session: the floor lowered on either page applies on both, and each storm alert says the rule."""
    storm = [r for r in small_storm.facts.requests if r.recompiles]
    default = StormRule()
    assert 0 < len(storm) < default.min_recompiles
    hour = storm[0].ts.replace(minute=0, second=0, microsecond=0)
    at = open_page(small_storm)
    assert_clean(at)
    assert not storm_alerts(at)
    assert default.describe() in texts(at)

    at.switch_page("views/weekly_report.py").run()
    at.number_input(key=floor_key(weekly_report.FLOORS_PAGE, "min_recompiles")).set_value(len(storm)).run()
    at.switch_page("views/overview.py").run()
    assert_clean(at)
    lowered = StormRule(min_recompiles=len(storm))
    (alert,) = storm_alerts(at)
    assert alert.startswith(
        f"**Recompile storm** · {MISTRAL} / {POOL_B} · hour of {hour:%Y-%m-%d %H:%M} UTC: "
        f"{len(storm)} recompiles (records, failed compiles too), "
    ), alert
    assert f"a storm: {lowered.thresholds()})." in alert
    assert lowered.describe() in texts(at)

    # The overview's own input holds the session's floor; raised back there, the Weekly report page starts at it.
    floor = at.number_input(key=floor_key(overview.FLOORS_PAGE, "min_recompiles"))
    assert floor.value == len(storm)
    floor.set_value(default.min_recompiles).run()
    assert not storm_alerts(at)
    at.switch_page("views/weekly_report.py").run()
    assert at.number_input(key=floor_key(weekly_report.FLOORS_PAGE, "min_recompiles")).value == default.min_recompiles


def test_hosts_gone_quiet_are_a_highlight(seeded: SeededService) -> None:
    at = open_page(seeded)
    assert_clean(at)
    (quiet,) = [e.value for e in at.error if "Hosts gone quiet" in e.value]
    # The seed's health records: two processes stopped reporting (tests/analytics/hosts.py), the longest silent first.
    assert quiet.startswith("**Hosts gone quiet** · 2 serving process(es) stopped sending health records: `h-gone`")
    assert "`h-quiet` · llama · h100 (" in quiet
    assert quiet.endswith("See the [Hosts page](hosts).")
    at = open_page(seeded, **{MODEL_KEY: MISTRAL})  # neither quiet process serves it
    assert_clean(at)
    assert not [e.value for e in at.error if "Hosts gone quiet" in e.value]


def test_kernel_provider_failures_are_a_highlight(seeded: SeededService) -> None:
    at = open_page(seeded)
    assert_clean(at)
    # The seed's decisions (tests/analytics/kernel_events.py): the Triton rms_norm raised on one llama-8b host.
    (failure,) = [w.value for w in at.warning if w.value.startswith("**Kernel provider failures**")]
    assert failure == (
        "**Kernel provider failures** · 1 kernel provider(s) raised and were taken out for the signatures they failed "
        f"on: triton for `rms_norm` ({LLAMA}). See the [Kernels page](kernels)."
    )
    at = open_page(seeded, **{MODEL_KEY: MISTRAL})  # its host falls back by design, nothing raised
    assert_clean(at)
    assert not [w.value for w in at.warning if w.value.startswith("**Kernel provider failures**")]


@pytest.mark.parametrize(("unit", "step"), [("minute", timedelta(minutes=1)), ("hour", timedelta(hours=1)),
                                            ("day", timedelta(days=1))])  # fmt: skip
def test_buckets_without_requests_count_zero(unit: str, step: timedelta) -> None:
    """A bucket that held no request is a zero between its neighbours, not a line drawn across it."""
    start = datetime(2026, 3, 2, tzinfo=UTC)
    counts = pl.DataFrame(
        {"bucket": [start, start + step, start + 5 * step], "errors": [2, 0, 3], "fallbacks": [0, 1, 0]},
        schema_overrides={"bucket": pl.Datetime("us", "UTC")},
    )
    filled = with_quiet_buckets(counts, "bucket", unit)
    assert filled.get_column("bucket").to_list() == [start + i * step for i in range(6)]
    assert filled.get_column("errors").to_list() == [2, 0, 0, 0, 0, 3]
    assert filled.get_column("fallbacks").to_list() == [0, 1, 0, 0, 0, 0]
    assert with_quiet_buckets(counts.head(1), "bucket", unit).equals(counts.head(1))


def test_the_trouble_chart_counts_every_kind_of_trouble_of_the_range(seeded: SeededService) -> None:
    """Errors, eager fallbacks, recompiles and non-finite outputs: each line sums to the seed's count (the chart
    left non-finite outputs out, though the headline and an alert counted them; this seed has none, so their line
    is zeros)."""
    at = open_page(seeded)
    (chart,) = [c for c in at.get("vega_lite_chart") if json.loads(c.proto.spec)["title"] == "Trouble per minute"]
    drawn = pl.from_arrow(pa.ipc.open_stream(chart.proto.datasets[0].data.data).read_all())
    assert isinstance(drawn, pl.DataFrame)
    sums = dict(drawn.group_by("series").agg(pl.col("value").sum()).iter_rows())
    requests = seeded.facts.requests
    assert sums == {
        "errors": sum(r.status == "error" for r in requests),
        "fallbacks": sum(r.outcome == "fallback" for r in requests),
        "recompiles": sum(r.recompiles for r in requests),
        "nonfinite": sum(r.fp_nan + r.fp_inf > 0 for r in requests),
    }
