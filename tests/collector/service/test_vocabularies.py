"""Closed vocabularies are checked on every table that has one, by both decoders alike.

What it got wrong: only ``requests`` had its words checked; a compile's ``outcome``, a cache lookup's ``result``,
a replay's ``attribution`` or a canary's ``verdict`` took any word, and a row with another word fell out of every
count that classifies by them.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter

import pytest

from inferensics.collector.service.capture_index import MARKER_KIND
from inferensics.collector.service.decode import decode_request
from inferensics.collector.service.testing import build_request
from inferensics.schema.ddl import columns_of
from inferensics.schema.events import (
    BlobIndexEvent,
    BundleMissEvent,
    BundleStateEvent,
    CacheEvent,
    CanaryVerdictEvent,
    CompileEvent,
    GraphBreakEvent,
    KernelQualificationEvent,
    ReplayResultEvent,
    RequestEvent,
    ShapeGuardEvent,
)
from inferensics.schema.table import Event
from inferensics.schema.vocabularies import VOCABULARIES
from tests.collector.service.otel import BASE
from tests.collector.service.test_engine_decoder_fuzz import Pair
from tests.collector.service.test_omit_defaults import sent

WRONG: list[tuple[type[Event], str]] = [
    (CompileEvent, "outcome"),
    (CompileEvent, "cache_status"),
    (CompileEvent, "trigger"),
    (CompileEvent, "source"),
    (GraphBreakEvent, "source"),
    (ShapeGuardEvent, "source"),
    (CacheEvent, "cache"),
    (CacheEvent, "result"),
    (CacheEvent, "source"),
    (BundleStateEvent, "state"),
    (BundleMissEvent, "action"),
    (ReplayResultEvent, "attribution"),
    (CanaryVerdictEvent, "verdict"),
    (KernelQualificationEvent, "status"),
    (KernelQualificationEvent, "decision"),
    (KernelQualificationEvent, "timing"),
]
"""Every table other than ``requests`` with a column of closed vocabulary, and that column."""


def _row(model: type[Event], **update: object) -> Event:
    return sent(model, "typical").model_copy(update={"ts": BASE, **update})


@pytest.mark.parametrize(("model", "column"), WRONG, ids=[f"{m.TABLE.name}.{c}" for m, c in WRONG])
def test_a_word_outside_a_columns_vocabulary_is_rejected_by_both_decoders(
    pair: Pair, model: type[Event], column: str
) -> None:
    pair.now_us = time.time_ns() // 1000
    good = _row(model)
    message = build_request([_row(model, **{column: "bogus"}), good, _row(model, **{column: "Bogus word"})])
    result = pair.decoder.insert(pair.engine, uuid.uuid4().hex, [message.SerializeToString()], possibly_seen=False)
    assert result.rejected == Counter({"invalid_row": 2}), result.messages
    assert result.sent == result.landed == 1
    words = ", ".join(repr(w) for w in VOCABULARIES[model][column])
    assert result.messages == [f"inferensics.{model.TABLE.name}: {column}: not one of {words} (2 rows)"]
    for fast in (True, False):
        ref = decode_request(message, fast=fast, now_us=pair.now_us)
        assert ref.rejected_rows == result.rejected, ref.errors
        assert ref.errors == [f"inferensics.{model.TABLE.name}: {column}: not one of {words}"] * 2
    pair.compare(message)


def test_every_vocabulary_holds_its_columns_default() -> None:
    """A row that leaves the column out (the SDK omits defaults) gets the default, which must pass."""
    assert {m for m, _ in WRONG} | {RequestEvent} == set(VOCABULARIES)
    assert sorted((m.__name__, c) for m, c in WRONG) == sorted(
        (m.__name__, c) for m, cols in VOCABULARIES.items() if m is not RequestEvent for c in cols
    )
    for model, columns in VOCABULARIES.items():
        for column, words in columns.items():
            info = model.model_fields[column]
            assert info.is_required() or info.get_default() in words, (model.__name__, column)


def test_vocabularies_hold_every_word_their_writers_write() -> None:
    """The words live beside the writers (replay, kernel qualification): a word added there and not here would
    have its rows rejected. (The bundle CLI's states are the schema's own tuple.)"""
    from inferensics.replay._internal.verdict import CATEGORIES

    assert set(CATEGORIES) <= set(VOCABULARIES[ReplayResultEvent]["attribution"])


def test_every_vocabulary_word_is_named_in_its_columns_docstring() -> None:
    """The column's docstring is its comment in the store: three of them lacked a word their writers write
    (``compiles.cache_status`` ``mixed``, ``bundle_states.state`` ``pushed``, ``kernel_qualifications.decision``
    ``demoted``), and the blob index's ``kind`` did not say that capture markers are ``inputs_ref`` rows."""
    missing = []
    for model, columns in VOCABULARIES.items():
        comments = {c.name: c.comment for c in columns_of(model)}
        missing += [(model.TABLE.name, column, w) for column, words in columns.items()
                    for w in words if w and f"``{w}``" not in comments[column]]  # fmt: skip
    assert missing == []
    kind = next(c.comment for c in columns_of(BlobIndexEvent) if c.name == "kind")
    assert f"``{MARKER_KIND}``" in kind
