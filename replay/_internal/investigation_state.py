"""What one replay investigation holds while it climbs the ladder, and the lookups every step shares.

The case (model, request, serving history, compile settings), the served output, the rungs run so far and
the compiles they cost, the fp64 reference and eager outputs, and the request's Dynamo graph with each
node's value in fp64 and in the serving dtype. :class:`InvestigationState` records a rung and writes the
evidence; its lookups find a node, the graph's placeholders as the user named them, and the fp64 values.
The ladder's steps (:mod:`~inferensics.replay._internal.registry_checks`,
:mod:`~inferensics.replay._internal.compiler_bisection`, :mod:`~inferensics.replay._internal.node_search`)
extend it, and :mod:`~inferensics.replay._internal.investigate` climbs the ladder.
"""

from __future__ import annotations

import math
import re
from typing import Any

import torch

from inferensics.replay._internal import graph_probe as gp
from inferensics.replay._internal.ladder import (
    Case,
    RungRun,
    Variation,
    input_names,
    run_rung,
)
from inferensics.replay._internal.tolerance import EAGER_LIMIT, RATIO_LIMIT, Comparison, compare

_FRAME_LOCAL = re.compile(r"L\['([A-Za-z_][A-Za-z0-9_]*)'\]")
"""Dynamo's source of a placeholder that is a plain local of the compiled frame: ``L['tokens']``."""


class InvestigationState:
    """One request's investigation: its case, its rungs and the request's graph (see the module docstring)."""

    def __init__(
        self,
        case: Case,
        served_output: Any,
        served_code: str | None,
        served_verified: bool = False,
        *,
        history_missing: str = "",
    ) -> None:
        self.case = case
        self.served_verified = served_verified
        self.history_missing = history_missing
        self.served_output = served_output
        self.served_code = served_code
        self.rungs: list[dict[str, Any]] = []
        self.compiles = 0
        self.ref: Any = None
        self.eager: Any = None
        self.graph: gp.GraphCall | None = None
        self.ref_nodes: gp.NodeRun | None = None
        self.eager_nodes: gp.NodeRun | None = None
        self.fp64_error = ""
        """The fp64 reference's error where it could not run (every rung is then judged against eager), or ``""``."""
        self._fp64_failed_node = ""
        self._fp64_node_values: dict[str, Any] = {}

    # -- evidence -------------------------------------------------------------------------
    def _evidence(self, **extra: Any) -> dict[str, Any]:
        dtype = str(self.case.dtype).removeprefix("torch.")
        tolerance: dict[str, Any] = {
            "rule": "candidate error vs fp64 over eager's own error vs fp64, RMSE and max-abs",
            "ratio_limit": RATIO_LIMIT,
            "eager_limit_rounding_units": EAGER_LIMIT,
        }
        if self.fp64_error:
            tolerance = {
                "rule": f"candidate error vs eager {dtype} (fp64 could not run) over {dtype}'s rounding of eager, "
                "RMSE and max-abs",
                "ratio_limit": RATIO_LIMIT,
                "ratio_unit": f"{dtype} rounding of eager {dtype}",
            }
        return {
            "serving_dtype": dtype,
            "tolerance": tolerance,
            **({"fp64_error": self.fp64_error} if self.fp64_error else {}),
            "rungs": self.rungs,
            "compiles": self.compiles,
            **extra,
        }

    def _record(self, comparison: Comparison, seconds: float, error: str = "") -> Comparison:
        entry = comparison.to_dict()
        entry["seconds"] = round(seconds, 3)
        if error:
            entry["error"] = error
        self.rungs.append(entry)
        return comparison

    def _rung(self, variation: Variation, **kw: Any) -> tuple[Comparison, RungRun]:
        run = run_rung(self.case, variation, **kw)
        self.compiles += 1
        if run.error:
            cmp = Comparison(variation.name(), math.inf, math.inf, math.inf, 0.0, 0.0, 0, [{"error": run.error}])
        else:
            cmp = compare(variation.name(), run.output, self.ref, self.eager)
        return self._record(cmp, run.seconds, run.error), run

    # -- the request's graph --------------------------------------------------------------
    def _fp64_values_cast_to_serving(self) -> tuple[dict[str, Any], Any]:
        """The fp64 run's node values, and a cast that brings one back to the dtype eager computed it in."""
        assert self.ref_nodes is not None
        assert self.eager_nodes is not None
        env64 = self.ref_nodes.values | self._placeholder_values(fp64=True)
        envd = self.eager_nodes.values | self._placeholder_values(fp64=False)

        def cast(name: str, value: Any) -> Any:
            like = envd.get(name)
            if isinstance(value, torch.Tensor) and isinstance(like, torch.Tensor) and value.is_floating_point():
                return value.to(like.dtype)
            return value

        return env64, cast

    def _placeholder_values(self, *, fp64: bool) -> dict[str, Any]:
        assert self.graph is not None
        names = [n.name for n in self.graph.gm.graph.nodes if n.op == "placeholder"]
        return {
            n: (v.double() if fp64 and isinstance(v, torch.Tensor) and v.is_floating_point() else v)
            for n, v in zip(names, self.graph.args, strict=False)
        }

    def _placeholder_user_names(self) -> dict[str, str]:
        """Placeholder name → the user's argument name, matched by tensor identity; a placeholder that is no
        tensor the request passed (the compiled frame is called with one the model derived, e.g. padded token
        ids) is named by its local in the compiled frame (Dynamo's source ``L['tokens']``: ``tokens``, not
        the graph's ``l_tokens_``)."""
        assert self.graph is not None
        user = input_names(self.case.model, self.case.request)
        out: dict[str, str] = {}
        placeholders = [n for n in self.graph.gm.graph.nodes if n.op == "placeholder"]
        for node, value in zip(placeholders, self.graph.args, strict=False):
            for name, tensor in user:
                if value is tensor or (
                    isinstance(value, torch.Tensor)
                    and isinstance(tensor, torch.Tensor)
                    and value.data_ptr() == tensor.data_ptr()
                    and value.shape == tensor.shape
                ):
                    out[node.name] = name
        for node, source in zip(placeholders, self.graph.sources, strict=False):
            local = _FRAME_LOCAL.fullmatch(source)
            if node.name not in out and local is not None:
                out[node.name] = local.group(1)
        return out

    def _node(self, name: str) -> torch.fx.Node | None:
        if self.graph is None or not name:
            return None
        return next((n for n in self.graph.gm.graph.nodes if n.name == name), None)

    def _in_graph_order(self, names: list[str]) -> list[str]:
        if self.graph is None:
            return names
        order = [n.name for n in self.graph.gm.graph.nodes]
        return sorted([n for n in names if n in order], key=order.index)
