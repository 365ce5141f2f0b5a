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
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final, Literal

import pyarrow as pa

from inferensics.schema import columns as col
from inferensics.schema.arrow import arrow_schema, dimension_fields
from inferensics.schema.events import (
    CACHE_RESULTS,
    CACHE_STATUSES,
    CACHES,
    FP_STATUSES,
    GUARD_OUTCOMES,
    OUTCOMES,
    BundleMissEvent,
    BundleStateEvent,
    CacheEvent,
    CanaryVerdictEvent,
    CompileEvent,
    GraphBreakEvent,
    KernelQualificationEvent,
    KernelTimingEvent,
    ReplayResultEvent,
    RequestEvent,
    SdkHealthEvent,
    ShapeGuardEvent,
)
from inferensics.schema.table import Event

COMPILE_OUTCOMES: Final = ("ok", "failed", "recompile_limit", "incomplete")
COMPILE_TRIGGERS: Final = ("", "first", "recompile", "import")
SOURCES: Final = ("live", "trace")
"""Where a compile-side row came from: the host SDK (``live``) or an imported TORCH_TRACE log (``trace``)."""
BUNDLE_STATES: Final = ("promoted", "demoted", "revoked", "quarantined", "released", "pushed")
"""What ``inferensics bundle`` records (``cli/bundle_commands.py``'s ``STATES``; ``pushed`` is missing from the
column's docstring)."""
MISS_ACTIONS: Final = ("", "compiled", "eager", "refused")
ATTRIBUTIONS: Final = (
    "",
    "source_op",
    "kernel_provider",
    "decomposition",
    "lowering",
    "graph_pass",
    "schedule",
    "shape_specialization",
    "artifact_mismatch",
    "inputs",
    "none",
)
"""Replay's verdict categories (ARCHITECTURE decision 11; ``replay/_internal/verdict.py``'s ``CATEGORIES``, which
the collector may not import); empty before a verdict."""
CANARY_VERDICTS: Final = ("pass", "fail", "inconclusive")
QUALIFICATION_STATUSES: Final = ("", "measured", "unsupported", "refused", "error")
QUALIFICATION_DECISIONS: Final = ("", "incumbent", "promoted", "demoted", "kept", "refused")
"""What ``kernels/qualify.py`` decides (``demoted`` is missing from the column's docstring)."""
QUALIFICATION_TIMINGS: Final = ("", "cuda_graph", "events", "wall")

VOCABULARIES: Final[Mapping[type[Event], Mapping[str, tuple[str, ...]]]] = {
    RequestEvent: {
        col.STATUS: ("ok", "error"),
        col.OUTCOME: OUTCOMES,
        col.GUARD_OUTCOME: GUARD_OUTCOMES,
        col.CACHE_STATUS: CACHE_STATUSES,
        col.FP_STATUS: ("", *FP_STATUSES),  # empty: a sender older than the column
    },
    CompileEvent: {
        col.TRIGGER: COMPILE_TRIGGERS,
        col.OUTCOME: COMPILE_OUTCOMES,
        col.CACHE_STATUS: CACHE_STATUSES,  # the trace assembler writes "mixed" too (fx_graph hits and misses)
        col.SOURCE: SOURCES,
    },
    GraphBreakEvent: {col.SOURCE: SOURCES},
    ShapeGuardEvent: {col.SOURCE: SOURCES},
    CacheEvent: {col.CACHE: CACHES, col.RESULT: CACHE_RESULTS, col.SOURCE: SOURCES},
    BundleStateEvent: {col.STATE: BUNDLE_STATES},
    BundleMissEvent: {col.ACTION: MISS_ACTIONS},
    ReplayResultEvent: {col.ATTRIBUTION: ATTRIBUTIONS},
    CanaryVerdictEvent: {col.VERDICT: CANARY_VERDICTS},
    KernelQualificationEvent: {
        col.STATUS: QUALIFICATION_STATUSES,
        col.DECISION: QUALIFICATION_DECISIONS,
        col.TIMING: QUALIFICATION_TIMINGS,
    },
}
"""Columns with a closed vocabulary (the words their docstrings in ``schema/events.py`` list, and the words their
writers in this repository write), per model; every word list holds the column's default. The dashboards, views
and reports classify rows by these words: another word would fall out of every count. Columns whose words are
open (a kernel's backend is whatever ``async_compile`` names, a bundle's ``signature_state`` any refusal cause, a
request's ``fallback_reason`` a graph-break id) are not checked."""
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
