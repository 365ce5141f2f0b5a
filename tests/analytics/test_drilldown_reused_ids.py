"""Two requests that share an id (a client re-run reuses its ids) are told apart, never merged.

The walker's ``b-002`` had two rows; the drill-down showed the earlier one with both requests' recompile reasons.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from inferensics.analytics import NotFound, RequestParams, request_detail
from inferensics.schema.events import RecompileEvent, RequestEvent
from inferensics.schema.store import Store
from tests.seeding import stop_ttl

T0 = datetime(2026, 3, 4, 10, tzinfo=UTC)
WHERE = dict(host="h1", model="m", hw_pool="p")


def _seed(store: Store) -> None:
    stop_ttl(store)
    store.insert_events(
        [
            RequestEvent(request_id="b-002", ts=T0, traffic_class="t", outcome="recompile", recompiles=1, **WHERE),
            RequestEvent(
                request_id="b-002",
                ts=T0 + timedelta(minutes=24),
                traffic_class="t",
                outcome="recompile",
                recompiles=1,
                **WHERE,
            ),
            RequestEvent(request_id="b-004", ts=T0 + timedelta(seconds=1), traffic_class="t", **WHERE),
        ]
    )
    store.insert_events(
        [
            RecompileEvent(ts=T0 + timedelta(milliseconds=5), request_id="b-002", reason="first run", **WHERE),
            RecompileEvent(ts=T0 + timedelta(minutes=24, milliseconds=5), request_id="b-002", reason="rerun", **WHERE),
        ]
    )


def test_requests_sharing_an_id_are_shown_apart(store: Store) -> None:
    _seed(store)
    first = request_detail(store, RequestParams(request_id="b-002")).row(0, named=True)
    second = request_detail(store, RequestParams(request_id="b-002", occurrence=2)).row(0, named=True)

    assert (first["occurrences"], first["occurrence"], second["occurrence"]) == (2, 1, 2)
    assert first["ts"] == T0
    assert second["ts"] == T0 + timedelta(minutes=24)
    assert first["occurrence_starts"] == second["occurrence_starts"] == [first["ts"], second["ts"]]
    # Each request's own recompile, never both requests' reasons on one.
    assert first["recompile_reasons"] == ["first run"]
    assert second["recompile_reasons"] == ["rerun"]

    alone = request_detail(store, RequestParams(request_id="b-004")).row(0, named=True)
    assert (alone["occurrences"], alone["occurrence"]) == (1, 1)
    with pytest.raises(NotFound, match="names 2 requests in the store; there is no occurrence 3"):
        request_detail(store, RequestParams(request_id="b-002", occurrence=3))
