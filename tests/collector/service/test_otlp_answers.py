"""``/v1/traces`` answers in the request's encoding (OTLP/HTTP): a refusal is a ``google.rpc.Status``, as protobuf
for an ``application/x-protobuf`` request and as JSON for an ``application/json`` one, with that Content-Type.
Refusals used to be ``{"error": ...}`` JSON whatever the request was, which a protobuf client cannot parse."""

from __future__ import annotations

import gzip
import logging
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Protocol

import httpx
import pytest
from google.protobuf import json_format
from google.rpc.status_pb2 import Status  # type: ignore[import-untyped]

from tests.collector.service.harness import INGEST, READ, RunningService, new_service
from tests.collector.service.otel import emit, request, tracer

pytestmark = pytest.mark.slow

PROTO = "application/x-protobuf"
JSON = "application/json"
LIMIT = 64 << 10
"""The service's ``max_body_bytes`` here (the smallest it takes)."""


class Answer(Protocol):
    """An HTTP answer (httpx's, or the Starlette test client's)."""

    @property
    def headers(self) -> Mapping[str, str]: ...
    @property
    def content(self) -> bytes: ...
    @property
    def text(self) -> str: ...


def otlp_refusal(r: Answer) -> str:
    """The message of a ``/v1/traces`` refusal, read as a ``google.rpc.Status`` in the encoding its Content-Type
    names (JSON parsed strictly: a field Status lacks fails)."""
    kind = r.headers["content-type"].split(";")[0].strip()
    status = Status()
    if kind == PROTO:
        status.ParseFromString(r.content)
    else:
        assert kind == JSON, r.headers
        json_format.Parse(r.text, status)
    assert status.code != 0, r.content  # an error's code (0 is OK)
    assert status.message, r.content
    return str(status.message)


def _post(http: httpx.Client, svc: RunningService, body: bytes, token: str = INGEST, **headers: str) -> httpx.Response:
    return http.post(f"{svc.url}/v1/traces", content=body, headers={"Authorization": f"Bearer {token}", **headers})


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningService]:
    """One service for the module, its body limit at the smallest."""
    with new_service(Path(tmp_path_factory.mktemp("answers")), max_body_bytes=str(LIMIT)) as svc:
        yield svc


@pytest.fixture
def http() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=30) as client:
        yield client


def test_refusals_are_a_status_in_the_requests_encoding(service: RunningService, http: httpx.Client) -> None:
    for kind in (PROTO, JSON):
        bad = b"\xff\xff\xff garbage" if kind == PROTO else b"{not json"
        cases = [
            (_post(http, service, bad, **{"Content-Type": kind}), 400, "malformed OTLP"),
            (_post(http, service, b"{}", token="wrong", **{"Content-Type": kind}), 401, "token"),
            (_post(http, service, b"{}", token=READ, **{"Content-Type": kind}), 403, "ingest"),
            (_post(http, service, b"x", **{"Content-Type": kind, "Content-Encoding": "br"}), 415, "use gzip"),
            (_post(http, service, b"not gzip", **{"Content-Type": kind, "Content-Encoding": "gzip"}), 400, "gzip"),
        ]
        for r, status, words in cases:
            assert (r.status_code, r.headers["content-type"]) == (status, kind), (kind, status, r.content)
            message = otlp_refusal(r)
            assert words in message, (kind, message)
            assert "\n" not in message
        # Status codes follow google/rpc/code.proto: INVALID_ARGUMENT, UNAUTHENTICATED, PERMISSION_DENIED
        codes = []
        for r, _, _ in cases[:3]:
            status = Status()
            if kind == PROTO:
                status.ParseFromString(r.content)
            else:
                json_format.Parse(r.text, status)
            codes.append(status.code)
        assert codes == [3, 16, 7]
    # no Content-Type is OTLP/HTTP's default, protobuf; a type it does not take is answered in JSON
    r = _post(http, service, b"\xff\xff\xff garbage")
    assert (r.status_code, r.headers["content-type"]) == (400, PROTO)
    assert otlp_refusal(r).startswith("malformed OTLP protobuf")
    r = _post(http, service, b"x", **{"Content-Type": "text/plain"})
    assert (r.status_code, r.headers["content-type"]) == (415, JSON)
    assert "use application/x-protobuf or application/json" in otlp_refusal(r)
    # a body over the limit, refused before it is read (its Content-Length) and after it is inflated: 413s in the
    # request's encoding
    for kind in (PROTO, JSON):
        for body, headers in (
            (b"\0" * (LIMIT + 1), {}),
            (gzip.compress(b"\0" * (LIMIT + 1)), {"Content-Encoding": "gzip"}),
        ):
            r = _post(http, service, body, **{"Content-Type": kind, **headers})
            assert (r.status_code, r.headers["content-type"]) == (413, kind), (headers, r.content)
            assert f"limit of {LIMIT} bytes" in otlp_refusal(r)
    # a body taken is answered an ExportTraceServiceResponse in the same encoding, as before
    ok = _post(http, service, b"", **{"Content-Type": PROTO})
    assert (ok.status_code, ok.headers["content-type"], ok.content) == (200, PROTO, b"")
    ok = _post(http, service, b"{}", **{"Content-Type": JSON})
    assert (ok.status_code, ok.headers["content-type"], ok.json()) == (200, JSON, {})


def test_the_opentelemetry_exporter_logs_a_refusal(service: RunningService, caplog: pytest.LogCaptureFixture) -> None:
    """The real OTLPSpanExporter (opentelemetry-exporter-otlp-proto-http) refused for its token: it logs the HTTP
    status and reason phrase (this release does not read the body), and the export fails without an exception."""
    logger = "opentelemetry.exporter.otlp.proto.http"
    with caplog.at_level(logging.ERROR, logger=logger), tracer(service.url, "wrong-token", timeout=10) as t:
        emit(t, [request(0, run="refused")])
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("opentelemetry.exporter")]
    assert any("Failed to export spans batch code: 401, reason: Unauthorized" in line for line in lines), lines
