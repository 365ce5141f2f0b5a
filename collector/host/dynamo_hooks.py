"""The functions the tracker hands Dynamo: the guard-complete hook (every compiled frame's call), the recompile
user context, and where a decorated model's own ``forward`` is."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from inferensics.collector.host import torch_adapter
from inferensics.collector.host.records import CURRENT
from inferensics.schema.locations import entry_codes

_current = CURRENT.get


def guard_hook(cache_hit: bool) -> bool:
    """Dynamo's guard-complete hook: count the frame's guard hit or miss into the current request.

    Runs once per compiled-frame call, from C: a plain function (no bound method, no chaining) so the
    call stays as cheap as a Python call from C can be.
    """
    request = _current()
    if request is not None:
        if cache_hit:
            request.guard_hits += 1
        else:
            request.guard_misses += 1
    return cache_hit


def chained_guard_hook(previous: Callable[[bool], bool]) -> Callable[[bool], bool]:
    """:func:`guard_hook`, then another tool's hook that was there before it."""

    def hook(cache_hit: bool) -> bool:
        guard_hook(cache_hit)
        return bool(previous(cache_hit))

    return hook


def user_context() -> str:
    """The recompile user context: the request a recompile happened in."""
    request = CURRENT.get()
    return f"request_id={request.request_id}"[:256] if request is not None else ""


def root_locations(model_or_fn: Any) -> dict[Any, str]:
    """``{wrapper code: location of the model's own forward}`` for a decorator's wrapper (Hugging Face decorates
    every model's ``forward``) and Dynamo's inline wrapper (the frame of a torch-owned module)."""
    return {
        wrapper: f"{own.co_filename}:{own.co_firstlineno}:{name}"
        for wrapper, (own, name) in entry_codes(model_or_fn, torch_adapter.inline_wrapper_code()).items()
    }
