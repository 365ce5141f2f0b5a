"""A service whose server store cannot be reached says so in its own lines only: the HTTP client's pool added a
``Retrying (...) after connection broken by NewConnectionError(...)`` warning on every attempt."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.collector.service.harness import READ, new_service
from tests.polling import poll

pytestmark = pytest.mark.slow


def test_an_unreachable_store_is_logged_without_the_http_clients_retries(tmp_path: Path) -> None:
    svc = new_service(tmp_path)
    svc.dsn_override = "http://default:pw@127.0.0.1:9/inferensics"  # nothing listens on port 9
    svc.start(ready="/healthz")
    try:
        poll(svc.log.read_text, lambda text: "cannot open store" in text, timeout=60, interval=0.2)
        # each status request tries the store again (one more connection refused)
        for _ in range(2):
            r = httpx.get(f"{svc.url}/api/v1/status", headers={"Authorization": f"Bearer {READ}"}, timeout=60)
            assert r.status_code == 200, r.text
            assert r.json()["store"]["ok"] is False
    finally:
        svc.stop()
    text = svc.log.read_text()
    assert "cannot open store http://default:***@127.0.0.1:9/inferensics" in text
    assert "urllib3" not in text, text[-2000:]
    assert "NewConnectionError" not in text
