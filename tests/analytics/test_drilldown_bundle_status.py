"""A request's bundle status in its drill-down: whether it ran from its verified bundle, a bundle miss (and why), or
at a shape the bundle never qualified (the host SDK's ``attrs['bundle_status']`` and
``attrs['bundle_unqualified_shape']``, which ``request_detail`` left out with the rest of ``attrs``)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from inferensics.analytics import RequestParams, request_detail
from inferensics.analytics.drilldown import BUNDLE_ATTRS, FACTOR_SHOWN, bundle_lines
from inferensics.schema import request_attrs
from inferensics.schema.events import RequestEvent
from inferensics.schema.request_attrs import BUNDLE_STATUS, BUNDLE_UNQUALIFIED_CALLS, BUNDLE_UNQUALIFIED_SHAPE
from inferensics.schema.store import Store
from tests.dashboard.bundle_statuses import (
    BUNDLE_NAME,
    HIT,
    LATER,
    LONG_FACTOR,
    MISS,
    MISS_FACTOR,
    MISS_REASON,
    NONE,
    REFUSED_STATE,
    REQUEST_SHAPE,
    SHAPE,
    UNQUALIFIED,
    UNQUALIFIED_CALLS,
    UNQUALIFIED_SHOWN,
    UNTRUSTED,
    events,
)
from tests.seeding import seed

NOW = datetime(2026, 3, 4, 10, tzinfo=UTC)


def _detail(store: Store, rid: str) -> dict[str, Any]:
    return request_detail(store, RequestParams(request_id=rid)).row(0, named=True)


def test_the_attribute_names_are_defined_once_in_the_schema() -> None:
    """The host SDK (``collector/host/records.py``) and the drill-down each spelled them (analytics may import only
    the schema): the schema's module holds them, and no other source file of the host SDK or the analytics spells
    one as a literal."""
    names = {v for k, v in vars(request_attrs).items() if k.isupper()}
    assert names == {BUNDLE_STATUS, BUNDLE_UNQUALIFIED_SHAPE, BUNDLE_UNQUALIFIED_CALLS}
    assert set(BUNDLE_ATTRS) == names
    root = Path(request_attrs.__file__).resolve().parents[1]
    spelled = sorted(
        f"{path.relative_to(root)}: {name}"
        for part in ("analytics", "collector/host")
        for path in (root / part).rglob("*.py")
        for name in names
        if re.search(rf"""=\s*["']{name}["']""", path.read_text(encoding="utf-8"))
    )
    assert spelled == []


def test_each_bundle_status_is_in_the_detail_and_said(store: Store) -> None:
    seed(store, events=events(NOW))

    hit = _detail(store, HIT)
    assert (hit[BUNDLE_STATUS], hit[BUNDLE_UNQUALIFIED_SHAPE], hit["bundle_signature_state"]) == ("hit", "", "verified")
    assert bundle_lines(hit) == [
        ("ok", f"ran from bundle {BUNDLE_NAME}, verified on its host: every graph that served it came from the bundle")
    ]

    shape = _detail(store, SHAPE)
    assert (shape[BUNDLE_UNQUALIFIED_SHAPE], shape[BUNDLE_UNQUALIFIED_CALLS]) == (UNQUALIFIED, str(UNQUALIFIED_CALLS))
    assert [level for level, _ in bundle_lines(shape)] == ["ok", "warn"]
    # Several shapes and the request's calls at them read as one sentence (it read "served it at sizes [9,8],
    # [7,8], which the bundle never qualified", with no count). Each call's graph sizes read apart, a tuple of one
    # list per input (it read "[8,128], [8,1];[2,8,4,128,16]"), beside the request's own shape, which is what the
    # shape distribution takes (it said to rebuild "with these sizes", which no shapes file holds).
    assert bundle_lines(shape)[1][1] == (
        f"a graph of bundle {BUNDLE_NAME} served {UNQUALIFIED_CALLS} of its calls at graph sizes {UNQUALIFIED_SHOWN} "
        f"(request {REQUEST_SHAPE}), which the bundle never qualified that graph at (its qualification checked "
        f"neither accuracy nor latency there); rebuild the bundle with the request shape {REQUEST_SHAPE} in its shape "
        "distribution"
    )
    older_sdk = {**shape, BUNDLE_UNQUALIFIED_CALLS: ""}  # no count recorded
    assert bundle_lines(older_sdk)[1][1].startswith(f"a graph of bundle {BUNDLE_NAME} served it at graph sizes ")

    miss = _detail(store, MISS)
    assert miss[BUNDLE_STATUS] == "miss"
    assert (miss["bundle_miss_actions"], miss["bundle_miss_factors"], miss["bundle_miss_reasons"]) == (
        ["compiled"], [[MISS_FACTOR, LONG_FACTOR]], [MISS_REASON]
    )  # fmt: skip
    assert miss["bundle_miss_this_request"] == [True]
    assert bundle_lines(miss) == [
        ("warn", f"bundle miss: a graph that served it is not in bundle {BUNDLE_NAME} (verified on its host): "
                 f"compiled ({MISS_FACTOR}; {LONG_FACTOR[:FACTOR_SHOWN]}… ({len(LONG_FACTOR) - FACTOR_SHOWN:,} more)): "
                 f"{MISS_REASON}")
    ]  # fmt: skip

    # Served later by the graph that missed: no miss of its own; the graph's miss (tied by its FX-graph-cache key)
    later = _detail(store, LATER)
    assert (later["bundle_miss_factors"], later["bundle_miss_this_request"]) == ([[MISS_FACTOR, LONG_FACTOR]], [False])
    assert bundle_lines(later)[0][1].endswith(f"{MISS_REASON} (in an earlier request's compile on its host)")

    none = _detail(store, NONE)
    assert (none[BUNDLE_STATUS], none["bundle_miss_actions"]) == ("", [])
    assert bundle_lines(none)[0][0] == "info"
    assert bundle_lines(none)[0][1].startswith(f"no graph of bundle {BUNDLE_NAME} served it")

    # The request's own host's registration, never another host's later one
    untrusted = _detail(store, UNTRUSTED)
    assert untrusted["bundle_signature_state"] == REFUSED_STATE
    assert bundle_lines(untrusted) == [
        ("warn", f"ran from bundle {BUNDLE_NAME}, registered {REFUSED_STATE} on its host, not verified: every graph "
                 "that served it came from the bundle")
    ]  # fmt: skip


def test_a_request_without_a_bundle_says_nothing_of_one(store: Store) -> None:
    seed(store, events=events(NOW))
    (hit,) = [e for e in events(NOW) if isinstance(e, RequestEvent) and e.request_id == HIT]
    store.insert_events([hit.model_copy(update={"request_id": "plain", "bundle_id": "", "attrs": {}})])
    plain = _detail(store, "plain")
    assert (plain[BUNDLE_STATUS], plain["bundle_signature_state"], plain["bundle_miss_actions"]) == ("", "", [])
    assert bundle_lines(plain) == []


def test_a_static_bundles_shape_miss_shows_its_advice_whole() -> None:
    # The factor the host writes for a static bundle's size miss ends with the --dynamic advice; cut at 160
    # characters, the request page and `requests --id` lost it (the stored row kept it).
    from inferensics.bundle.shape_factor import STATIC_ADVICE, accepted_shapes_factor

    fc = "L['self']._modules['fc']._parameters"
    sources = ["L['x']", f"{fc}['weight']", f"{fc}['bias']"]
    factor = accepted_shapes_factor(
        "float32[5,16]/16,1@cpu;float32[8,16]/16,1@cpu;float32[8]/1@cpu",
        ["float32[2,16]/16,1@cpu;float32[8,16]/16,1@cpu;float32[8]/1@cpu"],
        sources=sources,
        static=True,
    )
    assert factor.endswith(STATIC_ADVICE)
    detail = {"bundle_id": "ab" * 32, "bundle_name": "scorer", "bundle_signature_state": "verified",
              "bundle_status": "miss", "bundle_miss_actions": ["compiled"], "bundle_miss_factors": [[factor]],
              "bundle_miss_reasons": ["on_bundle_miss=compile"], "bundle_miss_this_request": [True]}  # fmt: skip
    (line,) = bundle_lines(detail)
    assert STATIC_ADVICE in line[1], line
