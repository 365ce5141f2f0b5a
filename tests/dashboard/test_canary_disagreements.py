"""The canary page links each disagreeing pair of a failing argmax-agreement check to its request pages, and asks
the service for several pools' comparisons in one ``canary_compare_pools`` query.

On main the page named no request id under a FAIL on argmax agreement (on-call found the request by guessing), and
fetched one ``canary_compare`` per pool, each scanning the requests again. The service holds
:mod:`tests.dashboard.canary_disagreements`: agreement fails on cpu-c and passes on cpu-b.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from streamlit.testing.v1 import AppTest

from inferensics.dashboard._internal.filters import NOW_KEY
from inferensics.dashboard._internal.settings import TOKEN_STATE_KEY, URL_STATE_KEY
from tests.collector.service.harness import READ, RunningService
from tests.dashboard.apptest import TIMEOUT_S, assert_clean
from tests.dashboard.canary_disagreements import DISAGREEING_POOL, DisagreementFacts, build
from tests.dashboard.conftest import seeded_service


@pytest.fixture(scope="module")
def walk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningService, DisagreementFacts]]:
    root = tmp_path_factory.mktemp("canary-disagreements-service")
    with seeded_service(root, "tests.dashboard.canary_disagreements", build) as seeded:
        yield seeded


def _canary_page() -> None:
    """The canary page, with the names of the queries its sections asked for kept in ``asked``."""
    import streamlit as st

    from inferensics.dashboard.views import canary

    asked = st.session_state.setdefault("asked", [])
    real = canary.section_query  # type: ignore[attr-defined]

    def counted(name: str, what: str, **params: object) -> object:
        asked.append(name)
        return real(name, what, **params)

    canary.section_query = counted  # type: ignore[attr-defined,assignment]
    try:
        canary.render()
    finally:
        canary.section_query = real  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def page(walk: tuple[RunningService, DisagreementFacts]) -> AppTest:
    """The canary page at its defaults: cpu-b and cpu-c, where both bundles served, each judged alone."""
    service, facts = walk
    at = AppTest.from_function(_canary_page, default_timeout=TIMEOUT_S)
    at.session_state[URL_STATE_KEY] = service.url
    at.session_state[TOKEN_STATE_KEY] = READ
    at.session_state[NOW_KEY] = facts.now + timedelta(minutes=1)
    at.run()
    assert_clean(at)
    return at


@pytest.mark.slow
def test_each_disagreeing_pair_links_to_its_requests(
    page: AppTest, walk: tuple[RunningService, DisagreementFacts]
) -> None:
    facts = walk[1]
    assert page.error[0].value.startswith(f"**Verdict: FAIL** — on hardware pool {DISAGREEING_POOL} (failed: argmax")
    (pairs,) = [m.value for m in page.markdown if "request_id=" in str(m.value)]  # cpu-b agrees: no pairs there
    links = [
        f"- candidate [`{c}`](./request?request_id={c}) · baseline [`{b}`](./request?request_id={b}) · input `{d}` · "
        f"{k} of the first argmax ids differ · not replayable: the candidate was served without a bundle or without "
        "its inputs captured, which replay needs"  # no candidate's inputs were captured: replay refuses each
        for c, b, d, k in facts.worst(10)
    ]
    assert pairs.splitlines() == links
    (said,) = [c.value for c in page.caption if "input-matched pairs disagree" in str(c.value)]
    assert said.startswith("argmax agreement FAIL: 10 of 100 input-matched pairs disagree.")
    assert said.endswith("where the candidate request is replayable, the replay command that names its fault.")


@pytest.mark.slow
def test_the_pools_are_compared_in_one_query(page: AppTest) -> None:
    assert page.session_state["asked"] == ["canary_compare_pools", "canary_verdicts"]
