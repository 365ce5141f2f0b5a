"""Requests a bundle served at sizes it was never qualified at, per model and bundle, from the host SDK's request
attributes (``attrs['bundle_unqualified_shape']``, ``attrs['bundle_unqualified_calls']``) in a real store."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from inferensics.analytics.bundle_unqualified import bundle_unqualified_sizes
from inferensics.analytics.filters import SliceParams
from inferensics.schema.events import RequestEvent
from inferensics.schema.request_attrs import BUNDLE_STATUS, BUNDLE_UNQUALIFIED_CALLS, BUNDLE_UNQUALIFIED_SHAPE
from inferensics.schema.store import Store
from tests.seeding import seed

NOW = datetime(2026, 3, 4, 10, tzinfo=UTC)
B1, B2 = "b1" * 32, "b2" * 32
WHERE = {"hw_pool": "a100", "traffic_class": "interactive"}


def unqualified_requests() -> list[RequestEvent]:
    """llama's bundle B1: 10 hits, 6 at unqualified sizes ([9,8] in 5, [7,8] in 3, [5,8] in 1, [3,8] in 1); qwen's B2:
    3 hits at qualified sizes; one request without a bundle."""
    shapes = ["[9,8], [7,8]", "[9,8]", "[9,8], [7,8] (+2 calls at other shapes)", "[9,8], [5,8]", "[9,8], [7,8]",
              "[3,8]"]  # fmt: skip
    out = [
        RequestEvent(request_id=f"u{i}", ts=NOW + timedelta(minutes=i), host="h", model="llama", bundle_id=B1, **WHERE,
                     attrs={BUNDLE_STATUS: "hit", BUNDLE_UNQUALIFIED_SHAPE: s, BUNDLE_UNQUALIFIED_CALLS: "2"})
        for i, s in enumerate(shapes)
    ]  # fmt: skip
    out += [
        RequestEvent(request_id=f"q{i}", ts=NOW + timedelta(minutes=i), host="h", model=model, bundle_id=bundle,
                     attrs={BUNDLE_STATUS: "hit"}, **WHERE)
        for i, (model, bundle) in enumerate([("llama", B1)] * 4 + [("qwen", B2)] * 3)
    ]  # fmt: skip
    out.append(RequestEvent(request_id="plain", ts=NOW, host="h", model="llama", **WHERE))
    return out


def test_requests_at_unqualified_sizes_are_counted_per_model_and_bundle_with_the_most_common_sizes(
    store: Store,
) -> None:
    seed(store, events=unqualified_requests())
    frame = bundle_unqualified_sizes(store, SliceParams(start=NOW, end=NOW + timedelta(hours=1)))
    assert frame.to_dicts() == [
        {
            "model": "llama",
            "bundle_id": B1,
            "unqualified_requests": 6,
            "bundle_requests": 10,
            "unqualified_calls": 12,
            "top_sizes": ["[9,8]", "[7,8]", "[3,8]"],
            "top_size_requests": [5, 3, 1],
        }
    ]
    qwen = SliceParams(start=NOW, end=NOW + timedelta(hours=1), model="qwen")
    assert bundle_unqualified_sizes(store, qwen).is_empty()  # its bundle served every request at qualified sizes


B3 = "b3" * 32
DECODER_SIZES = ["[8,128], [8,1];[2,8,4,128,16]", "[8,1];[2,8,4,128,16]",
                 "[8,1];[2,8,4,192,16], [8,1];[2,8,4,128,16] (+1 calls at other shapes)"]  # fmt: skip
"""A decoder's requests on bundle B3, as its host SDK stores them: a prefill graph's sizes (one input with a symbol)
and a decode step's (two: ``;`` between them), ``", "`` between calls."""


def decoder_requests() -> list[RequestEvent]:
    """Three requests of ``decoder`` on B3 at unqualified sizes (:data:`DECODER_SIZES`)."""
    return [
        RequestEvent(request_id=f"d{i}", ts=NOW + timedelta(minutes=i), host="h", model="decoder", bundle_id=B3,
                     attrs={BUNDLE_STATUS: "hit", BUNDLE_UNQUALIFIED_SHAPE: s, BUNDLE_UNQUALIFIED_CALLS: "3"}, **WHERE)
        for i, s in enumerate(DECODER_SIZES)
    ]  # fmt: skip


def test_a_graph_with_several_inputs_with_a_symbol_counts_each_calls_sizes_whole(store: Store) -> None:
    """One call's sizes are one size, however many inputs with a symbol its graph has: it counted each input's list
    on its own (``[8,1]`` in 3 and ``[2,8,4,128,16]`` in 3, as if they were sizes of their own)."""
    seed(store, events=decoder_requests())
    frame = bundle_unqualified_sizes(store, SliceParams(start=NOW, end=NOW + timedelta(hours=1), model="decoder"))
    (row,) = frame.to_dicts()
    assert (row["unqualified_requests"], row["unqualified_calls"]) == (3, 9)
    assert row["top_sizes"] == ["[8,1];[2,8,4,128,16]", "[8,128]", "[8,1];[2,8,4,192,16]"]
    assert row["top_size_requests"] == [3, 1, 1]
