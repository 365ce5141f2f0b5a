"""Requests classified through real compiles: dynamic-shape recompiles, recompile-limit overflow, and a
compile failure (raised, and suppressed into an eager fallback)."""

from __future__ import annotations

import pytest
import torch
import torch._dynamo

from inferensics.collector.host import Tracker
from inferensics.schema import CompileEvent, RecompileEvent, RequestEvent
from inferensics.schema import columns as col
from inferensics.schema.store import Store


def _scale(x: torch.Tensor) -> torch.Tensor:
    return torch.sin(x) * 3 + 1


def _by_id(store: Store) -> dict[str, RequestEvent]:
    return {r.request_id: r for r in store.select_events(RequestEvent)}


def _dispatch(r: RequestEvent) -> tuple[str, str, str, str, int, tuple[int, ...]]:
    return (r.outcome, r.guard_outcome, r.cache_status, r.fallback_reason, r.recompiles, r.graph_calls)


def test_dynamic_shapes_recompile_carries_request_id(tracker: Tracker, store: Store) -> None:
    compiled = tracker.compile(_scale)  # dynamic=None: static first, automatic dynamic on the recompile
    sizes = [4, 4, 7, 9, 4]
    for i, n in enumerate(sizes):
        with tracker.request(f"dyn-{i}", shape=(n,)) as req:
            req.set_output(compiled(torch.ones(n)))
    tracker.shutdown()

    r = _by_id(store)
    assert {k: _dispatch(v) for k, v in r.items()} == {
        "dyn-0": ("compile", "first", "miss", "", 0, (1,)),
        "dyn-1": ("hit", "hit", "none", "", 0, (1,)),
        "dyn-2": ("recompile", "miss", "miss", "", 1, (1,)),
        "dyn-3": ("hit", "hit", "none", "", 0, (1,)),  # the recompile made the size dynamic
        "dyn-4": ("hit", "hit", "none", "", 0, (1,)),
    }
    assert r["dyn-0"].compile_ms > 0
    assert r["dyn-2"].compile_ms > 0
    assert r["dyn-3"].graph_keys == r["dyn-2"].graph_keys != r["dyn-0"].graph_keys
    assert r["dyn-2"].shape_bucket == "b<=8"

    recompiles = store.select_events(RecompileEvent)
    assert len(recompiles) == 1
    assert recompiles[0].request_id == "dyn-2"
    assert "size mismatch" in recompiles[0].reason
    compiles = {c.compile_id: c for c in store.select_events(CompileEvent)}
    assert compiles["0/1"].request_id == "dyn-2"
    assert compiles["0/1"].attrs["recompile_user_context"] == "request_id=dyn-2"  # via the PyTorch hook
    assert compiles["0/1"].trigger == "recompile"
    assert compiles["0/0"].trigger == "first"


def test_recompile_limit_overflow_falls_back_to_eager(tracker: Tracker, store: Store) -> None:
    compiled = tracker.compile(_scale, dynamic=False)
    sizes = [3, 5, 6, 7, 3]
    outputs = {}
    with torch._dynamo.config.patch(recompile_limit=2):
        for i, n in enumerate(sizes):
            x = torch.full((n,), 0.5)
            with tracker.request(f"lim-{i}", shape=(n,)) as req:
                outputs[i] = compiled(x)
                req.set_output(outputs[i])
            torch.testing.assert_close(outputs[i], _scale(x))
    tracker.shutdown()

    r = _by_id(store)
    assert {k: _dispatch(v) for k, v in r.items()} == {
        "lim-0": ("compile", "first", "miss", "", 0, (1,)),
        "lim-1": ("recompile", "miss", "miss", "", 1, (1,)),
        "lim-2": ("fallback", "miss", "none", "recompile_limit", 0, ()),
        "lim-3": ("fallback", "miss", "none", "recompile_limit", 0, ()),
        "lim-4": ("hit", "hit", "none", "", 0, (1,)),
    }
    assert r["lim-2"].graph_keys == ()
    assert r["lim-3"].graph_keys == ()
    limit = [c for c in store.select_events(CompileEvent) if c.outcome == "recompile_limit"]
    assert len(limit) == 1
    assert limit[0].request_id == "lim-2"
    assert "recompile limit" in limit[0].fail_reason.lower()


def _cosine(x: torch.Tensor) -> torch.Tensor:
    return torch.cos(x) + 2


BROKEN_TOOLCHAIN = {"cpp.cxx": ("/nonexistent/c++",)}


def test_compile_failure_raised_is_an_error(tracker: Tracker, store: Store) -> None:
    compiled = tracker.compile(_cosine, options=BROKEN_TOOLCHAIN)
    with pytest.raises(Exception, match="InvalidCxxCompiler"), tracker.request("fail-0"):
        compiled(torch.ones(5))
    tracker.shutdown()

    r = _by_id(store)["fail-0"]
    assert r.status == "error"
    assert _dispatch(r) == ("error", "first", "miss", "compile_error", 0, ())
    assert "InvalidCxxCompiler" in r.error
    (c,) = store.select_events(CompileEvent, order_by=col.TS)
    assert c.outcome == "failed"
    assert c.fail_type == "InductorError"
    assert c.request_id == "fail-0"


def test_compile_failure_suppressed_falls_back(tracker: Tracker, store: Store) -> None:
    compiled = tracker.compile(_cosine, options=BROKEN_TOOLCHAIN)
    x = torch.ones(6)
    with torch._dynamo.config.patch(suppress_errors=True), tracker.request("supp-0") as req:
        out = compiled(x)
        req.set_output(out)
    torch.testing.assert_close(out, _cosine(x))
    tracker.shutdown()

    r = _by_id(store)["supp-0"]
    assert r.status == "ok"
    assert _dispatch(r) == ("fallback", "first", "miss", "compile_error", 0, ())
    assert r.graph_keys == ()


def test_requests_after_a_suppressed_failure_are_eager_fallbacks(tracker: Tracker, store: Store) -> None:
    """Dynamo skips a frame whose compile failed under ``suppress_errors`` from then on: later calls run
    eagerly with no guard, backend or trace event to say so. They are fallbacks with the failure's reason,
    not ``eager`` (which would hide that all of the traffic left the compiled path)."""
    compiled = tracker.compile(_cosine, options=BROKEN_TOOLCHAIN)
    x = torch.ones(6)
    with tracker.request("before") as req:  # nothing has failed yet: plain eager code is ``eager``
        req.set_output(_cosine(x))
    with torch._dynamo.config.patch(suppress_errors=True), tracker.request("supp-0") as req:
        req.set_output(compiled(x))
    for i in (1, 2):  # the setting is off again: the frame stays skipped all the same
        with tracker.request(f"supp-{i}") as req:
            out = compiled(x)
            req.set_output(out)
        torch.testing.assert_close(out, _cosine(x))
    tracker.shutdown()

    r = _by_id(store)
    assert _dispatch(r["before"]) == ("eager", "none", "none", "", 0, ())
    assert _dispatch(r["supp-0"]) == ("fallback", "first", "miss", "compile_error", 0, ())
    for i in (1, 2):
        assert _dispatch(r[f"supp-{i}"]) == ("fallback", "none", "none", "compile_error", 0, ())
    assert [c.outcome for c in store.select_events(CompileEvent)] == ["failed"]  # not tried again


def test_a_suppressed_failure_outside_requests_marks_later_requests(tracker: Tracker, store: Store) -> None:
    """A warm-up outside any request whose compile fails under ``suppress_errors``: the requests after it run
    that frame eagerly and are fallbacks; a raised failure outside requests marks nothing (Dynamo tries
    that frame again on its next call)."""
    x = torch.ones(6)
    raising = tracker.compile(_scale, options=BROKEN_TOOLCHAIN)
    with pytest.raises(Exception, match="InvalidCxxCompiler"):
        raising(x)
    with tracker.request("after-raise") as req:
        req.set_output(_scale(x))  # eager code only
    tracker.flush()
    compiled = tracker.compile(_cosine, options=BROKEN_TOOLCHAIN)
    with torch._dynamo.config.patch(suppress_errors=True):
        compiled(x)  # warm-up, no request
    tracker.flush()
    with tracker.request("after-warmup") as req:
        req.set_output(compiled(x))
    tracker.shutdown()

    r = _by_id(store)
    assert _dispatch(r["after-raise"]) == ("eager", "none", "none", "", 0, ())
    assert _dispatch(r["after-warmup"]) == ("fallback", "none", "none", "compile_error", 0, ())


class _RaisesOnFlag(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor, fail: bool = False) -> torch.Tensor:
        y: torch.Tensor = self.lin(x)
        if fail:  # a bad request: the model raises with no handler in the compiled frame
            raise ValueError("bad request")
        return y


def test_requests_after_one_that_raised_in_the_model_are_fallbacks(tracker: Tracker, store: Store) -> None:
    """A request whose model raises fails that frame's compile softly (Dynamo's ``Unsupported``: it suppresses it
    whatever ``suppress_errors`` says) and Dynamo skips the frame from then on: every later request runs the model
    eagerly, a fallback with the failure's reason, not ``eager``."""
    compiled = tracker.compile(_RaisesOnFlag().eval())
    x = torch.ones(2, 4)
    with torch.inference_mode():
        with tracker.request("ok-0"):
            compiled(x)
        with pytest.raises(ValueError, match="bad request"), tracker.request("bad"):
            compiled(x, True)
        for i in (1, 2):
            with tracker.request(f"ok-{i}"):
                compiled(x)
    tracker.shutdown()

    r = _by_id(store)
    assert (r["ok-0"].outcome, r["ok-0"].graph_calls) == ("compile", (1,))  # cache hit or miss: the session's cache
    assert (r["bad"].outcome, r["bad"].fallback_reason) == ("error", "compile_error")
    for i in (1, 2):  # no graph call: the model really ran eagerly
        assert _dispatch(r[f"ok-{i}"]) == ("fallback", "none", "none", "compile_error", 0, ())
    assert [c.fail_type for c in store.select_events(CompileEvent, order_by=col.TS)] == ["", "Unsupported"]
