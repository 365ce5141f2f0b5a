"""A model with a graph break: two graphs per request, the break's registry id on every request."""

from __future__ import annotations

import torch

from inferensics.collector.host import Tracker
from inferensics.schema import CompileEvent, GraphBreakEvent, RequestEvent
from inferensics.schema import columns as col
from inferensics.schema.store import Store


def _breaking(x: torch.Tensor) -> torch.Tensor:
    y = torch.sin(x) * 2
    if y.sum() > 0:  # data-dependent branch: graph break GB0170
        return torch.cos(y)
    return y - 1


def test_graph_break_requests(tracker: Tracker, store: Store) -> None:
    compiled = tracker.compile(_breaking)
    x = torch.ones(8)
    for i in range(3):
        with tracker.request(f"gb-{i}", traffic_class="interactive", shape=(8,)) as req:
            req.set_output(compiled(x))
    tracker.shutdown()

    reqs = store.select_events(RequestEvent, order_by=col.REQUEST_ID)
    assert [r.request_id for r in reqs] == ["gb-0", "gb-1", "gb-2"]
    first, *rest = reqs
    assert first.outcome == "compile"
    assert first.guard_outcome == "first"
    assert first.fallback_reason == "graph_break:GB0170"
    assert len(first.graph_keys) == 2
    assert all(first.graph_keys)
    assert all(first.graph_artifacts)
    assert first.compile_ms > 0
    for r in rest:
        assert r.outcome == "hit"
        assert r.guard_outcome == "hit"
        assert r.fallback_reason == "graph_break:GB0170"
        assert r.graph_keys == first.graph_keys
        assert r.graph_calls == (1, 1)
    breaks = store.select_events(GraphBreakEvent)
    assert len(breaks) == 1
    assert breaks[0].registry_id == "GB0170"
    assert breaks[0].break_type == "Data-dependent branching"
    assert breaks[0].request_id == "gb-0"
    assert "test_graph_break.py" in breaks[0].user_frame
    compiles = store.select_events(CompileEvent, order_by=col.COMPILE_ID)
    assert breaks[0].code_location == compiles[0].code_location != ""
    assert [c.compile_id for c in compiles] == ["0/0", "1/0"]
    assert all(c.request_id == "gb-0" and c.outcome == "ok" for c in compiles)
    assert {c.artifact_id for c in compiles} == set(first.graph_artifacts)
    for c in compiles:
        assert store.get_blob(c.artifact_id) is not None


def _prints_only(x: torch.Tensor) -> torch.Tensor:
    print("serving")  # graph break GB0… before any tensor op: the frame compiles no graph
    return x


def _prints_then_computes(x: torch.Tensor) -> torch.Tensor:
    print("serving")
    return torch.sin(x) + 1  # compiled in the resume function


def test_break_before_any_op_keeps_its_reason(tracker: Tracker, store: Store) -> None:
    """Later calls of a frame that breaks before any tensor op hit its guards and run no graph of their own:
    they still run the break eagerly every time, and say so."""
    only = tracker.compile(_prints_only)
    then = tracker.compile(_prints_then_computes)
    x = torch.ones(4)
    for i in range(3):
        with tracker.request(f"only-{i}") as req:
            req.set_output(only(x))
    for i in range(3):
        with tracker.request(f"then-{i}") as req:
            req.set_output(then(x))
    tracker.shutdown()

    reqs = {r.request_id: r for r in store.select_events(RequestEvent)}
    breaks = store.select_events(GraphBreakEvent)
    assert breaks
    reason = f"graph_break:{breaks[0].registry_id}"
    assert breaks[0].registry_id
    assert reqs["only-0"].outcome == "compile"
    for i in range(3):
        assert reqs[f"only-{i}"].fallback_reason == reason, i
    for i in (1, 2):
        assert reqs[f"only-{i}"].outcome == "fallback", i
    assert reqs["then-0"].outcome == "compile"
    for i in (1, 2):
        assert reqs[f"then-{i}"].outcome == "hit"
        assert reqs[f"then-{i}"].fallback_reason == reason
