"""The host filter: the sidebar's Host box narrows the slice pages, the Requests page lists one host's requests (a
replayed fault among them), and the Hosts page links each host to it. Real service, AppTest and headless Chromium."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page

from inferensics.dashboard._internal.filters import HOST_KEY
from inferensics.dashboard.navigation import BY_URL, PAGES
from tests.dashboard.apptest import assert_clean, metric, open_page, texts
from tests.dashboard.browser import (
    PAGE_TIMEOUT_MS,
    canvas_text,
    click_cell,
    record_canvas_text,
    screenshot,
    settle,
    wait_for_canvas_text,
    wait_for_metric,
)
from tests.dashboard.browser import open_page as open_in_browser
from tests.dashboard.conftest import SeededService, running_dashboard, seeded_service
from tests.dashboard.host_requests import HOSTS, VERDICT, WRONG_ID, HostFacts, build

pytestmark = pytest.mark.slow
FIRST, SECOND = HOSTS


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeededService]:
    root = tmp_path_factory.mktemp("host-filter-service")
    with seeded_service(root, "tests.dashboard.host_requests", build) as (service, facts):
        yield SeededService(service=service, token="read-token", facts=facts)  # type: ignore[arg-type]


def _facts(fleet: SeededService) -> HostFacts:
    return fleet.facts  # type: ignore[return-value]


def test_the_sidebar_offers_the_hosts_and_the_overview_narrows_to_one(fleet: SeededService) -> None:
    at = open_page(fleet)
    assert_clean(at)
    host_box = next(s for s in at.sidebar.selectbox if s.label == "Host")
    assert list(host_box.options) == ["All", *HOSTS]
    assert metric(at, "Requests") == str(len(_facts(fleet).requests))
    at = open_page(fleet, **{HOST_KEY: SECOND})
    assert_clean(at)
    of_second = [r for r in _facts(fleet).requests if r.host == SECOND]
    assert metric(at, "Requests") == str(len(of_second))
    assert f"host **{SECOND}**" in texts(at)


@pytest.mark.parametrize("page", [p.file for p in PAGES if p.filtered])
def test_every_filtered_page_takes_the_host_filter(fleet: SeededService, page: str) -> None:
    at = open_page(fleet, page, **{HOST_KEY: FIRST})
    assert_clean(at)
    assert "does not apply" not in texts(at)
    assert f"host **{FIRST}**" in texts(at)


def test_the_requests_page_lists_one_hosts_failing_requests_with_the_replayed_fault(fleet: SeededService) -> None:
    assert BY_URL["requests"].filtered
    at = open_page(fleet, "views/requests.py", **{HOST_KEY: FIRST})
    assert_clean(at)
    table = at.dataframe[0].value
    assert table["request_id"].to_list() == _facts(fleet).failing(FIRST)
    assert set(table["host"].to_list()) == {FIRST}
    wrong = table[table["request_id"] == WRONG_ID]
    assert (wrong["kind"].item(), wrong["verdict"].item()) == ("replayed fault", VERDICT)
    assert metric(at, "Replayed fault") == "1"
    assert metric(at, "Failing requests") == str(len(_facts(fleet).failing(FIRST)))


def test_a_typed_host_that_does_not_exist_is_named(fleet: SeededService) -> None:
    at = open_page(fleet, "views/requests.py", **{HOST_KEY: "h200-b-99"})
    assert_clean(at)
    assert "unknown host 'h200-b-99'" in texts(at)


@pytest.mark.browser
def test_the_hosts_page_links_a_host_to_its_requests(
    fleet: SeededService, page: Page, tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    facts = _facts(fleet)
    with running_dashboard(fleet.url, fleet.token, tmp_path_factory.mktemp("host-dashboard")) as base:
        record_canvas_text(page.context)  # type: ignore[arg-type]  # every tab of the context: the link opens one
        open_in_browser(page, base, facts.now, "hosts")
        wait_for_metric(page, "Hosts", str(len(HOSTS)))
        settle(page)
        grid = page.locator('[data-testid="stDataFrame"]').first  # the page's one table
        with page.context.expect_page() as opened:
            click_cell(page, grid, 0, 20)  # the first row (quiet first, then by host): the first host's link
        requests = opened.value
        try:
            requests.set_default_timeout(PAGE_TIMEOUT_MS)
            settle(requests)
            assert "/requests?host=" + FIRST in requests.url, requests.url
            wait_for_canvas_text(requests, WRONG_ID)
            drawn = canvas_text(requests)
            assert set(facts.failing(FIRST)) <= set(drawn)
            assert not any(rid.startswith("req-b08") for rid in drawn)
            assert VERDICT in drawn
            caption = requests.locator(
                '[data-testid="stMainBlockContainer"] [data-testid="stCaptionContainer"]'
            ).first.inner_text()
            assert f"host {FIRST}" in caption
            screenshot(requests, tmp_path, "host-requests")
        finally:
            requests.close()


def test_the_hosts_table_links_each_host_to_its_requests(fleet: SeededService) -> None:
    at = open_page(fleet, "views/hosts.py")
    assert_clean(at)
    table = at.dataframe[0].value
    assert dict(zip(table["host"], table["requests"], strict=True)) == {
        host: f"./requests?host={host}&window=1h" for host in HOSTS
    }
