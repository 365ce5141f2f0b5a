"""A compile's kernel rows: the kernel inventory of its output code (each kernel with the post-grad nodes it
computes and the user's source lines they come from) and the kernel registry's provider decisions.

The :class:`~inferensics.collector.trace.assembler.CompileAssembler` gathers what a compile's records say about
its kernels; this module turns that into rows once the compile ends.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from inferensics.collector.trace.artifacts import kernel_source_lines, kernels_in_output_code, source_file
from inferensics.schema.events import KernelDecisionEvent, KernelInventoryEvent

Decisions = dict[tuple[str, str], Mapping[str, Any]]
"""The provider decisions of one compile by ``(op, signature)``: the registry's record of each."""


def read_decisions(payload: Any, into: Decisions) -> None:
    """Add the provider decisions of a ``kernel_decisions`` payload (a list of records) to ``into``; a later record
    of the same op and signature replaces an earlier one."""
    for d in payload if isinstance(payload, list) else []:
        if isinstance(d, Mapping) and d.get("op") and d.get("provider"):
            into[(str(d["op"]), str(d.get("signature", "")))] = d


def decision_events(
    decisions: Decisions,
    *,
    ts: datetime,
    labels: Mapping[str, Any],
    request_id: str,
    graph_key: str,
    compile_id: str,
    attrs: Mapping[str, str],
) -> list[KernelDecisionEvent]:
    """One row per provider decision, in ``(op, signature)`` order."""
    rows: list[KernelDecisionEvent] = []
    for (op, signature), d in sorted(decisions.items()):
        raw = d.get("skipped")
        skipped: list[Any] = raw if isinstance(raw, list) else []
        rows.append(
            KernelDecisionEvent(
                ts=ts,
                **labels,
                request_id=request_id,
                graph_key=graph_key,
                compile_id=compile_id,
                op=op,
                provider=str(d["provider"]),
                signature=signature,
                bucket=str(d.get("bucket", "")),
                skipped=tuple(f"{s.get('provider')}: {s.get('reason')}" for s in skipped if isinstance(s, Mapping)),
                compiled=bool(d.get("compiled", True)),
                fallback=bool(d.get("fallback", False)),
                attrs=dict(attrs),
            )
        )
    return rows


def rebase_source_lines(
    lines: dict[str, list[str]], pre_nodes: Mapping[str, list[str]], node_traces: Mapping[str, str] | None
) -> int:
    """Kernel source lines from the graph this process compiled, not from Inductor's cached provenance; returns
    how many cached lines were dropped.

    The FX-graph-cache key does not cover source paths or line numbers: on a hit Inductor replays the
    stack traces of the process that compiled the graph first. When the backend recorded the current
    graph's node traces, each kernel's lines (``lines``, changed in place) are read from the nodes it computes;
    a cached line that names a file the current graph does not come from is dropped and counted, never stored.
    """
    if node_traces is None:
        return 0
    stale = 0
    current = kernel_source_lines({"graph": list(node_traces.values())})["graph"]
    files = {source_file(ref) for ref in current}
    for kernel in set(lines) | set(pre_nodes):
        traces = [node_traces[n] for n in pre_nodes.get(kernel, ()) if n in node_traces]
        if traces:
            lines[kernel] = kernel_source_lines({kernel: traces})[kernel]
            continue
        kept = [ref for ref in lines.get(kernel, []) if source_file(ref) in files]
        stale += len(lines.get(kernel, [])) - len(kept)
        lines[kernel] = kept
    return stale


class KernelInventory:
    """The kernel rows of the output codes one assembler saw: one per kernel of each distinct output code (the
    table's key), or, with ``every_time`` (live), one each time a code is served: the host pipeline maps a
    kernel's name to the artifact that served it last from these rows."""

    def __init__(self, *, every_time: bool) -> None:
        self._every_time = every_time
        self._seen: set[tuple[str, str]] = set()  # (artifact id, kernel name) emitted

    def rows(
        self,
        output_code: str,
        *,
        artifact_id: str,
        graph_key: str,
        nodes: Mapping[str, list[str]],
        lines: Mapping[str, list[str]],
        ts: datetime,
        host: str,
    ) -> list[KernelInventoryEvent]:
        """The rows of the kernels ``output_code`` defines that are due."""
        rows: list[KernelInventoryEvent] = []
        for name, backend in kernels_in_output_code(output_code):
            if (artifact_id, name) in self._seen and not self._every_time:
                continue  # a cache hit that serves the same output code again lists the same kernels
            self._seen.add((artifact_id, name))
            rows.append(
                KernelInventoryEvent(
                    ts=ts,
                    artifact_id=artifact_id,
                    kernel_name=name,
                    kernel_backend=backend,
                    graph_key=graph_key,
                    post_grad_nodes=tuple(nodes.get(name, ())),
                    source_lines=tuple(lines.get(name, ())),
                    host=host,
                )
            )
        return rows
