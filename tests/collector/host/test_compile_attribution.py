"""Compile-side records carry the model that was compiled: ``tracker.compile(model, name=...)`` labels
them (a frame at its recompile limit, which starts no compile, included), a plain ``torch.compile``
elsewhere in the process stays unattributed, a model whose ``forward`` is wrapped by a decorator (as
Hugging Face wraps every model's) is located at its own ``forward``, and so is a module whose ``forward`` is
torch's own (Dynamo compiles it from its inline wrapper's frame)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import pytest
import torch

from inferensics.collector.host import ConfigError, Tracker
from inferensics.collector.trace.assembler import ATTRIBUTION_ATTR, UNATTRIBUTED
from inferensics.schema import CacheEvent, CompileEvent, RecompileEvent, RequestEvent
from inferensics.schema.store import Store


def _decorated(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    return wrapper


class _Wrapped(torch.nn.Module):
    @_decorated
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sin(x) + 1


def _other(x: torch.Tensor) -> torch.Tensor:
    return torch.cos(x) * 2


def _plain(x: torch.Tensor) -> torch.Tensor:
    return torch.tanh(x) - 1


def test_labels_follow_the_compiled_model(tracker: Tracker, store: Store) -> None:
    a = tracker.compile(_Wrapped(), name="model-a")
    b = tracker.compile(_other, name="model-b")
    plain = torch.compile(_plain, backend="eager")  # another library's compile in the same process
    x = torch.ones(4)
    with tracker.request("r-a", model="model-a") as req:
        req.set_output(a(x))
    with tracker.request("r-b", model="model-b") as req:
        req.set_output(b(x))
    with tracker.request("r-p") as req:  # even inside a request of the tracker's default model
        req.set_output(plain(x))
    tracker.shutdown()

    compiles = {c.code_location.rsplit(":", 1)[-1]: c for c in store.select_events(CompileEvent)}
    assert set(compiles) == {"_Wrapped.forward", "_other", "_plain"}
    wrapped, other, unrelated = compiles["_Wrapped.forward"], compiles["_other"], compiles["_plain"]
    assert (wrapped.model, other.model) == ("model-a", "model-b")
    assert wrapped.code_location.startswith(__file__.removesuffix("c"))  # not the decorator's wrapper
    assert ATTRIBUTION_ATTR not in wrapped.attrs
    assert ATTRIBUTION_ATTR not in other.attrs
    assert unrelated.model == ""
    assert unrelated.attrs[ATTRIBUTION_ATTR] == UNATTRIBUTED
    cache = store.select_events(CacheEvent)
    assert cache
    by_compile = {c.compile_id: c.model for c in compiles.values()}
    assert all(e.model == by_compile[e.compile_id] for e in cache)
    assert {e.model for e in cache} == {"model-a", "model-b"}


def test_a_torch_owned_module_is_located_at_its_forward(tracker: Tracker, store: Store) -> None:
    seq = tracker.compile(torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()), name="seq")
    table = tracker.compile(torch.nn.Embedding(10, 4), name="emb")
    with tracker.request("r-seq", model="seq") as req:
        req.set_output(seq(torch.ones(2, 4)))
    with tracker.request("r-emb", model="emb") as req:
        req.set_output(table(torch.tensor([1, 2])))
    tracker.shutdown()

    located = {c.model: c.code_location for c in store.select_events(CompileEvent)}
    for model, cls in (("seq", torch.nn.Sequential), ("emb", torch.nn.Embedding)):
        code = cls.forward.__code__
        # It read torch/_dynamo/external_utils.py:67:inner, the wrapper every such module is compiled from.
        assert located[model] == f"{code.co_filename}:{code.co_firstlineno}:{cls.__name__}.forward"


def test_compile_takes_per_model_dynamo_settings(tracker: Tracker) -> None:
    accepted = "recompile_limit" in __import__("inspect").signature(torch.compile).parameters
    if accepted:
        compiled = tracker.compile(_other, recompile_limit=2)
        assert compiled(torch.ones(2)).shape == (2,)
    # a Dynamo setting torch.compile does not take: where to set it instead
    with pytest.raises(ConfigError, match=r"suppress_errors=.*torch\._dynamo\.config\.suppress_errors = \.\.\."):
        tracker.compile(_other, suppress_errors=True)
    # no such setting anywhere: it must not be sent to a torch._dynamo.config setting that does not exist
    with pytest.raises(ConfigError, match=r"not_a_setting=.*has no setting not_a_setting") as info:
        tracker.compile(_other, not_a_setting=1)
    assert "torch._dynamo.config.not_a_setting" not in str(info.value)


def _limited(x: torch.Tensor) -> torch.Tensor:
    return torch.sin(x) * 3


def test_a_frame_at_its_recompile_limit_keeps_its_models_label(tracker: Tracker, store: Store) -> None:
    """Dynamo logs a limit hit's reasons and metrics from inside its compile but never starts one: the record
    is still the compiled model's, not unattributed (the weekly report's top reason read "0 in  @ pool")."""
    compiled = tracker.compile(_limited, name="model-l", dynamic=False)
    with torch._dynamo.config.patch(recompile_limit=1):
        for n in (2, 3):
            with tracker.request(f"r-l{n}", model="model-l") as req:
                req.set_output(compiled(torch.ones(n)))
    tracker.shutdown()
    recompiles = store.select_events(RecompileEvent)
    limit = [e for e in recompiles if e.attrs.get("outcome") == "recompile_limit"]
    assert len(limit) == 1
    assert limit[0].model == "model-l"
    assert ATTRIBUTION_ATTR not in limit[0].attrs
    # its metrics name no code, but its frame's earlier compiles did: the limit hit is located there too
    located = {e.code_location for e in recompiles if e.code_location}
    assert limit[0].code_location in located
    assert limit[0].code_location.endswith(":_limited")


def test_request_rows_take_the_label_of_the_model_that_served_them(tracker: Tracker, store: Store) -> None:
    """A request given no model= is labelled with the name its graph was compiled under (it read the
    tracker's label, so a second model's requests were counted as the first's); its recompile row carries the
    request's traffic class (it was empty)."""
    a = tracker.compile(_other, name="model-a", dynamic=False)
    b = tracker.compile(_plain, name="model-b", dynamic=False)
    with tracker.request("r-a", traffic_class="interactive") as req:
        req.set_output(a(torch.ones(2)))
    with tracker.request("r-b1", traffic_class="batch") as req:
        req.set_output(b(torch.ones(2)))
    with tracker.request("r-b2", traffic_class="batch") as req:  # a new size: recompiles model-b's frame
        req.set_output(b(torch.ones(3)))
    with tracker.request("r-given", model="explicit") as req:  # a label given to the request wins
        req.set_output(b(torch.ones(2)))
    with tracker.request("r-eager"):  # no graph: the tracker's own label
        pass
    tracker.shutdown()
    rows = {r.request_id: r for r in store.select_events(RequestEvent)}
    assert rows["r-a"].model == "model-a"
    assert rows["r-b1"].model == rows["r-b2"].model == "model-b"
    assert rows["r-given"].model == "explicit"
    assert rows["r-eager"].model == tracker.model
    (recompile,) = [e for e in store.select_events(RecompileEvent) if e.request_id == "r-b2"]
    assert recompile.traffic_class == "batch"
    assert recompile.model == "model-b"
