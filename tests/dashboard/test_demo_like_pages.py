"""In a real browser, over a fleet shaped like the demo's (:mod:`tests.dashboard.demo_like`): what a walk through
the demo's dashboard found shown wrong. A request's graphs showed another host's compile without naming the
host; a process serving two models was listed under one; the weekly report's "compiles" and the Specializations
tab's ``compiles`` counted different things under one name; a slow hour was called a cold cache beside a 100 %
hit ratio. Each page is read as a person sees it (screenshots go to /tmp/inferensics-screens/)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import FrameLocator, Page, expect

from inferensics.schema import CacheEvent, CompileEvent, SdkHealthEvent
from tests.collector.service.harness import READ
from tests.dashboard.browser import (
    PAGE_TIMEOUT_MS,
    canvas_text,
    metric,
    open_page,
    record_canvas_text,
    screenshot,
    settle,
    wait_for_canvas_text,
    wait_for_metric,
)
from tests.dashboard.conftest import SeededService, running_dashboard, seeded_service
from tests.dashboard.demo_like import (
    DECODER,
    HOST_A,
    HOST_B,
    HOST_C,
    POOL,
    SCORER,
    SERVED_ELSEWHERE,
    SERVED_HERE,
    build,
    hour_window,
)

pytestmark = [pytest.mark.slow, pytest.mark.browser]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeededService]:
    """A service over the demo-like fleet."""
    root = tmp_path_factory.mktemp("demo-like-service")
    with seeded_service(root, "tests.dashboard.demo_like", build) as (service, facts):
        yield SeededService(service=service, token=READ, facts=facts)


@pytest.fixture(scope="module")
def dashboard(fleet: SeededService, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The dashboard process over that service; its base URL."""
    with running_dashboard(fleet.url, fleet.token, tmp_path_factory.mktemp("demo-like-dashboard")) as url:
        yield url


def drawn_table(page: Page, header: str) -> list[str]:
    """Every text drawn on the page's table grids once one with the column ``header`` has drawn its rows."""
    wait_for_canvas_text(page, header)
    page.wait_for_timeout(500)  # a grid's rows draw after its header
    return canvas_text(page)


def test_a_request_shows_its_own_hosts_compile_and_says_when_it_has_none(
    dashboard: str, fleet: SeededService, page: Page, tmp_path: Path
) -> None:
    """``req-a-hit`` ran on host A, which compiled its graphs two minutes before host B did: its table showed
    host B's compiles (the latest of any host) with the host past the screen's edge. It shows host A's, with the
    host and where it comes from; a request of host C, whose compiles are not stored, shows host B's and says so."""
    record_canvas_text(page)
    open_page(page, dashboard, fleet.facts.now, "request", f"request_id={SERVED_HERE}")
    settle(page)
    drawn = drawn_table(page, "code_location")
    # (A grid redraws its cells as the page settles: what was drawn is checked, not how often.)
    assert HOST_A in drawn  # the prefill and decode compiles of its own host, on screen
    assert HOST_B not in drawn
    from inferensics.analytics.drilldown import COMPILE_ORIGIN_ELSEWHERE, COMPILE_ORIGIN_HERE

    assert COMPILE_ORIGIN_HERE in drawn
    assert not any(t.startswith("another host") for t in drawn)
    expect(page.get_by_text("compile_origin says so")).to_be_visible()
    screenshot(page, tmp_path, "demo-like-request-own-host")

    record_canvas_text(page)
    open_page(page, dashboard, fleet.facts.now, "request", f"request_id={SERVED_ELSEWHERE}")
    settle(page)
    drawn = drawn_table(page, "code_location")
    assert HOST_C not in drawn
    assert HOST_B in drawn  # the latest compile of another host, named
    assert COMPILE_ORIGIN_ELSEWHERE in drawn
    assert COMPILE_ORIGIN_HERE not in drawn
    screenshot(page, tmp_path, "demo-like-request-other-host")


def test_a_process_lists_both_models_it_served(
    dashboard: str, fleet: SeededService, page: Page, tmp_path: Path
) -> None:
    """Host A's process is labelled with the tracker's model, the decoder, and compiled the scorer too under its
    own name: the Hosts page listed it under the decoder only. It lists both; host B's process, the decoder."""
    health = [e for e in fleet.facts.others if isinstance(e, SdkHealthEvent)]
    assert {e.model for e in health} == {DECODER}  # the records name the tracker's model only
    served = {(e.host, e.model) for e in fleet.facts.others if isinstance(e, CompileEvent)}
    assert served == {(HOST_A, DECODER), (HOST_A, SCORER), (HOST_B, DECODER)}
    record_canvas_text(page)
    open_page(page, dashboard, fleet.facts.now, "hosts")
    settle(page)
    assert metric(page, "Processes") == str(len({e.process for e in health}))
    drawn = drawn_table(page, "hw_pool")
    assert SCORER in drawn  # in host A's models_served only: both rows' model is the tracker's, the decoder
    screenshot(page, tmp_path, "demo-like-hosts")


def test_the_report_and_the_specializations_tab_name_each_count(
    dashboard: str, fleet: SeededService, page: Page, tmp_path: Path
) -> None:
    """The weekly report said "Compiles: 3" (requests that compiled) and the Specializations tab ``compiles`` 5
    (compile records, one per frame: each decoder request compiles two). Both pages now name each count as what it
    is, and the compile records they show agree."""
    records = [e for e in fleet.facts.others if isinstance(e, CompileEvent)]
    compiling = [r for r in fleet.facts.requests if r.outcome in ("compile", "recompile")]
    decoder_records = sum(e.model == DECODER for e in records)
    decoder_requests = sum(r.model == DECODER for r in compiling)
    assert (decoder_records, decoder_requests) == (4, 2)

    record_canvas_text(page)
    open_page(page, dashboard, fleet.facts.now, "compile")
    settle(page, charts=1)
    page.get_by_role("tab", name="Specializations").click()
    drawn = drawn_table(page, "active_graph_keys")
    assert "compile_records" in drawn
    assert "recompile_records" in drawn
    assert "compiles" not in drawn
    assert str(decoder_records) in drawn
    expect(page.get_by_text("its compiling_requests counts requests that compiled")).to_be_visible()
    screenshot(page, tmp_path, "demo-like-specializations")

    open_page(page, dashboard, fleet.facts.now, "report")
    settle(page)
    year, number, _ = hour_window(fleet.facts.now).isocalendar()
    page.locator('[data-testid="stSelectbox"]').filter(has_text="Week").first.click()
    page.get_by_role("option", name=f"{year}-W{number:02d}").click()
    page.get_by_role("button", name="Produce report").click()
    report = page.frame_locator('[data-testid="stIFrame"], iframe').first
    report.get_by_text("Weekly recompilation and cache report").first.wait_for(timeout=PAGE_TIMEOUT_MS)
    assert report.get_by_text(re.compile(rf"^Requests that compiled: {len(compiling)} ")).count() == 1
    assert report.get_by_text(re.compile(r"^Compiles:")).count() == 0
    said = report.get_by_text(re.compile(rf"^Compile records: {len(records)} \("))
    assert "recompile records: 0 (" in said.inner_text()
    assert "one per frame compiled" in said.inner_text()
    assert "Specializations: compiles, recompiles" in said.inner_text()
    table = report.locator("table").filter(has_text="compiling_requests").first
    header = [c.strip() for c in table.locator("th").all_inner_texts()]
    row = table.locator("tr").filter(has_text=DECODER).filter(has_text=POOL).first
    cells = dict(zip(header, [c.strip() for c in row.locator("td").all_inner_texts()], strict=True))
    assert (cells["compiling_requests"], cells["compile_records"]) == (str(decoder_requests), str(decoder_records))
    settle(page)
    screenshot(page, tmp_path, "demo-like-weekly-report")


PER_MODEL_CHART = "Compiling requests and recompiles they triggered"


def model_labels(report: FrameLocator, chart: str) -> list[dict[str, Any]]:
    """The axis labels of the report's ``chart`` that name a model, as drawn (Vega's SVG): each label's text, its
    box and whether the box lies inside the chart's."""
    box = report.locator(".chart").filter(has_text=chart).first
    box.locator("svg g.role-axis-label text").first.wait_for(timeout=PAGE_TIMEOUT_MS)
    labels: list[dict[str, Any]] = box.evaluate(
        """(chart, models) => { const svg = chart.querySelector('svg').getBoundingClientRect();
            return [...chart.querySelectorAll('svg g.role-axis-label text')]
                .filter(t => models.some(m => m.includes(t.textContent.replace('…', '')) || t.textContent.includes(m)))
                .map(t => { const r = t.getBoundingClientRect();
                    return {text: t.textContent, width: r.width, height: r.height,
                            inside: r.left >= svg.left && r.right <= svg.right && r.top >= svg.top
                                && r.bottom <= svg.bottom}; }); }""",
        [DECODER, SCORER],
    )
    return labels


def test_the_per_model_chart_names_each_model_in_full(
    dashboard: str, fleet: SeededService, page: Page, tmp_path: Path
) -> None:
    """The report's compiles-per-model chart drew its model names upright under narrow bars, where a walk read them
    cut ("a-tiny", "coder-"). Its bars lie along the page now, each model named in full, level, on the chart."""
    open_page(page, dashboard, fleet.facts.now, "report")
    settle(page)
    year, number, _ = hour_window(fleet.facts.now).isocalendar()
    week = f"{year}-W{number:02d}"
    page.locator('[data-testid="stSelectbox"]').filter(has_text="Week").first.click()
    page.get_by_role("option", name=week).click()
    page.get_by_role("button", name="Produce report").click()
    # The page shows the latest report while it builds another: read the new one once written.
    expect(page.get_by_text(f"Weekly report {week} written to")).to_be_visible(timeout=PAGE_TIMEOUT_MS)
    settle(page)
    report = page.frame_locator('[data-testid="stIFrame"], iframe').first
    report.get_by_text("Weekly recompilation and cache report").first.wait_for(timeout=PAGE_TIMEOUT_MS)
    labels = model_labels(report, PER_MODEL_CHART)
    assert {label["text"] for label in labels} == {DECODER, SCORER}, labels
    for label in labels:
        assert label["width"] > label["height"], f"{label['text']} is drawn upright: {label}"
        assert label["inside"], f"{label['text']} reaches past its chart: {label}"
    screenshot(page, tmp_path, "demo-like-weekly-report-per-model")


def test_a_slow_hour_says_whether_its_cache_was_cold(
    dashboard: str, fleet: SeededService, page: Page, tmp_path: Path
) -> None:
    """The decoder's first compiles took 100 s in an hour whose compile-cache lookups all hit, and the overview
    called them "first compiles or a cold compile cache" while Compile & cache health showed a 100 % hit ratio.
    Each slow hour now names its lookups: the decoder's all hit, the scorer's partly missed."""
    lookups = [e for e in fleet.facts.others if isinstance(e, CacheEvent)]
    decoder = [e.result for e in lookups if e.model == DECODER]
    scorer = [e.result for e in lookups if e.model == SCORER]
    assert set(decoder) == {"hit"}
    open_page(page, dashboard, fleet.facts.now, "")
    settle(page, charts=2)
    alerts = page.locator('[data-testid="stAlert"]').filter(has_text="Slow compiles")
    expect(alerts).to_have_count(2, timeout=PAGE_TIMEOUT_MS)
    warm = alerts.filter(has_text=f"{DECODER} / {POOL}").inner_text()
    assert f"not a cold cache: all {len(decoder)} of that hour's compile-cache lookups hit" in warm
    assert "cold compile cache" not in warm
    cold = alerts.filter(has_text=f"{SCORER} / {POOL}").inner_text()
    missed = scorer.count("miss")
    assert f"a cold compile cache: of that hour's {len(scorer)} compile-cache lookups, {missed} missed" in cold
    screenshot(page, tmp_path, "demo-like-overview-slow-compiles")

    open_page(page, dashboard, fleet.facts.now, "compile")
    settle(page, charts=1)
    page.locator('[data-testid="stSidebar"] [data-testid="stSelectbox"]').filter(has_text="Model").first.click()
    page.get_by_role("option", name=DECODER, exact=True).click()
    # The decoder's ratio, which its alert now agrees with (the old run's 83.33 % stays until the new one draws).
    wait_for_metric(page, "Cache hit ratio", "100.00 %")
    settle(page, charts=1)
    screenshot(page, tmp_path, "demo-like-decoder-cache-health")
