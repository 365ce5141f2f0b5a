"""``POST /v1/traces``: OTLP/HTTP in, rows fsynced to the spool before the sender is answered."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from inferensics.collector.service.config import ServiceConfig
from inferensics.collector.service.decode import JSON, PROTOBUF, BadRequestError, read_body
from inferensics.collector.service.metrics import Metrics
from inferensics.collector.service.spool import Spool, SpoolFullError, encode_record


@dataclass(frozen=True, slots=True)
class IngestResult:
    """What to answer: status, body, media type and extra headers."""

    status: int
    body: bytes
    media_type: str
    headers: dict[str, str]


class Ingest:
    """Decode, validate, spool (fsync), then answer; runs in a worker thread per request."""

    def __init__(self, config: ServiceConfig, spool: Spool, metrics: Metrics, store_ok: Callable[[], bool]) -> None:
        self.config = config
        self.spool = spool
        self.metrics = metrics
        self._store_ok = store_ok

    def handle(self, raw: bytes, content_type: str | None, content_encoding: str | None) -> IngestResult:
        """Handle one export request body."""
        media = (content_type or PROTOBUF).split(";")[0].strip().lower()
        answer_json = media == JSON
        try:
            decoded = read_body(raw, content_type, content_encoding, self.config.max_body_bytes)
        except BadRequestError as exc:
            reason = {413: "too_large", 415: "unsupported_media"}.get(exc.status, "malformed")
            self.metrics.inc("rejected", label=reason)
            return error(exc.status, exc.message)
        self.metrics.inc("received_spans", decoded.spans)
        self.metrics.inc("received_rows", decoded.row_count)
        for reason, n in decoded.rejected_rows.items():
            self.metrics.inc("rejected", n, label=reason)
        rows = decoded.row_count
        if rows:
            tables = {m.TABLE.name: t for m, t in decoded.tables().items()}
            try:
                self.spool.append(encode_record(tables), rows)
            except SpoolFullError as exc:
                self.metrics.inc("rejected", label="spool_full")
                down = not self._store_ok()
                status = 503 if down else 429
                why = "the store is unavailable and " if down else ""
                return error(
                    status,
                    f"{why}{exc}; retry after {self.config.retry_after_s} s",
                    {"Retry-After": str(self.config.retry_after_s)},
                )
            self.metrics.inc("spooled_rows", rows)
        response = ExportTraceServiceResponse()
        if decoded.rejected_spans:
            response.partial_success.rejected_spans = decoded.rejected_spans
            response.partial_success.error_message = decoded.error_message()
        if answer_json:
            return IngestResult(200, json_format.MessageToJson(response).encode(), JSON, {})
        return IngestResult(200, response.SerializeToString(), PROTOBUF, {})


def error(status: int, message: str, headers: dict[str, str] | None = None) -> IngestResult:
    """A JSON error body ``{"error": message}``."""
    return IngestResult(status, json.dumps({"error": message}).encode(), "application/json", headers or {})
