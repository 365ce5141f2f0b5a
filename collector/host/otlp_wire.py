"""Records as OTLP protobuf bytes: one ``ExportTraceServiceRequest`` per batch, written directly.

The bytes are the message OpenTelemetry's own encoder (``encode_spans``) makes of the spans that
:mod:`~inferensics.collector.host.otlp_spans` builds from the same records: one resource, one scope, a span
per record (a request's sub-records as its span events), attributes from the contract's
:func:`~inferensics.schema.otlp.event_to_attributes`. Building a ``ReadableSpan`` and then a tree of
protobuf messages per record (a ``KeyValue`` and an ``AnyValue`` per attribute, each copied into its span)
was most of the export path's CPU; here a span is its fields' bytes joined, the resource and scope are
written once per exporter, and an attribute whose value repeats across requests (model, host, outcome,
graph keys, ...) is looked up, not re-encoded. ``tests/collector/host/test_otlp_wire.py`` holds the two
encodings equal, byte for byte, over generated records of every kind.

What OpenTelemetry's encoder does with a value protobuf cannot carry is kept: an attribute whose value
cannot be encoded (an int outside int64, a string with a lone surrogate, an unknown type) is left out of
its span, and reported here (``on_attribute_error``) instead of logged per span; a record whose times
cannot be carried (before 1970, a NaN latency) is left out of the batch and reported (``on_error``),
where OpenTelemetry's encoder failed the whole batch.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from time import time_ns
from typing import Any, Final

from inferensics.schema import columns as col
from inferensics.schema.otlp import event_to_attributes, span_name
from inferensics.schema.table import Event

Item = tuple[Event, Sequence[Event] | None]
"""A record to export: a request with its sub-records, or a record of its own (``None``)."""

_U64: Final = 1 << 64
_I64_MIN: Final = -(1 << 63)
_I64_MAX: Final = (1 << 63) - 1
_CACHE_LIMIT: Final = 4096
"""Cached attribute encodings per span part before the cache starts over (unique values, such as request
ids, pass through it too)."""
_CACHED_FIELD_MAX: Final = 512
"""The longest attribute encoding cached (a long value seldom repeats; the cache stays small)."""

_pack_double = struct.Struct("<d").pack
_pack_times = struct.Struct("<BQBQ").pack  # start (field 7) and end (field 8) of a span, both fixed64
_pack_fixed64 = struct.Struct("<Q").pack


def unix_nanos(ts: datetime) -> int:
    """A record's time as OTLP's nanoseconds since the epoch (microsecond precision, as the record has)."""
    return int(ts.timestamp() * 1_000_000) * 1000


def random_ids() -> tuple[int, int]:
    """A new root span's trace id and span id (random, as the SDK's RandomIdGenerator draws them; never zero)."""
    bits = random.getrandbits
    return bits(128) or 1, bits(64) or 1


def _varint(n: int) -> bytes:
    if n < 0x80:
        return _SMALL[n]
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_SMALL: Final = tuple(bytes((i,)) for i in range(0x80))
_VARINTS: Final = tuple(_varint(i) if i >= 0x80 else _SMALL[i] for i in range(1 << 14))
"""The varint of every small length and int, looked up instead of computed."""
_INT_ELEMENTS: Final = tuple(b"\x0a" + _SMALL[len(b"\x18" + v)] + b"\x18" + v for v in _VARINTS)
"""An array element (a length-delimited ``AnyValue``) of every small int."""


def varint(n: int) -> bytes:
    """Protobuf's base-128 varint of a non-negative int below 2**64."""
    return _VARINTS[n] if n < 16384 else _varint(n)


def _field(tag: bytes, payload: bytes) -> bytes:
    """A length-delimited field: its tag (one byte), the payload's length, the payload."""
    n = len(payload)
    return tag + (_VARINTS[n] if n < 16384 else _varint(n)) + payload


def _int_value(n: int) -> bytes:
    """``AnyValue.int_value`` (field 3, int64: negatives as their two's complement in 64 bits)."""
    if n < 0:
        if n < _I64_MIN:
            raise ValueError(f"Value out of range: {n}")
        return b"\x18" + _varint(n + _U64)
    if n > _I64_MAX:
        raise ValueError(f"Value out of range: {n}")
    return b"\x18" + (_VARINTS[n] if n < 16384 else _varint(n))


def any_value(value: object) -> bytes:
    """The encoded ``AnyValue`` of an attribute value, by OpenTelemetry's rules (``_encode_value``): bool,
    str, int, float, bytes, then any sequence as an array and any mapping as a key-value list; ``None`` is
    an empty value. Raises for what it cannot encode (OpenTelemetry's encoder then leaves the attribute out)."""
    if value is None:
        return b""
    if isinstance(value, bool):
        return b"\x10\x01" if value else b"\x10\x00"
    if isinstance(value, str):
        return _field(b"\x0a", value.encode())
    if isinstance(value, int):
        return _int_value(value)
    if isinstance(value, float):
        return b"\x21" + _pack_double(value)
    if isinstance(value, bytes):
        return _field(b"\x3a", value)
    if isinstance(value, Sequence):
        return _field(b"\x2a", b"".join([_field(b"\x0a", any_value(v)) for v in value]))  # pyright: ignore[reportUnknownVariableType]
    if isinstance(value, Mapping):
        pairs = value.items()  # pyright: ignore[reportUnknownVariableType, reportUnknownMemberType]
        return _field(b"\x32", b"".join([_field(b"\x0a", key_value(str(k), v)) for k, v in pairs]))  # pyright: ignore[reportUnknownArgumentType]
    raise TypeError(f"Invalid type {type(value)} of value {value}")


def key_value(key: str, value: object) -> bytes:
    """The encoded ``KeyValue`` message of one attribute."""
    return _field(b"\x0a", key.encode()) + _field(b"\x12", any_value(value))


class AttributeEncoder:
    """Attributes as the repeated ``KeyValue`` field ``tag`` of one message kind (a span's or an event's),
    the encodings of repeating values cached.

    Cached, by key and value: strings, ints, and lists whose every item is a string or an int. Only exact
    ``str`` and ``int`` go in (never a bool or a float: ``True == 1`` and ``-0.0 == 0.0`` would find another
    value's bytes), and a string never equals an int, so a hit is always the value's own bytes. Floats and
    bools are written each time; other values go through :func:`any_value`.
    """

    def __init__(self, tag: bytes) -> None:
        self.tag = tag
        self._scalars: dict[str, dict[str | int, bytes]] = {}
        self._lists: dict[str, dict[tuple[str | int, ...], bytes]] = {}
        self._cached = 0

    def encode(self, attributes: Mapping[str, Any], on_error: Callable[[str, Exception], None]) -> list[bytes]:
        """Each attribute's field, in the mapping's order; one that cannot be encoded is left out and passed
        to ``on_error`` with its key."""
        out: list[bytes] = []
        append = out.append
        scalars, lists = self._scalars, self._lists
        for key, value in attributes.items():
            kind = type(value)
            if kind is str or kind is int:
                per_key = scalars.get(key)
                if per_key is None:
                    per_key = scalars[key] = {}
                field = per_key.get(value)
                if field is None:
                    try:
                        field = self.field(key, any_value(value))
                    except Exception as exc:  # left out, as OpenTelemetry's encoder does; reported, never raised
                        on_error(key, exc)
                        continue
                    if len(field) <= _CACHED_FIELD_MAX:
                        per_key[value] = field
                        self._count()
            elif kind is list and _cacheable(value):
                per_list = lists.get(key)
                if per_list is None:
                    per_list = lists[key] = {}
                items = tuple(value)
                field = per_list.get(items)
                if field is None:
                    try:
                        field = self.field(key, any_value(items))
                    except Exception as exc:
                        on_error(key, exc)
                        continue
                    if len(field) <= _CACHED_FIELD_MAX:
                        per_list[items] = field
                        self._count()
            else:
                try:
                    if kind is float:
                        field = self.field(key, b"\x21" + _pack_double(value))
                    elif kind is list:
                        field = self.field(key, _field(b"\x2a", b"".join([_element(v) for v in value])))
                    else:
                        field = self.field(key, any_value(value))
                except Exception as exc:
                    on_error(key, exc)
                    continue
            append(field)
        return out

    def field(self, key: str, encoded: bytes) -> bytes:
        """The field of one attribute whose ``AnyValue`` is ``encoded``."""
        return _field(self.tag, _field(b"\x0a", key.encode()) + _field(b"\x12", encoded))

    def _count(self) -> None:
        self._cached += 1
        if self._cached > _CACHE_LIMIT:
            self._scalars.clear()
            self._lists.clear()
            self._cached = 0


def _element(value: object) -> bytes:
    """One value of an array (``ArrayValue.values``, field 1): small ints looked up."""
    if type(value) is int and 0 <= value < 16384:
        return _INT_ELEMENTS[value]
    return _field(b"\x0a", any_value(value))


def _cacheable(values: list[Any]) -> bool:
    """Whether every item of a list is exactly a string or an int (see :class:`AttributeEncoder`)."""
    for v in values:
        kind = type(v)
        if kind is not str and kind is not int:
            return False
    return True


# Span fields in field-number order, as protobuf writes them (opentelemetry/proto/trace/v1/trace.proto).
_KIND_INTERNAL: Final = b"\x30\x01"  # kind (6) = SPAN_KIND_INTERNAL
_SPAN_TAIL: Final = b"\x7a\x00" + b"\x85\x01" + struct.pack("<I", 0x100)
"""status (15): an empty Status (code UNSET); flags (16, fixed32): SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK."""


def _check_time(nanos: int) -> int:
    if not 0 <= nanos < _U64:
        raise ValueError(f"time {nanos} ns is outside OTLP's range (fixed64 nanoseconds since 1970)")
    return nanos


class TraceRequestEncoder:
    """Batches of records as the bytes of one ``ExportTraceServiceRequest`` each, for one resource and one
    instrumentation scope (encoded once, here)."""

    def __init__(
        self, resource_attributes: Mapping[str, object], scope_name: str, resource_schema_url: str = ""
    ) -> None:
        resource = b"".join(_field(b"\x0a", key_value(k, v)) for k, v in resource_attributes.items())
        self._resource_field = _field(b"\x0a", resource)  # ResourceSpans.resource (1)
        self._scope_field = _field(b"\x0a", _field(b"\x0a", scope_name.encode()))  # ScopeSpans.scope (1): its name
        self._resource_tail = _field(b"\x1a", resource_schema_url.encode()) if resource_schema_url else b""
        self.span_attributes = AttributeEncoder(b"\x4a")  # Span.attributes (9)
        self.event_attributes = AttributeEncoder(b"\x1a")  # Span.Event.attributes (3)
        self._names: dict[type[Event], tuple[bytes, bytes]] = {}  # per model: span name + kind, event name

    def encode(
        self,
        items: Iterable[Item],
        on_error: Callable[[Exception], None],
        on_attribute_error: Callable[[str, Exception], None],
        failed: list[int] | None = None,
    ) -> tuple[bytes, int]:
        """The request's bytes and the number of spans in it; a record that cannot be encoded is left out,
        passed to ``on_error`` and its item's index appended to ``failed``."""
        spans: list[bytes] = []
        for index, (record, children) in enumerate(items):
            try:
                span = self.span(record, children, on_attribute_error)
            except Exception as exc:  # one bad record never costs the batch
                on_error(exc)
                if failed is not None:
                    failed.append(index)
                continue
            spans.append(_field(b"\x12", span))  # ScopeSpans.spans (2)
        if not spans:
            return b"", 0
        scope_spans = _field(b"\x12", self._scope_field + b"".join(spans))  # ResourceSpans.scope_spans (2)
        resource_spans = self._resource_field + scope_spans + self._resource_tail
        return _field(b"\x0a", resource_spans), len(spans)  # ExportTraceServiceRequest.resource_spans (1)

    def span(
        self, record: Event, children: Sequence[Event] | None, on_attribute_error: Callable[[str, Exception], None]
    ) -> bytes:
        """One record's ``Span`` message: a request (``children``: its sub-records, each a span event at its
        own time or the span's start) from its time to its time + latency; a record of its own
        (``children`` ``None``) at its time (now, for a record without one)."""
        if children is None:
            ts = getattr(record, col.TS, None)
            start = end = unix_nanos(ts) if isinstance(ts, datetime) else time_ns()
        else:
            start = unix_nanos(record.ts)  # type: ignore[attr-defined]  # a request's item holds a RequestEvent
            end = start + int(record.latency_ms * 1_000_000)  # type: ignore[attr-defined]
        # every time first: a record that cannot be encoded fails before any of its attributes is reported
        times = [self._event_time(child, start) for child in children] if children else None
        names = self._names.get(type(record)) or self._name(type(record))
        if 0 < start <= end < _U64:
            parts = [b"", names[0], _pack_times(0x39, start, 0x41, end)]
        else:
            parts = [b"", names[0], _times(_check_time(start), _check_time(end))]
        parts += self.span_attributes.encode(event_to_attributes(record, omit_defaults=True), on_attribute_error)
        if children and times:
            for child, t in zip(children, times, strict=True):
                parts.append(self._event(child, t, on_attribute_error))
        parts.append(_SPAN_TAIL)
        # the ids last: a record that fails draws none (as a span that is never made)
        trace_id, span_id = random_ids()
        parts[0] = b"\x0a\x10" + trace_id.to_bytes(16, "big") + b"\x12\x08" + span_id.to_bytes(8, "big")
        return b"".join(parts)

    @staticmethod
    def _event_time(child: Event, start: int) -> int:
        ts = getattr(child, col.TS, None)
        return _check_time(unix_nanos(ts)) if isinstance(ts, datetime) else start

    def _event(self, child: Event, t: int, on_attribute_error: Callable[[str, Exception], None]) -> bytes:
        parts = [b"\x09" + _pack_fixed64(t) if t else b"", self._name(type(child))[1]]  # time (1), name (2)
        parts += self.event_attributes.encode(event_to_attributes(child, omit_defaults=True), on_attribute_error)
        return _field(b"\x5a", b"".join(parts))  # Span.events (11)

    def _name(self, model: type[Event]) -> tuple[bytes, bytes]:
        names = self._names.get(model)
        if names is None:
            name = span_name(model).encode()
            names = self._names[model] = (_field(b"\x2a", name) + _KIND_INTERNAL, _field(b"\x12", name))
        return names


def _times(start: int, end: int) -> bytes:
    """A span's start (7) and end (8) times, fixed64; a zero time is left out, as protobuf leaves out a
    field at its default."""
    if start and end:
        return _pack_times(0x39, start, 0x41, end)
    return (b"\x39" + _pack_fixed64(start) if start else b"") + (b"\x41" + _pack_fixed64(end) if end else b"")
