"""The error panel: an unreachable service or a refused token is one clear message, not a traceback."""

from __future__ import annotations

import pytest

from tests.collector.service.harness import INGEST, free_port
from tests.dashboard.apptest import assert_clean, open_page
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
