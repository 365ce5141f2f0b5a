"""The recording backend: Inductor's ``compile_fx`` wrapped to record each graph's signature, cache keys,
output code and compile time, and to count which graph served which call.

The **graph signature** is computed before compiling, from the Dynamo graph's code (comments, which hold
file paths, stripped) and its input metadata: a host matches it against the bundle before deciding whether
it may compile. The FX-graph-cache key, learned during the compile, proves which code served.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from inferensics.bundle import torch_adapter
from inferensics.bundle.canonical import sha256_hex
from inferensics.bundle.locations import code_location
from inferensics.schema.locations import Entry


def _render_input(x: Any) -> str:
    if isinstance(x, torch.Tensor):
        shape = ",".join(str(d) for d in x.shape)
        stride = ",".join(str(d) for d in x.stride()) if x.layout == torch.strided else ""
        return f"{str(x.dtype).removeprefix('torch.')}[{shape}]/{stride}@{x.device.type}"
    if isinstance(x, torch.SymInt):
        return f"sym:{x.node.expr}" if hasattr(x, "node") else "sym"
    if isinstance(x, bool | int | float):
        return repr(x)
    return type(x).__name__


def graph_inputs(example_inputs: list[Any]) -> str:
    """The graph's input metadata as one line (dtype[shape]/stride@device per input)."""
    return ";".join(_render_input(x) for x in example_inputs)


def graph_input_values(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> list[Any]:
    """The graph's inputs as Dynamo traced them (the placeholders' example values: a dynamic dimension is a
    symbol there, e.g. ``int64[s52,s27]``), else ``example_inputs`` (concrete sizes).

    A dynamic graph so has one signature whatever the sizes of the call that compiled it first.
    """
    values = [n.meta.get("example_value") for n in gm.graph.nodes if n.op == "placeholder"]
    if len(values) == len(example_inputs) and all(v is not None for v in values):
        return values
    return example_inputs


_SYMBOLIC_SIZES = re.compile(r"\[([^\]]*)\]")


def dynamic_positions(inputs: str) -> tuple[int, ...]:
    """The positions of a graph's inputs (:func:`graph_inputs` of its traced values) whose size is symbolic: each
    tensor with a symbol among its sizes, and each ``sym:`` input whose symbol no such tensor has (a dynamic integer
    of its own; one that is a tensor's size adds nothing). Empty for a static graph."""
    entries = inputs.split(";") if inputs else []
    tensors: dict[int, set[str]] = {}
    for i, entry in enumerate(entries):
        sizes = _SYMBOLIC_SIZES.search(entry) if not entry.startswith("sym:") else None
        symbols = {d.strip() for d in sizes.group(1).split(",") if not d.strip().isdigit()} if sizes else set()
        symbols.discard("")
        if symbols:
            tensors[i] = symbols
    in_tensors = set().union(*tensors.values()) if tensors else set()
    own = {i for i, e in enumerate(entries) if e.startswith("sym:") and e.removeprefix("sym:") not in in_tensors}
    return tuple(sorted({*tensors, *own}))


def call_shape(args: Sequence[Any], positions: Sequence[int]) -> str:
    """The concrete sizes of a call's inputs at ``positions`` (:func:`dynamic_positions`): ``[5,8]`` per tensor,
    the value of an integer, ``;`` between them."""
    out = []
    for i in positions:
        x = args[i] if i < len(args) else None
        out.append(f"[{','.join(map(str, x.shape))}]" if isinstance(x, torch.Tensor) else repr(x))
    return ";".join(out)


def _code(gm: torch.fx.GraphModule) -> str:
    return "\n".join(line for line in gm.code.splitlines() if line.strip() and not line.strip().startswith("#"))


def graph_code_digest(gm: torch.fx.GraphModule) -> str:
    """sha256 of the graph's code without comments (no input metadata)."""
    return sha256_hex(_code(gm).encode())


def graph_signature(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> str:
    """sha256 of the graph's code without comments, plus its input metadata (see :func:`graph_input_values`)."""
    return sha256_hex(f"{_code(gm)}\n--\n{graph_inputs(graph_input_values(gm, example_inputs))}".encode())


_AOT_ID = re.compile(r"^# AOT ID: .*$", re.MULTILINE)


def normalise_output_code(code: str, cache_dir: str = "") -> str:
    """Output code with the cache directory replaced by ``$CACHE`` and the process-local AOT id dropped (both
    differ per process, not per program)."""
    code = _AOT_ID.sub("# AOT ID: -", code)
    if cache_dir:
        code = code.replace(cache_dir, "$CACHE")
    return code


@dataclass
class GraphCapture:
    """What one compile of one graph produced."""

    index: int
    signature: str
    inputs: str
    compile_id: str
    graph_code: str = ""
    """sha256 of the graph's code alone (:func:`graph_code_digest`)."""
    fx_key: str = ""
    aot_key: str = ""
    fx_status: str = ""
    """``hit``, ``miss`` or ``bypass`` of the FX-graph cache (empty: the cache was off or said nothing)."""
    fx_bypass_reason: str = ""
    """Why Inductor bypassed its FX-graph cache for this graph, as it said (``bypass`` only)."""
    output_code: str = ""
    compile_s: float = 0.0
    calls: int = 0
    guards: str = ""
    code_location: str = ""
    """``path:line:name`` of the frame Dynamo traced (``inferensics.bundle.locations``)."""
    dynamic: tuple[int, ...] = ()
    """The positions of its inputs with a symbolic size (:func:`dynamic_positions`); empty for a static graph."""
    served_shapes: set[str] = field(default_factory=set)
    """The concrete sizes at those positions of each call it served (:func:`call_shape`), when the backend
    records them (a build's qualification)."""
    sources: tuple[str, ...] = ()
    """Where Dynamo took each input from (``L['x']``, or the module's ``L['self']...`` parameters and buffers), in
    the order of :attr:`inputs` (``""`` where it recorded none): a miss names the model's inputs apart from them."""


def new_capture(
    gm: torch.fx.GraphModule, example_inputs: list[Any], index: int = -1, entries: dict[Any, Entry] | None = None
) -> GraphCapture:
    """The record of a graph about to be compiled: its signature, input metadata and frame's location."""
    inputs = graph_inputs(graph_input_values(gm, example_inputs))
    return GraphCapture(
        index=index,
        signature=graph_signature(gm, example_inputs),
        inputs=inputs,
        compile_id=torch_adapter.current_compile_id(),
        graph_code=graph_code_digest(gm),
        code_location=code_location(torch_adapter.compiling_code(), entries),
        dynamic=dynamic_positions(inputs),
        sources=tuple(torch_adapter.graph_input_sources(gm)),
    )


def fill_from_trace(g: GraphCapture, events: list[tuple[str, dict[str, Any], str]], cache_dir: str = "") -> None:
    """Set the FX and AOTAutograd cache keys, FX-cache status and output code from a compile's trace events."""
    for name, _md, payload in events:
        if name.startswith("fx_graph_cache_"):
            info = torch_adapter.payload_json(payload)
            g.fx_key = str(info.get("key", g.fx_key))
            g.fx_status = name.removeprefix("fx_graph_cache_")
            g.fx_bypass_reason = str(info.get("cache_bypass_reason", ""))
        elif name.startswith("aotautograd_cache_"):
            g.aot_key = str(torch_adapter.payload_json(payload).get("key", g.aot_key))
        elif name == "inductor_output_code":
            g.output_code = normalise_output_code(payload, cache_dir)


@dataclass
class RecordingBackend:
    """A Dynamo backend: ``torch.compile(model, backend=RecordingBackend(patches))``.

    Args:
        config_patches: Inductor options (a mode's options merged with explicit ones).
        cache_dir: The Inductor cache directory in use (normalised out of output code).
    """

    config_patches: Mapping[str, Any] = field(default_factory=dict)
    cache_dir: str = ""
    graphs: list[GraphCapture] = field(default_factory=list)
    gate: Callable[[GraphCapture, Any], Callable[..., Any] | None] | None = None
    """Called with the graph and its ``GraphModule`` before compiling; a callable it returns serves the graph
    instead (eager, refusal)."""
    on_compiled: Callable[[GraphCapture, Callable[..., Any]], Callable[..., Any]] | None = None
    """Called after each compile with its keys and time filled in and what it compiled; returns what serves the
    graph (that, or a wrapper of it)."""
    record_shapes: bool = False
    """Keep the concrete sizes each call of a dynamic graph served (:attr:`GraphCapture.served_shapes`)."""
    entries: dict[Any, Entry] = field(default_factory=dict)
    """The compiled model's decorated ``forward``, if any (:func:`~inferensics.schema.locations.entry_codes`)."""

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        """Compile ``gm`` (or let the gate serve it) and return the counting callable."""
        g = new_capture(gm, example_inputs, len(self.graphs), self.entries)
        self.graphs.append(g)
        if self.gate is not None:
            replacement = self.gate(g, gm)
            if replacement is not None:
                return replacement
        t0 = time.perf_counter()
        with torch_adapter.capture_compiles() as cap:
            compiled = torch_adapter.compile_fx(gm, example_inputs, self.config_patches)
        g.compile_s = time.perf_counter() - t0
        fill_from_trace(g, cap.events, self.cache_dir)
        if self.on_compiled is not None:
            compiled = self.on_compiled(g, compiled)
        return _counting(compiled, g, record_shapes=self.record_shapes and bool(g.dynamic))


def _counting(compiled: Callable[..., Any], g: GraphCapture, *, record_shapes: bool = False) -> Callable[..., Any]:
    if record_shapes:

        def recording(*args: Any) -> Any:
            g.calls += 1
            g.served_shapes.add(call_shape(args, g.dynamic))
            return compiled(*args)

        return recording

    def run(*args: Any) -> Any:
        g.calls += 1
        return compiled(*args)

    return run
