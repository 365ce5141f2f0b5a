"""Dispatch fields of graphs Inductor compiles to nothing: a served graph with no ops still has a graph key
(the digest of its Dynamo graph), and a compile whose only cache lookups were AOTAutograd's says what
they found instead of ``none`` (which means "no compile")."""

from __future__ import annotations

import torch

from inferensics.collector.host import Tracker
from inferensics.schema import CacheEvent, CompileEvent, RequestEvent
from inferensics.schema import columns as col
from inferensics.schema.store import Store


def _no_ops(x: torch.Tensor) -> torch.Tensor:
    return x.detach()  # nothing left for Inductor after AOTAutograd: no output code, no FX-cache key


def test_graph_without_ops(tracker: Tracker, store: Store) -> None:
    compiled = tracker.compile(_no_ops)
    for i, n in enumerate((3, 3, 5)):
        with tracker.request(f"n-{i}") as req:
            req.set_output(compiled(torch.ones(2, n)))
    tracker.shutdown()

    reqs = {r.request_id: r for r in store.select_events(RequestEvent)}
    assert [reqs[k].outcome for k in ("n-0", "n-1", "n-2")] == ["compile", "hit", "recompile"]
    for r in reqs.values():
        assert r.graph_keys
        assert all(r.graph_keys), r.request_id
    compiles = store.select_events(CompileEvent, order_by=col.COMPILE_ID)
    assert [c.compile_id for c in compiles] == ["0/0", "0/1"]
    assert all(c.graph_key and not c.artifact_id and not c.fx_cache_key for c in compiles)
    assert set(reqs["n-0"].graph_keys) == {compiles[0].graph_key}
    assert set(reqs["n-2"].graph_keys) == {compiles[1].graph_key}
    lookups = store.select_events(CacheEvent)
    assert lookups
    assert {e.cache for e in lookups} == {"aot_autograd"}
    for c in compiles:
        results = {e.result for e in lookups if e.compile_id == c.compile_id}
        assert c.cache_status == (results.pop() if len(results) == 1 else "mixed") != "none"
    assert reqs["n-0"].cache_status == compiles[0].cache_status
    assert reqs["n-2"].cache_status == compiles[1].cache_status
    assert reqs["n-1"].cache_status == "none"
