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
* Resource attribute ``host.name`` fills ``host`` when the record leaves it unset. Attributes outside the
  ``inferensics.`` namespace are kept in the row's ``attrs`` map, never dropped.

This module is pure (no OpenTelemetry import) so both sides and the tests share it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Final

from inferensics.schema import columns as col
from inferensics.schema.events import MODELS_BY_TABLE
from inferensics.schema.table import Event

PREFIX: Final = "inferensics."
MAP_COLUMNS: Final = (col.ATTRS, col.COMPILER_CONFIG)
INHERITED: Final = (col.REQUEST_ID, col.HOST, col.MODEL, col.HW_POOL, col.TRAFFIC_CLASS, col.BUNDLE_ID)
"""Columns an event's row takes from its enclosing span when it does not set them."""
RESOURCE_HOST: Final = "host.name"

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


def event_to_attributes(event: Event, *, skip_time: str = col.TS) -> dict[str, AttrValue]:
    """Encode a record as OTLP attributes (the time column is carried by the span or event time)."""
    out: dict[str, AttrValue] = {}
    for name in type(event).model_fields:
        if name == skip_time:
            continue
        value = getattr(event, name)
        if name in MAP_COLUMNS:
            for k, v in value.items():
                out[f"{PREFIX}{name}.{k}"] = str(v)
        elif isinstance(value, datetime):
            out[PREFIX + name] = value.isoformat()
        elif isinstance(value, bytes):
            out[PREFIX + name] = value.hex()
        elif isinstance(value, tuple):
            out[PREFIX + name] = list(value)  # pyright: ignore[reportUnknownArgumentType]
        else:
            out[PREFIX + name] = value
    return out


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
                if fields[name].annotation is bytes and isinstance(value, str):
                    # strict hex (no spaces, as the engine decoder checks); else validation names the column
                    record[name] = bytes.fromhex(value) if _HEX.fullmatch(value) else value
                else:
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
_HEX: Final = re.compile(r"(?:[0-9a-fA-F]{2})*")
