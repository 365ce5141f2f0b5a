"""The canary comparison opened from a link (``/canary?model=...``): the form filled in, the verdict at once, and a
warning for each parameter the page cannot use."""

from __future__ import annotations

import doctest
from datetime import timedelta
from urllib.parse import parse_qsl, urlsplit

import pytest
from streamlit.testing.v1 import AppTest

from inferensics.analytics.report.canary import verdict_of
from inferensics.collector.client import ServiceClient
from inferensics.dashboard._internal import filters, links
from inferensics.dashboard._internal.links import canary_link, duration_text, parse_duration
from inferensics.dashboard._internal.settings import TOKEN_STATE_KEY, URL_STATE_KEY
from inferensics.dashboard.launcher import APP_FILE
from inferensics.dashboard.navigation import BY_URL
from inferensics.dashboard.views.canary import LinkedForm
from tests.dashboard.apptest import TIMEOUT_S, assert_clean, metric
from tests.dashboard.conftest import SeededService
from tests.dashboard.seed import BASELINE, CANDIDATE, LLAMA, POOL_A

DASHBOARD = "http://127.0.0.1:8501"


def open_link(seeded: SeededService, url: str) -> AppTest:
    """The app as a browser opens ``url``: its page with its query parameters (nothing pinned but the service)."""
    at = AppTest.from_file(str(APP_FILE), default_timeout=TIMEOUT_S)
    at.session_state[URL_STATE_KEY] = seeded.url
    at.session_state[TOKEN_STATE_KEY] = seeded.token
    at.run()
    parts = urlsplit(url)
    at.query_params.update(parse_qsl(parts.query))
    at.switch_page(BY_URL[parts.path.strip("/")].file).run()
    return at


def warnings(at: AppTest) -> list[str]:
    """The page's warnings about its link."""
    return [str(w.value) for w in at.warning if "The link's" in str(w.value)]


@pytest.mark.slow
def test_a_link_fills_the_form_and_opens_on_its_verdict(seeded: SeededService) -> None:
    """The demo's case: a short window, where the analytics' defaults (100 requests a side) say INCONCLUSIVE and
    the link's lowered thresholds give the verdict. On main the page ignored the link: the newest bundle against
    the previous one, every pool, the last 6 hours, the defaults."""
    end = seeded.facts.now + timedelta(minutes=1)
    start = end - timedelta(minutes=15)
    url = canary_link(
        DASHBOARD, model=LLAMA, hw_pool=POOL_A, baseline=CANDIDATE,  # the sides swapped: not the page's defaults
        candidate=BASELINE[:12],  # the pickers show 12 characters: a prefix names the bundle
        window=end - start, end=end, latency_tolerance=0.2, min_requests=20, min_pairs=10,
    )  # fmt: skip
    at = open_link(seeded, url)
    assert_clean(at)
    assert warnings(at) == []
    assert at.selectbox(key="canary.model").value == LLAMA
    assert at.selectbox(key="canary.candidate").value == BASELINE
    assert at.selectbox(key="canary.baseline").value == CANDIDATE
    assert at.selectbox(key="canary.hw_pool").value == POOL_A
    assert at.selectbox(key="canary.window").value == "Last 15 minutes"
    assert at.number_input(key="canary.min_requests").value == 20
    assert at.number_input(key="canary.min_pairs").value == 10
    assert at.number_input(key="canary.tolerance").value == pytest.approx(0.2)

    compared = {"start": start, "end": end, "model": LLAMA, "hw_pool": POOL_A, "candidate": BASELINE,
                "baseline": CANDIDATE}  # fmt: skip
    with ServiceClient(seeded.url, token=seeded.token) as client:
        lowered = client.query("canary_compare", **compared, latency_tolerance=0.2, min_requests=20, min_pairs=10)
        verdict, rule = verdict_of(lowered)
        defaults = client.query("canary_compare", **compared)  # 100 requests a side, 30 pairs
        assert verdict_of(defaults)[0] == "inconclusive"
    assert verdict == "fail"
    banner = next(e.value for e in [*at.error, *at.warning, *at.success] if "Verdict:" in e.value)
    assert banner == f"**Verdict: {verdict.upper()}** — {rule}"
    shown = [r for r in seeded.facts.requests if r.model == LLAMA and start <= r.ts < end]
    assert metric(at, "Candidate requests") == f"{sum(r.bundle_id == BASELINE for r in shown):,}"
    assert metric(at, "Baseline requests") == f"{sum(r.bundle_id == CANDIDATE for r in shown):,}"


@pytest.mark.slow
def test_each_unusable_parameter_says_what_it_expects_and_the_rest_still_works(seeded: SeededService) -> None:
    end = seeded.facts.now + timedelta(minutes=1)
    url = canary_link(DASHBOARD, model=LLAMA, candidate="0ddba11", baseline=BASELINE, end=end)
    url += "&min_requests=many&min_pairs=0&latency_tolerance=5&window=3w&hw_pool=tpu-z&min_request=12"
    at = open_link(seeded, url)
    assert_clean(at)
    said = warnings(at)
    assert len(said) == 7, said
    expected = {
        "candidate=0ddba11": f"the id, or a prefix of one id, of a bundle of {LLAMA} (it matches none of:",
        "min_requests=many": "a whole number of at least 1",
        "min_pairs=0": "a whole number of at least 1",
        "latency_tolerance=5": "a number from 0 to 2",
        "window=3w": "a duration such as 15m, 6h or 7d, at most 30d",
        "hw_pool=tpu-z": "a pool that served requests: All, ",
    }
    for given, wanted in expected.items():
        line = next(s for s in said if f"`{given}`" in s)
        assert f"is not usable: expected {wanted}" in line, line
        assert line.endswith("That field keeps its default."), line
    assert any("`min_request`" in s and "is not one this page reads" in s for s in said), said
    # The usable ones hold; the others keep the defaults, and the page still compares (the default candidate).
    assert at.selectbox(key="canary.baseline").value == BASELINE
    assert at.selectbox(key="canary.candidate").value == CANDIDATE
    assert at.number_input(key="canary.min_requests").value == 100
    assert at.selectbox(key="canary.window").value == "Last 6 hours"
    assert at.error[0].value.startswith("**Verdict: FAIL**")


def test_a_bundle_prefix_must_name_one_bundle() -> None:
    said: list[str] = []
    labels = {"abc123": "one (abc123)", "abc456": "two (abc456)", "abc": "three (abc)"}
    form = LinkedForm({"candidate": "abc4", "baseline": "ab"}, said.append)
    assert form.bundle("candidate", labels, 0, "m") == 1
    assert form.bundle("baseline", labels, 0, "m") == 0
    assert said == [
        "The link's `baseline=ab` is not usable: expected the id, or a prefix of one id, of a bundle of m (it "
        "matches 3 of: one (abc123), two (abc456), three (abc)). That field keeps its default."
    ]
    assert LinkedForm({"candidate": "abc"}, said.append).bundle("candidate", labels, 0, "m") == 2  # a whole id


def test_the_window_is_the_shortest_of_the_pages_that_holds_the_links() -> None:
    windows = list(filters.TIME_RANGES)
    said: list[str] = []
    picked = {w: LinkedForm({"window": w}, said.append).window(windows, 0) for w in ("15m", "16m", "6h", "2d", "30d")}
    assert {w: windows[i] for w, i in picked.items()} == {
        "15m": "Last 15 minutes", "16m": "Last hour", "6h": "Last 6 hours", "2d": "Last 7 days", "30d": "Last 30 days",
    }  # fmt: skip
    assert said == []
    for span in (timedelta(minutes=7), timedelta(hours=2), timedelta(days=7), timedelta(seconds=90)):
        parsed = parse_duration(duration_text(span))
        assert parsed is not None
        assert parsed >= span


def test_the_links_open_the_pages_they_name() -> None:
    """The pages' paths and parameters are named in the light links module (the demo imports it, not the
    pages): the navigation routes its paths to those pages."""
    assert BY_URL[links.REQUEST_PATH].file == "views/request.py"
    assert BY_URL[links.CANARY_PATH].file == "views/canary.py"
    assert links.request_link(DASHBOARD + "/", "req-1") == f"{DASHBOARD}/request?request_id=req-1"
    result = doctest.testmod(links)
    assert result.attempted > 0
    assert result.failed == 0
