"""Run the dashboard's pages in Streamlit's AppTest against the seeded service."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from streamlit.testing.v1 import AppTest

from inferensics.dashboard._internal.filters import NOW_KEY
from inferensics.dashboard._internal.settings import TOKEN_STATE_KEY, URL_STATE_KEY
from inferensics.dashboard.launcher import APP_FILE
from tests.dashboard.conftest import SeededService

TIMEOUT_S = 120


def open_page(seeded: SeededService, page: str | None = None, **state: Any) -> AppTest:
    """The app run once on its default page, then on ``page`` (``views/x.py``), with ``state`` preset.

    "Now" is pinned to the minute after the seed's clock, so the default "last hour" holds every seeded event
    however long the session has been running.
    """
    at = AppTest.from_file(str(APP_FILE), default_timeout=TIMEOUT_S)
    at.session_state[URL_STATE_KEY] = seeded.url
    at.session_state[TOKEN_STATE_KEY] = seeded.token
    at.session_state[NOW_KEY] = seeded.facts.now + timedelta(minutes=1)
    for key, value in state.items():
        at.session_state[key] = value
    at.run()
    if page is not None:
        at.switch_page(page).run()
    return at


def texts(at: AppTest) -> str:
    """Every markdown, caption, alert and metric text of the page, joined (for "is it shown" checks)."""
    parts: list[str] = []
    for group in (at.markdown, at.caption, at.error, at.warning, at.info, at.success, at.title, at.subheader):
        parts.extend(str(e.value) for e in group)
    parts.extend(f"{m.label}: {m.value}" for m in at.metric)
    return "\n".join(parts)


def metric(at: AppTest, label: str) -> str:
    """The value of the metric with ``label``."""
    for m in at.metric:
        if m.label == label:
            return str(m.value)
    raise AssertionError(f"no metric {label!r}; metrics: {[m.label for m in at.metric]}")


def assert_clean(at: AppTest) -> None:
    """No uncaught exception on the page."""
    assert not at.exception, [e.value for e in at.exception]
