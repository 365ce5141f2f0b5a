"""The replay ladder: attribute a failing request to a category, then localise it to a node and line.

Order: the request's own inputs, eager against fp64 (source op, unless forcing the kernel registry's
reference providers fixes eager: kernel provider), the served artifact against a fresh compile of the same
history (artifact mismatch), the fresh compile with the registry forced to its reference providers (kernel
provider), the same history against a compile at this shape
alone (shape specialisation), AOTAutograd with Inductor's decompositions (decomposition), then
Inductor with one thing switched off at a time: each custom pass and the pattern matcher (graph pass),
fusion (schedule), precision-cast emulation and each lowering (lowering). The first diverging Dynamo
node under the failing configuration names the op, the user's line and, through Inductor's
provenance, the kernel.
"""

from __future__ import annotations

import contextlib
import math
import re
import time
from collections.abc import Sequence
from typing import Any

import torch

from inferensics.bundle.errors import error_line
from inferensics.bundle.tolerance import fp64_model, to_fp64
from inferensics.kernels.op import REFERENCE
from inferensics.replay._internal import graph_probe as gp
from inferensics.replay._internal import output_code as oc
from inferensics.replay._internal import providers as pv
from inferensics.replay._internal import torch_adapter as ta
from inferensics.replay._internal import verdict_text as vt
from inferensics.replay._internal.ladder import (
    Case,
    RungRun,
    Variation,
    as_call,
    call_model,
    input_names,
    run_rung,
    run_served,
    serving_dtype,
    to_device,
)
from inferensics.replay._internal.tolerance import EAGER_LIMIT, RATIO_LIMIT, Comparison, check_eager, compare
from inferensics.replay._internal.verdict import Verdict
from inferensics.replay._internal.verdict_text import num

_FRAME_LOCAL = re.compile(r"L\['([A-Za-z_][A-Za-z0-9_]*)'\]")
"""Dynamo's source of a placeholder that is a plain local of the compiled frame: ``L['tokens']``."""

POSITIONS_KEPT = 8
"""Positions of bad input elements listed in a verdict."""
FUSION_OFF = {"max_fusion_size": 1, "epilogue_fusion": False, "aggressive_fusion": False}


def investigate(
    model: Any,
    inputs: Any,
    *,
    compile_kwargs: dict[str, Any] | None = None,
    warmup_inputs: Sequence[Any] = (),
    device: str = "cpu",
    served_output: Any = None,
    served_code: str | None = None,
) -> Verdict:
    """Re-execute one request and name the fault.

    Compiles in this process with the compiler as it stands (patched decompositions, lowerings and
    passes are seen). The first compile, with the caller's caches, is the served artifact; every
    other rung compiles fresh.

    Args:
        model: The module (or function) that served the request.
        inputs: The request: a tensor, a tuple of positional arguments or a dict of keyword arguments.
        compile_kwargs: ``torch.compile`` keywords the model was served with.
        warmup_inputs: Earlier requests, run through the compiled model first (the serving history
            that produced the served artifact).
        device: Where to run (``cpu`` or ``cuda``).
        served_output: The output as served (from a bundle); when given, replaces the in-process
            served compile.
        served_code: The served wrapper module (from a bundle), to compare kernels with a fresh compile.

    Returns:
        The verdict.
    """
    verdict, _ = investigate_keeping_graph(
        model,
        inputs,
        compile_kwargs=compile_kwargs,
        warmup_inputs=warmup_inputs,
        device=device,
        served_output=served_output,
        served_code=served_code,
    )
    return verdict


def investigate_keeping_graph(
    model: Any,
    inputs: Any,
    *,
    compile_kwargs: dict[str, Any] | None = None,
    warmup_inputs: Sequence[Any] = (),
    device: str = "cpu",
    served_output: Any = None,
    served_code: str | None = None,
    served_verified: bool = False,
    history_missing: str = "",
) -> tuple[Verdict, gp.GraphCall | None]:
    """:func:`investigate`, also returning the request's Dynamo graph and its arguments (for the repro).

    ``served_verified``: ``served_output`` came from a signed bundle whose every graph key hit (its artifact is
    exactly the signed one), so a fresh compile that is right never makes it a stale cache entry.
    ``history_missing``: why the serving history that produced the served artifact (a bundle's build history) is
    not in ``warmup_inputs``, or ``""``; without it no verdict is a shape specialisation to that history."""
    start = time.perf_counter()
    if isinstance(model, torch.nn.Module):
        model = model.to(device).eval()
    request = to_device(as_call(inputs), device)
    history = [to_device(as_call(w), device) for w in warmup_inputs]
    case = Case(model, request, history, dict(compile_kwargs or {}), serving_dtype(model, request))
    served = to_device(served_output, device) if served_output is not None else None
    inv = _Investigation(case, served, served_code, served_verified, history_missing=history_missing)
    with ta.quiet_meta_failures():
        verdict = inv.run()
    verdict.evidence["seconds"] = round(time.perf_counter() - start, 3)
    return verdict, inv.graph


class _Investigation:
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

    # -- evidence -------------------------------------------------------------------------
    def _evidence(self, **extra: Any) -> dict[str, Any]:
        return {
            "serving_dtype": str(self.case.dtype).removeprefix("torch."),
            "tolerance": {
                "rule": "candidate error vs fp64 over eager's own error vs fp64, RMSE and max-abs",
                "ratio_limit": RATIO_LIMIT,
                "eager_limit_rounding_units": EAGER_LIMIT,
            },
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

    # -- the ladder -----------------------------------------------------------------------
    def run(self) -> Verdict:
        case = self.case
        self._capture_graph()
        bad = self._nonfinite_inputs()
        t0 = time.perf_counter()
        ref_model = fp64_model(case.model)
        try:
            ref_call = to_fp64(case.request)
            with pv.forced_reference(), ta.index_bounds_checked([*ref_call[0], *ref_call[1].values()]):
                self.ref = call_model(ref_model, ref_call)
            ref_error = ""
        except Exception as exc:
            ref_error = error_line(exc)
        if ref_error:
            # The request's own dtypes name the error the served request met (fp64 says DoubleTensor where the
            # request sent floats); fp64's stands when eager runs.
            try:
                with ta.index_bounds_checked([*case.request[0], *case.request[1].values()]):
                    call_model(case.model, case.request)
            except Exception as exc:
                return self._inputs_from_exception(error_line(exc), fp64_only=False)
            return self._inputs_from_exception(ref_error)
        self.eager = call_model(case.model, case.request)
        eager_check = check_eager(self.eager, self.ref)
        self.rungs.append(
            {
                "rung": "eager",
                "dtype": str(case.dtype).removeprefix("torch."),
                "rounding_units": num(eager_check.ratio),
                "nonfinite_new": eager_check.nonfinite_new,
                "passed": not eager_check.wrong,
                "seconds": round(time.perf_counter() - t0, 3),
            }
        )
        if bad and _has_nonfinite(self.ref):
            return self._inputs_nonfinite(bad)
        if eager_check.wrong:
            return self._kernel_provider(compiled=False) or self._source_op(eager_check.ratio)

        served = self._served()
        if served.passed and _has_nonfinite(self.ref):
            # Non-finite where fp64 is non-finite too, and nowhere else: the model computes it on these inputs.
            return self._nonfinite_everywhere(served)
        if served.passed:
            return self._none(served)

        fresh_cmp, fresh_run = self._rung(Variation(label="inductor (fresh compile, same history)"))
        self._fresh_trace = fresh_run.trace
        if fresh_cmp.passed and self.served_verified:
            return self._signed_artifact_diverges(served, fresh_run)
        if fresh_cmp.passed:
            return self._artifact_mismatch(served, fresh_run)
        provider = self._kernel_provider(compiled=True)
        if provider is not None:
            return provider

        shape_fault = False
        failing = Variation(label="inductor")
        if case.history or case.compile_kwargs.get("dynamic"):
            here_cmp, _ = self._rung(
                Variation(history=False, dynamic=False, label="inductor (compiled at this shape only)")
            )
            # Without the serving history, a compile at this shape that is right tells nothing of that history.
            shape_fault = here_cmp.passed and not self.history_missing

        aot_cmp, _ = self._rung(Variation(backend="aot_eager", label="aot_eager"))
        if not aot_cmp.passed:
            return self._finish("graph_pass", failing, culprit=vt.AOT_EAGER_CULPRIT, summary=vt.AOT_EAGER_SUMMARY)
        decomp_cmp, _ = self._rung(Variation(backend="aot_eager_decomp_partition", label="aot_eager_decomp_partition"))
        if not decomp_cmp.passed and not shape_fault:
            return self._decomposition()

        culprit, ops, category = self._bisect_inductor(failing)
        if shape_fault:
            return self._finish(
                "shape_specialization", failing, culprit=culprit, ops=ops, summary=vt.SHAPE_SPECIALISED_SUMMARY
            )
        return self._finish(category, failing, culprit=culprit, ops=ops)

    # -- rungs ---------------------------------------------------------------------------
    def _served(self) -> Comparison:
        if self.served_output is not None:
            self._served_value = self.served_output
            cmp = compare("served (bundle)", self.served_output, self.ref, self.eager)
            self._served_code = self.served_code or ""
            return self._record(cmp, 0.0)
        run = run_served(self.case)
        self.compiles += 1
        self._served_code = run.trace.output_code[-1] if run.trace.output_code else ""
        self._served_keys = run.trace.fx_cache_keys
        self._served_value = run.output
        if run.error:
            cmp = Comparison("served", math.inf, math.inf, math.inf, 0.0, 0.0, 0, [{"error": run.error}])
        else:
            cmp = compare("served", run.output, self.ref, self.eager)
        return self._record(cmp, run.seconds, run.error)

    def _capture_graph(self) -> None:
        calls: list[gp.GraphCall] = []
        case = self.case
        kwargs, _ = case.compile_options()
        ta.reset()
        with ta.quiet_compiles():
            compiled = torch.compile(case.model, backend=gp.recording_backend(calls), **kwargs)
            try:
                for call in case.history:
                    call_model(compiled, call)
            except Exception:
                pass
            calls.clear()
            with contextlib.suppress(Exception):
                call_model(compiled, case.request)
        ta.reset()
        if calls:
            self.graph = calls[0]
            with pv.forced_reference():
                self.ref_nodes = gp.interpret(self.graph.gm, self.graph.args, fp64=True)
            self.eager_nodes = gp.interpret(self.graph.gm, self.graph.args, fp64=False)

    def _nonfinite_inputs(self) -> list[dict[str, Any]]:
        bad = []
        for name, value in input_names(self.case.model, self.case.request):
            if isinstance(value, torch.Tensor) and value.is_floating_point():
                mask = ~torch.isfinite(value)
                if bool(mask.any()):
                    bad.append({"tensor": name, "count": int(mask.sum()), "positions": _positions(mask)})
        return bad

    # -- categories ----------------------------------------------------------------------
    def _inputs_nonfinite(self, bad: list[dict[str, Any]]) -> Verdict:
        served = self._served()
        first = bad[0]
        node, src = self._first_node_consuming(first["tensor"])
        return Verdict(
            "inputs",
            fx_node=node,
            source_file=src.file,
            source_line=src.line,
            source_text=src.text,
            culprit=f"input {first['tensor']}",
            summary=vt.nonfinite_input_summary(first),
            evidence=self._evidence(bad_inputs=bad, served_agrees_nonfinite=served.nonfinite_new == 0),
        )

    def _inputs_from_exception(self, error: str, *, fp64_only: bool = True) -> Verdict:
        if self.graph is None or self.ref_nodes is None or not self.ref_nodes.failed_node:
            return self._inputs_raised_without_node(error, fp64_only=fp64_only)
        gm = self.graph.gm
        node = next(n for n in gm.graph.nodes if n.name == self.ref_nodes.failed_node)
        placeholders = {n.name: i for i, n in enumerate(n for n in gm.graph.nodes if n.op == "placeholder")}
        names = self._placeholder_user_names()
        culprit = ""
        detail: dict[str, Any] = {}
        tensors = [a for a in node.all_input_nodes]
        # Only an indexing failure is read as indices out of range (an integer input of a matmul is a wrong
        # dtype, not an index past a bound).
        indexing = error.startswith("IndexError") or "out of range" in error or "out of bounds" in error
        for a in tensors if indexing else []:
            if a.name not in placeholders:
                continue
            value = self.graph.args[placeholders[a.name]]
            if not isinstance(value, torch.Tensor) or value.is_floating_point():
                continue
            others = [
                self.ref_nodes.values.get(o.name, None)
                if o.name not in placeholders
                else self.graph.args[placeholders[o.name]]
                for o in tensors
                if o is not a
            ]
            bound = next((int(t.shape[0]) for t in others if isinstance(t, torch.Tensor) and t.dim() > 0), None)
            if bound is None:
                continue
            mask = (value >= bound) | (value < -bound)
            if bool(mask.any()):
                culprit = names.get(a.name, a.name)
                detail = {
                    "tensor": culprit,
                    "count": int(mask.sum()),
                    "positions": _positions(mask),
                    "values": [int(v) for v in value[mask][:POSITIONS_KEPT]],
                    "valid_range": [0, bound - 1],
                }
                break
        src = gp.source_of(node)
        ops = gp.aten_ops_of(gm, node, self.ref_nodes.values | self._placeholder_values(fp64=True))
        return Verdict(
            "inputs",
            op=ta.op_name(ops[0]) if ops else "",
            fx_node=node.name,
            source_file=src.file,
            source_line=src.line,
            source_text=src.text,
            culprit=f"input {culprit}" if culprit else "inputs",
            summary=vt.raised_input_summary(detail, error),
            evidence=self._evidence(bad_inputs=[detail] if detail else [], error=error),
        )

    def _inputs_raised_without_node(self, error: str, *, fp64_only: bool) -> Verdict:
        """A request that raises where no FX node can name the op: Dynamo could not trace it (its fake tensors
        refuse a wrong shape before a graph exists), or it raised outside the graph traced. The op and the user's
        line come from running it eagerly again (the run that raised: fp64, or the request's own dtypes), and the
        verdict says what was found and what could not be."""
        case = self.case
        raised = "fp64 eager" if fp64_only else "eager"
        model, call = (fp64_model(case.model), to_fp64(case.request)) if fp64_only else (case.model, case.request)
        with pv.forced_reference() if fp64_only else contextlib.nullcontext():
            at = gp.locate_raise(lambda: call_model(model, call), [*call[0], *call[1].values()])
        op = ta.op_name(at.op) if at is not None and at.op is not None else ""
        src = at.source if at is not None else gp.SourceLine()
        return Verdict(
            "inputs",
            op=op,
            source_file=src.file,
            source_line=src.line,
            source_text=src.text,
            culprit=f"{raised} raised",
            summary=vt.raised_without_node_summary(
                raised,
                fp64_only=fp64_only,
                error=error,
                traced=self.graph is not None,
                located=at is not None,
                op=op,
                src=src,
            ),
            evidence=self._evidence(error=error, located_by="eager run" if at is not None else ""),
        )

    # -- kernel registry -------------------------------------------------------------------
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

    def _source_op(self, ratio: float) -> Verdict:
        """Eager in the serving dtype is already wrong against fp64: the model's own arithmetic, said in words with
        each path's non-finite counts (fp64 may be non-finite too, on other elements)."""
        node, check = self._first_wrong_eager_node()
        ops: list[Any] = []
        if node is not None and self.graph is not None and self.ref_nodes is not None:
            ops = gp.aten_ops_of(self.graph.gm, node, self.ref_nodes.values | self._placeholder_values(fp64=True))
        src = gp.source_of(node) if node is not None else gp.SourceLine()
        dtype = str(self.case.dtype).removeprefix("torch.")
        counts = {"fp64": _nonfinite_counts(self.ref), f"eager {dtype}": _nonfinite_counts(self.eager)}
        size = _numel(self.eager)
        return Verdict(
            "source_op",
            op=ta.op_name(ops[0]) if ops else "",
            fx_node=node.name if node is not None else "",
            source_file=src.file,
            source_line=src.line,
            source_text=src.text,
            culprit=vt.SOURCE_OP_CULPRIT,
            summary=vt.source_op_summary(
                src, dtype, ratio, counts, size=size, node_name=node.name if node is not None else ""
            ),
            evidence=self._evidence(
                node_rounding_units=num(check) if check is not None else None,
                nonfinite=counts,
                outputs=size,
            ),
        )

    def _nonfinite_everywhere(self, served: Comparison) -> Verdict:
        """fp64 eager gives non-finite output on these (finite) inputs, and eager and the served output have
        non-finite values only where fp64 has them: the model computes them, so no compiler path is at fault. Names
        the first op whose value turns non-finite in the fp64 run (the FX node of the request's graph and the user's
        line where Dynamo traced it; located by an fp64 eager run otherwise) and the counts of every path."""
        dtype = str(self.case.dtype).removeprefix("torch.")
        counts = {
            "fp64": _nonfinite_counts(self.ref),
            f"eager {dtype}": _nonfinite_counts(self.eager),
            served.rung: _nonfinite_counts(getattr(self, "_served_value", None)),
        }
        for rung in self.rungs:  # the rungs that pass say why their non-finite values do not fail them
            path = f"eager {dtype}" if rung.get("rung") == "eager" else rung.get("rung")
            if path in (f"eager {dtype}", served.rung):
                rung["nonfinite_as_fp64"] = counts[path]["total"]
        node_name, op, src = self._first_nonfinite()
        return Verdict(
            "inputs",
            op=op,
            fx_node=node_name,
            source_file=src.file,
            source_line=src.line,
            source_text=src.text,
            culprit=vt.NONFINITE_EVERYWHERE_CULPRIT,
            summary=vt.nonfinite_everywhere_summary(
                counts, served_has=counts[served.rung]["total"] > 0, node_name=node_name, op=op, src=src
            ),
            evidence=self._evidence(nonfinite=counts, first_nonfinite={"op": op, "fx_node": node_name}),
        )

    def _first_nonfinite(self) -> tuple[str, str, gp.SourceLine]:
        """The first node of the request's graph whose fp64 value is non-finite (its node name, op and user line),
        else the first operator that returns a non-finite value in an fp64 eager run and the model's line that
        called it (no node name: no graph was traced)."""
        if self.graph is not None and self.ref_nodes is not None:
            for node in self.graph.gm.graph.nodes:
                value = self.ref_nodes.values.get(node.name)
                if node.op == "placeholder" or value is None or not _has_nonfinite(value):
                    continue
                ops = gp.aten_ops_of(self.graph.gm, node, self.ref_nodes.values | self._placeholder_values(fp64=True))
                return node.name, ta.op_name(ops[0]) if ops else "", gp.source_of(node)
        call = to_fp64(self.case.request)
        with pv.forced_reference():
            at = gp.locate_nonfinite(lambda: call_model(fp64_model(self.case.model), call))
        if at is None:
            return "", "", gp.SourceLine()
        return "", ta.op_name(at.op) if at.op is not None else "", at.source

    def _none(self, served: Comparison) -> Verdict:
        dtype = str(self.case.dtype).removeprefix("torch.")
        return Verdict("none", summary=vt.none_summary(served.ratio, dtype), evidence=self._evidence())

    def _artifact_mismatch(
        self,
        served: Comparison,
        fresh: RungRun,
        *,
        category: str = "artifact_mismatch",
        culprit: str = vt.STALE_ENTRY_CULPRIT,
        summary: str = vt.STALE_ENTRY_SUMMARY,
    ) -> Verdict:
        served_code = getattr(self, "_served_code", "")
        fresh_code = fresh.trace.output_code[-1] if fresh.trace.output_code else ""
        differing = oc.differing_kernels(served_code, fresh_code) if served_code and fresh_code else []
        node_name = ""
        constants: dict[str, Any] = {}
        for kernel in differing:
            ordered = self._in_graph_order(oc.nodes_of_kernel(fresh.trace.node_mappings, kernel))
            tokens = oc.changed_tokens(oc.kernels(served_code).get(kernel, ""), oc.kernels(fresh_code).get(kernel, ""))
            # Op names on the changed lines point at the node (exact first, then as part of a
            # longer name: Inductor's C++ writes rsqrt as ``1 / std::sqrt``).
            exact = [n for n in ordered if self._op_words(n) & tokens]
            partial = [
                n for n in ordered if any(w in t or t in w for w in self._op_words(n) for t in tokens if len(t) >= 3)
            ]
            # Only a constant differs: the node whose scalar argument is the constant the compiler writes now
            # (or, failing that, the stale one).
            stale, now = oc.changed_numbers(
                oc.kernels(served_code).get(kernel, ""), oc.kernels(fresh_code).get(kernel, "")
            )
            constant = self._nodes_with_constant(ordered, now) or self._nodes_with_constant(ordered, stale)
            if exact or constant or partial or ordered:
                node_name = (exact or constant or partial or ordered)[0]
                if constant and not exact:
                    constants = {"kernel": kernel, "served": stale, "fresh": now}
                break
        verdict = self._located(category, node_name, fresh.trace, culprit=culprit, summary=summary)
        evidence = dict(verdict.evidence)
        evidence.update(
            served_code_sha256=oc.code_digest(served_code) if served_code else "",
            fresh_code_sha256=oc.code_digest(fresh_code) if fresh_code else "",
            differing_kernels=differing,
            differing_constants=constants,
            served_fx_cache_keys=getattr(self, "_served_keys", []),
        )
        kernel = differing[0] if differing else verdict.kernel
        return Verdict(**{**verdict.to_dict(), "evidence": evidence, "kernel": kernel})

    def _signed_artifact_diverges(self, served: Comparison, fresh: RungRun) -> Verdict:
        """The served output came from a verified bundle hit (exactly the signed artifact) and is wrong, while a
        fresh compile after the same history is right. Not a stale cache entry: the bundle's build compiled it. At
        a shape none of the history ran (the bundle's qualified shapes), the artifact is specialised to the shapes
        it was compiled on; at one of them, the build's code generation is one this compiler does not reproduce."""
        if self.history_missing:
            return self._artifact_mismatch(
                served,
                fresh,
                category="lowering",
                culprit=vt.SIGNED_UNTOLD_CULPRIT,
                summary=vt.SIGNED_UNTOLD_SUMMARY,
            )
        ran = {_shapes_of(call) for call in self.case.history}
        if ran and _shapes_of(self.case.request) not in ran:
            return self._artifact_mismatch(
                served,
                fresh,
                category="shape_specialization",
                culprit=vt.SIGNED_SHAPE_CULPRIT,
                summary=vt.SIGNED_SHAPE_SUMMARY,
            )
        return self._artifact_mismatch(
            served, fresh, category="lowering", culprit=vt.SIGNED_CODEGEN_CULPRIT, summary=vt.SIGNED_CODEGEN_SUMMARY
        )

    def _decomposition(self) -> Verdict:
        table = ta.inductor_decompositions()
        candidates = self._graph_ops(table)
        culprit_op = None
        for op in candidates:
            trial = {k: v for k, v in table.items() if k != op}
            cmp, _ = self._rung(
                Variation(
                    backend="aot_eager_decomp_partition",
                    decompositions=trial,
                    label=f"aot_eager_decomp_partition without {ta.op_name(op)}",
                ),
                provenance=False,
            )
            if cmp.passed:
                culprit_op = op
                break
        if culprit_op is None:
            culprit_op = self._bisect_table(table)
        variation = Variation(backend="aot_eager_decomp_partition", label="aot_eager_decomp_partition")
        ops = [culprit_op] if culprit_op is not None else []
        return self._finish(
            "decomposition",
            variation,
            culprit=f"decomposition of {ta.op_name(culprit_op)}" if culprit_op else "a decomposition",
            ops=ops,
        )

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

    # -- localisation --------------------------------------------------------------------
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

    def _node(self, name: str) -> torch.fx.Node | None:
        if self.graph is None or not name:
            return None
        return next((n for n in self.graph.gm.graph.nodes if n.name == name), None)

    def _in_graph_order(self, names: list[str]) -> list[str]:
        if self.graph is None:
            return names
        order = [n.name for n in self.graph.gm.graph.nodes]
        return sorted([n for n in names if n in order], key=order.index)

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


def _is_definition(served: pv.Served) -> bool:
    """Whether a call was served by the op's definition (the reference, or the reference left to Inductor)."""
    return served.provider == REFERENCE or served.kind == "inductor"


def _has_config(name: str) -> bool:
    try:
        ta.inductor_config_value(name)
    except AttributeError:
        return False
    return True


def _has_nonfinite(value: Any) -> bool:
    from inferensics.replay._internal.tolerance import float_leaves

    return any(not bool(torch.isfinite(t).all()) for t in float_leaves(value))


def _nonfinite_counts(value: Any) -> dict[str, int]:
    """NaN and infinite elements of an output's floating leaves (all zero for ``None``)."""
    from inferensics.replay._internal.tolerance import float_leaves

    leaves = float_leaves(value) if value is not None else []
    nan = sum(int(torch.isnan(t).sum()) for t in leaves)
    inf = sum(int(torch.isinf(t).sum()) for t in leaves)
    return {"nan": nan, "inf": inf, "total": nan + inf}


def _numel(value: Any) -> int:
    """Elements of an output's floating leaves."""
    from inferensics.replay._internal.tolerance import float_leaves

    return sum(t.numel() for t in float_leaves(value)) if value is not None else 0


def _shapes_of(call: Any) -> tuple[tuple[int, ...], ...]:
    """The shapes of a call's tensors, in argument order."""
    from torch.utils._pytree import tree_leaves

    return tuple(tuple(t.shape) for t in tree_leaves(call) if isinstance(t, torch.Tensor))


def _positions(mask: torch.Tensor) -> list[list[int]]:
    return [list(map(int, p)) for p in mask.nonzero()[:POSITIONS_KEPT].tolist()]
