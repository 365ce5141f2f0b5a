"""The dashboard's settings, declared once: name, environment variable, default and meaning.

The dashboard process is started by ``inferensics dashboard`` (or ``inferensics serve --with-dashboard``),
which passes the service URL and token through these environment variables, so the token never shows in a
process listing. Precedence inside the app: Session State (set by tests) > environment variable > default.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import streamlit as st

from inferensics.collector.service_url import DEFAULT_URL, SERVICE_URL_ENV, TOKEN_ENV
from inferensics.dashboard._internal.replay_command import KEYRING_ENV
from inferensics.schema.dsn import default_report_dir

CACHE_TTL_ENV: Final = "INFERENSICS_DASHBOARD_CACHE_TTL_S"
"""Seconds a query answer is reused before the service is asked again."""
DEFAULT_CACHE_TTL_S: Final = 30
REPORT_DIR_STATE_KEY: Final = "inferensics.report_dir"
URL_STATE_KEY: Final = "inferensics.service_url"
"""Session State key that overrides the service URL (tests, a future connection form)."""
TOKEN_STATE_KEY: Final = "inferensics.token"
"""Session State key that overrides the token."""


@dataclass(frozen=True, slots=True)
class DashboardSettings:
    """Where the service is and how to authenticate to it."""

    service_url: str
    token: str | None
    cache_ttl_s: int
    report_dir: Path
    keyring: str | None = None
    """The builders' keys replay trusts (:data:`KEYRING_ENV`), ``None`` when the dashboard was given none."""


def current_settings() -> DashboardSettings:
    """The settings for this session."""
    url = st.session_state.get(URL_STATE_KEY) or os.environ.get(SERVICE_URL_ENV) or DEFAULT_URL
    token = st.session_state.get(TOKEN_STATE_KEY) or os.environ.get(TOKEN_ENV) or None
    raw_ttl = os.environ.get(CACHE_TTL_ENV, "")
    ttl = int(raw_ttl) if raw_ttl.isdigit() else DEFAULT_CACHE_TTL_S
    reports = st.session_state.get(REPORT_DIR_STATE_KEY) or ""
    report_dir = Path(reports).expanduser() if reports else default_report_dir()
    keyring = os.environ.get(KEYRING_ENV, "").strip() or None
    return DashboardSettings(
        service_url=str(url).rstrip("/"), token=token, cache_ttl_s=ttl, report_dir=report_dir, keyring=keyring
    )
