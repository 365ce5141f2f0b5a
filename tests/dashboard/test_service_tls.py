"""The dashboard over a service that serves HTTPS with a certificate no system CA signed: the CA file the
README names (``$INFERENSICS_CA_FILE``) is enough for every call the dashboard makes, its health check included.

Before, the service check read ``/readyz`` with a bare HTTP client that ignored the variable, so every page of a
dashboard configured as documented said it could not reach the service."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from inferensics.dashboard._internal.settings import TOKEN_STATE_KEY, URL_STATE_KEY
from inferensics.dashboard.launcher import APP_FILE
from tests.collector.service.harness import READ, new_service
from tests.collector.service.test_tls import self_signed
from tests.dashboard.apptest import TIMEOUT_S, assert_clean, texts

pytestmark = pytest.mark.slow


def test_the_ca_file_variable_is_enough_for_the_dashboards_service_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        monkeypatch.delenv(name, raising=False)
    cert, key = self_signed(tmp_path)
    svc = new_service(tmp_path, ca=str(cert), tls_cert=str(cert), tls_key=str(key)).start()
    try:
        monkeypatch.setenv("INFERENSICS_CA_FILE", str(cert))
        at = AppTest.from_file(str(APP_FILE), default_timeout=TIMEOUT_S)
        at.session_state[URL_STATE_KEY] = svc.url
        at.session_state[TOKEN_STATE_KEY] = READ
        at.run()
        assert_clean(at)
        shown = texts(at)
        assert "Cannot reach the inferensics service" not in shown, shown
        assert "store is not ready" not in shown, shown
        assert svc.url.startswith("https://")
    finally:
        svc.stop()
