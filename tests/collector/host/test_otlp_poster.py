"""The SDK's OTLP/HTTP POST behaves as OpenTelemetry's OTLPSpanExporter does, answer for answer: the same
attempts against the same scripted answers, the same verdict, the same headers and settings; and it says
why a request was refused (the cause the export health counts)."""

from __future__ import annotations

import gzip
import threading
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any, ClassVar

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from inferensics.collector.host import otlp_poster
from inferensics.collector.host.otlp_poster import OtlpPoster
from inferensics.collector.host.otlp_spans import host_resource, record_span
from inferensics.schema.events import CompileEvent
from tests.collector.service.harness import free_port
from tests.loopback import serving
from tests.schema.samples import sample


class _Scripted(BaseHTTPRequestHandler):
    """Answers each POST with the next scripted ``(status, headers)`` (200 once the script is spent) and
    keeps what it was sent."""

    script: ClassVar[list[tuple[int, dict[str, str]]]] = []
    seen: ClassVar[list[tuple[str, dict[str, str], bytes]]] = []

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        _Scripted.seen.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
        status, headers = _Scripted.script.pop(0) if _Scripted.script else (200, {})
        text = b"" if status < 400 else b"no such table"
        self.send_response(status)
        for k, v in {"Content-Length": str(len(text)), **headers}.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(text)


@pytest.fixture
def server() -> Iterator[str]:
    _Scripted.script, _Scripted.seen = [], []
    with serving(_Scripted) as url:
        yield f"{url}/v1/traces"


AGAIN_NOW = {"Retry-After": "0"}
SCRIPTS: dict[str, list[tuple[int, dict[str, str]]]] = {
    "ok": [],
    "busy-then-ok": [(503, AGAIN_NOW), (429, AGAIN_NOW)],
    "busy-backoff-then-ok": [(502, {})],  # no Retry-After: the exponential backoff (about 1 s)
    "busy-throughout": [(503, AGAIN_NOW)] * 6,
    "bad-request": [(400, {})],
    "unauthorized": [(401, {})],
    "forbidden": [(403, {})],
    "redirect": [(302, {"Location": "http://127.0.0.1:1/elsewhere"})],
    "server-error": [(500, {})],
}
CAUSES = {
    "ok": "",
    "busy-then-ok": "",
    "busy-backoff-then-ok": "",
    "busy-throughout": "back_pressure",
    "bad-request": "rejected",
    "unauthorized": "auth",
    "forbidden": "auth",
    "redirect": "",
    "server-error": "rejected",
}


@pytest.mark.parametrize("name", list(SCRIPTS))
def test_answer_for_answer_as_opentelemetrys_exporter(server: str, name: str) -> None:
    span = record_span(host_resource("h"), sample(CompileEvent, "typical"))
    _Scripted.script = list(SCRIPTS[name])
    otel = OTLPSpanExporter(endpoint=server, headers={"Authorization": "Bearer t"}, timeout=10)
    theirs = otel.export([span]) == SpanExportResult.SUCCESS
    otel.shutdown()  # type: ignore[no-untyped-call]
    their_requests = list(_Scripted.seen)

    _Scripted.script, _Scripted.seen = list(SCRIPTS[name]), []
    poster = OtlpPoster(server, headers={"Authorization": "Bearer t"}, timeout_s=10)
    outcome = poster.post(b"\x0a\x00")
    poster.shutdown()

    assert len(_Scripted.seen) == len(their_requests)
    assert (outcome.cause == "") == theirs
    assert outcome.cause == CAUSES[name]
    ours = _Scripted.seen[0][1]
    for header in ("content-type", "authorization"):
        assert ours[header] == their_requests[0][1][header]
    assert {p for p, _, _ in _Scripted.seen} == {"/v1/traces"}


def test_a_refusal_says_what_the_service_answered(server: str) -> None:
    _Scripted.script = [(400, {})]
    outcome = OtlpPoster(server, timeout_s=5).post(b"")
    assert outcome == ("rejected", "HTTP 400 Bad Request: no such table")
    _Scripted.script = [(401, {})]
    assert OtlpPoster(server, timeout_s=5).post(b"") == ("auth", "HTTP 401 Unauthorized")


def test_a_service_that_is_down() -> None:
    poster = OtlpPoster(f"http://127.0.0.1:{free_port()}/v1/traces", timeout_s=1.5)
    assert poster.post(b"") == ("down", "ConnectionError")


@pytest.mark.parametrize(("setting", "decode"), [("gzip", gzip.decompress), ("deflate", zlib.decompress)])
def test_settings_from_the_environment(server: str, monkeypatch: pytest.MonkeyPatch, setting: str, decode: Any) -> None:
    """OpenTelemetry's exporter settings apply as they did: headers (the SDK's own win), compression."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", setting)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-tenant=blue,authorization=Bearer env")
    body = b"\x0a\x03abc" * 100
    assert OtlpPoster(server, headers={"Authorization": "Bearer sdk"}).post(body).cause == ""
    _, headers, sent = _Scripted.seen[0]
    assert (headers["x-tenant"], headers["authorization"], headers["content-encoding"]) == (
        "blue",
        "Bearer sdk",
        setting,
    )
    assert decode(sent) == body


def test_an_unknown_compression_is_said_and_not_used(
    server: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "brotli")
    assert OtlpPoster(server).post(b"abc").cause == ""
    assert "content-encoding" not in _Scripted.seen[0][1]
    assert _Scripted.seen[0][2] == b"abc"
    assert "unsupported OTLP compression 'brotli'" in caplog.text


def test_a_request_over_the_size_limit_is_not_sent(server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(otlp_poster, "MAX_REQUEST_BYTES", 10)
    cause, detail = OtlpPoster(server).post(b"x" * 11)
    assert (cause, detail) == ("rejected", "request of 11 bytes is over 10 bytes: not sent")
    assert _Scripted.seen == []


def test_shutdown_cuts_a_retry_short(server: str) -> None:
    """A service shedding load without Retry-After: the poster waits out its backoff, unless shut down."""
    _Scripted.script = [(503, {})] * 6
    poster = OtlpPoster(server, timeout_s=120)
    outcomes: list[tuple[str, str]] = []
    worker = threading.Thread(target=lambda: outcomes.append(poster.post(b"")))
    worker.start()
    for _ in range(6000):  # the first answer is in (at most a minute)
        if _Scripted.seen:
            break
        threading.Event().wait(0.01)
    poster.shutdown()
    worker.join(60)
    assert not worker.is_alive()
    assert outcomes == [("back_pressure", "HTTP 503 Service Unavailable: no such table")]
    assert len(_Scripted.seen) == 1
