"""Values a column's type admits but its meaning does not: checked at ingest by both decoders.

The models type a column (a string, a float); some columns mean more than their type says: an ``outcome`` is one
word of a closed vocabulary (:data:`~inferensics.schema.vocabularies.VOCABULARIES`), a latency is never negative, a
``Digest`` column holds a hex content hash (the blob API refuses anything else, so any other value is a reference
that can never resolve), and a dimension is a label that a NUL would make unreadable in every tool downstream. The
checks live at the receiver, not in the models: rows built in Python (tests, fixtures, the trace importer writing
to a store) are not the wire's hostile input.

A row that fails one is rejected as ``invalid_row`` with the column named, and the rest of its request is kept.
:mod:`inferensics.collector.service.otlp_sql` (the engine) and :mod:`inferensics.collector.service.decode` (the
Python reference) both apply :func:`value_checks`, so ``tests/collector/service/test_engine_decoder_fuzz.py``
holds them to the same answers.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final, Literal

import pyarrow as pa

from inferensics.schema import columns as col
from inferensics.schema.arrow import arrow_schema, dimension_fields
from inferensics.schema.events import (
    BundleMissEvent,
    CompileEvent,
    KernelTimingEvent,
    RequestEvent,
    SdkHealthEvent,
)
from inferensics.schema.table import Event
from inferensics.schema.vocabularies import VOCABULARIES

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
class RuleForms:
    """What a rule is in each place it is applied: the message, the engine's SQL and the Python test.

    ``message`` and ``sql`` are templates: ``{column}`` is the column's name, ``{value}`` its SQL expression,
    ``{words}`` and ``{quoted}`` a vocabulary as the message and the SQL write it, ``{float32}`` the cast of a
    ``Float32`` column, ``{pattern}`` the digest pattern and ``{max_digest}`` :data:`MAX_DIGEST_CHARS`.
    ``breaks(check, value, stored)`` says whether ``value`` (``stored``: a float as its column keeps it) breaks it.
    """

    message: str
    sql: str
    breaks: Callable[[ValueCheck, object, float | None], bool]


RULES: Final[Mapping[Rule, RuleForms]] = {
    "vocabulary": RuleForms(
        "{column}: not one of {words}",
        "{value} NOT IN ({quoted})",
        lambda check, value, _: value not in check.words,
    ),
    "non_negative": RuleForms(
        "{column}: negative (it must be 0 or more)",
        "{float32}({value}) < 0",
        lambda _, value, stored: (stored if stored is not None else float(value)) < 0,  # type: ignore[arg-type]
    ),
    "digest": RuleForms(
        "{column}: not a hex digest (0-9 and a-f, at most {max_digest} digits, or empty)",
        "NOT match({value}, {pattern})",
        lambda _, value, __: _DIGEST.fullmatch(str(value)) is None,
    ),
    "no_nul": RuleForms(
        "{column}: holds a NUL character",
        "position({value}, char(0)) > 0",
        lambda _, value, __: "\x00" in str(value),
    ),
}
"""Each rule defined once, in every form it takes."""


@dataclass(frozen=True, slots=True)
class ValueCheck:
    """One column's rule (:data:`RULES`), with its SQL twin and its message."""

    column: str
    rule: Rule
    words: tuple[str, ...] = ()
    float32: bool = False

    def _fill(self, template: str, value: str = "") -> str:
        return template.format(
            column=self.column,
            value=value,
            words=", ".join(repr(w) for w in self.words),
            quoted=", ".join(_quote(w) for w in self.words),
            float32="toFloat32" if self.float32 else "",
            pattern=_quote("^" + DIGEST_CHARS + "$"),
            max_digest=MAX_DIGEST_CHARS,
        )

    @property
    def message(self) -> str:
        """Why a row is rejected (after the row's table or span name)."""
        return self._fill(RULES[self.rule].message)

    def sql(self, value: str) -> str:
        """The engine condition that ``value`` (the column's expression) breaks the rule."""
        return self._fill(RULES[self.rule].sql, value)

    def breaks(self, value: object, stored: float | None = None) -> bool:
        """Whether ``value`` (``stored``: a float as its column keeps it) breaks the rule."""
        return RULES[self.rule].breaks(self, value, stored)


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
