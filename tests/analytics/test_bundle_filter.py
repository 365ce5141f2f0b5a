"""The ``bundle`` filter: a unique bundle-id prefix names its bundle, as the bundle commands take one; an ambiguous
one is refused naming the candidates; an unknown value's refusal names no empty id (newuser finding 9)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from inferensics.analytics import LocalRunner, UnknownFilterValue
from inferensics.schema import columns as col
from inferensics.schema.events import RequestEvent
from inferensics.schema.store import Store
from tests.analytics.failing_requests import END, T
from tests.seeding import seed

WINDOW = {"start": T, "end": END}
FIRST = "b1045dcf" + "5" * 56
SECOND = "b1045e00" + "6" * 56
THIRD = "c0ffee00" + "7" * 56


@pytest.fixture
def runner(store: Store) -> LocalRunner:
    ids = {"r-first": FIRST, "r-second": SECOND, "r-third": THIRD, "r-none": ""}
    seed(store, events=[
        RequestEvent(request_id=rid, ts=T + timedelta(minutes=i), host="h1", model="m", hw_pool="p1",
                     traffic_class="interactive", bundle_id=b)
        for i, (rid, b) in enumerate(ids.items())
    ])  # fmt: skip
    return LocalRunner(store)


def test_a_unique_prefix_names_its_bundle(runner: LocalRunner) -> None:
    for given in ("b1045dcf", FIRST[:12], FIRST):
        listed = runner.query("request_list", **WINDOW, bundle=given)
        assert listed.get_column(col.REQUEST_ID).to_list() == ["r-first"], given
    assert runner.query("request_kinds", **WINDOW, bundle="c0ff").get_column("requests").to_list() == [1]


def test_an_ambiguous_prefix_is_refused_naming_the_candidates(runner: LocalRunner) -> None:
    from inferensics.analytics.filters import AmbiguousFilterValue

    with pytest.raises(AmbiguousFilterValue) as refused:
        runner.query("request_list", **WINDOW, bundle="b104")
    assert str(refused.value) == f"bundle id prefix 'b104' names 2 bundles: {FIRST!r}, {SECOND!r}; give more digits"


def test_an_unknown_bundle_names_no_empty_id(runner: LocalRunner) -> None:
    for given in ("b1045dce", "bnd-x"):
        with pytest.raises(UnknownFilterValue) as refused:
            runner.query("request_list", **WINDOW, bundle=given)
        assert refused.value.known == [FIRST, SECOND, THIRD], given
        assert "''" not in str(refused.value)
