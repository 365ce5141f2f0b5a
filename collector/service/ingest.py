"""``POST /v1/traces``: OTLP/HTTP in, the request fsynced to the spool before the sender is answered.

Ingest only checks and counts: it decompresses, parses the body with opentelemetry-proto (malformed → 400),
counts the spans and spools the request's protobuf bytes (OTLP/JSON is converted to protobuf first). The
engine maps spans to rows later, when the writer inserts a sealed segment (``writer.py``); rows that fail
validation there are counted in ``rejected{reason=...}`` and logged, the rest of the batch is kept. The
OTLP response therefore carries no row-level ``partial_success`` (a MAY in the OTLP specification).

Every answer is encoded as the request was (OTLP/HTTP): an ``ExportTraceServiceResponse`` on success, a
``google.rpc.Status`` on a 4xx or 5xx, each as protobuf for ``application/x-protobuf`` and as JSON for
``application/json``, with that ``Content-Type`` (:func:`error`).
"""

from __future__ import annotations

import logging
import multiprocessing
import threading
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Final

from google.protobuf import json_format
from google.rpc.status_pb2 import Status  # type: ignore[import-untyped]
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from inferensics.collector.service.config import ServiceConfig
from inferensics.collector.service.metrics import Metrics
from inferensics.collector.service.otlp_body import JSON, PROTOBUF, BadRequestError, decompress, parse_request
from inferensics.collector.service.spool import RECORD_OVERHEAD, Spool, SpoolDiskError, SpoolFullError, encode_record

log = logging.getLogger("inferensics.collector.service")


@dataclass(frozen=True, slots=True)
class IngestResult:
    """What to answer: status, body, media type and extra headers."""

    status: int
    body: bytes
    media_type: str
    headers: dict[str, str]


@dataclass(frozen=True, slots=True)
class Prepared:
    """One body checked and framed as a spool record (picklable: it may come back from a decode process)."""

    spans: int
    record: bytes


def prepare(raw: bytes, content_type: str | None, content_encoding: str | None, limit: int) -> Prepared:
    """Decompress and parse a body, count its spans and frame its protobuf bytes as a spool record.

    Raises:
        BadRequestError: the body is malformed, too large or of an unsupported type.
    """
    if len(raw) > limit:
        raise BadRequestError(413, f"request body of {len(raw)} bytes exceeds the limit of {limit} bytes")
    body = decompress(raw, content_encoding, limit)
    message = parse_request(body, content_type)
    spans = sum(len(ss.spans) for rs in message.resource_spans for ss in rs.scope_spans)
    if not spans:
        return Prepared(0, b"")
    # Protobuf is spooled as received (re-encoding would cost more than the parse); JSON is converted.
    payload = body if otlp_media(content_type) == PROTOBUF else message.SerializeToString()
    return Prepared(spans, encode_record(payload))


GZIP_MAGIC: Final = b"\x1f\x8b"
GZIP_MIN_BYTES: Final = 18
"""Header (10 bytes) and trailer (8) of the smallest gzip member."""


def record_size_hint(raw: bytes, media: str, content_encoding: str | None) -> int | None:
    """The size of the spool record a body would become, read without parsing it; ``None`` when unknown.

    A protobuf body is spooled as received, so its record is the body plus the frame. A gzip body's
    trailer holds the size of its (last) member's content (ISIZE, RFC 1952), which is the whole content for
    the single member every OTLP exporter sends. JSON is converted to protobuf, a size not known before
    the parse. The hint only lets ingest refuse a body early: one whose trailer lies gets a 429 or 503
    where parsing it would have told, never an acknowledgement it should not have.
    """
    if media != PROTOBUF:
        return None
    encoding = (content_encoding or "identity").strip().lower()
    if encoding in ("", "identity"):
        return len(raw) + RECORD_OVERHEAD
    if encoding == "gzip" and len(raw) >= GZIP_MIN_BYTES and raw[:2] == GZIP_MAGIC:
        return int.from_bytes(raw[-4:], "little") + RECORD_OVERHEAD
    return None


class Ingest:
    """Parse, count, spool (fsync), then answer; runs in a worker thread per request.

    With ``decode_workers`` > 0 the parsing runs in that many processes (the GIL otherwise keeps it on one
    core); appending to the spool and answering stay here.
    """

    def __init__(self, config: ServiceConfig, spool: Spool, metrics: Metrics, store_ok: Callable[[], bool]) -> None:
        self.config = config
        self.spool = spool
        self.metrics = metrics
        self._store_ok = store_ok
        self._pool: ProcessPoolExecutor | None = None
        self._pool_lock = threading.Lock()
        if config.decode_workers:
            self._pool = self._new_pool()
            # start every worker now (spawn + imports take seconds), not on the first requests
            warm = [self._pool.submit(prepare, b"", PROTOBUF, None, 1) for _ in range(config.decode_workers)]
            for future in warm:
                future.result()

    def _prepare(self, raw: bytes, content_type: str | None, content_encoding: str | None, limit: int) -> Prepared:
        pool = self._pool
        if pool is None:
            return prepare(raw, content_type, content_encoding, limit)
        try:
            return pool.submit(prepare, raw, content_type, content_encoding, limit).result()
        except BrokenProcessPool:
            # A decode process died (killed, out of memory): the pool refuses all work from then on. This
            # request is parsed here and the pool started again for the next ones.
            log.error("a decode process died; restarting the pool of %d", self.config.decode_workers)
            self.metrics.inc("decode_pool_restarts")
            with self._pool_lock:
                if self._pool is pool:
                    pool.shutdown(wait=False, cancel_futures=True)
                    self._pool = self._new_pool()
            return prepare(raw, content_type, content_encoding, limit)

    def _new_pool(self) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(self.config.decode_workers, mp_context=multiprocessing.get_context("spawn"))

    def close(self) -> None:
        """Stop the decode processes."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)

    def handle(self, raw: bytes, content_type: str | None, content_encoding: str | None) -> IngestResult:
        """Handle one export request body."""
        media = otlp_media(content_type)
        answer_json = media == JSON
        limit = self.config.max_body_bytes
        hint = record_size_hint(raw, media, content_encoding)
        if hint is not None and len(raw) <= limit and hint <= self.spool.max_bytes:
            # A body the spool cannot take is refused before the parse. Senders retry a refused body after
            # Retry-After, or at once if they ignore it, and a body parsed only to be refused took CPU from the
            # writer that is draining the spool (2.4 MB bodies at the cap: 3-4 ms of parse each).
            try:
                self.spool.check_room(hint)
            except SpoolFullError as exc:
                return self._spool_full(exc, content_type)
        try:
            prepared = self._prepare(raw, content_type, content_encoding, limit)
        except BadRequestError as exc:
            reason = {413: "too_large", 415: "unsupported_media"}.get(exc.status, "malformed")
            self.metrics.inc("rejected", label=reason)
            return error(exc.status, exc.message, media=content_type)
        self.metrics.inc("received_spans", prepared.spans)
        if prepared.spans:
            if len(prepared.record) > self.spool.max_bytes:
                # Would never fit, however long the sender waits: not a 429/503 to retry but a body to split.
                self.metrics.inc("rejected", label="too_large")
                return error(
                    413,
                    f"request of {len(prepared.record)} bytes is larger than the whole spool "
                    f"({self.spool.max_bytes} bytes, setting spool_max_bytes): send smaller batches or raise the cap",
                    media=content_type,
                )
            try:
                self.spool.append(prepared.record, prepared.spans)
            except SpoolFullError as exc:
                return self._spool_full(exc, content_type)
            self.metrics.inc("spooled_spans", prepared.spans)
        response = ExportTraceServiceResponse()
        if answer_json:
            return IngestResult(200, json_format.MessageToJson(response).encode(), JSON, {})
        return IngestResult(200, response.SerializeToString(), PROTOBUF, {})

    def _spool_full(self, exc: SpoolFullError, content_type: str | None) -> IngestResult:
        """429 (the store is catching up) or 503 (the store is down), with Retry-After; counted."""
        self.metrics.inc("rejected", label="spool_full")
        disk = isinstance(exc, SpoolDiskError)
        down = not self._store_ok()
        status = 503 if down or disk else 429
        why = "the store is unavailable and " if down and not disk else ""
        return error(
            status,
            f"{why}{exc}; retry after {self.config.retry_after_s} s",
            {"Retry-After": str(self.config.retry_after_s)},
            media=content_type,
        )


RPC_CODES: Final = {400: 3, 401: 16, 403: 7, 404: 5, 413: 3, 415: 3, 429: 8, 500: 13, 503: 14}
"""The ``google.rpc.Code`` an error answer's ``Status.code`` carries for its HTTP status (google/rpc/code.proto's
mapping: INVALID_ARGUMENT, UNAUTHENTICATED, PERMISSION_DENIED, NOT_FOUND, RESOURCE_EXHAUSTED, INTERNAL,
UNAVAILABLE). OTLP clients do not act on it (the HTTP status decides a retry) but may log it."""


def error(status: int, message: str, headers: dict[str, str] | None = None, *, media: str | None) -> IngestResult:
    """An OTLP/HTTP error answer: a ``google.rpc.Status`` carrying ``message``, encoded as the request was.

    ``media`` is the request's ``Content-Type``: protobuf for ``application/x-protobuf`` (and for none, OTLP/HTTP's
    default), JSON (``{"code": 3, "message": "..."}``) for ``application/json``. A request of another type is
    answered in JSON, which a person reading the refusal can read.
    """
    answer = Status(code=RPC_CODES.get(status, 2), message=message)  # 2: UNKNOWN
    if otlp_media(media) == PROTOBUF:
        return IngestResult(status, answer.SerializeToString(), PROTOBUF, headers or {})
    return IngestResult(status, json_format.MessageToJson(answer, indent=None).encode(), JSON, headers or {})


def otlp_media(content_type: str | None) -> str:
    """The media type of an OTLP/HTTP request's ``Content-Type`` (none: protobuf, the default)."""
    return (content_type or PROTOBUF).split(";")[0].strip().lower()
