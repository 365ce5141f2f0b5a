"""Eager kernel-registry decisions into the store, as ``kernel_decisions`` rows with ``compiled`` false.

A compiled graph's decisions travel in its compile's trace (the assembler turns them into rows); an eager call's
decision is made on the serving thread, the first time a signature is called in the process, and never reaches a
trace. The tracker listens to the process's registry for them. The registry is found among the modules already
imported (reading it must not build it: that defines the operators and imports Triton), so a process that imports
``inferensics.kernels`` after ``instrument`` is watched from the background thread's next drain, and the decisions
made before that are taken from the registry's log once.

The listener runs on the deciding thread: it only queues the decision with the request it was made in; the
background thread builds the row, once per ``(op, signature, provider)`` in the process.
"""

from __future__ import annotations

import sys
import time
from datetime import UTC, datetime
from typing import Any, Final

from inferensics.collector.host.queueing import BoundedQueue
from inferensics.collector.host.records import CURRENT
from inferensics.collector.trace.assembler import AssemblyContext
from inferensics.schema.events import KernelDecisionEvent

KIND: Final = "kernel_decision"
"""The queue item kind of an eager decision: ``(decision, request id, model, time)``."""
EXPORTED_LIMIT: Final = 4096
"""Distinct ``(op, signature, provider)`` exported at most per process (the registry keeps as many signatures)."""


def built_log() -> Any:
    """The decision log of the process's kernel registry, or ``None`` while nothing has built one."""
    module = sys.modules.get("inferensics.kernels.registry")
    registry = module.built_registry() if module is not None else None
    return registry.log if registry is not None else None


class EagerDecisions:
    """Listens to a registry's decision log for one tracker (``attach``, ``detach``) and builds the rows."""

    def __init__(self, queue: BoundedQueue, context: AssemblyContext) -> None:
        self.queue = queue
        self.context = context
        self.log: Any = None
        self._exported: set[tuple[str, str, str]] = set()

    def attach(self) -> bool:
        """Listen to the registry if one is built (queueing the eager decisions it made already); whether it is."""
        if self.log is not None:
            return True
        log = built_log()
        if log is None:
            return False
        log.listeners = (*log.listeners, self._listen)
        self.log = log
        for decision in log.snapshot():
            if not decision.compiled:
                self.queue.put(KIND, (decision, "", "", time.time()))
        return True

    def detach(self) -> None:
        """Stop listening (the tracker's shutdown)."""
        log, self.log = self.log, None
        if log is not None:
            log.listeners = tuple(fn for fn in log.listeners if fn != self._listen)

    def _listen(self, decision: Any) -> None:
        """On the deciding thread: queue an eager decision with the request it was made in."""
        if decision.compiled:
            return  # a compiled graph's decisions travel in its compile's trace
        request = CURRENT.get()
        rid, model = (request.request_id, request.model) if request is not None else ("", "")
        self.queue.put(KIND, (decision, rid, model, time.time()))

    def row(self, item: tuple[Any, str, str, float]) -> KernelDecisionEvent | None:
        """The ``kernel_decisions`` row of a queued decision, or ``None`` when its ``(op, signature, provider)``
        was exported already in this process (or the process has exported :data:`EXPORTED_LIMIT` of them)."""
        decision, request_id, model, t = item
        key = (str(decision.op), str(decision.signature), str(decision.provider))
        if key in self._exported or len(self._exported) >= EXPORTED_LIMIT:
            return None
        self._exported.add(key)
        ctx = self.context
        return KernelDecisionEvent(
            ts=datetime.fromtimestamp(t, UTC),
            host=ctx.host,
            model=str(model or ctx.model),
            hw_pool=ctx.hw_pool,
            request_id=str(request_id),
            op=key[0],
            provider=key[2],
            signature=key[1],
            bucket=str(decision.bucket),
            skipped=tuple(f"{p}: {r}" for p, r in decision.skipped),
            compiled=False,
            fallback=bool(decision.fallback),
            attrs=dict(ctx.attrs),
        )
