"""Spans and span events named after the blob tables are refused by both decoders: blobs come in only through
``PUT /api/v1/blobs``.

What it got wrong: an ``ingest`` token could send ``inferensics.blobs`` spans over OTLP, and both decoders wrote them
into the blob index. ``blobs`` is a ``ReplacingMergeTree(ts)`` keyed on the digest, so such a row with a later
time replaced a real upload's row at the next merge: a blob uploaded as ``inputs`` (users' tensors) became
``output_code``, which any ``read`` token may fetch unless a request names it.
"""

from __future__ import annotations

import hashlib
import time
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta

from starlette.testclient import TestClient

from inferensics.collector.service import ServiceState
from inferensics.collector.service.capture_index import marker_key
from inferensics.collector.service.decode import decode_request
from inferensics.collector.service.testing import any_value, build_request
from inferensics.schema.events import BlobContentEvent, BlobIndexEvent, RecompileEvent
from inferensics.schema.otlp import PREFIX
from tests.collector.service.harness import ADMIN, INGEST, READ
from tests.collector.service.otel import request
from tests.collector.service.test_engine_decoder_fuzz import Pair
from tests.polling import poll

API_ONLY_TABLE = "api_only_table"
INPUTS = b"captured user tensors, uploaded as inputs\n"


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _forged_index_row(sha256: str, ts: datetime) -> BlobIndexEvent:
    return BlobIndexEvent(ts=ts, sha256=sha256, size_bytes=len(INPUTS), kind="output_code", host="h")


def test_an_ingest_token_cannot_replace_an_uploaded_blobs_index_row_over_otlp(
    app_state: ServiceState, api: TestClient
) -> None:
    digest = hashlib.sha256(INPUTS).hexdigest()
    put = api.put(f"/api/v1/blobs/{digest}?kind=inputs", content=INPUTS, headers=_auth(INGEST))
    assert put.status_code == 201, put.text
    assert api.get(f"/api/v1/blobs/{digest}", headers=_auth(READ)).status_code == 403
    later = datetime.now(UTC) + timedelta(hours=1)  # inside the window a row's time may be ahead
    kept = request(0, run="forge")
    forged = [
        _forged_index_row(digest, later),
        _forged_index_row(marker_key("ab" * 32), later),  # a capture marker's key: markers are not forged either
        BlobContentEvent(ts=later, sha256=hashlib.sha256(b"other").hexdigest(), data=b"other"),
    ]
    message = build_request([kept, *forged], events={0: [_forged_index_row(digest, later)]})
    headers = {"Content-Type": "application/x-protobuf", **_auth(INGEST)}
    assert api.post("/v1/traces", content=message.SerializeToString(), headers=headers).status_code == 200

    def refused() -> float:
        return app_state.metrics.get("rejected", API_ONLY_TABLE)

    assert poll(refused, lambda n: n >= 4, timeout=30) == 4
    store = app_state.query_store()
    db = store.database
    with app_state.query_lock:
        assert store.query_rows(f"SELECT count() FROM {db}.requests WHERE request_id = {{r:String}}",
                                {"r": kept.request_id}) == [(1,)]  # fmt: skip
        store.client.command(f"OPTIMIZE TABLE {db}.blobs FINAL")
        rows = store.query_rows(f"SELECT sha256, kind FROM {db}.blobs WHERE kind != 'inputs_ref' ORDER BY sha256")
    assert rows == [(digest, "inputs")]  # the upload's row alone, after a merge
    assert api.get(f"/api/v1/blobs/{digest}", headers=_auth(READ)).status_code == 403
    assert api.get(f"/api/v1/blobs/{digest}", headers=_auth(ADMIN)).content == INPUTS
    text = api.get("/metrics", headers=_auth(ADMIN)).text
    assert f'inferensics_collector_rejected_total{{reason="{API_ONLY_TABLE}",unit="row"}} 4' in text.splitlines()


def test_both_decoders_refuse_blob_spans_and_events_and_keep_the_rest(pair: Pair) -> None:
    pair.now_us = time.time_ns() // 1000
    base = request(0, run="api-only")
    index = _forged_index_row(hashlib.sha256(b"x").hexdigest(), base.ts)
    contents = BlobContentEvent(ts=base.ts, sha256=hashlib.sha256(b"x").hexdigest(), data=b"x")
    child = RecompileEvent(ts=base.ts, host="", reason="under a blob span", code_location="m.py:1")
    # a recompile under a refused blobs span and a blobs event under a request span: rows of other tables are kept
    message = build_request([base, index, contents], events={0: [index, child], 1: [child]})
    result = pair.decoder.insert(pair.engine, uuid.uuid4().hex, [message.SerializeToString()], possibly_seen=False)
    assert result.rejected == Counter({API_ONLY_TABLE: 3}), result.messages
    assert "blobs is written only through the blob API (PUT /api/v1/blobs), never as spans" in " ".join(result.messages)
    db = pair.engine.database
    assert pair.engine.query_rows(f"SELECT count() FROM {db}.blobs WHERE kind != 'inputs_ref'") == [(0,)]
    assert pair.engine.query_rows(f"SELECT count() FROM {db}.blob_contents") == [(0,)]
    assert pair.engine.query_rows(f"SELECT count() FROM {db}.recompiles") == [(2,)]
    for fast in (True, False):
        ref = decode_request(message, fast=fast, now_us=pair.now_us)
        assert ref.rejected_rows == result.rejected, fast
        assert ref.row_count == result.sent == 3, ref.errors
    pair.compare(message)


def test_a_foreign_spans_key_outside_the_namespace_is_not_inherited(pair: Pair) -> None:
    """A foreign span's attribute whose key merely ends in an inheritable column's name after as many characters as
    the ``inferensics.`` prefix was inherited by the Python reference and not by the engine."""
    pair.now_us = time.time_ns() // 1000
    base = request(0, run="foreign")
    message = build_request([base], events={0: [RecompileEvent(ts=base.ts, host="h", reason="r")]})
    span = message.resource_spans[0].scope_spans[0].spans[0]
    span.name = "GET /"
    del span.attributes[:]
    span.attributes.add(key="x" * len(PREFIX) + "model").value.CopyFrom(any_value("not-inherited"))
    event = span.events[0]
    own = [kv for kv in event.attributes if kv.key != PREFIX + "model"]  # the event leaves its model to its span
    del event.attributes[:]
    event.attributes.extend(own)
    pair.compare(message)
    ref = decode_request(message, now_us=pair.now_us)
    assert [t.column("model").to_pylist() for m, t in ref.tables().items() if m is RecompileEvent] == [[""]]
