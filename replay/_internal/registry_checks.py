"""The kernel-registry rung: whether forcing the registry's reference providers fixes the request, and which
op's provider is at fault.

Suspects are the registry ops of the request's graph served, at this call, by something other than their
definition; forcing them (all, then one at a time) to the reference provider either fixes the request or
clears the registry. A provider that is wrong on its own arguments is blamed with its kernel function and
the calling line; one that is right alone leaves the compiled path to the rungs below.
"""

from __future__ import annotations

import math
import time
from typing import Any

import torch

from inferensics.bundle.tolerance import to_fp64
from inferensics.kernels.op import REFERENCE
from inferensics.replay._internal import graph_probe as gp
from inferensics.replay._internal import providers as pv
from inferensics.replay._internal import verdict_text as vt
from inferensics.replay._internal.investigation_state import InvestigationState
from inferensics.replay._internal.ladder import (
    Variation,
    call_model,
)
from inferensics.replay._internal.tolerance import Comparison, check_eager, compare
from inferensics.replay._internal.verdict import Verdict
from inferensics.replay._internal.verdict_text import num


class RegistryChecks(InvestigationState):
    """The kernel-registry checks of an investigation."""

    def _registry_calls(self, *, compiled: bool) -> list[tuple[torch.fx.Node, Any, list[Any], pv.Served]]:
        """Registry nodes of the request's graph with their arguments (serving dtype) and the provider each
        call gets, eager or while compiling."""
        if self.graph is None or self.ref_nodes is None or self.eager_nodes is None:
            return []
        env64, cast = self._fp64_values_cast_to_serving()

        out = []
        for node, op in pv.registry_nodes(self.graph.gm):
            try:
                args = gp.node_args(node, env64, cast)
                served = pv.served_by(op, args, compiled=compiled)
            except Exception:
                continue
            out.append((node, op, args, served))
        return out

    def _kernel_provider(self, *, compiled: bool) -> Verdict | None:
        """Force the registry's reference providers (all suspects, then one op at a time); when that fixes
        the request, name the op, the provider that served it, its kernel function and the calling line."""
        calls = self._registry_calls(compiled=compiled)
        # Suspects: ops served by something other than their definition at this call (or, for a compile
        # with symbolic sizes, ops whose default list puts a non-reference provider first).
        suspects: list[str] = []
        dynamic = compiled and bool(self.case.compile_kwargs.get("dynamic") or self.case.history)
        for i, (node, op, args, served) in enumerate(calls):
            first = op.priority[0] if op.priority else REFERENCE
            open_default = dynamic and first != REFERENCE and op.providers[first].kind != "inductor"
            if open_default and _is_definition(served):
                # Traced with symbolic sizes the call took the default list, not this shape's bucket.
                calls[i] = (node, op, args, pv.served_by(op, args, compiled=True, provider=first))
            if not _is_definition(calls[i][3]) and op.name not in suspects:
                suspects.append(op.name)
        if not suspects:
            return None
        if not self._forced_passes(tuple(suspects), compiled):
            return None
        culprit = suspects[0]
        if len(suspects) > 1:
            culprit = next((n for n in suspects if self._forced_passes((n,), compiled)), suspects[0])
        mine = [c for c in calls if c[1].name == culprit and not _is_definition(c[3])]
        chosen: tuple[torch.fx.Node, Any, list[Any], pv.Served] | None = None
        alone: Comparison | None = None
        for node, op, args, served in mine:
            cmp = self._provider_alone(op, served.provider, args)
            if chosen is None or (alone is not None and alone.passed and not cmp.passed):
                chosen, alone = (node, op, args, served), cmp
            if not cmp.passed:
                break
        if chosen is None or alone is None:
            return None
        node, op, _args, served = chosen
        if compiled and alone.passed:
            # The provider is right on its own at this call: the compiler mishandles its code; go on down.
            self.rungs.append({**alone.to_dict(), "note": "provider right alone: not blamed"})
            return None
        src = gp.source_of(node)
        return Verdict(
            "kernel_provider",
            op=served.op,
            fx_node=node.name,
            kernel=served.source.function,
            source_file=src.file,
            source_line=src.line,
            source_text=src.text,
            culprit=vt.provider_culprit(served.to_dict()),
            summary=vt.provider_summary(served.to_dict(), compiled=compiled, src=src),
            evidence=self._evidence(
                provider={**served.to_dict(), "alone": alone.to_dict()},
                ops_forced=suspects,
                kernels=[],
                output_code_line=0,
            ),
        )

    def _forced_passes(self, names: tuple[str, ...], compiled: bool) -> bool:
        label = f"kernel registry: {', '.join(names)} forced to the reference provider"
        if compiled:
            cmp, _ = self._rung(Variation(forced=names, label=f"inductor, {label}"), provenance=False)
            return cmp.passed
        start = time.perf_counter()
        with pv.forced_reference(names):
            out = call_model(self.case.model, self.case.request)
        check = check_eager(out, self.ref)
        self.rungs.append(
            {
                "rung": f"eager, {label}",
                "rounding_units": num(check.ratio),
                "nonfinite_new": check.nonfinite_new,
                "passed": not check.wrong,
                "seconds": round(time.perf_counter() - start, 3),
            }
        )
        return not check.wrong

    def _provider_alone(self, op: Any, provider: str, args: list[Any]) -> Comparison:
        """The provider on this call's arguments against the op's reference in fp64, anchored on the reference
        in the serving dtype."""
        label = f"{op.name}: provider {provider} alone"
        try:
            out = pv.run_provider(op, provider, args)
            anchor = pv.run_provider(op, REFERENCE, args)
            ref = pv.run_provider(op, REFERENCE, [to_fp64(a) for a in args])
        except Exception as exc:
            return Comparison(label, math.inf, math.inf, math.inf, 0.0, 0.0, 0, [{"error": f"{type(exc).__name__}"}])
        return compare(label, out, ref, anchor)


def _is_definition(served: pv.Served) -> bool:
    """Whether a call was served by the op's definition (the reference, or the reference left to Inductor)."""
    return served.provider == REFERENCE or served.kind == "inductor"
