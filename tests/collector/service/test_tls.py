"""TLS when certificate paths are configured: HTTPS with the configured certificate, plain HTTP refused."""

from __future__ import annotations

import ssl
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import httpx
import pytest

from inferensics.collector.client import ServiceClient, ServiceError
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


@pytest.fixture
def https_health(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Path]]:
    """A loopback HTTPS server with a self-signed certificate answering every GET with ``{"status": "ok"}``."""
    for name in ("SSL_CERT_FILE", "SSL_CERT_DIR", "INFERENSICS_CA_FILE"):
        monkeypatch.delenv(name, raising=False)
    cert, key = self_signed(tmp_path)

    class Ok(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b'{"status": "ok"}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Ok)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}", cert
    finally:
        server.shutdown()
        server.server_close()


def test_an_untrusted_certificate_says_so_and_how_to_pass_the_ca(
    https_health: tuple[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A self-signed service answered "cannot reach ...: [SSL: CERTIFICATE_VERIFY_FAILED] ...; is it running
    (`inferensics serve`)?": the wrong cause, and no word on how to trust the certificate."""
    url, cert = https_health
    with ServiceClient(url, token="t") as client, pytest.raises(ServiceError) as info:
        client.health()
    message = str(info.value)
    assert "its TLS certificate is not trusted (self-signed certificate" in message
    assert "set $INFERENSICS_CA_FILE to a PEM file of the CA that signed it" in message
    assert "is it running" not in message
    monkeypatch.setenv("INFERENSICS_CA_FILE", str(cert))
    with ServiceClient(url, token="t") as client:
        assert client.health() == {"alive": True, "status": "ok"}
    monkeypatch.setenv("INFERENSICS_CA_FILE", str(cert.with_name("missing.pem")))
    with pytest.raises(ServiceError, match=r"cannot read the CA certificates .*missing.pem \(\$INFERENSICS_CA_FILE\)"):
        ServiceClient(url, token="t")
