"""A blob that a request names as its captured inputs is refused to a token without ``replay``, decided from the
blob index alone.

What it got wrong: every blob read by a token without ``replay`` (the dashboard's generated-code views) ran a
``count()`` over the whole ``requests`` table for ``capture_blob = digest``: a scan of the store's retention per
read. Both decoders now write a capture marker to the blob index when they keep a request row naming a capture,
and the read looks up the index only (benchmarks/bench_blob_read.py has the figures). The tests take the
``requests`` table away before the reads that must be refused: the old check failed there.
"""

from __future__ import annotations

import hashlib
import time
from datetime import timedelta

import pytest
from starlette.testclient import TestClient

from inferensics.collector.service import ServiceState
from inferensics.collector.service.decode import decode_request
from inferensics.collector.service.testing import build_request, encode_request
from inferensics.schema.events import RequestEvent
from tests.collector.service.harness import ADMIN, INGEST, READ
from tests.collector.service.otel import BASE, request
from tests.collector.service.test_engine_decoder_fuzz import Pair
from tests.polling import poll

PROTO = "application/x-protobuf"
CODE = b"def call(args): return args  # generated code, uploaded without the inputs kind\n"


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _naming(digest: str, run: str) -> RequestEvent:
    """A request row naming ``digest`` as its captured inputs (upper case: the check folds it)."""
    return request(0, run=run).model_copy(update={"capture_blob": digest.upper()})


def _store_rows(state: ServiceState, api: TestClient, row: RequestEvent, path: str) -> None:
    """Store ``row`` through the engine decoder (ingest, then the writer) or the Python reference decoder."""
    if path == "engine":
        r = api.post("/v1/traces", content=encode_request([row]), headers={"Content-Type": PROTO, **_auth(INGEST)})
        assert r.status_code == 200, r.text
    else:
        decoded = decode_request(build_request([row]), now_us=time.time_ns() // 1000)
        assert decoded.row_count == 1, decoded.errors
        with state.query_lock:
            for model, table in decoded.tables().items():
                state.query_store().insert_arrow(model, table)
    store = state.query_store()

    def stored() -> int:
        with state.query_lock:
            rows = store.query_rows(
                f"SELECT count() FROM {store.database}.requests WHERE request_id = {{r:String}}", {"r": row.request_id}
            )
        return int(rows[0][0])

    assert poll(stored, lambda n: n >= 1, timeout=30) == 1


def _put(api: TestClient, data: bytes, kind: str) -> str:
    digest = hashlib.sha256(data).hexdigest()
    r = api.put(f"/api/v1/blobs/{digest}?kind={kind}", content=data, headers=_auth(INGEST))
    assert r.status_code == 201, r.text
    return digest


def _take_requests_away(state: ServiceState) -> None:
    with state.query_lock:
        store = state.query_store()
        store.client.command(f"RENAME TABLE {store.database}.requests TO {store.database}.requests_away")


@pytest.mark.parametrize("blob_first", [True, False], ids=["blob-first", "request-first"])
@pytest.mark.parametrize("path", ["engine", "python"])
def test_a_blob_a_request_names_is_refused_from_the_blob_index_alone(
    app_state: ServiceState, api: TestClient, path: str, blob_first: bool
) -> None:
    digest = hashlib.sha256(CODE).hexdigest()
    if blob_first:
        _put(api, CODE, "output_code")
    _store_rows(app_state, api, _naming(digest, f"cap-{path}"), path)
    if not blob_first:
        _put(api, CODE, "output_code")
    other = _put(api, b"other generated code", "output_code")
    assert api.get(f"/api/v1/blobs/{other}", headers=_auth(READ)).status_code == 200  # the process's first check
    _take_requests_away(app_state)
    refused = api.get(f"/api/v1/blobs/{digest}", headers=_auth(READ))
    assert refused.status_code == 403, refused.text
    error = refused.json()["error"]
    assert error.startswith("token lacks the 'replay' role: this blob is a request's captured inputs"), error
    assert api.get(f"/api/v1/blobs/{digest}", headers=_auth(ADMIN)).content == CODE
    assert api.get(f"/api/v1/blobs/{other}", headers=_auth(READ)).content == b"other generated code"
    inputs = _put(api, b"inputs uploaded as such", "Inputs")  # the uploaded kind still counts, case folded
    assert api.get(f"/api/v1/blobs/{inputs}", headers=_auth(READ)).status_code == 403


def test_request_rows_stored_before_capture_markers_are_indexed_once(app_state: ServiceState, api: TestClient) -> None:
    """Rows written by an older release (here: straight into the store) have no marker: the first check of a
    process writes theirs, and the blob stays refused after the ``requests`` table is gone."""
    digest = _put(api, b"captured long ago", "")
    old = _naming(digest, "old").model_copy(update={"ts": BASE - timedelta(hours=1)})
    with app_state.query_lock:
        app_state.query_store().insert_events([old])
    assert api.get(f"/api/v1/blobs/{digest}", headers=_auth(READ)).status_code == 403
    _take_requests_away(app_state)
    assert api.get(f"/api/v1/blobs/{digest}", headers=_auth(READ)).status_code == 403
    assert api.get(f"/api/v1/blobs/{digest}", headers=_auth(ADMIN)).content == b"captured long ago"


def test_both_decoders_write_the_same_capture_markers(pair: Pair) -> None:
    pair.now_us = time.time_ns() // 1000
    digest = hashlib.sha256(b"x").hexdigest()
    rows = [_naming(digest, "a"), request(1, run="none"), _naming("AB" * 32, "b")]
    message = build_request(rows)
    pair.decoder.insert(pair.engine, "seg", [message.SerializeToString()], possibly_seen=False)
    marked = pair.engine.query_rows(f"SELECT attrs['capture_of'] FROM {pair.engine.database}.blobs ORDER BY 1")
    assert [r[0] for r in marked] == sorted([digest, "ab" * 32])
    pair.compare(message)  # the same rows, markers included, from the reference
