"""Every touch of PyTorch's private modules by the kernel registry, in one place.

The registry needs three things PyTorch keeps private: whether a call is being traced by a compiler (its
arguments are fake tensors), the id of the compile in progress, and the structured trace log, where a
compiled graph's provider decisions are written as an artifact beside Inductor's own (the host SDK's
trace sink and the trace-log importer read it from there). Each is guarded: a torch without the API reads
as "not compiling" or "no log", never an error in the serving path.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

import torch

from inferensics.schema.events import KERNEL_DECISIONS_ARTIFACT as DECISIONS_ARTIFACT


def tracing(args: Iterable[Any]) -> bool:
    """Whether any tensor in ``args`` is a fake tensor (Dynamo or AOTAutograd tracing a graph)."""
    try:
        from torch._guards import detect_fake_mode

        return detect_fake_mode(tuple(a for a in args if isinstance(a, torch.Tensor))) is not None
    except Exception:
        return False


def compile_id() -> str:
    """The compile in progress as Dynamo prints it (``0/1``); empty outside a compile."""
    try:
        from torch._guards import CompileContext

        cid = CompileContext.current_compile_id()
        return "" if cid is None else str(cid)
    except Exception:
        return ""


def emit_decisions(payload: Callable[[], list[dict[str, Any]]]) -> None:
    """Write provider decisions into the structured trace of the compile in progress (lazily: the payload is
    built only when a trace handler listens)."""
    try:
        from torch._logging import trace_structured  # type: ignore[attr-defined]

        trace_structured(
            "artifact",
            metadata_fn=lambda: {"name": DECISIONS_ARTIFACT, "encoding": "json"},
            payload_fn=lambda: json.dumps(payload(), sort_keys=True),
        )
    except Exception:
        return


def compile_reference(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` compiled by Inductor alone (the op left to the compiler), one graph per shape."""
    return torch.compile(fn, fullgraph=True, dynamic=False)
