"""The live trace sink: a ``logging.Handler`` on ``torch.__trace`` that queues compile records.

It runs inside Dynamo's and Inductor's compile critical sections, so it only filters by record kind,
notes which request was active, and enqueues; decoding and assembly happen on the background thread
with the same decoder the log importer uses.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Final

from inferensics.collector.host import torch_adapter
from inferensics.collector.host.queueing import BoundedQueue
from inferensics.collector.host.records import CURRENT, GRAPH_COMPILES, ORIGIN_ATTR
from inferensics.collector.trace.artifacts import NODE_TRACES_ARTIFACT
from inferensics.collector.trace.envelope import RESERVED
from inferensics.schema.events import KERNEL_DECISIONS_ARTIFACT

SKIPPED: Final = frozenset(
    {
        "chromium_event",
        "str",
        "describe_tensor",
        "describe_storage",
        "describe_source",
        "create_symbol",
        "guard_added_fast",
        "guard_added",  # shape guards (TORCH_DTRACE): a live compile keeps its whole guard tree as a blob
        "aot_inference_graph",
        "aot_forward_graph",
        "aot_backward_graph",
        "aot_joint_graph",
        "inductor_post_grad_graph",
        "graph_dump",
    }
)
"""Kinds never forwarded (high-volume timing and fake-tensor detail, intermediate graphs)."""
KEPT_ARTIFACTS: Final = frozenset(
    {
        "recompile_reasons",
        "dynamo_graph_break_reason",
        "dynamo_error",
        "fx_graph_cache_hit",
        "fx_graph_cache_miss",
        "fx_graph_cache_bypass",
        "aotautograd_cache_hit",
        "aotautograd_cache_miss",
        "aotautograd_cache_bypass",
        "inductor_provenance_tracking_node_mappings",
        "inductor_provenance_tracking_kernel_stack_traces",
        "inductor_triton_kernel_to_post_grad_nodes",
        KERNEL_DECISIONS_ARTIFACT,
        NODE_TRACES_ARTIFACT,
    }
)
"""Artifacts the assembler reads; others are dropped at the sink."""
ORIGIN_CAPACITY: Final = 4096
"""Compiles whose origin the sink remembers (a compile's records arrive within it; old ones are done)."""

Origin = tuple[str, bool, str]
"""``(model label, attributed, code location override)`` of one compile, as the assembler takes it."""
UNATTRIBUTED: Final[Origin] = ("", False, "")
"""A compile not made through ``tracker.compile`` (a plain ``torch.compile`` elsewhere in the process)."""


def _suppressed_failure(metadata: dict[str, object]) -> bool:
    """Whether the compile these metrics end failed and Dynamo suppressed the failure (then it skips the frame)."""
    metrics = metadata.get("compilation_metrics")
    fail_type = metrics.get("fail_type") if isinstance(metrics, dict) else None
    if not fail_type:
        return False
    return torch_adapter.errors_suppressed() or torch_adapter.soft_failure(str(fail_type))


class TraceSink(logging.Handler):
    """Forwards structured compile records to the SDK queue as
    ``("trace", (metadata, payload, request, t, failure suppressed, origin))``.

    The trace logger is process-wide: it also sees compiles that no tracker made. Each compile's origin
    is found once, when it starts or (a frame at its recompile limit, which starts none) at its first
    record (the backend on Dynamo's stack), and every record of it carries that origin, so a compile is
    labelled with the model that was compiled, or left unattributed."""

    def __init__(self, queue: BoundedQueue) -> None:
        super().__init__(level=logging.DEBUG)
        self.queue = queue
        self.errors = 0
        self.origins: OrderedDict[str, Origin] = OrderedDict()
        # Called (on the compiling thread, before the frame runs) when a compile made through a tracker's
        # backend ends without a graph of it (records.GRAPH_COMPILES).
        self.on_graphless_compile: Callable[[], None] | None = None

    def _origin(self, cid: str, start: bool) -> Origin:
        # Found at the compile's start, or at its first record when it has no start: a frame at its recompile
        # limit logs its reasons and metrics from inside Dynamo's compile but never starts one.
        if not start:
            known = self.origins.get(cid)
            if known is not None:
                return known
        backend, code = torch_adapter.compiling_backend(ORIGIN_ATTR)
        origin = getattr(backend, ORIGIN_ATTR, None) if backend is not None else None
        found: Origin = (
            (origin.model, True, origin.root_locations.get(code, "")) if origin is not None else UNATTRIBUTED
        )
        self.origins[cid] = found
        while len(self.origins) > ORIGIN_CAPACITY:
            self.origins.popitem(last=False)
        return found

    def handle(self, record: logging.LogRecord) -> bool:  # no handler lock: emit is reentrant-safe
        self.emit(record)
        return True

    def emit(self, record: logging.LogRecord) -> None:
        """Filter and enqueue one record; never raises."""
        try:
            metadata = getattr(record, "metadata", None)
            if not isinstance(metadata, dict):
                return
            kind = next((k for k in metadata if k not in RESERVED), None)
            if kind is None or kind in SKIPPED:
                return
            if kind == "artifact":
                body = metadata.get("artifact")
                name = body.get("name", "") if isinstance(body, dict) else ""
                if name not in KEPT_ARTIFACTS:
                    return
            request = CURRENT.get()
            cid = f"{metadata.get('frame_id')}/{metadata.get('frame_compile_id')}"
            origin = self._origin(cid, kind == "dynamo_start")
            if (
                request is not None
                and kind in ("dynamo_start", "compilation_metrics")
                and cid not in request.compile_ids
            ):
                request.compile_ids = (*request.compile_ids, cid)
            payload = getattr(record, "payload", None)
            rid = request.request_id if request is not None else ""
            # Whether a failed compile was suppressed is known here only (the caller's setting, often a
            # patch scope): Dynamo then skips the frame for good, and later requests run it eagerly.
            suppressed = kind == "compilation_metrics" and _suppressed_failure(metadata)
            text = payload if isinstance(payload, str) else None
            self.queue.put("trace", (metadata, text, rid, time.time(), suppressed, origin))
            if kind == "dynamo_start":  # an id left from before torch._dynamo.reset() is not this compile's
                GRAPH_COMPILES.discard(cid)
            elif kind == "compilation_metrics":  # the compile has ended
                if cid in GRAPH_COMPILES:
                    GRAPH_COMPILES.discard(cid)
                elif origin[1] and self.on_graphless_compile is not None:  # a compile of ours (not foreign)
                    self.on_graphless_compile()
        except Exception:
            self.errors += 1
