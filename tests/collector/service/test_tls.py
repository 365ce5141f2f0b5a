"""TLS when certificate paths are configured: HTTPS with the configured certificate, plain HTTP refused."""

from __future__ import annotations

import subprocess
from pathlib import Path

import httpx
import pytest

from tests.collector.service.harness import INGEST, new_service
from tests.collector.service.otel import emit, request, tracer
from tests.polling import poll

pytestmark = pytest.mark.slow


def self_signed(directory: Path) -> tuple[Path, Path]:
    """A throwaway certificate for 127.0.0.1 (openssl)."""
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


def test_https_with_configured_certificate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # requests lets $REQUESTS_CA_BUNDLE / $CURL_CA_BUNDLE override a session's CA file (requests #3829),
    # which would hide the exporter's certificate_file on machines that set them.
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    cert, key = self_signed(tmp_path)
    svc = new_service(tmp_path, ca=str(cert), tls_cert=str(cert), tls_key=str(key)).start()
    try:
        assert svc.url.startswith("https://")
        client = svc.client()
        assert client.health()["ready"] is True
        with pytest.raises(httpx.HTTPError):
            httpx.get(f"http://127.0.0.1:{svc.port}/healthz", timeout=5)
        with pytest.raises(httpx.HTTPError):  # an unknown CA is refused by a verifying client
            httpx.get(f"{svc.url}/healthz", timeout=5)
        with tracer(svc.url, INGEST, certificate=str(cert)) as t:
            emit(t, [request(i, run="tls") for i in range(5)])
        poll(lambda: client.status()["store"]["row_counts"]["requests"], lambda n: n >= 5, timeout=30, interval=0.1)
        assert int(client.sql("SELECT count() FROM inferensics.requests")[0, 0]) == 5
    finally:
        svc.stop()
