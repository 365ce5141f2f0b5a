"""Guard hits and misses without Dynamo's guard-complete hook, and the hook going in when it is needed.

While every compile of the process has given a graph of a tracker's backend, a frame's guard hit is a call of
its graph and a miss a recompile, so the tracker leaves the hook (a Python call from C on every compiled
frame's call) out. The same requests, served once with the hook in from the start and once without, must be
classified alike; a compile that gives no graph of ours (a frame that broke before any op, one at its
recompile limit, a plain ``torch.compile`` elsewhere) puts the hook in before that frame runs again.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch
import torch._dynamo

from inferensics.collector.host import SdkConfig, Tracker, instrument
from inferensics.schema import RequestEvent
from inferensics.schema import columns as col
from inferensics.schema.store import Store


def _scale(x: torch.Tensor) -> torch.Tensor:
    return torch.sin(x) * 3 + 1


def _shift(x: torch.Tensor) -> torch.Tensor:
    return torch.cos(x) - 1


def _breaking(x: torch.Tensor) -> torch.Tensor:
    y = torch.sin(x) * 2
    if y.sum() > 0:  # data-dependent branch: a graph break, two graphs a call
        return torch.cos(y)
    return y - 1


@pytest.fixture
def stores(chdb_dir: Path) -> Iterator[Callable[[], Store]]:
    """Fresh migrated stores in their own databases (one per run of the same traffic), dropped afterwards."""
    made: list[Store] = []

    def make() -> Store:
        s = Store.open(f"chdb://{chdb_dir}?database=g_{uuid.uuid4().hex[:12]}")
        s.migrate()
        made.append(s)
        return s

    yield make
    for s in made:
        s.client.command(f"DROP DATABASE IF EXISTS {s.database} SYNC")
        s.close()


def _fields(r: RequestEvent) -> tuple[object, ...]:
    # Not the cache status: the second run of the same traffic hits the FX-graph cache the first one filled.
    return (r.outcome, r.guard_outcome, r.fallback_reason, r.recompiles, r.graph_calls)


def _serve(store: Store, counted: bool, run: Callable[[Tracker], None]) -> tuple[dict[str, tuple[object, ...]], int]:
    torch._dynamo.reset()
    tracker = instrument(store=store, host="h", model="m", config=SdkConfig(batch_rows=1000))
    try:
        if counted:
            tracker._count_guards()  # the hook from the first request on, as before this change
        run(tracker)
        installed = tracker.stats()["guard_hook_installed"]
    finally:
        tracker.shutdown()
    rows = store.select_events(RequestEvent, order_by=col.REQUEST_ID)
    return {r.request_id: _fields(r) for r in rows}, installed


def _traffic(tracker: Tracker) -> None:
    """Compiles, recompiles (static, then dynamic shapes), several calls of a graph a request, two compiled
    functions in one request, a graph break, and requests with no compiled call at all."""
    scale, shift, breaking = tracker.compile(_scale), tracker.compile(_shift), tracker.compile(_breaking)
    plan: list[tuple[int, int]] = [(4, 1), (4, 3), (7, 2), (9, 1), (4, 4), (5, 0), (11, 2)]
    for i, (n, calls) in enumerate(plan):
        x = torch.ones(n)
        with tracker.request(f"r{i}", shape=(n,)) as req:
            for _ in range(calls):
                x = scale(x)
            if i % 2:
                x = shift(x)
            req.set_output(x)
    for i in range(3):
        with tracker.request(f"s{i}") as req:
            req.set_output(breaking(torch.ones(6) * (i + 1)))
    static = tracker.compile(_scale, dynamic=False)
    for i, n in enumerate((3, 4)):  # the second: a recompile and nothing else (a miss)
        with tracker.request(f"t{i}") as req:
            req.set_output(static(torch.ones(n)))
    with tracker.request("u0"):  # no compiled call
        torch.ones(2).sum()


def test_requests_are_classified_alike_with_and_without_the_hook(stores: Callable[[], Store]) -> None:
    counted, hook_counted = _serve(stores(), True, _traffic)
    derived, hook_derived = _serve(stores(), False, _traffic)
    assert (hook_counted, hook_derived) == (1, 0)  # every compile gave a graph: the hook stayed out
    assert derived == counted
    # The traffic covers what the hook would have told apart.
    assert {v[1] for v in derived.values()} == {"first", "hit", "miss", "mixed", "none"}
    assert {v[0] for v in derived.values()} >= {"compile", "recompile", "hit", "eager"}


def _prints_then_scales(x: torch.Tensor) -> torch.Tensor:
    print("serving")  # a graph break before any tensor op: this frame compiles no graph
    return torch.sin(x) * 3


def _graphless_traffic(tracker: Tracker) -> None:
    compiled = tracker.compile(_prints_then_scales)
    for i in range(3):
        with tracker.request(f"p{i}") as req:
            req.set_output(compiled(torch.ones(5)))


def test_a_frame_without_a_graph_puts_the_hook_in(stores: Callable[[], Store]) -> None:
    counted, _ = _serve(stores(), True, _graphless_traffic)
    derived, installed = _serve(stores(), False, _graphless_traffic)
    assert installed == 1
    assert derived == counted
    # The print runs eagerly on every call and the rest hits its graph: a hit carrying the break's reason.
    assert derived["p1"][0] == derived["p2"][0] == "hit"
    assert str(derived["p1"][2]).startswith("graph_break:")
    assert derived["p1"][2] != "graph_break:unknown"


def _limit_traffic(tracker: Tracker) -> None:
    compiled = tracker.compile(_scale, dynamic=False)
    with torch._dynamo.config.patch(recompile_limit=2):
        for i, n in enumerate([3, 5, 6, 7, 3, 8]):
            with tracker.request(f"l{i}", shape=(n,)) as req:
                req.set_output(compiled(torch.full((n,), 0.5)))


def test_the_recompile_limit_puts_the_hook_in_before_the_next_eager_miss(stores: Callable[[], Store]) -> None:
    counted, _ = _serve(stores(), True, _limit_traffic)
    derived, installed = _serve(stores(), False, _limit_traffic)
    assert installed == 1
    assert derived == counted
    # l2 hit the limit (counted from its compile), l3 and l5 missed without compiling (counted by the hook).
    assert [derived[f"l{i}"][:2] for i in range(6)] == [
        ("compile", "first"),
        ("recompile", "miss"),
        ("fallback", "miss"),
        ("fallback", "miss"),
        ("hit", "hit"),
        ("fallback", "miss"),
    ]


def test_a_plain_torch_compile_elsewhere_is_not_counted_as_the_trackers(stores: Callable[[], Store]) -> None:
    """A frame compiled by another backend is not the tracker's: its guard hits are no request's, and a
    compile of it (graph or not) leaves the hook out. With the hook in (as before) the request that called only
    it read as an eager request with guard hits."""

    def traffic(tracker: Tracker) -> None:
        mine, theirs = tracker.compile(_scale), torch.compile(_shift)
        with tracker.request("mine") as req:
            req.set_output(mine(torch.ones(3)))
        theirs(torch.ones(3))  # compiled by another backend
        with tracker.request("both") as req:
            req.set_output(theirs(mine(torch.ones(3))))
        with tracker.request("theirs") as req:
            req.set_output(theirs(torch.ones(3)))

    rows, installed = _serve(stores(), False, traffic)
    assert installed == 0
    assert rows["both"][:2] == ("hit", "hit")
    assert rows["theirs"][:2] == ("eager", "none")
    counted, _ = _serve(stores(), True, traffic)
    assert counted["theirs"][:2] == ("eager", "hit")
