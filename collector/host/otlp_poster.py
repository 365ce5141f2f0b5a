"""OTLP/HTTP: an encoded ``ExportTraceServiceRequest`` POSTed to a traces endpoint, retried as
OpenTelemetry's OTLP/HTTP exporter retries, with how it ended (delivered, or refused and why).

OpenTelemetry's ``OTLPSpanExporter`` takes only ``ReadableSpan``s and encodes them itself; it has no public
way to send bytes already encoded (:mod:`~inferensics.collector.host.otlp_wire` writes them), so the POST is
made here, over ``requests`` as that exporter makes it, with its behaviour: the
``$OTEL_EXPORTER_OTLP_[TRACES_]{HEADERS,COMPRESSION,CERTIFICATE,CLIENT_KEY,CLIENT_CERTIFICATE}`` settings,
``Content-Type: application/x-protobuf``, no redirects followed, any 2xx or 3xx a delivery; a connection
error tried once more at once (a stale pooled connection); HTTP 429/502/503/504 and connection errors
retried with exponential backoff (``2**attempt`` s, ±20 % jitter, or the answer's ``Retry-After``), up to 6
attempts, all within one timeout; a request over 64 MiB before compression not sent. ``shutdown`` cuts a
backoff short. ``tests/collector/host/test_otlp_poster.py`` holds it to that.
"""

from __future__ import annotations

import gzip
import logging
import math
import os
import random
import threading
import time
import zlib
from collections.abc import Mapping
from datetime import UTC
from email.utils import parsedate_to_datetime
from typing import Final, NamedTuple

import requests
from opentelemetry.sdk.environment_variables import (
    OTEL_EXPORTER_OTLP_CERTIFICATE,
    OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE,
    OTEL_EXPORTER_OTLP_CLIENT_KEY,
    OTEL_EXPORTER_OTLP_COMPRESSION,
    OTEL_EXPORTER_OTLP_HEADERS,
    OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE,
    OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE,
    OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY,
    OTEL_EXPORTER_OTLP_TRACES_COMPRESSION,
    OTEL_EXPORTER_OTLP_TRACES_HEADERS,
)
from opentelemetry.util.re import parse_env_headers

from inferensics.collector.host.export_health import cause_of_status

log = logging.getLogger("inferensics.collector.host")

MAX_ATTEMPTS: Final = 6
RETRYABLE_STATUS: Final = frozenset({429, 502, 503, 504})
MAX_REQUEST_BYTES: Final = 64 * 1024 * 1024
"""The largest request sent, before compression (OpenTelemetry's exporter's default ``max_request_size``)."""
_JITTER: Final = 0.2
_CONNECTION_ERRORS: Final = (
    requests.exceptions.ConnectionError,
    requests.exceptions.Timeout,
    requests.exceptions.SSLError,
    requests.exceptions.ProxyError,
)


class PostOutcome(NamedTuple):
    """How one POST (with its retries) ended: ``cause`` ``""`` for a delivery, else an
    :data:`~inferensics.collector.host.export_health.CAUSES` entry; ``detail`` for the log and ``last_error``."""

    cause: str
    detail: str


def _env(*names: str) -> str | None:
    for name in names:
        if value := os.environ.get(name):
            return value
    return None


class OtlpPoster:
    """POSTs encoded OTLP requests to ``endpoint`` (the full ``.../v1/traces`` URL), one at a time.

    ``headers`` (such as the bearer token) win over ``$OTEL_EXPORTER_OTLP_[TRACES_]HEADERS``; ``timeout_s``
    bounds one request with all its retries.
    """

    def __init__(
        self,
        endpoint: str,
        *,
        headers: Mapping[str, str] | None = None,
        timeout_s: float = 10.0,
        session: requests.Session | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.timeout_s = timeout_s
        env_headers = parse_env_headers(
            _env(OTEL_EXPORTER_OTLP_TRACES_HEADERS, OTEL_EXPORTER_OTLP_HEADERS) or "", liberal=True
        )
        self.headers = {"content-type": "application/x-protobuf", "user-agent": "inferensics-host"}
        self.headers.update(env_headers)
        self.headers.update({k.lower(): v for k, v in (headers or {}).items()})
        self.compression = self._compression()
        if self.compression != "none" and "content-encoding" not in self.headers:
            self.headers["content-encoding"] = self.compression
        self.session = session if session is not None else requests.Session()
        self.session.verify = _env(OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE, OTEL_EXPORTER_OTLP_CERTIFICATE) or True
        key = _env(OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY, OTEL_EXPORTER_OTLP_CLIENT_KEY)
        cert = _env(OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE, OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE)
        if cert:
            self.session.cert = (cert, key) if key else cert
        self._shutdown = threading.Event()

    @staticmethod
    def _compression() -> str:
        value = (_env(OTEL_EXPORTER_OTLP_TRACES_COMPRESSION, OTEL_EXPORTER_OTLP_COMPRESSION) or "none").strip().lower()
        if value not in ("none", "gzip", "deflate"):
            log.warning(
                "inferensics: unsupported OTLP compression %r (none, gzip or deflate): sending uncompressed", value
            )
            return "none"
        return value

    def post(self, body: bytes) -> PostOutcome:
        """Send one encoded request, retrying what may pass on a later try; how it ended."""
        if len(body) > MAX_REQUEST_BYTES:
            return PostOutcome("rejected", f"request of {len(body)} bytes is over {MAX_REQUEST_BYTES} bytes: not sent")
        if self.compression == "gzip":
            body = gzip.compress(body)
        elif self.compression == "deflate":
            body = zlib.compress(body)
        deadline = time.time() + self.timeout_s
        outcome = PostOutcome("rejected", "no answer")
        for attempt in range(MAX_ATTEMPTS):
            backoff = 2**attempt * random.uniform(1 - _JITTER, 1 + _JITTER)
            response, error = self._submit(body, max(deadline - time.time(), 0.0))
            if response is not None:
                status = response.status_code
                if 200 <= status < 400:
                    return PostOutcome("", f"HTTP {status}")
                outcome = PostOutcome(cause_of_status(status), _answer(response))
                retryable = status in RETRYABLE_STATUS
                if retryable and (retry_after := _retry_after(response)) is not None:
                    backoff = retry_after
            else:
                assert error is not None
                retryable = isinstance(error, _CONNECTION_ERRORS)
                cause = "down" if isinstance(error, requests.RequestException) else "rejected"
                outcome = PostOutcome(cause, type(error).__name__)
            if (
                not retryable
                or attempt + 1 == MAX_ATTEMPTS
                or backoff > deadline - time.time()
                or self._shutdown.wait(backoff)
            ):
                return outcome
        return outcome

    def _submit(self, body: bytes, timeout: float) -> tuple[requests.Response | None, Exception | None]:
        """One POST; a connection error once more at once while time is left (a stale pooled connection)."""
        deadline = time.time() + timeout
        response, error = self._request(body, timeout)
        if error is not None and isinstance(error, _CONNECTION_ERRORS) and (left := deadline - time.time()) > 0:
            response, error = self._request(body, left)
        return response, error

    def _request(self, body: bytes, timeout: float) -> tuple[requests.Response | None, Exception | None]:
        try:
            response = self.session.request(
                "POST", self.endpoint, headers=self.headers, data=body, timeout=timeout, allow_redirects=False
            )
        except Exception as exc:  # an outcome like any other: counted by the caller, never raised
            return None, exc
        return response, None

    def shutdown(self) -> None:
        """Cut a retry's wait short (what it held ends refused) and close the connections."""
        self._shutdown.set()
        self.session.close()


def _answer(response: requests.Response) -> str:
    """``HTTP <status> <reason>``, and the start of the body when the service said why: the message of the
    ``google.rpc.Status`` an OTLP/HTTP error answer carries (protobuf or JSON), else the body's text."""
    detail = f"HTTP {response.status_code} {(response.reason or '').strip()}".strip()
    try:
        text = _said(response)
    except Exception:  # an undecodable body says nothing more
        text = ""
    return f"{detail}: {text[:200]}" if text and response.status_code not in (401, 403) else detail


def _said(response: requests.Response) -> str:
    """What an error answer's body says: a ``google.rpc.Status``'s message (OTLP/HTTP answers a protobuf request
    with a protobuf Status, a JSON one with its JSON form), else the body as text."""
    media = response.headers.get("content-type", "").split(";")[0].strip().lower()
    if media == "application/x-protobuf":
        from google.rpc.status_pb2 import Status  # type: ignore[import-untyped]  # OTLPSpanExporter's dependency

        status = Status()
        status.ParseFromString(response.content)
        return str(status.message).strip()
    if media == "application/json":
        answer = response.json()
        message = answer.get("message") if isinstance(answer, dict) else None
        if isinstance(message, str):
            return message.strip()
    return response.text.strip()


def _retry_after(response: requests.Response) -> float | None:
    """The answer's ``Retry-After`` in seconds (delay-seconds or an HTTP date, RFC 7231), if it has one."""
    value = response.headers.get("retry-after")
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        return max(seconds, 0.0) if math.isfinite(seconds) else None
    try:
        at = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return max(at.timestamp() - time.time(), 0.0)
