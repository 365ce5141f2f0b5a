"""The dashboard's service check (every page runs it, every 10 s) makes two requests: the query list, which needs
a read token and so shows an unreachable service and a wrong token alike, and ``/readyz``. It made three (a
``/healthz`` between them, which the query list had already answered)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from inferensics.dashboard._internal import service as dashboard_service
from tests.collector.service.harness import READ, new_service

pytestmark = pytest.mark.slow


def test_the_service_check_asks_for_the_query_list_and_readiness_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths: list[str] = []
    send = httpx.Client.send

    def counted(self: httpx.Client, request: httpx.Request, **kwargs: object) -> httpx.Response:
        paths.append(request.url.path)
        return send(self, request, **kwargs)  # type: ignore[arg-type]

    svc = new_service(tmp_path).start()
    try:
        monkeypatch.setattr(httpx.Client, "send", counted)
        dashboard_service._health.clear()  # pyright: ignore[reportPrivateUsage]
        checked = dashboard_service._health(svc.url, READ)  # pyright: ignore[reportPrivateUsage]
    finally:
        svc.stop()
    assert paths == ["/api/v1/queries", "/readyz"]
    assert checked["alive"] is True
    assert checked["ready"] is True
