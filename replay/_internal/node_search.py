"""The diverging-node search: the first FX node of the request's graph whose value goes wrong, and the
verdict located there (the op, the user's line and, through Inductor's provenance, the kernel).

Under the failing configuration every compute node is exposed and compared, in graph order, with its fp64
and eager values; where exposing every node hides the fault (a pass no longer matches), one node at a time
is exposed and the order bisected. Eager's own first wrong node, the first node consuming an input, and the
nodes a changed kernel line or constant points at are found here too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from inferensics.replay._internal import graph_probe as gp
from inferensics.replay._internal import output_code as oc
from inferensics.replay._internal import torch_adapter as ta
from inferensics.replay._internal import verdict_text as vt
from inferensics.replay._internal.investigation_state import InvestigationState
from inferensics.replay._internal.ladder import (
    Variation,
    run_rung,
)
from inferensics.replay._internal.tolerance import check_eager, compare
from inferensics.replay._internal.verdict import Verdict


class NodeSearch(InvestigationState):
    """Finding the node at fault and writing the verdict located there."""

    def _finish(
        self, category: str, failing: Variation, *, culprit: str, ops: Sequence[Any] = (), summary: str = ""
    ) -> Verdict:
        node_name, trace = self._first_diverging_node(failing)
        return self._located(category, node_name, trace, culprit=culprit, ops=ops, summary=summary)

    def _located(
        self,
        category: str,
        node_name: str,
        trace: ta.CompileTrace,
        *,
        culprit: str,
        ops: Sequence[Any] = (),
        summary: str = "",
    ) -> Verdict:
        node = self._node(node_name)
        src = gp.source_of(node) if node is not None else gp.SourceLine()
        node_ops: list[Any] = []
        if node is not None and self.graph is not None and self.ref_nodes is not None:
            node_ops = gp.aten_ops_of(self.graph.gm, node, self.ref_nodes.values | self._placeholder_values(fp64=True))
        op = ""
        chosen = [o for o in ops if o in node_ops] or list(ops) or node_ops
        if chosen:
            op = ta.op_name(chosen[0])
        overload = str(chosen[0]) if chosen and isinstance(chosen[0], torch._ops.OpOverload) else ""
        kernels = oc.kernels_of_node(trace.node_mappings, node_name) if node_name else []
        code = trace.output_code[-1] if trace.output_code else ""
        line = oc.kernel_line(code, kernels[0]) if kernels and code else 0
        return Verdict(
            category,
            op=op,
            fx_node=node_name,
            kernel=kernels[0] if kernels else "",
            source_file=src.file,
            source_line=src.line,
            source_text=src.text,
            culprit=culprit,
            summary=summary or vt.located_summary(category, culprit, node_name, op),
            evidence=self._evidence(kernels=kernels, output_code_line=line, op_overload=overload),
        )

    def _first_diverging_node(self, failing: Variation) -> tuple[str, ta.CompileTrace]:
        if self.graph is None or self.ref_nodes is None or self.eager_nodes is None:
            return "", ta.CompileTrace()
        order = [n.name for n in gp.compute_nodes(self.graph.gm)]
        sink: dict[str, Any] = {}
        run = run_rung(
            self.case, failing, wrap=lambda inner: gp.exposing_backend(inner, None, sink), before_request=sink.clear
        )
        self.compiles += 1
        first = self._first_bad(order, sink)
        trace = getattr(self, "_fresh_trace", None) or run.trace
        if first:
            return first, trace
        # Exposing every node hid the fault (a pass no longer matched): bisect on one exposed node at a time.
        lo, hi = 0, len(order) - 1
        found = ""
        while lo <= hi:
            mid = (lo + hi) // 2
            sink = {}
            run_rung(
                self.case,
                failing,
                wrap=lambda inner, s=sink, n=order[mid]: gp.exposing_backend(inner, {n}, s),
                before_request=sink.clear,
                provenance=False,
            )
            self.compiles += 1
            if self._first_bad([order[mid]], sink):
                found, hi = order[mid], mid - 1
            else:
                lo = mid + 1
        return found, trace

    def _first_bad(self, order: list[str], sink: dict[str, Any]) -> str:
        assert self.ref_nodes is not None
        assert self.eager_nodes is not None
        for name in order:
            if name not in sink or name not in self.ref_nodes.values or name not in self.eager_nodes.values:
                continue
            cmp = compare(name, sink[name], self.ref_nodes.values[name], self.eager_nodes.values[name])
            if not cmp.passed:
                return name
        return ""

    def _first_wrong_eager_node(self) -> tuple[torch.fx.Node | None, float | None]:
        if self.graph is None or self.ref_nodes is None or self.eager_nodes is None:
            return None, None
        gm = self.graph.gm
        env64, cast = self._fp64_values_cast_to_serving()

        for node in gp.compute_nodes(gm):
            if node.name not in env64:
                continue
            try:
                local = gp.run_node_alone(gm, node, env64, cast)
            except Exception:
                continue
            check = check_eager(local, env64[node.name])
            if check.wrong:
                return node, check.ratio
        return None, None

    def _first_node_consuming(self, input_name: str) -> tuple[str, gp.SourceLine]:
        if self.graph is None:
            return "", gp.SourceLine()
        names = self._placeholder_user_names()
        for node in self.graph.gm.graph.nodes:
            if node.op == "placeholder" and names.get(node.name) == input_name:
                users = [u for u in self.graph.gm.graph.nodes if node in u.all_input_nodes]
                if users:
                    return users[0].name, gp.source_of(users[0])
        return "", gp.SourceLine()

    def _nodes_with_constant(self, names: list[str], values: list[float]) -> list[str]:
        """Those of ``names`` whose node takes one of ``values`` as a scalar argument."""
        if not values:
            return []

        def scalars(node: torch.fx.Node) -> list[float]:
            out: list[float] = []
            torch.fx.node.map_aggregate(
                (node.args, node.kwargs),
                lambda a: out.append(float(a)) if isinstance(a, int | float) and not isinstance(a, bool) else None,
            )
            return out

        found = []
        for name in names:
            node = self._node(name)
            if node is not None and any(math.isclose(s, v, rel_tol=1e-6) for s in scalars(node) for v in values):
                found.append(name)
        return found

    def _op_words(self, name: str) -> set[str]:
        node = self._node(name)
        if node is None or self.graph is None or self.ref_nodes is None:
            return set()
        ops = gp.aten_ops_of(self.graph.gm, node, self.ref_nodes.values | self._placeholder_values(fp64=True))
        return {ta.op_name(op).split(".")[-1].split("::")[-1] for op in ops[:1]}
