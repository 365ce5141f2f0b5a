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
