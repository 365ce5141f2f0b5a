"""The compiler rungs that switch one thing off at a time: a decomposition, a custom pass, the pattern
matcher, fusion, precision-cast emulation, a lowering; bisecting where one list of many holds the culprit.

Each trial is a fresh compile (a rung recorded in the evidence); the first that makes the request right
names the part of the compiler at fault.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from inferensics.replay._internal import torch_adapter as ta
from inferensics.replay._internal.investigation_state import InvestigationState
from inferensics.replay._internal.ladder import (
    Variation,
    run_rung,
)

FUSION_OFF = {"max_fusion_size": 1, "epilogue_fusion": False, "aggressive_fusion": False}


class CompilerBisection(InvestigationState):
    """Switching parts of the compiler off, one at a time or by halves."""

    def _bisect_table(self, table: dict[Any, Any]) -> Any:
        keys = list(table)
        while len(keys) > 1:
            half = keys[: len(keys) // 2]
            trial = {k: v for k, v in table.items() if k not in set(half)}
            cmp, _ = self._rung(
                Variation(
                    backend="aot_eager_decomp_partition",
                    decompositions=trial,
                    label=f"aot_eager_decomp_partition without {len(half)} decompositions",
                ),
                provenance=False,
            )
            keys = half if cmp.passed else keys[len(keys) // 2 :]
        return keys[0] if keys else None

    def _bisect_inductor(self, failing: Variation) -> tuple[str, list[Any], str]:
        for slot in ta.active_custom_passes():
            name = ta.custom_pass_name(slot)
            cmp, _ = self._rung(Variation(config={slot: None}, label=f"inductor without {name}"), provenance=False)
            if cmp.passed:
                return name, self._ops_changed_by_pass(slot), "graph_pass"
        cmp, _ = self._rung(
            Variation(config={"pattern_matcher": False}, label="inductor pattern_matcher=False"), provenance=False
        )
        if cmp.passed:
            return "pattern_matcher (built-in pattern passes)", [], "graph_pass"
        fusion = {k: v for k, v in FUSION_OFF.items() if _has_config(k)}
        cmp, _ = self._rung(
            Variation(
                config=fusion, no_fusion=True, label="inductor fusion off (max_fusion_size=1, no scheduler fusion)"
            ),
            provenance=False,
        )
        if cmp.passed:
            return "fusion", [], "schedule"
        if torch.finfo(self.case.dtype).bits < 32:
            cmp, _ = self._rung(
                Variation(config={"emulate_precision_casts": True}, label="inductor emulate_precision_casts=True"),
                provenance=False,
            )
            if cmp.passed:
                return "precision casts elided by codegen (emulate_precision_casts fixes it)", [], "lowering"
        lowered = [op for op in self._graph_ops(None, decomposed=True) if ta.has_lowering(op)]
        if lowered:
            cmp, _ = self._rung(
                Variation(fallbacks=tuple(lowered), label=f"inductor with {len(lowered)} lowerings as fallbacks"),
                provenance=False,
            )
            if cmp.passed:
                found = self._bisect_lowerings(lowered)
                if found is not None:
                    return f"lowering of {ta.op_name(found)}", [found], "lowering"
        return "no single variation fixed it", [], "lowering"

    def _bisect_lowerings(self, ops: list[Any]) -> Any:
        while len(ops) > 1:
            half = ops[: len(ops) // 2]
            cmp, _ = self._rung(
                Variation(
                    fallbacks=tuple(half), label=f"inductor with {', '.join(ta.op_name(o) for o in half)} as fallbacks"
                ),
                provenance=False,
            )
            ops = half if cmp.passed else ops[len(ops) // 2 :]
        return ops[0] if ops else None

    def _ops_changed_by_pass(self, slot: str) -> list[Any]:
        with_pass = self._graph_ops(None, decomposed=True, post_grad=True)
        with ta.inductor_config({slot: None}):
            without = self._graph_ops(None, decomposed=True, post_grad=True)
        return [op for op in without if op not in with_pass] + [op for op in with_pass if op not in without]

    def _graph_ops(
        self, table: dict[Any, Any] | None, *, decomposed: bool = False, post_grad: bool = False
    ) -> list[Any]:
        """Ops in the request's ATen graph: before decomposition (keys of ``table``), after, or post-grad."""
        graphs: list[torch.fx.GraphModule] = []

        def record(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Any:
            graphs.append(gm)
            return gm

        if post_grad:

            def capture(graph: torch.fx.Graph) -> None:
                graphs.append(torch.fx.GraphModule({}, graph))

            # Appended after the user's own post pass, so the graph seen is what lowering receives.
            user = ta.inductor_config_value("post_grad_custom_post_pass")

            def chained(graph: torch.fx.Graph) -> None:
                if user is not None:
                    user(graph)
                capture(graph)

            run_rung(self.case, Variation(config={"post_grad_custom_post_pass": chained}), provenance=False)
        else:
            from torch._dynamo.backends.common import aot_autograd

            decomps = ta.inductor_decompositions() if decomposed else None
            backend = (
                aot_autograd(fw_compiler=record, decompositions=decomps)
                if decomps
                else aot_autograd(fw_compiler=record)
            )
            run_rung(self.case, Variation(backend="aot_eager"), wrap=lambda _inner: backend, provenance=False)
        self.compiles += 1
        ops: list[Any] = []
        for gm in graphs[-1:]:
            for node in gm.graph.nodes:
                if (
                    node.op == "call_function"
                    and isinstance(node.target, torch._ops.OpOverload)
                    and node.target not in ops
                ) and (table is None or node.target in table):
                    ops.append(node.target)
        return ops


def _has_config(name: str) -> bool:
    try:
        ta.inductor_config_value(name)
    except AttributeError:
        return False
    return True
