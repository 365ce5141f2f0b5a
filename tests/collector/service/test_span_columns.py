"""No bytes column is decoded over OTLP: neither decoder plans one.

The only bytes column, ``blob_contents.data``, travels in no span (blobs come in through ``PUT /api/v1/blobs``,
``schema/otlp.py``'s ``API_ONLY_MODELS``), so neither decoder keeps a path for bytes columns: a model given one is
refused when it is planned, in one line, rather than decoded by code no request reaches.
"""

from __future__ import annotations

import pytest

from inferensics.collector.service.otlp_sql import rows_sql
from inferensics.collector.service.row_plan import Plan
from inferensics.schema.arrow import arrow_schema, column_kind
from inferensics.schema.events import EVENT_MODELS, BlobContentEvent
from inferensics.schema.otlp import API_ONLY_MODELS

REFUSAL = (
    "BlobContentEvent.data is a bytes column, which no span carries (blobs come in through PUT /api/v1/blobs); "
    "decoding it over OTLP needs a check in both decoders"
)


def test_no_model_a_span_carries_has_a_bytes_column() -> None:
    kinds = {
        (m.TABLE.name, f.name): column_kind(f.type) for m in EVENT_MODELS if m not in API_ONLY_MODELS
        for f in arrow_schema(m)
    }  # fmt: skip
    assert [where for where, kind in kinds.items() if kind == "bytes"] == []


def test_neither_decoder_plans_a_bytes_column() -> None:
    with pytest.raises(NotImplementedError) as python:
        Plan.of(BlobContentEvent)
    with pytest.raises(NotImplementedError) as engine:
        rows_sql(BlobContentEvent, "records")
    assert str(python.value) == str(engine.value) == REFUSAL
