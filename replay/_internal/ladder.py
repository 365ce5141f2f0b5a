"""Running one request through one rung of the ladder: a backend, a config, a history of calls."""

from __future__ import annotations

import contextlib
import inspect
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from inferensics.bundle.errors import error_line
from inferensics.replay._internal import torch_adapter as ta
from inferensics.replay._internal.providers import forced_reference

Call = tuple[tuple[Any, ...], dict[str, Any]]
"""One call of the model: positional and keyword arguments."""


def as_call(inputs: Any) -> Call:
    """Normalise what a user passes as a request: a tensor, a tuple/list of arguments, or a dict of kwargs."""
    if isinstance(inputs, dict):
        return (), dict(inputs)
    if isinstance(inputs, tuple | list):
        return tuple(inputs), {}
    return (inputs,), {}


def input_names(model: Any, call: Call) -> list[tuple[str, Any]]:
    """Name every argument of a call by the model's ``forward`` signature (``x``, ``input_ids``)."""
    args, kwargs = call
    try:
        params = [p for p in inspect.signature(model.forward if hasattr(model, "forward") else model).parameters]
    except (TypeError, ValueError):
        params = []
    named = [(params[i] if i < len(params) else f"arg{i}", a) for i, a in enumerate(args)]
    return named + list(kwargs.items())


def to_device(value: Any, device: str | torch.device) -> Any:
    """Move the tensors of a value to ``device``."""
    from torch.utils._pytree import tree_map

    return tree_map(lambda t: t.to(device) if isinstance(t, torch.Tensor) else t, value)


def serving_dtype(model: Any, call: Call) -> torch.dtype:
    """The floating dtype the request runs in: the model's first floating parameter, else the inputs'."""
    if isinstance(model, torch.nn.Module):
        for p in model.parameters():
            if p.is_floating_point():
                return p.dtype
    for _, v in input_names(model, call):
        if isinstance(v, torch.Tensor) and v.is_floating_point():
            return v.dtype
    return torch.get_default_dtype()


def call_model(model: Any, call: Call) -> Any:
    """Run one call without autograd."""
    args, kwargs = call
    with torch.no_grad():
        return model(*args, **kwargs)


@dataclass
class Variation:
    """What a rung changes in the compiler."""

    backend: str = "inductor"
    """``inductor``, ``aot_eager`` or ``aot_eager_decomp_partition``."""
    config: dict[str, Any] = field(default_factory=dict)
    """Inductor config patches."""
    decompositions: dict[Any, Any] | None = None
    """A decomposition table to use instead of Inductor's."""
    fallbacks: tuple[Any, ...] = ()
    """Ops whose lowering becomes an ATen fallback."""
    no_fusion: bool = False
    """Refuse every fusion in the scheduler."""
    history: bool = True
    """Run the warm-up calls first (the serving history); off compiles at the request's shape only."""
    forced: tuple[str, ...] = ()
    """Kernel-registry ops served by their reference provider (the ``kernel_provider`` rung)."""
    dynamic: bool | str | None = "as_served"
    """``as_served`` keeps the caller's ``dynamic``; otherwise overrides it."""
    label: str = ""

    def name(self) -> str:
        """The rung's readable name."""
        return self.label or self.backend


@dataclass
class RungRun:
    """The outcome of running the request through one rung."""

    output: Any = None
    error: str = ""
    seconds: float = 0.0
    trace: ta.CompileTrace = field(default_factory=ta.CompileTrace)
    warnings: list[str] = field(default_factory=list)


@dataclass
class Case:
    """A request and what produced its served artifact."""

    model: Any
    request: Call
    history: list[Call]
    compile_kwargs: dict[str, Any]
    dtype: torch.dtype

    def compile_options(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """``torch.compile`` keywords without backend/mode/options, and the Inductor patches those imply."""
        kwargs = dict(self.compile_kwargs)
        kwargs.pop("backend", None)
        patches: dict[str, Any] = {}
        mode = kwargs.pop("mode", None)
        if mode:
            patches.update(torch._inductor.list_mode_options(mode, kwargs.get("dynamic")))
        patches.update(kwargs.pop("options", None) or {})
        return kwargs, patches


def _backend_for(case: Case, variation: Variation, extra: ta.Backend | None) -> ta.Backend:
    if variation.backend == "inductor":
        inner = ta.inductor_backend(variation.decompositions)
    elif variation.backend == "aot_eager":
        inner = ta.aot_eager_backend(None)
    else:
        table = variation.decompositions if variation.decompositions is not None else ta.inductor_decompositions()
        inner = ta.aot_eager_backend(table)
    return extra if extra is not None else inner


@contextlib.contextmanager
def _compiler_state(variation: Variation, patches: dict[str, Any], fresh: bool) -> Iterator[None]:
    with contextlib.ExitStack() as stack:
        if fresh:
            stack.enter_context(ta.fresh_compiles())
        merged = {**patches, **variation.config}
        if merged:
            stack.enter_context(ta.inductor_config(merged))
        if variation.fallbacks:
            stack.enter_context(ta.lowerings_as_fallbacks(variation.fallbacks))
        if variation.no_fusion:
            stack.enter_context(ta.fusion_disabled())
        if variation.forced:
            stack.enter_context(forced_reference(variation.forced))
        yield


def run_rung(
    case: Case,
    variation: Variation,
    *,
    fresh: bool = True,
    wrap: Any = None,
    provenance: bool = True,
    before_request: Any = None,
) -> RungRun:
    """Compile the model under ``variation``, replay the history, then run the request.

    Args:
        case: The request.
        variation: The compiler variation.
        fresh: Turn the FX graph and AOTAutograd caches off (every rung but the served one).
        wrap: A function taking the rung's backend and returning the backend to compile with.
        provenance: Record Inductor's provenance mappings and output code.
        before_request: Called between the history and the request (to clear a sink).
    """
    result = RungRun()
    ta.reset()
    kwargs, patches = case.compile_options()
    if variation.dynamic != "as_served":
        kwargs["dynamic"] = variation.dynamic
    backend = _backend_for(case, variation, None)
    if wrap is not None:
        backend = wrap(backend)
    start = time.perf_counter()
    with ta.quiet_compiles() as seen, ta.capture_compile_trace(provenance) as trace:
        try:
            with _compiler_state(variation, patches, fresh):
                compiled = torch.compile(case.model, backend=backend, **kwargs)
                if variation.history:
                    for call in case.history:
                        call_model(compiled, call)
                if before_request is not None:
                    before_request()
                result.output = call_model(compiled, case.request)
        except Exception as exc:
            result.error = error_line(exc)
    result.seconds = time.perf_counter() - start
    result.trace = trace
    result.warnings = seen
    ta.reset()
    return result


def run_served(case: Case) -> RungRun:
    """The request as it was served: the caller's backend and caches, after the history."""
    result = RungRun()
    ta.reset()
    start = time.perf_counter()
    with ta.quiet_compiles() as seen, ta.capture_compile_trace(False) as trace:
        try:
            compiled = torch.compile(case.model, **case.compile_kwargs)
            for call in case.history:
                call_model(compiled, call)
            result.output = call_model(compiled, case.request)
        except Exception as exc:
            result.error = error_line(exc)
    result.seconds = time.perf_counter() - start
    result.trace = trace
    result.warnings = seen
    ta.reset()
    return result


def seq(values: Sequence[Any]) -> list[Any]:
    """A list copy."""
    return list(values)
