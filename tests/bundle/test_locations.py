"""A bundle's graphs name the frame they were traced from, written the same on every machine (the field was
empty in every bundle), and a decorated ``forward`` (as Hugging Face decorates every model's) is named by the
model's own ``forward``, not the decorator's wrapper."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import pytest
import torch

from inferensics import bundle as b
from inferensics.bundle import torch_adapter
from inferensics.bundle.locations import code_location, portable_path
from inferensics.schema.locations import entry_codes
from tests.bundle.models import TinyMLP


def _decorated(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    return wrapper


class _Decorated(torch.nn.Module):
    @_decorated
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + 1


@pytest.mark.slow
def test_the_built_graphs_name_the_models_forward(built: b.BuildResult) -> None:
    code = TinyMLP.forward.__code__
    want = f"tests/bundle/models.py:{code.co_firstlineno}:TinyMLP.forward"
    assert {g.code_location for g in built.manifest.graphs} == {want}


def test_a_decorated_forward_is_named_by_the_models_own_code() -> None:
    wrapper = type(_Decorated()).forward.__code__
    own = _Decorated.forward.__wrapped__.__code__  # type: ignore[attr-defined]
    entries = entry_codes(_Decorated())
    assert set(entries) == {wrapper}
    assert code_location(wrapper, entries) == f"tests/bundle/test_locations.py:{own.co_firstlineno}:_Decorated.forward"
    assert (
        code_location(wrapper) == f"tests/bundle/test_locations.py:{wrapper.co_firstlineno}:_decorated.<locals>.wrapper"
    )
    assert entry_codes(TinyMLP()) == {}
    assert code_location(None) == ""


def test_a_torch_owned_module_is_named_by_its_forward_not_dynamos_inline_wrapper() -> None:
    inline = torch_adapter.inline_wrapper_code()
    assert inline is not None
    assert inline.co_filename.endswith("external_utils.py")
    entries = entry_codes(torch.nn.Sequential(torch.nn.Linear(2, 2)), inline)
    line = torch.nn.Sequential.forward.__code__.co_firstlineno
    assert code_location(inline, entries) == f"torch/nn/modules/container.py:{line}:Sequential.forward"
    assert entry_codes(torch.nn.Sequential(), None) == {}


def test_a_path_outside_sys_path_keeps_its_name_only(tmp_path: Any) -> None:
    assert portable_path(str(tmp_path / "elsewhere" / "model.py")) == "model.py"
    assert portable_path(torch.__file__) == "torch/__init__.py"
