"""Values a column's type admits but its meaning does not: checked at ingest by both decoders.

The models type a column (a string, a float); some columns mean more than their type says: an ``outcome`` is one
word of a closed vocabulary, a latency is never negative, a ``Digest`` column holds a hex content hash (the blob
API refuses anything else, so any other value is a reference that can never resolve), and a dimension is a label
that a NUL would make unreadable in every tool downstream. The checks live at the receiver, not in the models:
rows built in Python (tests, fixtures, the trace importer writing to a store) are not the wire's hostile input.

A row that fails one is rejected as ``invalid_row`` with the column named, and the rest of its request is kept.
:mod:`inferensics.collector.service.otlp_sql` (the engine) and :mod:`inferensics.collector.service.decode` (the
Python reference) both apply :func:`value_checks`, so ``tests/collector/service/test_engine_decoder_fuzz.py``
holds them to the same answers.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

import pyarrow as pa

from inferensics.schema import columns as col
from inferensics.schema.arrow import arrow_schema, dimension_fields
from inferensics.schema.events import (
    CACHE_STATUSES,
    FP_STATUSES,
    GUARD_OUTCOMES,
    OUTCOMES,
    BundleMissEvent,
    CompileEvent,
    KernelTimingEvent,
    RequestEvent,
    SdkHealthEvent,
)
from inferensics.schema.table import Event

VOCABULARIES: Final[Mapping[type[Event], Mapping[str, tuple[str, ...]]]] = {
    RequestEvent: {
        col.STATUS: ("ok", "error"),
        col.OUTCOME: OUTCOMES,
        col.GUARD_OUTCOME: GUARD_OUTCOMES,
        col.CACHE_STATUS: CACHE_STATUSES,
        col.FP_STATUS: ("", *FP_STATUSES),  # empty: a sender older than the column
    },
}
"""Columns with a closed vocabulary (the words their docstrings in ``schema/events.py`` list), per model. The
dashboards and views classify requests by these words: another word would fall out of every count."""
NON_NEGATIVE: Final[Mapping[type[Event], tuple[str, ...]]] = {
    RequestEvent: (col.LATENCY_MS, col.COMPILE_MS, col.FP_STD, col.FP_ABSMAX, col.FP_RATE),
    CompileEvent: (col.ENTIRE_FRAME_S, col.BACKEND_S, col.INDUCTOR_S, col.CODEGEN_S),
    KernelTimingEvent: (col.TOTAL_US,),
    BundleMissEvent: (col.COMPILE_S,),
    SdkHealthEvent: (col.INTERVAL_S,),
}
"""Float columns that are durations, spreads or rates: a negative value is a sender's bug, not a measurement."""
MAX_DIGEST_CHARS: Final = 128
"""Longest hex digest taken (sha512's 128 digits; the platform's own digests are sha256, 64)."""
DIGEST_CHARS: Final = rf"[0-9a-fA-F]{{0,{MAX_DIGEST_CHARS}}}"
"""What a ``Digest`` column holds: hex digits (empty when absent)."""
_DIGEST: Final = re.compile(DIGEST_CHARS)
_DIGEST_TYPE: Final = "Digest"
"""The name ``schema/events.py`` declares a digest column with. ``Digest`` and ``Text`` share one ``ChType`` (the
same storage), so the declaration, not the column type, says which strings are digests."""

Rule = Literal["vocabulary", "non_negative", "digest", "no_nul"]


@dataclass(frozen=True, slots=True)
class ValueCheck:
    """One column's rule, with its SQL twin and its message."""

    column: str
    rule: Rule
    words: tuple[str, ...] = ()
    float32: bool = False

    @property
    def message(self) -> str:
        """Why a row is rejected (after the row's table or span name)."""
        if self.rule == "vocabulary":
            return f"{self.column}: not one of {', '.join(repr(w) for w in self.words)}"
        if self.rule == "non_negative":
            return f"{self.column}: negative (it must be 0 or more)"
        if self.rule == "digest":
            return f"{self.column}: not a hex digest (0-9 and a-f, at most {MAX_DIGEST_CHARS} digits, or empty)"
        return f"{self.column}: holds a NUL character"

    def sql(self, value: str) -> str:
        """The engine condition that ``value`` (the column's expression) breaks the rule."""
        if self.rule == "vocabulary":
            return f"{value} NOT IN ({', '.join(_quote(w) for w in self.words)})"
        if self.rule == "non_negative":
            return f"{'toFloat32' if self.float32 else ''}({value}) < 0"
        if self.rule == "digest":
            return f"NOT match({value}, {_quote('^' + DIGEST_CHARS + '$')})"
        return f"position({value}, char(0)) > 0"

    def breaks(self, value: object, stored: float | None = None) -> bool:
        """Whether ``value`` (``stored``: a float as its column keeps it) breaks the rule."""
        if self.rule == "vocabulary":
            return value not in self.words
        if self.rule == "non_negative":
            return (stored if stored is not None else float(value)) < 0  # type: ignore[arg-type]
        if self.rule == "digest":
            return _DIGEST.fullmatch(str(value)) is None
        return "\x00" in str(value)


@functools.cache
def value_checks(model: type[Event]) -> tuple[ValueCheck, ...]:
    """``model``'s checks, in column order (a column's vocabulary or sign first, then NUL)."""
    schema = arrow_schema(model)
    vocab = VOCABULARIES.get(model, {})
    non_negative = set(NON_NEGATIVE.get(model, ()))
    digests = digest_columns(model)
    dims = dimension_fields(model)
    out: list[ValueCheck] = []
    for f in schema:
        name = f.name
        if name in vocab:
            out.append(ValueCheck(name, "vocabulary", vocab[name]))
        if name in non_negative:
            out.append(ValueCheck(name, "non_negative", float32=pa.types.is_float32(f.type)))
        if name in digests:
            out.append(ValueCheck(name, "digest"))
        if name in dims and name not in vocab:
            out.append(ValueCheck(name, "no_nul"))
    return tuple(out)


def digest_columns(model: type[Event]) -> frozenset[str]:
    """The fields ``model`` (or a base) declares as ``Digest``."""
    out: set[str] = set()
    for klass in model.__mro__:
        for name, annotation in getattr(klass, "__annotations__", {}).items():
            if name in model.model_fields and _DIGEST_TYPE in (annotation, getattr(annotation, "__name__", None)):
                out.add(name)
    return frozenset(out)


def _quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
