"""OTLP/HTTP trace requests → typed rows, following the contract in :mod:`inferensics.schema.otlp`.

Decoding uses opentelemetry-proto's generated messages (the upb C implementation when installed) and
``google.protobuf.json_format`` for OTLP/JSON. Each row is validated by its pydantic model; a row that
fails is rejected and counted, and the rest of the request is kept.
"""

from __future__ import annotations

import json
import zlib
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import pyarrow as pa
from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from pydantic import ValidationError

from inferensics.schema.arrow import arrow_schema
from inferensics.schema.otlp import INHERITED, PREFIX, attributes_to_record, model_for_name, nanos_to_datetime
from inferensics.schema.table import Event

PROTOBUF: Final = "application/x-protobuf"
JSON: Final = "application/json"
MAX_ERRORS: Final = 5


class BadRequestError(ValueError):
    """The body cannot be decoded; ``status`` is 400 (malformed), 413 (too large) or 415 (media type)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class Decoded:
    """The rows of one request, grouped by model, with what was rejected."""

    rows: dict[type[Event], list[Event]] = field(default_factory=dict)
    spans: int = 0
    rejected_spans: int = 0
    rejected_rows: Counter[str] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)

    @property
    def row_count(self) -> int:
        """Rows accepted."""
        return sum(len(v) for v in self.rows.values())

    def tables(self) -> dict[type[Event], pa.Table]:
        """The accepted rows as one Arrow table per model."""
        return {m: rows_to_arrow(m, rows) for m, rows in self.rows.items() if rows}

    def error_message(self) -> str:
        """A short summary of the rejections for ``partial_success.error_message``."""
        if not self.errors:
            return ""
        more = sum(self.rejected_rows.values()) - len(self.errors)
        return "; ".join(self.errors) + (f"; and {more} more" if more > 0 else "")


def decompress(body: bytes, encoding: str | None, limit: int) -> bytes:
    """Undo ``Content-Encoding`` (identity or gzip), refusing bodies larger than ``limit`` after inflation."""
    enc = (encoding or "identity").strip().lower()
    if enc in ("", "identity"):
        if len(body) > limit:
            raise BadRequestError(413, f"request body of {len(body)} bytes exceeds the limit of {limit} bytes")
        return body
    if enc != "gzip":
        raise BadRequestError(415, f"unsupported Content-Encoding {encoding!r}; use gzip or identity")
    inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        out = inflater.decompress(body, limit + 1)
    except zlib.error as exc:
        raise BadRequestError(400, f"malformed gzip body: {exc}") from None
    if len(out) > limit:
        raise BadRequestError(413, f"request body exceeds the limit of {limit} bytes after gunzip")
    if not inflater.eof:
        raise BadRequestError(400, "malformed gzip body: truncated stream")
    return out


def parse_request(body: bytes, content_type: str | None) -> ExportTraceServiceRequest:
    """Parse an ``ExportTraceServiceRequest`` from protobuf or OTLP/JSON."""
    media = (content_type or PROTOBUF).split(";")[0].strip().lower()
    message = ExportTraceServiceRequest()
    if media == PROTOBUF:
        try:
            message.ParseFromString(body)
        except (DecodeError, RuntimeError, ValueError) as exc:
            raise BadRequestError(400, f"malformed OTLP protobuf: {exc or 'cannot parse'}") from None
        return message
    if media == JSON:
        try:
            json_format.Parse(body.decode("utf-8"), message, ignore_unknown_fields=True)
        except (json_format.ParseError, UnicodeDecodeError, RecursionError, ValueError) as exc:
            raise BadRequestError(400, f"malformed OTLP JSON: {str(exc)[:300]}") from None
        return message
    raise BadRequestError(415, f"unsupported Content-Type {content_type!r}; use {PROTOBUF} or {JSON}")


def _value(v: Any) -> object:
    which = v.WhichOneof("value")
    if which == "string_value":
        return v.string_value
    if which == "int_value":
        return v.int_value
    if which == "double_value":
        return v.double_value
    if which == "bool_value":
        return v.bool_value
    if which == "array_value":
        return [_value(x) for x in v.array_value.values]
    if which == "bytes_value":
        return bytes(v.bytes_value).hex()
    if which == "kvlist_value":
        return json.dumps({kv.key: _value(kv.value) for kv in v.kvlist_value.values}, default=str)
    return None


def _attributes(kvs: Any) -> dict[str, object]:
    return {kv.key: _value(kv.value) for kv in kvs}


def decode_request(message: ExportTraceServiceRequest) -> Decoded:
    """Map every ``inferensics.*`` span and span event to a validated row; count and keep the rest."""
    out = Decoded()
    for rs in message.resource_spans:
        resource = _attributes(rs.resource.attributes)
        for ss in rs.scope_spans:
            for span in ss.spans:
                out.spans += 1
                if not _decode_span(span, resource, out):
                    out.rejected_spans += 1
    return out


def _decode_span(span: Any, resource: Mapping[str, object], out: Decoded) -> bool:
    ok = True
    name = span.name
    model = model_for_name(name)
    inherited: dict[str, object] = {}
    attributes: dict[str, object] | None = None
    if model is not None:
        attributes = _attributes(span.attributes)
        record = attributes_to_record(
            model, attributes, time=nanos_to_datetime(span.start_time_unix_nano), resource=resource
        )
        ok = _accept(model, record, out, name)
        inherited = {c: record[c] for c in INHERITED if c in record}
    elif name.startswith(PREFIX):
        _reject(out, "unknown_table", f"span {name!r}: no table of that name")
        ok = False
    for event in span.events:
        ev_model = model_for_name(event.name)
        if ev_model is None:
            if event.name.startswith(PREFIX):
                _reject(out, "unknown_table", f"span event {event.name!r}: no table of that name")
                ok = False
            continue
        if not inherited and attributes is None:
            # A foreign span (e.g. an HTTP server span) carrying inferensics events: inherit from its attrs.
            attributes = _attributes(span.attributes)
            inherited = {k[len(PREFIX) :]: v for k, v in attributes.items() if k[len(PREFIX) :] in INHERITED}
        record = attributes_to_record(
            ev_model,
            _attributes(event.attributes),
            time=nanos_to_datetime(event.time_unix_nano or span.start_time_unix_nano),
            inherited=inherited,
            resource=resource,
        )
        ok = _accept(ev_model, record, out, event.name) and ok
    return ok


def _accept(model: type[Event], record: dict[str, object], out: Decoded, where: str) -> bool:
    try:
        row = model.model_validate(record)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"]) or "row"
        _reject(out, "invalid_row", f"{where}: {loc}: {first['msg']}")
        return False
    out.rows.setdefault(model, []).append(row)
    return True


def _reject(out: Decoded, reason: str, message: str) -> None:
    out.rejected_rows[reason] += 1
    if len(out.errors) < MAX_ERRORS:
        out.errors.append(message)


def rows_to_arrow(model: type[Event], rows: list[Event]) -> pa.Table:
    """Validated rows → an Arrow table in the model's schema (columns built straight from field values)."""
    schema = arrow_schema(model)
    arrays = []
    for f in schema:
        name = f.name
        values = [r.__dict__[name] for r in rows]
        if pa.types.is_map(f.type):
            values = [list(m.items()) for m in values]
        arrays.append(pa.array(values, type=f.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def read_body(raw: bytes, content_type: str | None, content_encoding: str | None, limit: int) -> Decoded:
    """Decompress, parse and decode one request body."""
    if len(raw) > limit:
        raise BadRequestError(413, f"request body of {len(raw)} bytes exceeds the limit of {limit} bytes")
    return decode_request(parse_request(decompress(raw, content_encoding, limit), content_type))
