"""Dynamo FX graphs of a request: capture them, run them node by node, expose nodes as outputs.

Localisation works on the graph Dynamo hands to the backend (torch-level ops, one node per user
expression, ``stack_trace`` in each node's meta), so a diverging node maps straight to a user line.
"""

from __future__ import annotations

import linecache
import os
import re
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

import inferensics.kernels
from inferensics.replay._internal import torch_adapter as ta

_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<fn>\S+)\n(?P<code>[^\n]*)')


@dataclass(frozen=True)
class SourceLine:
    """Where a node came from in the user's code."""

    file: str = ""
    line: int = 0
    text: str = ""


_LIBRARY_DIRS = (str(Path(inferensics.kernels.__file__).parent) + os.sep,)
"""Frames inside these folders are library code (the kernel registry's dispatch), not the user's line."""
_NOT_THE_USERS = (*_LIBRARY_DIRS, str(Path(torch.__file__).parent) + os.sep, str(Path(__file__).parents[1]) + os.sep)
"""Frames of an eager traceback that are not the model's own code: the kernel registry's, torch's own (its modules'
``forward``, as Dynamo's stack traces leave them out) and replay's, which called the model."""


def source_of(node: torch.fx.Node) -> SourceLine:
    """The innermost user frame in ``node.meta['stack_trace']``: the kernel registry's own frames are
    skipped, so an op served through it names the model line that called it."""
    trace = node.meta.get("stack_trace") or ""
    frames = list(_FRAME.finditer(trace))
    if not frames:
        return SourceLine()
    user = [f for f in frames if not f["file"].startswith(_LIBRARY_DIRS)]
    last = (user or frames)[-1]
    file, line = last["file"], int(last["line"])
    text = linecache.getline(file, line).strip() or last["code"].strip()
    return SourceLine(file, line, text)


@dataclass(frozen=True)
class RaisedAt:
    """Where an eager run raised, located without a graph: the operator that raised and the user's line."""

    op: Any = None
    """The ATen or custom operator the exception came out of, or ``None`` (raised outside any operator)."""
    source: SourceLine = field(default_factory=SourceLine)
    """The innermost frame of the model's own code in the traceback (empty when every frame is torch's)."""


class _RaisingOp(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """Records the operator an exception leaves (the innermost one: it is recorded first)."""

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.raised: list[Any] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        try:
            return func(*args, **(kwargs or {}))
        except Exception:
            self.raised.append(func)
            raise


def locate_raise(run: Callable[[], Any], tensors: Sequence[Any]) -> RaisedAt | None:
    """Run ``run`` (an eager call of the model on ``tensors``) and say where it raised, or ``None`` when it did not.

    For a request Dynamo cannot trace (its fake tensors refuse a wrong shape before any graph exists), so no FX node
    names the failing op: the op is the operator the exception left, and the line the innermost frame of the
    model's own code in its traceback, as a node's ``stack_trace`` would give it.
    """
    recorder = _RaisingOp()
    try:
        # The recorder is entered last so it sees each op before the bounds check refuses it.
        with torch.no_grad(), ta.index_bounds_checked(tensors), recorder:
            run()
    except Exception as exc:
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if not f.filename.startswith(_NOT_THE_USERS)]
        source = SourceLine()
        line = frames[-1].lineno if frames else None
        if line:
            text = linecache.getline(frames[-1].filename, line).strip() or (frames[-1].line or "").strip()
            source = SourceLine(frames[-1].filename, line, text)
        custom = [op for op in recorder.raised if ta.is_custom_op(op)]
        return RaisedAt((custom or recorder.raised or [None])[0], source)
    return None


class _NonfiniteOp(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """Records the first operator whose floating output holds a non-finite value, and the model's line that called
    it (read from the Python stack at that moment)."""

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.found: RaisedAt | None = None

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        if self.found is None:
            leaves = [t for t in torch.utils._pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]
            if any(t.is_floating_point() and not bool(torch.isfinite(t).all()) for t in leaves):
                frames = [f for f in traceback.extract_stack() if not f.filename.startswith(_NOT_THE_USERS)]
                source = SourceLine()
                if frames and frames[-1].lineno:
                    text = linecache.getline(frames[-1].filename, frames[-1].lineno).strip()
                    source = SourceLine(frames[-1].filename, frames[-1].lineno, text or (frames[-1].line or "").strip())
                self.found = RaisedAt(func, source)
        return out


def locate_nonfinite(run: Callable[[], Any]) -> RaisedAt | None:
    """Run ``run`` (an eager call of the model) and name the first operator that returned a non-finite value, with
    the innermost line of the model's own code on the stack then; ``None`` when every value stayed finite (or the
    run raised). Used where no FX graph of the request exists to name the node."""
    recorder = _NonfiniteOp()
    try:
        with torch.no_grad(), recorder:
            run()
    except Exception:  # a run that raises is located by locate_raise, not here
        return recorder.found
    return recorder.found


@dataclass
class GraphCall:
    """One call of a compiled Dynamo graph: the graph, the concrete arguments it got and where in the
    compiled frame each placeholder came from (Dynamo's sources, ``L['tokens']``: read while the graph is
    handed to the backend, as Dynamo drops them from the nodes afterwards)."""

    gm: torch.fx.GraphModule
    args: tuple[Any, ...]
    sources: tuple[str, ...] = ()


def recording_backend(calls: list[GraphCall]) -> ta.Backend:
    """A Dynamo backend that runs graphs eagerly and records every call's graph and arguments."""

    def backend(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Callable[..., Any]:
        sources = tuple(ta.graph_input_names(gm))

        def run(*args: Any) -> Any:
            calls.append(GraphCall(gm, args, sources))
            with ta.index_bounds_checked(args):
                return gm(*args)

        return run

    return backend


def compute_nodes(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    """Nodes that compute a floating tensor, in graph order."""
    out = []
    for node in gm.graph.nodes:
        if node.op not in ("call_function", "call_method", "call_module"):
            continue
        value = node.meta.get("example_value")
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            out.append(node)
    return out


@dataclass
class NodeRun:
    """Every node's value from one interpretation of a graph."""

    values: dict[str, Any] = field(default_factory=dict)
    failed_node: str = ""
    error: str = ""


def _to64(x: Any) -> Any:
    return x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x


def _clone(x: Any) -> Any:
    return x.clone() if isinstance(x, torch.Tensor) else x


class _Recorder(torch.fx.Interpreter):
    def __init__(self, gm: torch.fx.GraphModule, sink: NodeRun) -> None:
        super().__init__(gm)
        self.sink = sink

    def run_node(self, n: torch.fx.Node) -> Any:
        try:
            value = super().run_node(n)
        except Exception as exc:
            self.sink.failed_node = n.name
            self.sink.error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            raise
        self.sink.values[n.name] = tree_map(lambda t: t.detach() if isinstance(t, torch.Tensor) else t, value)
        return value


def interpret(gm: torch.fx.GraphModule, args: Sequence[Any], *, fp64: bool) -> NodeRun:
    """Run ``gm`` node by node, in fp64 (floating inputs promoted) or as given; exceptions are recorded."""
    sink = NodeRun()
    inputs = [(_to64(a) if fp64 else a) for a in args]
    inputs = [_clone(a) for a in inputs]
    try:
        with torch.no_grad(), ta.index_bounds_checked(inputs):
            _Recorder(gm, sink).run(*inputs)
    except Exception:
        if not sink.failed_node:
            raise
    return sink


def node_args(node: torch.fx.Node, env: dict[str, Any], cast: Callable[[str, Any], Any]) -> list[Any]:
    """A ``call_function`` node's arguments from ``env`` (by node name) through ``cast``, positional in its
    schema's order (keyword arguments placed by name, defaults filled)."""

    def arg(a: Any) -> Any:
        if isinstance(a, torch.fx.Node):
            return _clone(cast(a.name, env[a.name]))
        return a

    args = list(torch.fx.node.map_aggregate(node.args, arg))
    kwargs = dict(torch.fx.node.map_aggregate(node.kwargs, arg))
    schema = getattr(node.target, "_schema", None)
    if schema is not None:
        for param in schema.arguments[len(args) :]:
            if param.name in kwargs:
                args.append(kwargs[param.name])
            elif param.has_default_value():
                args.append(param.default_value)
    return args


def run_node_alone(
    gm: torch.fx.GraphModule, node: torch.fx.Node, env: dict[str, Any], cast: Callable[[str, Any], Any]
) -> Any:
    """Run one node with its arguments taken from ``env`` (by node name) through ``cast``."""

    def arg(a: Any) -> Any:
        if isinstance(a, torch.fx.Node):
            return _clone(cast(a.name, env[a.name]))
        return a

    args = torch.fx.node.map_aggregate(node.args, arg)
    kwargs = torch.fx.node.map_aggregate(node.kwargs, arg)
    with torch.no_grad():
        if node.op == "call_function":
            return node.target(*args, **kwargs)  # type: ignore[operator]
        if node.op == "call_method":
            self_obj, *rest = args
            return getattr(self_obj, str(node.target))(*rest, **kwargs)
        return gm.get_submodule(str(node.target))(*args, **kwargs)


class _OpRecorder(TorchDispatchMode):  # type: ignore[no-untyped-call]
    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.ops: list[Any] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.ops.append(func)
        return func(*args, **(kwargs or {}))


_TRIVIAL = {
    "detach",
    "alias",
    "view",
    "_unsafe_view",
    "t",
    "expand",
    "clone",
    "_to_copy",
    "lift_fresh",
    "empty",
    "empty_strided",
    "copy_",
    "unsqueeze",
    "squeeze",
    "permute",
    "transpose",
    "reshape",
    "slice",
    "select",
}


def aten_ops_of(gm: torch.fx.GraphModule, node: torch.fx.Node, env: dict[str, Any]) -> list[Any]:
    """The operators (ATen or custom) that ``node`` dispatches to, trivial view/copy ops last."""
    rec = _OpRecorder()
    try:
        # The recorder is entered last so it sees each op before the bounds check refuses it.
        with ta.index_bounds_checked(list(env.values())), rec:
            run_node_alone(gm, node, env, lambda _n, v: v)
    except Exception:
        pass
    seen: list[Any] = []
    for op in rec.ops:
        if op not in seen:
            seen.append(op)
    custom = [op for op in seen if ta.is_custom_op(op)]
    if custom:
        return custom
    return sorted(seen, key=lambda op: getattr(op, "_opname", "") in _TRIVIAL)


def exposing_backend(inner: ta.Backend, names: set[str] | None, sink: dict[str, Any]) -> ta.Backend:
    """Wrap ``inner`` so the named nodes (all compute nodes when ``None``) become extra graph outputs.

    The compiled function strips the extras and stores them in ``sink`` by node name (the first value of
    each name since the sink was last cleared), so the model's outputs are unchanged. The extras are
    computed by the same compiled code, fusion included.
    """

    def backend(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Callable[..., Any]:
        chosen = [n for n in compute_nodes(gm) if names is None or n.name in names]
        output = next(n for n in gm.graph.nodes if n.op == "output")
        original = output.args[0]
        multiple = isinstance(original, tuple | list)
        orig_list = list(original) if multiple else [original]
        if not chosen:
            return inner(gm, example_inputs)
        output.args = (tuple(orig_list + chosen),)
        gm.recompile()
        count = len(orig_list)
        chosen_names = [n.name for n in chosen]
        compiled = inner(gm, example_inputs)

        def run(*args: Any) -> Any:
            values = list(compiled(*args))
            for name, value in zip(chosen_names, values[count:], strict=True):
                # The first call of the request wins: the graph the investigation recorded is its first
                # call, and a model of several graphs (prefill, then decode steps) reuses node names.
                sink.setdefault(name, value.detach() if isinstance(value, torch.Tensor) else value)
            return tuple(values[:count])

        return run

    return backend
