"""Per-graph call counts and host time of a request: the first graph in the request's own slots, others in
its dict, read back in the order of their first calls (the order of the record's graph_keys/graph_calls); every
call counted, the first TIMED_FIRST calls of a graph and every TIMED_EVERY-th after them timed, the host time
scaled to all calls."""

from __future__ import annotations

import os
from typing import Any

from inferensics.collector.host.backend import _counting
from inferensics.collector.host.records import CURRENT, TIMED_EVERY, TIMED_FIRST, GraphSlot, RawRequest, timed_calls


def _request() -> RawRequest:
    return RawRequest(None, "r1", model="m")


def test_counts_keep_first_call_order() -> None:
    a, b, c = GraphSlot(0, "0/0"), GraphSlot(1, "1/0"), GraphSlot(2, "2/0")
    raw = _request()
    assert raw.graph_counts() == {}
    for slot, ns in ((b, 5), (a, 7), (b, 11), (c, 1), (a, 2), (b, 3)):
        assert raw.count_call(slot)  # within the first TIMED_FIRST calls of each: every one timed
        raw.add_ns(slot, ns)
    assert list(raw.graph_counts().items()) == [(b, [3, 19]), (a, [2, 9]), (c, [1, 1])]


def test_timed_calls_matches_the_calls_the_request_times() -> None:
    """For the first graph (the request's own slots) and a later one (its dict) alike: which calls are timed,
    how many, and the host time scaled to all calls."""
    a, b = GraphSlot(0, "0/0"), GraphSlot(1, "1/0")
    raw = _request()
    timed: dict[GraphSlot, list[int]] = {a: [], b: []}
    calls = 3 * TIMED_EVERY + 5
    for n in range(calls):
        for slot in (a, b):
            if raw.count_call(slot):
                timed[slot].append(n)
                raw.add_ns(slot, 1000 if slot is a else 10 * (n + 1))
    expected = [n for n in range(calls) if n < TIMED_FIRST or n % TIMED_EVERY == 0]
    assert timed[a] == timed[b] == expected
    assert [timed_calls(c) for c in (0, 1, TIMED_FIRST, calls)] == [0, 1, TIMED_FIRST, len(expected)]
    counts = raw.graph_counts()
    assert counts[a] == [calls, 1000 * calls]  # a steady 1 us per timed call: exactly the sum over all calls
    assert counts[b] == [calls, sum(10 * (n + 1) for n in expected) * calls // len(expected)]
    assert raw.graph_counts() == counts  # reading them changes nothing


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


def test_wrapper_reads_the_clock_only_on_timed_calls(monkeypatch: Any) -> None:
    """Every call counted; the clock read twice on each timed call and on no other; each timed call here
    takes one clock step (1 us), so the scaled host time is exactly 1 us a call."""
    import time

    reads = iter(range(0, 10**9, 1000))
    monkeypatch.setattr(time, "perf_counter_ns", lambda: next(reads))
    slot = GraphSlot(0, "0/0")
    wrapped = _counting(lambda x: x, slot)
    raw = _request()
    token = CURRENT.set(raw)
    try:
        calls = 2 * TIMED_EVERY + 8
        assert [wrapped(i) for i in range(calls)] == list(range(calls))
    finally:
        CURRENT.reset(token)
    assert next(reads) == 2 * timed_calls(calls) * 1000  # the clock reads so far, one step each
    assert raw.graph_counts() == {slot: [calls, calls * 1000]}


def test_the_schema_describes_the_sampling_the_sdk_does() -> None:
    """``graph_us``'s column description (the DDL comment and the request page's help) names the SDK's rule."""
    from inferensics.schema import RequestEvent

    text = " ".join((RequestEvent.model_fields["graph_us"].description or "").split())
    assert f"first {TIMED_FIRST} calls" in text
    assert f"every {TIMED_EVERY}th" in text


def _python_frames(fn: Any, x: Any) -> list[str]:
    """The Python functions one call of ``fn(x)`` enters, in order (the graph's generated module and the user's
    function each as one name)."""
    import sys

    import torch

    names: list[str] = []
    cache_dir = os.environ.get("TORCHINDUCTOR_CACHE_DIR") or "\0"  # the tests' own Inductor cache (conftest)

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            code = frame.f_code
            generated = "torchinductor" in code.co_filename or code.co_filename.startswith(("<", cache_dir))
            if generated:
                names.append("<generated>")
            elif code.co_filename == __file__:
                names.append("<user>")  # plain_fn / ours_fn
            else:
                names.append(f"{code.co_filename.rsplit('/', 1)[-1]}:{code.co_name}")

    with torch.no_grad():
        fn(x), fn(x)  # compiled and warm
        sys.setprofile(profile)
        try:
            fn(x)
        finally:
            sys.setprofile(None)
    return names


def test_a_compiled_call_runs_only_the_counting_frame_beyond_a_plain_compile() -> None:
    """Inductor returns its graph inside Dynamo's disable wrapper and Dynamo wraps what the backend returns in
    another: the counting wrapper calls the graph inside (torch_adapter.undisabled), so a call of the
    instrumented graph enters the Python frames of a plain ``torch.compile`` and the wrapper, nothing more
    (it entered three more and made four more set_eval_frame calls on every call).

    Both compile with the FX graph and AOTAutograd caches off: the two functions give the same graph, so the
    second compile would load the first's from the cache, and on some torch versions (2.11, the H200's) a fresh
    compile with the AOTAutograd cache on runs a runtime-wrapper frame that a graph loaded from it does not,
    whichever backend compiled it."""
    import torch
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config

    from inferensics.collector.host.backend import InductorBackend

    def plain_fn(x: Any) -> Any:
        return x * 2 + 1

    def ours_fn(x: Any) -> Any:
        return x * 2 + 1

    x = torch.randn(4, 8)
    with inductor_config.patch(fx_graph_cache=False), functorch_config.patch(enable_autograd_cache=False):
        plain = _python_frames(torch.compile(plain_fn), x)
        ours = _python_frames(torch.compile(ours_fn, backend=InductorBackend()), x)
    added = [n for n in ours if n not in plain or ours.count(n) > plain.count(n)]
    assert sorted(set(added)) == ["backend.py:run"], added
    assert len(ours) == len(plain) + 1, (plain, ours)
    assert torch.equal(torch.compile(ours_fn, backend=InductorBackend())(x), x * 2 + 1)
