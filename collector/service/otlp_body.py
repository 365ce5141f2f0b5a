"""OTLP/HTTP request bodies as ingest checks them: the encoding undone and the request parsed (malformed → 400).

Ingest imports only this module; the Python reference decoder (``decode.py``, a test oracle) builds on it.
"""

from __future__ import annotations

import base64
import json
import string
import zlib
from typing import Any, Final

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

PROTOBUF: Final = "application/x-protobuf"
JSON: Final = "application/json"


class BadRequestError(ValueError):
    """The body cannot be decoded; ``status`` is 400 (malformed), 413 (too large) or 415 (media type)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message

    def __reduce__(self) -> tuple[type[BadRequestError], tuple[int, str]]:
        # keeps both fields when it crosses from a decode process
        return (type(self), (self.status, self.message))


def decompress(body: bytes, encoding: str | None, limit: int) -> bytes:
    """Undo ``Content-Encoding`` (identity or gzip), refusing bodies larger than ``limit`` after inflation."""
    enc = (encoding or "identity").strip().lower()
    if enc in ("", "identity"):
        if len(body) > limit:
            raise BadRequestError(413, f"request body of {len(body)} bytes exceeds the limit of {limit} bytes")
        return body
    if enc != "gzip":
        raise BadRequestError(415, f"unsupported Content-Encoding {encoding!r}; use gzip or identity")
    # A gzip body may hold several members one after another (RFC 1952; what concatenated .gz files are):
    # each is inflated in turn, all of them counted against the limit.
    parts: list[bytes] = []
    size, rest = 0, body
    while True:
        inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        try:
            out = inflater.decompress(rest, limit + 1 - size)
        except zlib.error as exc:
            raise BadRequestError(400, f"malformed gzip body: {exc}") from None
        size += len(out)
        if size > limit:
            raise BadRequestError(413, f"request body exceeds the limit of {limit} bytes after gunzip")
        if not inflater.eof:
            raise BadRequestError(400, "malformed gzip body: truncated stream")
        parts.append(out)
        rest = inflater.unused_data
        if not rest:
            return b"".join(parts)


def parse_request(body: bytes, content_type: str | None) -> ExportTraceServiceRequest:
    """Parse an ``ExportTraceServiceRequest`` from protobuf or OTLP/JSON."""
    media = (content_type or PROTOBUF).split(";")[0].strip().lower()
    message = ExportTraceServiceRequest()
    if media == PROTOBUF:
        try:
            message.ParseFromString(body)
        except (DecodeError, RuntimeError, ValueError) as exc:
            raise BadRequestError(400, f"malformed OTLP protobuf: {_one_line(str(exc)) or 'cannot parse'}") from None
        return message
    if media == JSON:
        if body.lstrip()[:1] != b"{":
            # json_format.Parse takes any JSON value ([] or "abc" parse as an empty request)
            raise BadRequestError(
                400, "malformed OTLP JSON: the body must be a JSON object (ExportTraceServiceRequest)"
            )
        try:
            tree = json.loads(body.decode("utf-8"), object_pairs_hook=_object)
            _ids_as_protobuf_json(tree)
            json_format.ParseDict(tree, message, ignore_unknown_fields=True)
        except (json_format.ParseError, UnicodeDecodeError, RecursionError, ValueError) as exc:
            raise BadRequestError(400, f"malformed OTLP JSON: {_one_line(str(exc))[:300]}") from None
        return message
    raise BadRequestError(415, f"unsupported Content-Type {content_type!r}; use {PROTOBUF} or {JSON}")


def _one_line(text: str) -> str:
    """``text`` with its unprintable characters escaped: a parser's message quotes what the sender sent (a value with
    a newline in it), and a refusal is one line."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object, refused when it names a field twice (as protobuf's JSON parser refuses it)."""
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        twice = next(k for k, _ in pairs if k in seen or seen.add(k))  # type: ignore[func-returns-value]
        raise ValueError(f"the field {twice!r} is given twice in one object")
    return out


_ID_BYTES: Final = {"traceId": 16, "trace_id": 16, "spanId": 8, "span_id": 8, "parentSpanId": 8, "parent_span_id": 8}
"""The OTLP id fields of a span and of its links, and their lengths in bytes."""


def _ids_as_protobuf_json(tree: Any) -> None:
    """Turn the hex ids of OTLP/JSON into the base64 that protobuf's JSON mapping reads, in place.

    OTLP/JSON encodes trace and span ids as hex (32 and 16 digits), unlike protobuf's generic JSON mapping of bytes
    (base64), which read a hex trace id as 24 bytes of something else. An id that is not hex of its length is left
    to that mapping (base64, as earlier releases' own JSON sent them; anything else is malformed).
    """
    if not isinstance(tree, dict):
        return
    for resource in _items(tree, "resourceSpans", "resource_spans"):
        for scope in _items(resource, "scopeSpans", "scope_spans"):
            for span in _items(scope, "spans"):
                _convert_ids(span)
                for link in _items(span, "links"):
                    _convert_ids(link)


def _items(parent: dict[str, Any], *keys: str) -> list[dict[str, Any]]:
    """The objects of the first of ``keys`` that ``parent`` holds as a list (the others are the mapping's to refuse)."""
    value = next((parent[k] for k in keys if k in parent), None)
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _convert_ids(item: dict[str, Any]) -> None:
    for key, size in _ID_BYTES.items():
        value = item.get(key)
        if isinstance(value, str) and len(value) == 2 * size and all(c in string.hexdigits for c in value):
            item[key] = base64.b64encode(bytes.fromhex(value)).decode()
