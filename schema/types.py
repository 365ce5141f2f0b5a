"""Field types that carry their ClickHouse column type.

A model field's annotation says both what Python holds and how ClickHouse stores it, so the DDL and the
Arrow schema are derived from the models and never written by hand.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated

from pydantic import AfterValidator, BeforeValidator


@dataclass(frozen=True, slots=True)
class ChType:
    """The ClickHouse type (and optional codec) of a column.

    Attributes:
        sql: The ClickHouse type, e.g. ``LowCardinality(String)``.
        codec: The compression codec list, e.g. ``Delta(8), ZSTD(1)``; empty for the default (LZ4).
        arrow: The Arrow type name used for batch inserts (see ``inferensics.schema.arrow``).
    """

    sql: str
    codec: str = ""
    arrow: str = ""


def as_utc(value: datetime) -> datetime:
    """``value`` in UTC: a naive datetime is taken as UTC, an aware one converted.

    ClickHouse stores DateTime64(6, 'UTC'); every time that enters a query or a row passes through here.
    """
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


# Magnitudes at or above the midpoint between float32's largest value and 2**128 round to infinity.
_F32_OVERFLOW = (2 - 2**-24) * 2.0**127
_PACK_F32 = struct.Struct("<f")


def to_float32(value: float) -> float:
    """Round ``value`` to the nearest float32, as a Float32 column stores it (overflow becomes ±inf).

    >>> to_float32(0.1)
    0.10000000149011612
    >>> to_float32(1e39)
    inf
    """
    value = float(value)
    if not math.isfinite(value):
        return value
    if abs(value) >= _F32_OVERFLOW:
        return math.copysign(math.inf, value)
    result: float = _PACK_F32.unpack(_PACK_F32.pack(value))[0]
    return result


def _f32_tuple(values: tuple[float, ...]) -> tuple[float, ...]:
    return tuple(to_float32(v) for v in values)


def _tuple(value: object) -> object:
    if isinstance(value, list):
        return tuple(value)  # pyright: ignore[reportUnknownArgumentType]
    return value


_DELTA_ZSTD = "Delta(8), ZSTD(1)"
_T64_ZSTD = "T64, ZSTD(1)"

Timestamp = Annotated[
    datetime,
    AfterValidator(as_utc),
    ChType("DateTime64(6, 'UTC')", _DELTA_ZSTD, "timestamp[us, tz=UTC]"),
]
"""A UTC instant with microsecond precision (1900-01-01 .. 2299-12-31)."""

Dim = Annotated[str, ChType("LowCardinality(String)", "", "dictionary<values=string, indices=int32>")]
"""A dimension with few distinct values: model, pool, class, host, status, reason codes."""

Text = Annotated[str, ChType("String", "ZSTD(1)", "string")]
"""Free text or an identifier with many distinct values."""

Digest = Annotated[str, ChType("String", "ZSTD(1)", "string")]
"""A hex content hash (sha256) or an empty string when absent."""

U8 = Annotated[int, ChType("UInt8", "", "uint8")]
U16 = Annotated[int, ChType("UInt16", "", "uint16")]
U32 = Annotated[int, ChType("UInt32", _T64_ZSTD, "uint32")]
U64 = Annotated[int, ChType("UInt64", _T64_ZSTD, "uint64")]
Flag = Annotated[bool, ChType("Bool", "", "bool")]
F32 = Annotated[float, AfterValidator(to_float32), ChType("Float32", "ZSTD(1)", "float32")]
"""A float stored as Float32; the model rounds it on construction so a round-trip compares equal."""
F64 = Annotated[float, ChType("Float64", "ZSTD(1)", "float64")]
Bytes = Annotated[bytes, ChType("String", "ZSTD(3)", "binary")]
"""Opaque bytes (blob contents)."""

DimList = Annotated[
    tuple[str, ...],
    BeforeValidator(_tuple),
    ChType("Array(LowCardinality(String))", "", "list<string>"),
]
TextList = Annotated[tuple[str, ...], BeforeValidator(_tuple), ChType("Array(String)", "ZSTD(1)", "list<string>")]
U32List = Annotated[tuple[int, ...], BeforeValidator(_tuple), ChType("Array(UInt32)", "ZSTD(1)", "list<uint32>")]
F32List = Annotated[
    tuple[float, ...],
    BeforeValidator(_tuple),
    AfterValidator(_f32_tuple),
    ChType("Array(Float32)", "ZSTD(1)", "list<float32>"),
]
Attrs = Annotated[
    dict[str, str],
    ChType("Map(LowCardinality(String), String)", "ZSTD(1)", "map<string, string>"),
]
"""The long tail: attributes with no column of their own (unknown OTLP attributes land here)."""

__all__ = [
    "F32",
    "F64",
    "U8",
    "U16",
    "U32",
    "U64",
    "Attrs",
    "Bytes",
    "ChType",
    "Digest",
    "Dim",
    "DimList",
    "F32List",
    "Flag",
    "Text",
    "TextList",
    "Timestamp",
    "U32List",
    "as_utc",
    "to_float32",
]
