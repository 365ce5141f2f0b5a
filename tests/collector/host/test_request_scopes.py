"""Request scopes that do not nest as a ``with`` block does: two requests' generators interleaved on one thread (a
streaming server), a scope exited on another thread than it was entered on. A request that has ended never collects
later calls of the thread it ran on. Interleaved generators share the thread's context, so a call counts in the scope
that context holds (``RequestScope``'s docstring says which); each stream stepped in its own context is counted
right."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Iterator

import pytest
import torch

from inferensics.collector.host import SdkConfig, Tracker, instrument
from inferensics.collector.host.records import CURRENT
from inferensics.collector.testing import InMemoryExporter


@pytest.fixture
def exporter() -> InMemoryExporter:
    return InMemoryExporter()


@pytest.fixture
def quiet_tracker(exporter: InMemoryExporter) -> Iterator[Tracker]:
    """A tracker whose thread drains only at flush: a request's record stays open to later calls until then."""
    t = instrument(exporter=exporter, host="h", model="m",
                   config=SdkConfig(flush_interval_s=3600.0, health_interval_s=0, journal_dir="off"))  # fmt: skip
    try:
        yield t
    finally:
        t.shutdown()


def _calls(exporter: InMemoryExporter) -> dict[str, int]:
    return {r.request_id: sum(r.graph_calls) for r in exporter.requests}


def test_interleaved_streams_leave_no_ended_request_current(quiet_tracker: Tracker, exporter: InMemoryExporter) -> None:
    compiled = quiet_tracker.compile(torch.nn.Linear(4, 4).eval(), name="m")
    x = torch.ones(2, 4)

    def stream(request_id: str, steps: int) -> Iterator[None]:
        with quiet_tracker.request(request_id):
            for _ in range(steps):
                compiled(x)
                yield

    with torch.inference_mode():
        a, b = stream("a", 1), stream("b", 1)
        next(a)  # a enters and calls
        next(b)  # b enters inside a's scope and calls
        next(a, None)  # a ends first
        next(b, None)  # b ends: a, ended, is what its entry found current
        current = CURRENT.get()
        for _ in range(3):
            compiled(x)  # outside any request
    quiet_tracker.flush()
    assert _calls(exporter) == {"a": 1, "b": 1}
    assert current is None


def test_a_scope_exited_on_another_thread_stops_collecting_at_the_next_request(
    quiet_tracker: Tracker, exporter: InMemoryExporter
) -> None:
    compiled = quiet_tracker.compile(torch.nn.Linear(4, 4).eval(), name="m")
    x = torch.ones(2, 4)
    with torch.inference_mode():
        scope = quiet_tracker.request("handed-off")
        scope.__enter__()
        compiled(x)
        closer = threading.Thread(target=scope.__exit__, args=(None, None, None))
        closer.start()
        closer.join()
        with quiet_tracker.request("next"):
            compiled(x)
        current = CURRENT.get()
        for _ in range(3):
            compiled(x)  # outside any request
    quiet_tracker.flush()
    # the calls after "next" ended are outside any request, not handed-off's (which ended before them)
    assert _calls(exporter) == {"handed-off": 1, "next": 1}
    assert quiet_tracker.stats()["scope_errors"] == 1
    assert current is None


def _stream(tracker: Tracker, compiled: torch.nn.Module, request_id: str, steps: int) -> Iterator[None]:
    """A streaming response: the request's scope stays open across its yields."""
    x = torch.ones(2, 4)
    with tracker.request(request_id):
        for _ in range(steps):
            compiled(x)
            yield


def test_interleaved_streams_count_in_the_scope_their_context_holds(
    quiet_tracker: Tracker, exporter: InMemoryExporter
) -> None:
    """The behaviour ``RequestScope`` documents: generators stepped by one thread share its context, so a call
    counts in the scope whose ``with`` line ran last there, whichever generator makes it; after the scopes end out
    of order, the other stream's calls count in no request."""
    compiled = quiet_tracker.compile(torch.nn.Linear(4, 4).eval(), name="m")
    with torch.inference_mode():
        a, b = _stream(quiet_tracker, compiled, "a", 3), _stream(quiet_tracker, compiled, "b", 3)
        next(a)  # a enters, calls: a's
        next(b)  # b enters, calls: b's
        next(a)  # a's call, while b's scope is current: b's
        next(a)  # a's call: b's
        next(a, None)  # a ends: its exit puts back what its entry found (no request)
        next(b)  # b's call: no request's
        next(b)  # b's call: no request's
        next(b, None)  # b ends
    quiet_tracker.flush()
    assert _calls(exporter) == {"a": 1, "b": 3}


def test_streams_stepped_each_in_its_own_context_are_counted_right(
    quiet_tracker: Tracker, exporter: InMemoryExporter
) -> None:
    """The documented remedy: each stream's steps run in a context of its own (``contextvars.copy_context()``
    once per stream, then ``context.run(next, stream)``), as each ``asyncio`` task's do."""
    compiled = quiet_tracker.compile(torch.nn.Linear(4, 4).eval(), name="m")
    streams = {rid: (_stream(quiet_tracker, compiled, rid, 3), contextvars.copy_context()) for rid in ("a", "b")}
    with torch.inference_mode():
        for _ in range(4):  # three calls each, then both end: a first
            for stream, context in streams.values():
                context.run(next, stream, None)
        current = CURRENT.get()
    quiet_tracker.flush()
    assert _calls(exporter) == {"a": 3, "b": 3}
    assert current is None


def test_a_call_in_an_executor_thread_counts_only_in_a_copied_context(
    quiet_tracker: Tracker, exporter: InMemoryExporter
) -> None:
    """The behaviour ``RequestScope`` documents: ``loop.run_in_executor`` runs its function on a pool thread without
    the caller's context (asyncio copies none there), so its compiled calls count in no request; run through
    ``contextvars.copy_context().run`` (or ``asyncio.to_thread``, which does that) they count in the caller's."""
    compiled = quiet_tracker.compile(torch.nn.Linear(4, 4).eval(), name="m")

    def twice() -> None:
        with torch.inference_mode():  # a thread-local mode: the pool thread sets its own
            compiled(torch.randn(2, 4))
            compiled(torch.randn(2, 4))

    async def serve(rid: str, how: str) -> None:
        loop = asyncio.get_running_loop()
        with quiet_tracker.request(rid):
            with torch.inference_mode():
                compiled(torch.randn(2, 4))
            if how == "executor":
                await loop.run_in_executor(None, twice)
            elif how == "copied":
                await loop.run_in_executor(None, contextvars.copy_context().run, twice)
            else:
                await asyncio.to_thread(twice)

    async def main() -> None:
        for rid in ("executor", "copied", "to_thread"):
            await serve(rid, rid)

    asyncio.run(main())
    quiet_tracker.flush()
    assert _calls(exporter) == {"executor": 1, "copied": 3, "to_thread": 3}
