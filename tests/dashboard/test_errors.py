"""The error panel: an unreachable service or a refused token is one clear message, not a traceback."""

from __future__ import annotations

from datetime import timedelta

import pytest
from streamlit.testing.v1 import AppTest

from inferensics.dashboard._internal.settings import TOKEN_STATE_KEY, URL_STATE_KEY
from inferensics.dashboard.launcher import APP_FILE
from tests.collector.service.harness import INGEST, free_port
from tests.dashboard.apptest import TIMEOUT_S, assert_clean, open_page
from tests.dashboard.conftest import SeededService

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("page", [None, "views/request.py", "views/canary.py", "views/weekly_report.py"])
def test_unreachable_service_shows_the_error_panel(seeded: SeededService, page: str | None) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    at = open_page(seeded, page, **{"inferensics.service_url": url})
    assert_clean(at)
    assert len(at.error) == 1
    panel = at.error[0].value
    assert "Cannot reach the inferensics service" in panel
    assert url in panel
    assert "inferensics serve" in panel
    assert not at.dataframe
    assert not at.metric


@pytest.mark.parametrize(
    ("token", "says"),
    [("not-a-token", "refused the token"), (INGEST, "does not allow this token to read")],
)
@pytest.mark.parametrize("page", [None, "views/bundles.py", "views/compile_health.py"])
def test_wrong_token_shows_the_error_panel(seeded: SeededService, page: str | None, token: str, says: str) -> None:
    at = open_page(seeded, page, **{"inferensics.token": token})
    assert_clean(at)
    assert len(at.error) == 1
    assert says in at.error[0].value
    assert "--token" in at.error[0].value
    assert not at.dataframe
    assert not at.metric


@pytest.mark.parametrize("page", [None, "views/canary.py", "views/weekly_report.py"])
def test_a_link_whose_end_is_not_a_time_says_so(seeded: SeededService, page: str | None) -> None:
    """A shared incident link with a mistyped ``?end=`` used to show the last hour before now without a word;
    the page now says the end was not understood, and still draws."""
    at = AppTest.from_file(str(APP_FILE), default_timeout=TIMEOUT_S)
    at.session_state[URL_STATE_KEY] = seeded.url
    at.session_state[TOKEN_STATE_KEY] = seeded.token
    at.query_params["end"] = "2026-13-45T99:00Z"
    at.run()
    if page is not None:
        at.switch_page(page).run()
    assert_clean(at)
    warnings = [str(w.value) for w in at.warning]
    assert any("`?end=2026-13-45T99:00Z` is not an ISO-8601 time" in w for w in warnings), warnings
    at.query_params["end"] = (seeded.facts.now + timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%MZ")
    at.run()
    assert_clean(at)
    assert not any("is not an ISO-8601 time" in str(w.value) for w in at.warning)
