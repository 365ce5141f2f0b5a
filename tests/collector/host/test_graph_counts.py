"""Per-graph call counts and host time of a request: the first graph in the request's own slots, others in
its dict, read back in the order of their first calls (the order of the record's graph_keys/graph_calls)."""

from __future__ import annotations

from typing import Any

from inferensics.collector.host.backend import _counting
from inferensics.collector.host.records import CURRENT, GraphSlot, RawRequest


def _request() -> RawRequest:
    return RawRequest("r1", "m", "", "", "", 0.0)


def test_counts_keep_first_call_order() -> None:
    a, b, c = GraphSlot(0, "0/0"), GraphSlot(1, "1/0"), GraphSlot(2, "2/0")
    raw = _request()
    assert raw.graph_counts() == {}
    for slot, ns in ((b, 5), (a, 7), (b, 11), (c, 1), (a, 2), (b, 3)):
        raw.note_graph(slot, ns)
    assert list(raw.graph_counts().items()) == [(b, [3, 19]), (a, [2, 9]), (c, [1, 1])]


def test_wrapper_counts_into_the_current_request_only() -> None:
    seen: list[Any] = []

    def graph(x: Any) -> Any:
        seen.append(x)
        return x

    first = _counting(graph, GraphSlot(0, "0/0"))
    second = _counting(lambda x: x + 1, GraphSlot(1, "1/0"))
    assert first(1) == 1  # outside a request: called, nothing counted anywhere
    raw = _request()
    token = CURRENT.set(raw)
    try:
        assert [second(1), first(2), second(3), second(4)] == [2, 2, 4, 5]
    finally:
        CURRENT.reset(token)
    counts = raw.graph_counts()
    assert [(s.index, v[0]) for s, v in counts.items()] == [(1, 3), (0, 1)]
    assert all(v[1] >= 0 for v in counts.values())
    assert seen == [1, 2]
