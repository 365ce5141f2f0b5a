"""The one module of replay that touches PyTorch's private compile APIs (ARCHITECTURE decision 8).

Replay re-runs a graph under many compiler variations (a decomposition removed, a lowering made a
fallback, a pass switched off, fusion off) in the calling process, so it needs Inductor's tables and
config slots directly. Each touch lives here, so a torch minor that renames one breaks one function.
Available on torch 2.11 (the H200 hosts) and 2.13 (here); see shared/research/torch-compile-internals.md.

The FX graph and AOTAutograd caches are turned off inside :func:`fresh_compiles`: their keys do not
cover patched lowerings, decompositions or passes, so a variation could be served a stale entry.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import torch
from torch.utils._python_dispatch import TorchDispatchMode

TRACE_LOGGER: Final = "torch.__trace"
CUSTOM_PASS_SLOTS: Final = (
    "pre_grad_custom_pass",
    "joint_custom_pre_pass",
    "joint_custom_post_pass",
    "post_grad_custom_pre_pass",
    "post_grad_custom_post_pass",
)
"""Inductor config slots that hold user graph passes, in the order Inductor runs them."""

Backend = Callable[[torch.fx.GraphModule, Sequence[Any]], Callable[..., Any]]


def reset() -> None:
    """Forget every compiled frame, so the next call compiles again."""
    torch._dynamo.reset()


@contextlib.contextmanager
def fresh_compiles() -> Iterator[None]:
    """Compile without the FX graph and AOTAutograd caches (their keys miss patched compiler code)."""
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config

    with (
        inductor_config.patch(fx_graph_cache=False, fx_graph_remote_cache=False, autotune_local_cache=False),
        functorch_config.patch(enable_autograd_cache=False),
    ):
        yield


@contextlib.contextmanager
def inductor_config(patches: dict[str, Any]) -> Iterator[None]:
    """Apply Inductor config patches (dotted names such as ``trace.provenance_tracking_level``)."""
    import torch._inductor.config as cfg

    with cfg.patch(patches):
        yield


def inductor_config_value(name: str) -> Any:
    """Read one Inductor config value."""
    import torch._inductor.config as cfg

    obj: Any = cfg
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def active_custom_passes() -> list[str]:
    """The custom-pass config slots that hold a pass now."""
    return [slot for slot in CUSTOM_PASS_SLOTS if inductor_config_value(slot) is not None]


def custom_pass_name(slot: str) -> str:
    """A readable name for the pass in ``slot`` (its class or function name)."""
    value = inductor_config_value(slot)
    if value is None:
        return ""
    name = getattr(value, "__qualname__", None) or type(value).__qualname__
    return f"{slot}={name}"


def inductor_decompositions() -> dict[Any, Callable[..., Any]]:
    """Inductor's decomposition table exactly as ``compile_fx`` would pick it now.

    ``fast_random_decomps`` caches a copy of ``decompositions`` on first use: a caller that patches
    ``decompositions`` later must patch the cached table too, or Inductor never sees the patch.
    """
    from torch._inductor import decomposition

    return dict(decomposition.select_decomp_table())


def inductor_backend(decompositions: dict[Any, Callable[..., Any]] | None = None) -> Backend:
    """Inductor's ``compile_fx``, optionally with a given decomposition table."""
    from torch._inductor.compile_fx import compile_fx

    if decompositions is None:
        return compile_fx  # type: ignore[return-value]
    return functools.partial(compile_fx, decompositions=decompositions)  # type: ignore[return-value]


def aot_eager_backend(decompositions: dict[Any, Callable[..., Any]] | None) -> Backend:
    """AOTAutograd with no codegen: ``aot_eager`` (no table) or ``aot_eager_decomp_partition``."""
    from torch._dynamo.backends.common import aot_autograd
    from torch._dynamo.backends.debugging import boxed_nop

    if decompositions is None:
        return aot_autograd(fw_compiler=boxed_nop)
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    return aot_autograd(
        fw_compiler=boxed_nop,
        bw_compiler=boxed_nop,
        decompositions=decompositions,
        partition_fn=min_cut_rematerialization_partition,
    )


def has_lowering(op: Any) -> bool:
    """Whether Inductor lowers ``op`` itself (rather than calling the ATen kernel)."""
    from torch._inductor import lowering

    return op in lowering.lowerings and op not in lowering.fallbacks


@contextlib.contextmanager
def lowerings_as_fallbacks(ops: Sequence[Any]) -> Iterator[None]:
    """Make Inductor call the ATen kernel for ``ops`` instead of lowering them; restore afterwards."""
    from torch._inductor import lowering

    saved = {op: lowering.lowerings.get(op) for op in ops}
    realized = set(lowering.needs_realized_inputs)
    try:
        for op in ops:
            lowering.lowerings.pop(op, None)
            lowering.make_fallback(op, warn=False, override_decomp=True)  # type: ignore[no-untyped-call]
        yield
    finally:
        for op, fn in saved.items():
            lowering.fallbacks.discard(op)
            if fn is None:
                lowering.lowerings.pop(op, None)
            else:
                lowering.lowerings[op] = fn
        lowering.needs_realized_inputs.clear()
        lowering.needs_realized_inputs.update(realized)


@contextlib.contextmanager
def fusion_disabled() -> Iterator[None]:
    """Refuse every fusion in Inductor's scheduler (``max_fusion_size=1`` alone leaves some on CPU)."""
    from torch._inductor import scheduler

    saved = scheduler.Scheduler.can_fuse, scheduler.Scheduler.fuse_nodes
    scheduler.Scheduler.can_fuse = lambda self, *args, **kwargs: False  # type: ignore[method-assign]
    scheduler.Scheduler.fuse_nodes = lambda self, nodes: nodes  # type: ignore[method-assign]
    try:
        yield
    finally:
        scheduler.Scheduler.can_fuse, scheduler.Scheduler.fuse_nodes = saved  # type: ignore[method-assign]


@dataclass
class CompileTrace:
    """What Inductor reported about the compiles inside :func:`capture_compile_trace`."""

    output_code: list[str] = field(default_factory=list)
    """Generated wrapper modules, in compile order."""
    node_mappings: list[dict[str, Any]] = field(default_factory=list)
    """``inductor_provenance_tracking_node_mappings`` payloads (pre-grad → post-grad → kernel)."""
    fx_cache_keys: list[str] = field(default_factory=list)
    """FX-graph-cache keys hit or missed."""


class _TraceHandler(logging.Handler):
    def __init__(self, sink: CompileTrace) -> None:
        super().__init__(logging.DEBUG)
        self.sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        import json

        meta: dict[str, Any] = getattr(record, "metadata", {}) or {}
        payload = getattr(record, "payload", None)
        try:
            if "inductor_output_code" in meta and payload:
                self.sink.output_code.append(str(payload))
            artifact = meta.get("artifact")
            if isinstance(artifact, dict) and payload:
                name = artifact.get("name", "")
                if name == "inductor_provenance_tracking_node_mappings":
                    self.sink.node_mappings.append(json.loads(payload))
                elif name in ("fx_graph_cache_hit", "fx_graph_cache_miss"):
                    self.sink.fx_cache_keys.append(str(json.loads(payload).get("key", "")))
        except Exception:  # a trace sink must not fail the compile it observes
            return


@contextlib.contextmanager
def capture_compile_trace(provenance: bool = True) -> Iterator[CompileTrace]:
    """Collect output code and provenance mappings of the compiles run inside the block."""
    sink = CompileTrace()
    handler = _TraceHandler(sink)
    logger = logging.getLogger(TRACE_LOGGER)
    logger.addHandler(handler)
    try:
        if provenance:
            with inductor_config({"trace.provenance_tracking_level": 1}):
                yield sink
        else:
            yield sink
    finally:
        logger.removeHandler(handler)


FAKE_TENSOR_LOGGER: Final = "torch._subclasses.fake_tensor"
META_FAILURE: Final = "failed while attempting to run meta"
"""How the fake-tensor logger's record of an op that cannot take its inputs starts (``log.exception``)."""


@contextlib.contextmanager
def quiet_meta_failures() -> Iterator[None]:
    """Drop the fake-tensor logger's record of an op that cannot take its inputs, and torch.fx's printed
    traceback of a traced graph that raises, for the ``with`` block only.

    Tracing a request of the wrong shape makes Dynamo's fake tensors log the failing op's traceback at ERROR
    on the terminal; the same error reaches the investigation as an exception and its verdict names it, so the
    log line says nothing more. The logger's other records still pass, and its filters are as before after.
    """

    def not_a_meta_failure(record: logging.LogRecord) -> bool:  # one per block: a nested one removes only its own
        return not str(record.msg).startswith(META_FAILURE)

    logger = logging.getLogger(FAKE_TENSOR_LOGGER)
    logger.addFilter(not_a_meta_failure)
    try:
        with _quiet_traced_graph_errors():
            yield
    finally:
        logger.removeFilter(not_a_meta_failure)


@contextlib.contextmanager
def _quiet_traced_graph_errors() -> Iterator[None]:
    """Keep torch.fx from printing the traceback of an error raised inside a traced graph's forward.

    ``torch.fx``'s ``_WrappedCall`` prints that traceback to stderr (``Call using an FX-traced Module ...``)
    and then re-raises the error; a request of the wrong dtype makes Dynamo's graph raise so on its eager run.
    The error still propagates (with its traceback kept) and the verdict names it. A torch without the hook
    keeps its print: noisier, never wrong.
    """
    from torch.fx import graph_module

    wrapped = getattr(graph_module, "_WrappedCall", None)
    original = vars(wrapped).get("__call__") if isinstance(wrapped, type) else None
    if wrapped is None or original is None:
        yield
        return

    def call_without_print(self: Any, obj: Any, *args: Any, **kwargs: Any) -> Any:
        if self.cls_call is not None:
            return self.cls_call(obj, *args, **kwargs)
        return super(self.cls, obj).__call__(*args, **kwargs)

    wrapped.__call__ = call_without_print
    try:
        yield
    finally:
        wrapped.__call__ = original


@contextlib.contextmanager
def quiet_compiles() -> Iterator[list[str]]:
    """Keep the compiler's warnings (recompiles, disabled caches) out of the caller's warning filters.

    The messages are collected, so a caller can report them.
    """
    seen: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield seen
    seen.extend(str(w.message) for w in caught)


def graph_input_names(gm: torch.fx.GraphModule) -> list[str]:
    """The source of each placeholder of a Dynamo graph, such as ``L['x']``."""
    names: list[str] = []
    for node in gm.graph.nodes:
        if node.op != "placeholder":
            continue
        grapharg = node.meta.get("grapharg")
        name = getattr(getattr(grapharg, "source", None), "name", None)  # a method on older torch, a property now
        name = name() if callable(name) else name
        names.append(name if isinstance(name, str) and name else node.name)
    return names


def op_name(op: Any) -> str:
    """``aten.rsqrt`` for ATen ops, ``mylib::rms_norm`` for custom ops, the qualified name otherwise."""
    if isinstance(op, torch._ops.OpOverload | torch._ops.OpOverloadPacket):
        qualified = str(op.name() if isinstance(op, torch._ops.OpOverload) else op._qualified_op_name)  # type: ignore[no-untyped-call]
        namespace, _, rest = qualified.partition("::")
        base = rest.split(".")[0]
        return f"aten.{base}" if namespace in ("aten", "prims") else f"{namespace}::{base}"
    module = getattr(op, "__module__", "") or ""
    name = getattr(op, "__qualname__", None) or getattr(op, "__name__", None) or str(op)
    return f"{module}.{name}" if module else str(name)


def is_custom_op(op: Any) -> bool:
    """Whether ``op`` is an operator outside ATen/prims (a user's ``torch.library`` op)."""
    return isinstance(op, torch._ops.OpOverload) and op.namespace not in ("aten", "prims", "_c10d_functional")


def _bounds(what: str, index: torch.Tensor, size: int, *, negative: bool) -> None:
    if index.numel() == 0 or index.is_floating_point() or index.dtype == torch.bool:
        return
    low, high = int(index.min()), int(index.max())
    if high >= size or low < (-size if negative else 0):
        raise IndexError(f"index out of range in self: {what} indices span [{low}, {high}] for a size of {size}")


def _check_index_args(func: Any, args: Sequence[Any]) -> None:
    aten = torch.ops.aten
    if func is aten.embedding.default:
        _bounds("embedding", args[1], int(args[0].shape[0]), negative=False)
    elif func in (aten.index_select.default, aten.gather.default):
        source, dim, index = args[0], int(args[1]), args[2]
        _bounds(op_name(func), index, int(source.shape[dim]) if source.dim() else 1, negative=False)
    elif func is aten.index.Tensor:
        source, indices = args[0], args[1]
        for dim, index in enumerate(indices):
            if isinstance(index, torch.Tensor):
                _bounds("index", index, int(source.shape[dim]), negative=True)


class _IndexBounds(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """Raises ``IndexError`` before an indexing op reads out of range (a device assert would kill the context)."""

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]

    def __torch_dispatch__(
        self, func: Any, types: Any, args: Sequence[Any] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        _check_index_args(func, args)
        return func(*args, **(kwargs or {}))


def index_bounds_checked(tensors: Sequence[Any]) -> contextlib.AbstractContextManager[Any]:
    """Check indexing ops' bounds on the host while eager code runs on an accelerator.

    On a GPU an out-of-range index is a device-side assert that poisons the CUDA context for the rest of the
    process, so the investigation could not go on; on CPU the op raises ``IndexError`` itself, and nothing is
    added there.
    """
    if any(isinstance(t, torch.Tensor) and t.device.type != "cpu" for t in tensors):
        return _IndexBounds()
    return contextlib.nullcontext()
