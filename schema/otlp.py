"""How event records travel as OTLP spans: the contract between the host SDK and the collector service.

* A span named ``inferensics.<table>`` carries one row of ``<table>`` in its attributes (one span per
  request: ``inferensics.requests``; rare records such as compiles get their own small span).
* A span *event* named ``inferensics.<table>`` inside such a span carries one more row of ``<table>``
  (recompiles, guard failures, graph breaks, cache lookups and kernel timings of that request). An event's
  row inherits the span's shared dimensions (:data:`INHERITED`) when it does not set them.
* Column ``c`` travels as attribute ``inferensics.c``, with the exact OTLP kind of the column (string,
  int, double, bool; an int is also taken for a float column). Lists travel as OTLP array values; the
  ``attrs`` map and the ``compiler_config`` map travel flattened as ``inferensics.attrs.<key>`` /
  ``inferensics.compiler_config.<key>`` (values stringified); bytes as hex strings. Timestamps travel as
  the span's (or event's) time unless the record sets ``inferensics.<column>`` itself as an ISO-8601
  string.
* The blob tables (:data:`API_ONLY_MODELS`) travel in no span: blobs come in only through the service's blob
  API, which hashes the bytes and checks the uploader's role. A span or span event named after one is refused.
* Resource attribute ``host.name`` fills ``host`` when the record leaves it unset. Attributes outside the
  ``inferensics.`` namespace are kept in the row's ``attrs`` map, never dropped.
* A column that is not required, not inherited (:data:`INHERITED`) and holds its model's default may be
  left out: every receiver fills a missing column with its default (the host SDK sends only the columns
  that differ, ``event_to_attributes(..., omit_defaults=True)``: about half of a request's columns, and
  each attribute costs the OpenTelemetry SDK several microseconds to clean and encode).

This module is pure (no OpenTelemetry import) so both sides and the tests share it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Final

from inferensics.schema import columns as col
from inferensics.schema.events import MODELS_BY_TABLE, BlobContentEvent, BlobIndexEvent
from inferensics.schema.table import Event

PREFIX: Final = "inferensics."
MAP_COLUMNS: Final = (col.ATTRS, col.COMPILER_CONFIG)
INHERITED: Final = (col.REQUEST_ID, col.HOST, col.MODEL, col.HW_POOL, col.TRAFFIC_CLASS, col.BUNDLE_ID)
"""Columns an event's row takes from its enclosing span when it does not set them."""
RESOURCE_HOST: Final = "host.name"
API_ONLY_MODELS: Final[frozenset[type[Event]]] = frozenset({BlobIndexEvent, BlobContentEvent})
"""Models whose rows no span carries: the blob index and the blobs' bytes are written by ``PUT /api/v1/blobs``
alone. ``blobs`` is a ``ReplacingMergeTree`` keyed on the digest, so an index row sent as a span with a later
time would replace a real upload's row at the next merge (turning captured inputs into a kind any ``read`` token
may fetch); the collector's decoders refuse such spans and events (reason ``api_only_table``)."""

AttrValue = str | bool | int | float | Sequence[str] | Sequence[bool] | Sequence[int] | Sequence[float]


def span_name(model: type[Event]) -> str:
    """The span (or span event) name that carries rows of ``model``."""
    return PREFIX + model.TABLE.name


def model_for_name(name: str) -> type[Event] | None:
    """The model whose rows a span or event of this name carries, or ``None`` for foreign spans."""
    if not name.startswith(PREFIX):
        return None
    return MODELS_BY_TABLE.get(name[len(PREFIX) :])


def attribute_key(column: str) -> str:
    """The OTLP attribute key of a column."""
    return PREFIX + column


def event_to_attributes(event: Event, *, skip_time: str = col.TS, omit_defaults: bool = False) -> dict[str, AttrValue]:
    """Encode a record as OTLP attributes (the time column is carried by the span or event time).

    ``omit_defaults`` leaves out the columns a receiver fills in by itself (see the module docstring);
    the decoded row is the same either way.
    """
    out: dict[str, AttrValue] = {}
    values = event.__dict__
    for name, key, default in _plan(type(event), skip_time, omit_defaults):
        value = values[name]
        kind = type(value)
        if kind is str or kind is int or kind is bool:
            if value == default and kind is type(default):
                continue
            out[key] = value
        elif kind is float:
            # 0.0 only: -0.0 equals it but is not the default a receiver would fill in
            if value == default and kind is type(default) and math.copysign(1.0, value) > 0:
                continue
            out[key] = value
        elif kind is tuple:
            if value or default is not _EMPTY:
                out[key] = list(value)
        elif name in MAP_COLUMNS:
            for k, v in value.items():
                out[f"{key}.{k}"] = str(v)
        elif isinstance(value, datetime):
            out[key] = value.isoformat()
        elif isinstance(value, bytes):
            if value or default is _SEND:
                out[key] = value.hex()
        elif isinstance(value, tuple):
            out[key] = list(value)  # pyright: ignore[reportUnknownArgumentType]
        else:
            out[key] = value
    return out


_SEND: Final = object()
"""A plan's default for a column that is always sent (required, inherited, or ``omit_defaults`` off)."""
_EMPTY: Final = ()
_PLANS: dict[tuple[type[Event], str, bool], tuple[tuple[str, str, object], ...]] = {}


def _plan(model: type[Event], skip_time: str, omit_defaults: bool) -> tuple[tuple[str, str, object], ...]:
    """``(column, attribute key, default or _SEND)`` per column of ``model`` in field order, built once."""
    plan = _PLANS.get((model, skip_time, omit_defaults))
    if plan is None:
        rows: list[tuple[str, str, object]] = []
        for name, info in model.model_fields.items():
            if name == skip_time:
                continue
            default: object = _SEND
            if omit_defaults and not info.is_required() and name not in INHERITED and info.default_factory is None:
                value = info.default
                # Only defaults a receiver fills as the same value: empty text, zero, False, the empty tuple.
                if type(value) in (str, int, float, bool) or value == ():
                    default = _EMPTY if value == () else value
                elif isinstance(value, bytes) and not value:
                    default = value
            rows.append((name, PREFIX + name, default))
        plan = _PLANS[(model, skip_time, omit_defaults)] = tuple(rows)
    return plan


def attributes_to_record(
    model: type[Event],
    attributes: Mapping[str, object],
    *,
    time: datetime,
    inherited: Mapping[str, object] | None = None,
    resource: Mapping[str, object] | None = None,
) -> dict[str, object]:
    """Decode OTLP attributes into a dict ready for ``model.model_validate``.

    Unknown ``inferensics.*`` keys and foreign keys go to ``attrs`` (as strings) when the model has it.
    Validation (types, required fields) is the caller's: a row that fails it is rejected and counted.
    """
    fields = model.model_fields
    record: dict[str, object] = {}
    extra: dict[str, str] = {}
    maps: dict[str, dict[str, str]] = {}
    for key, value in attributes.items():
        if key.startswith(PREFIX):
            name = key[len(PREFIX) :]
            head, _, tail = name.partition(".")
            if tail and head in MAP_COLUMNS and head in fields:
                maps.setdefault(head, {})[tail] = _stringify(value)
                continue
            if name in fields:
                record[name] = value
                continue
        extra[key] = _stringify(value)
    for name, m in maps.items():
        record[name] = m
    if col.ATTRS in fields and extra:
        merged = dict(extra)
        existing = record.get(col.ATTRS)
        if isinstance(existing, dict):
            merged.update({str(k): str(v) for k, v in existing.items()})  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
        record[col.ATTRS] = merged
    for name in INHERITED:
        if name in fields and name not in record and inherited and name in inherited:
            record[name] = inherited[name]
    if col.HOST in fields and not record.get(col.HOST) and resource and RESOURCE_HOST in resource:
        record[col.HOST] = _stringify(resource[RESOURCE_HOST])
    if col.TS in fields and col.TS not in record:
        record[col.TS] = time
    return record


def _stringify(value: object) -> str:
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
    return str(value)


def nanos_to_datetime(nanos: int) -> datetime:
    """OTLP's nanoseconds since the epoch as an aware UTC datetime (microsecond precision)."""
    return _EPOCH + timedelta(microseconds=nanos // 1000)


_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
