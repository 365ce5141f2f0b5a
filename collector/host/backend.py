"""The compile backend: Inductor's ``compile_fx`` wrapped so that every compiled graph reports its calls.

``torch.compile(model, backend=InductorBackend(...))`` compiles exactly as ``torch.compile(model,
mode=..., options=...)`` would (the mode and options become ``config_patches``), and the returned graph
callable counts its calls and host time into the current request. The per-call path is a context-variable
read and a slot update on the request object, and on the calls that are timed (records.TIMED_FIRST) two clock
reads and another update.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from inferensics.collector.host import torch_adapter
from inferensics.collector.host.records import (
    CURRENT,
    GRAPH_COMPILES,
    TIMED_FIRST,
    TIMED_MASK,
    CompileOrigin,
    GraphSlot,
)
from inferensics.collector.trace.artifacts import NODE_TRACES_ARTIFACT


class InductorBackend:
    """A Dynamo backend around Inductor that tags each compiled graph with a :class:`GraphSlot`."""

    def __init__(
        self,
        *,
        mode: str | None = None,
        options: Mapping[str, Any] | None = None,
        provenance_level: int = 0,
        origin: CompileOrigin | None = None,
        gate: Callable[[Any, list[Any], Callable[[], Any]], Callable[..., Any]] | None = None,
    ) -> None:
        # The trace sink finds this object on Dynamo's stack when a compile starts and labels the
        # compile's records with it (records.ORIGIN_ATTR): the label follows the compiled model.
        self.inferensics_origin = origin or CompileOrigin("")
        self.config_patches: dict[str, Any] = {**torch_adapter.mode_options(mode), **dict(options or {})}
        self.provenance_level = provenance_level
        self.gate = gate  # a release bundle's gate (bundle_guard): decides, then compiles through the callback
        self.slots: list[GraphSlot] = []
        self._lock = threading.Lock()

    def __call__(self, gm: Any, example_inputs: list[Any]) -> Callable[..., Any]:
        """Compile ``gm`` with Inductor and return the counting wrapper."""
        try:
            compile_id = torch_adapter.current_compile_id()
        except Exception:
            compile_id = ""
        request = CURRENT.get()
        t0 = time.perf_counter_ns()
        if torch_adapter.effective_provenance_level(self.provenance_level, self.config_patches) > 0:
            # Inductor's kernel stack traces come from its FX-graph cache on a hit (recorded by whoever
            # compiled first, or by a release bundle's builder in another checkout); these name this
            # process's files and lines (see NODE_TRACES_ARTIFACT).
            torch_adapter.emit_node_stack_traces(gm, NODE_TRACES_ARTIFACT)
        try:
            with torch_adapter.provenance_tracking(self.provenance_level):
                if self.gate is None:
                    compiled = torch_adapter.compile_fx(gm, example_inputs, self.config_patches)
                else:
                    patches = self.config_patches
                    compiled = self.gate(
                        gm, example_inputs, lambda: torch_adapter.compile_fx(gm, example_inputs, patches)
                    )
        finally:
            if request is not None:
                request.compile_ns += time.perf_counter_ns() - t0
        with self._lock:
            slot = GraphSlot(len(self.slots), compile_id)
            self.slots.append(slot)
            GRAPH_COMPILES.add(compile_id)
        return _counting(compiled, slot)


def _counting(compiled: Callable[..., Any], slot: GraphSlot) -> Callable[..., Any]:
    # Dynamo calls what a backend returns inside its own disable wrapper (Dynamo held off), so the one
    # Inductor put around the graph is left out here: three frames and four set_eval_frame calls less on
    # every call (torch_adapter.undisabled), the cost a plain torch.compile does not pay.
    compiled = torch_adapter.undisabled(compiled)
    get = CURRENT.get
    clock = time.perf_counter_ns
    first, mask = TIMED_FIRST, TIMED_MASK

    def run(*args: Any) -> Any:
        request = get()
        if request is None:
            return compiled(*args)
        # RawRequest.count_call's common case inlined: this runs once per compiled-graph call.
        if request.graph0 is slot:
            n = request.graph0_calls
            request.graph0_calls = n + 1
            if n >= first and n & mask:  # counted, not timed (records.TIMED_EVERY)
                return compiled(*args)
            t0 = clock()
            out = compiled(*args)
            request.graph0_ns += clock() - t0
            return out
        if not request.count_call(slot):
            return compiled(*args)
        t0 = clock()
        out = compiled(*args)
        request.add_ns(slot, clock() - t0)
        return out

    run.inferensics_slot = slot  # type: ignore[attr-defined]
    return run
