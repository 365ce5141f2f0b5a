"""OTLP/HTTP trace requests → typed rows in Python: the reference decoder (a test oracle, off the ingest path).

The service's ingest checks bodies with ``otlp_body.py`` (malformed → 400); the engine maps spans to rows
(``engine_decoder.py``). :func:`decode_request` is the *reference* decoder of the contract
in :mod:`inferensics.schema.otlp`: the differential fuzz test sends the same requests through both and
requires the same rows and the same rejection counts. It is not on the service's hot path.

Decoding uses opentelemetry-proto's generated messages (the upb C implementation when installed) and
``google.protobuf.json_format`` for OTLP/JSON. Each row is validated by its pydantic model; a row that
fails is rejected and counted, and the rest of the request is kept.
"""

from __future__ import annotations

import functools
import json
import math
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

import pyarrow as pa
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from pydantic import ValidationError

from inferensics.collector.service.capture_index import CAPTURE_COLUMNS, marker_row
from inferensics.collector.service.otlp_body import BadRequestError, decompress, parse_request
from inferensics.collector.service.otlp_sql import (
    API_ONLY_TABLE,
    DUPLICATE_KEY,
    ISO_PATTERN,
    MAX_ID_BYTES,
    MAX_MAP_ENTRIES,
    MAX_TEXT_CHARS,
    OUT_OF_RANGE_TIME,
    TOO_MANY_ENTRIES,
    UNSUPPORTED_VALUE,
    YEARS,
    api_only_text,
    cut_columns,
    is_id_column,
    time_window_us,
)
from inferensics.collector.service.row_plan import ColumnBuffer, Plan, event_row, fast_row, plan_for
from inferensics.collector.service.value_checks import value_checks
from inferensics.schema import columns as col
from inferensics.schema.events import BlobIndexEvent
from inferensics.schema.otlp import (
    API_ONLY_MODELS,
    INHERITED,
    MAP_COLUMNS,
    PREFIX,
    RESOURCE_HOST,
    attributes_to_record,
    model_for_name,
    nanos_to_datetime,
)
from inferensics.schema.table import Event
from inferensics.schema.types import to_float32

ISO: Final = re.compile(ISO_PATTERN, re.ASCII)
MAX_ERRORS: Final = 5


@dataclass
class Decoded:
    """The rows of one request, column by column per model, with what was rejected."""

    buffers: dict[type[Event], ColumnBuffer] = field(default_factory=dict)
    spans: int = 0
    rejected_spans: int = 0
    duplicate_spans: int = 0
    truncated: int = 0
    """String values cut to :data:`~inferensics.collector.service.otlp_sql.MAX_TEXT_CHARS`."""
    dropped: Counter[str] = field(default_factory=Counter)
    """Values not stored, by the engine's ``dropped`` reason (``unsupported_value``, ``too_many_entries``,
    ``duplicate_key``)."""
    markers: ColumnBuffer | None = None
    """The blob index's capture markers of the kept rows that name a captured-inputs blob
    (:mod:`inferensics.collector.service.capture_index`): index rows, not decoded rows."""
    rejected_rows: Counter[str] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    now_us: int = field(default_factory=lambda: time.time_ns() // 1000)
    """The clock of the rows' time window (:func:`inferensics.collector.service.otlp_sql.time_window_us`)."""

    @property
    def row_count(self) -> int:
        """Rows accepted."""
        return sum(b.rows for b in self.buffers.values())

    def add(self, model: type[Event], row: list[Any], where: str = "") -> bool:
        """Accept one row of ``model`` (values in the model's column order) unless its time is outside the
        table's window (rejected as ``out_of_range_time``, as the engine does); returns whether it was kept."""
        plan = plan_for(model)
        wrong = _bounds_error(plan, row)
        if wrong is not None:
            _reject(self, "invalid_row", f"{where or model.TABLE.name}: {wrong}")
            return False
        if plan.ts >= 0:
            low, high = time_window_us(model.TABLE.ttl_days, self.now_us)
            if not low <= row[plan.ts] <= high:
                _reject(self, OUT_OF_RANGE_TIME, f"{where or model.TABLE.name}: ts outside the table's window")
                return False
        # what is cut or dropped is counted for kept rows only, as the engine does
        for i, kind in _cuts(plan):
            value = row[i]
            if kind == "map" and len(value) > MAX_MAP_ENTRIES:
                self.dropped[TOO_MANY_ENTRIES] += len(value) - MAX_MAP_ENTRIES
                value = row[i] = dict(list(value.items())[:MAX_MAP_ENTRIES])
            if kind == "str" and len(value) > MAX_TEXT_CHARS:
                row[i] = value[:MAX_TEXT_CHARS]
                self.truncated += 1
            elif kind == "map" and any(len(v) > MAX_TEXT_CHARS for v in value.values()):
                self.truncated += sum(len(v) > MAX_TEXT_CHARS for v in value.values())
                row[i] = {k: v[:MAX_TEXT_CHARS] for k, v in value.items()}
        buffer = self.buffers.get(model)
        if buffer is None:
            buffer = self.buffers[model] = ColumnBuffer(plan_for(model))
        buffer.append(row)
        capture = CAPTURE_COLUMNS.get(model)
        if capture is not None and row[plan.schema.get_field_index(capture)]:
            if self.markers is None:
                self.markers = ColumnBuffer(plan_for(BlobIndexEvent))
            marker = marker_row(row[plan.schema.get_field_index(capture)], row[plan.ts])
            self.markers.append([marker[n] for n in self.markers.plan.names])
        return True

    def tables(self) -> dict[type[Event], pa.Table]:
        """The accepted rows as one Arrow table per model, the capture markers with the blob index's rows."""
        out = {m: b.to_arrow() for m, b in self.buffers.items() if b.rows}
        if self.markers is not None:
            markers = self.markers.to_arrow()
            index = out.get(BlobIndexEvent)
            out[BlobIndexEvent] = markers if index is None else pa.concat_tables([index, markers])
        return out

    def error_message(self) -> str:
        """A short summary of the rejections (the reference decoder's messages)."""
        if not self.errors:
            return ""
        more = sum(self.rejected_rows.values()) - len(self.errors)
        return "; ".join(self.errors) + (f"; and {more} more" if more > 0 else "")


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
    """Attributes by key; of a key repeated (OTLP forbids it) the first value, as the engine reads them."""
    out: dict[str, object] = {}
    for kv in kvs:
        if kv.key not in out:
            out[kv.key] = _value(kv.value)
    return out


def _unsupported(v: Any) -> bool:
    """Whether an AnyValue has no text form in the engine: a kvlist, or an array holding arrays or kvlists."""
    which = v.WhichOneof("value")
    if which == "kvlist_value":
        return True
    nested = ("array_value", "kvlist_value")
    return which == "array_value" and any(x.WhichOneof("value") in nested for x in v.array_value.values)


def _to_map(model: type[Event], key: str) -> bool:
    """Whether attribute ``key`` of a ``model`` row lands in a map column (``attrs``, a map's entry), as the
    engine's ``_codes`` decides: not a column's own key."""
    fields = model.model_fields
    if key.startswith(PREFIX):
        name = key[len(PREFIX) :]
        head, _, tail = name.partition(".")
        if tail and head in MAP_COLUMNS and head in fields:
            return True
        if name in fields:
            return False
    return col.ATTRS in fields


def _row_attributes(model: type[Event], kvs: Any) -> tuple[dict[str, object], Counter[str]]:
    """A row's own attributes without the values bound for a map that have no text form and without the repeats
    of a key (the first value is kept), and how many of each were dropped
    (:data:`~inferensics.collector.service.otlp_sql.UNSUPPORTED_VALUE`, :data:`DUPLICATE_KEY`)."""
    out: dict[str, object] = {}
    seen: set[str] = set()
    dropped: Counter[str] = Counter()
    for kv in kvs:
        if kv.key in seen:
            dropped[DUPLICATE_KEY] += 1
            continue
        seen.add(kv.key)
        if _unsupported(kv.value) and _to_map(model, kv.key):
            dropped[UNSUPPORTED_VALUE] += 1
            continue
        out[kv.key] = _value(kv.value)
    return out, dropped


def decode_request(message: ExportTraceServiceRequest, *, fast: bool = True, now_us: int | None = None) -> Decoded:
    """Map every ``inferensics.*`` span and span event to a validated row; count and keep the rest.

    ``fast=False`` sends every row through the slow path (attributes_to_record + pydantic); the fuzz
    tests compare both. ``now_us`` is the clock of the time window (default: now). A span repeated in the
    request (same trace id, span id, name and start) is decoded once.
    """
    out = Decoded() if now_us is None else Decoded(now_us=now_us)
    keys: set[tuple[bytes, bytes, str, int]] = set()
    for rs in message.resource_spans:
        resource = _attributes(rs.resource.attributes)
        host = resource.get(RESOURCE_HOST)
        for ss in rs.scope_spans:
            for span in ss.spans:
                out.spans += 1
                if _staged(span):  # a span that carries nothing for the store is no duplicate of anything
                    key = (span.trace_id, span.span_id, span.name, span.start_time_unix_nano)
                    if key in keys:  # the same span twice (its identity, as the engine keys it): stored once
                        out.duplicate_spans += 1
                        continue
                    keys.add(key)
                if not _decode_span(span, resource, host, out, fast):
                    out.rejected_spans += 1
    return out


def _staged(span: Any) -> bool:
    """Whether the engine decoder stages ``span`` (``otlp_sql.records_sql``) and so keys it for duplicates:
    an ``inferensics.*`` name or span event, or attributes or events its sender dropped."""
    if span.name.startswith(PREFIX) or span.dropped_attributes_count or span.dropped_events_count:
        return True
    return any(e.name.startswith(PREFIX) or e.dropped_attributes_count for e in span.events)


def _decode_span(span: Any, resource: dict[str, object], host: object, out: Decoded, fast: bool) -> bool:
    ok = True
    name = span.name
    model = model_for_name(name)
    inherited: dict[str, object] = {}
    if model in API_ONLY_MODELS:
        _reject(out, API_ONLY_TABLE, f"span {name!r}: {api_only_text(name)}")
        ok = False
        # its events inherit what the engine passes them from a span of this table: its attributes as sent
        inherited = {k: v for k, v in _own_inherited(span.attributes).items() if k in model.model_fields}
    elif model is not None:
        start = span.start_time_unix_nano
        plan = plan_for(model)
        fast_result = fast_row(plan, span.attributes, start // 1000, None, host) if fast else None
        if fast_result is not None:
            row, seen = fast_result
            ok = out.add(model, row, name)
            inherited = {n: row[i] for i, n in plan.inherited if i in seen}
        else:
            attributes, left_out = _row_attributes(model, span.attributes)
            record = attributes_to_record(model, attributes, time=nanos_to_datetime(start), resource=resource)
            ok = _accept(model, record, out, name)
            if ok:
                out.dropped.update(left_out)
            inherited = {c: record[c] for c in INHERITED if c in record}
    elif name.startswith(PREFIX):
        _reject(out, "unknown_table", f"span {name!r}: no table of that name")
        ok = False
    if not span.events:
        return ok
    if model is None:
        # A foreign span (e.g. an HTTP server span) carrying inferensics events: inherit from its attributes.
        inherited = _own_inherited(span.attributes)
    for event in span.events:
        ev_model = model_for_name(event.name)
        if ev_model is None:
            if event.name.startswith(PREFIX):
                _reject(out, "unknown_table", f"span event {event.name!r}: no table of that name")
                ok = False
            continue
        if ev_model in API_ONLY_MODELS:
            _reject(out, API_ONLY_TABLE, f"span event {event.name!r}: {api_only_text(event.name)}")
            ok = False
            continue
        nanos = event.time_unix_nano or span.start_time_unix_nano
        ev_result = fast_row(plan_for(ev_model), event.attributes, nanos // 1000, inherited, host) if fast else None
        if ev_result is not None:
            ok = out.add(ev_model, ev_result[0], event.name) and ok
            continue
        attributes, left_out = _row_attributes(ev_model, event.attributes)
        record = attributes_to_record(
            ev_model, attributes, time=nanos_to_datetime(nanos), inherited=inherited, resource=resource
        )
        kept = _accept(ev_model, record, out, event.name)
        if kept:
            out.dropped.update(left_out)
        ok = kept and ok
    return ok


def _own_inherited(kvs: Any) -> dict[str, object]:
    """The inheritable columns (:data:`~inferensics.schema.otlp.INHERITED`) among a span's attributes, as sent."""
    attributes = _attributes(kvs)
    return {
        k[len(PREFIX) :]: v for k, v in attributes.items() if k.startswith(PREFIX) and k[len(PREFIX) :] in INHERITED
    }


def exact_kind_error(model: type[Event], record: dict[str, object]) -> str | None:
    """Why a record's values are not of their columns' exact OTLP kinds, or ``None`` when they are.

    The contract (schema/otlp.py) types every column by its OTLP kind; pydantic's lax coercions (``"5"``
    for an int, ``1`` for a bool, a number for a time) are not part of it, and the engine decoder
    (collector/service/otlp_sql.py) applies the same rules.
    """
    plan = plan_for(model)
    for i, name in enumerate(plan.names):
        if name not in record:
            continue
        value, kind, bound = record[name], plan.kinds[i], plan.bounds.get(i, 0)
        t = type(value)
        if kind == "ts":
            ok = t is datetime or (t is str and _iso_ok(value))  # type: ignore[arg-type]
        elif kind == "map":
            ok = t is dict
        elif kind == "strlist":
            ok = t is list and all(type(x) is str for x in value)  # type: ignore[attr-defined]
        elif kind == "intlist":
            ok = t is list and all(type(x) is int and 0 <= x <= bound for x in value)  # type: ignore[attr-defined]
        elif kind == "int":
            ok = t is int and 0 <= value <= bound  # type: ignore[operator]
        elif kind == "float":
            ok = t is float or t is int
        elif kind == "bool":
            ok = t is bool
        else:
            ok = t is str
        if not ok:
            return f"{name}: {value!r} is not of the column's OTLP kind ({kind})"
    return None


def _iso_ok(text: str) -> bool:
    return ISO.fullmatch(text) is not None and YEARS[0] <= int(text[:4]) <= YEARS[1]


def _accept(model: type[Event], record: dict[str, object], out: Decoded, where: str) -> bool:
    wrong = exact_kind_error(model, record)
    if wrong is not None:
        _reject(out, "invalid_row", f"{where}: {wrong}")
        return False
    try:
        event = model.model_validate(record)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"]) or "row"
        _reject(out, "invalid_row", f"{where}: {loc}: {first['msg']}")
        return False
    row = event_row(plan_for(model), event)
    if isinstance(row, str):
        _reject(out, "invalid_row", f"{where}: {row}")
        return False
    return out.add(model, row, where)


def _bounds_error(plan: Plan, row: list[Any]) -> str | None:
    """What the engine's pivot also rejects: a non-finite float, an id empty (request_id) or too long."""
    for i, name in enumerate(plan.names):
        kind = plan.kinds[i]
        value = row[i]
        if kind == "float":
            stored = to_float32(value) if pa.types.is_float32(plan.schema.field(i).type) else float(value)
            if not math.isfinite(stored):
                return f"{name}: not a finite number (NaN or infinite)"
        elif (
            kind == "str"
            and is_id_column(name)
            and (
                len(value.encode()) > MAX_ID_BYTES
                or (
                    name == col.REQUEST_ID
                    and not value
                    and name in plan.model.model_fields
                    and plan.model.model_fields[name].is_required()
                )
            )
        ):
            return f"{name}: an id must be 1 to {MAX_ID_BYTES} bytes"
    index = plan.schema.get_field_index
    for check in value_checks(plan.model):
        value = row[index(check.column)]
        if check.breaks(value, to_float32(value) if check.float32 else None):
            return check.message
    return None


@functools.cache
def _cut_indexes(model: type[Event]) -> list[tuple[int, str]]:
    cut = dict(cut_columns(model))
    return [(i, cut[n]) for i, n in enumerate(plan_for(model).names) if n in cut]


def _cuts(plan: Plan) -> list[tuple[int, str]]:
    return _cut_indexes(plan.model)


def _reject(out: Decoded, reason: str, message: str) -> None:
    out.rejected_rows[reason] += 1
    if len(out.errors) < MAX_ERRORS:
        out.errors.append(message)


def read_body(raw: bytes, content_type: str | None, content_encoding: str | None, limit: int) -> Decoded:
    """Decompress, parse and decode one request body."""
    if len(raw) > limit:
        raise BadRequestError(413, f"request body of {len(raw)} bytes exceeds the limit of {limit} bytes")
    return decode_request(parse_request(decompress(raw, content_encoding, limit), content_type))
