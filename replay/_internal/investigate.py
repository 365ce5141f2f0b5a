"""The replay ladder: attribute a failing request to a category, then localise it to a node and line.

Order: the request's own inputs, eager against fp64 (source op, unless forcing the kernel registry's
reference providers fixes eager: kernel provider), the served artifact against a fresh compile of the same
history (artifact mismatch), the fresh compile with the registry forced to its reference providers (kernel
provider), the same history against a compile at this shape
alone (shape specialisation), AOTAutograd with Inductor's decompositions (decomposition), then
Inductor with one thing switched off at a time: each custom pass and the pattern matcher (graph pass),
fusion (schedule), precision-cast emulation and each lowering (lowering). The first diverging Dynamo
node under the failing configuration names the op, the user's line and, through Inductor's
provenance, the kernel. Where the fp64 reference cannot run and eager in the serving dtype can (an op with no
float64 path), every rung is judged against that eager run instead, and the verdict says so.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Sequence
from typing import Any

import torch

from inferensics.bundle.errors import error_line
from inferensics.bundle.tolerance import fp64_model, to_fp64
from inferensics.replay._internal import graph_probe as gp
from inferensics.replay._internal import output_code as oc
from inferensics.replay._internal import providers as pv
from inferensics.replay._internal import torch_adapter as ta
from inferensics.replay._internal import verdict_text as vt
from inferensics.replay._internal.compiler_bisection import CompilerBisection
from inferensics.replay._internal.ladder import (
    Case,
    RungRun,
    Variation,
    as_call,
    call_model,
    input_names,
    run_served,
    serving_dtype,
    to_device,
)
from inferensics.replay._internal.node_search import NodeSearch
from inferensics.replay._internal.registry_checks import RegistryChecks
from inferensics.replay._internal.tolerance import Comparison, check_eager, compare
from inferensics.replay._internal.verdict import Verdict
from inferensics.replay._internal.verdict_text import num

POSITIONS_KEPT = 8
"""Positions of bad input elements listed in a verdict."""


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


class _Investigation(RegistryChecks, CompilerBisection, NodeSearch):
    """The ladder (the module docstring's order) and the verdict of each category; the registry rung, the
    compiler bisection and the diverging-node search are its bases'."""

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
            # request sent floats). Where eager runs, the inputs are not at fault: the model has no float64 path.
            try:
                with ta.index_bounds_checked([*case.request[0], *case.request[1].values()]):
                    eager = call_model(case.model, case.request)
            except Exception as exc:
                return self._inputs_from_exception(error_line(exc), fp64_only=False)
            return self._without_fp64(ref_error, eager, time.perf_counter() - t0)
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
        return self._compiled_ladder(served)

    def _compiled_ladder(self, served: Comparison) -> Verdict:
        """The rungs after a served output that fails: artifact, registry, shape, then the compiler bisection."""
        case = self.case
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

    def _without_fp64(self, ref_error: str, eager: Any, seconds: float) -> Verdict:
        """The fp64 reference raised while eager in the serving dtype ran the request: an op or the model has no
        float64 path (a custom op registered for the serving dtypes only, an integer-only kernel), not the caller's
        inputs. What ran is judged instead: the served output, and every later rung, against eager in the serving
        dtype (its reference and its anchor both, so a rung passes within :data:`RATIO_LIMIT` units of the dtype's
        rounding of eager), and eager's own accuracy is left unchecked. A served output that agrees is ``none``
        with :data:`~verdict_text.NO_FP64_CULPRIT`; one that does not climbs the rest of the ladder, its verdict's
        summary saying what it was judged against."""
        dtype = str(self.case.dtype).removeprefix("torch.")
        self.fp64_error = ref_error
        self.eager = self.ref = eager
        self.ref_nodes = self.eager_nodes  # the node search compares the compiled nodes with eager's
        self.rungs.append({"rung": "eager fp64", "passed": False, "error": ref_error, "seconds": round(seconds, 3)})
        served = self._served()
        node_name, op, src = self._fp64_raised_at()
        raised_at = {"op": op, "fx_node": node_name}
        if served.passed:
            return Verdict(
                "none",
                op=op,
                fx_node=node_name,
                source_file=src.file,
                source_line=src.line,
                source_text=src.text,
                culprit=vt.NO_FP64_CULPRIT,
                summary=vt.no_fp64_agrees_summary(ref_error, dtype, served.ratio, op=op, node_name=node_name, src=src),
                evidence=self._evidence(fp64_raised_at=raised_at),
            )
        verdict = self._compiled_ladder(served)
        evidence = {**verdict.evidence, "fp64_raised_at": raised_at}
        summary = vt.no_fp64_note(ref_error, dtype) + verdict.summary
        return Verdict(**{**verdict.to_dict(), "summary": summary, "evidence": evidence})

    def _fp64_raised_at(self) -> tuple[str, str, gp.SourceLine]:
        """Where the fp64 reference raised: the request graph's node (its name, op and user line) where Dynamo traced
        it, else the operator and model line an fp64 eager run raised at (no node name), else nothing."""
        failed = self._fp64_failed_node
        if self.graph is not None and failed:
            node = next(n for n in self.graph.gm.graph.nodes if n.name == failed)
            ops = gp.aten_ops_of(self.graph.gm, node, self._placeholder_values(fp64=True) | self._fp64_node_values)
            return failed, ta.op_name(ops[0]) if ops else "", gp.source_of(node)
        call = to_fp64(self.case.request)
        with pv.forced_reference():
            at = gp.locate_raise(lambda: call_model(fp64_model(self.case.model), call), [*call[0], *call[1].values()])
        if at is None:
            return "", "", gp.SourceLine()
        return "", ta.op_name(at.op) if at.op is not None else "", at.source

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
            self._fp64_failed_node, self._fp64_node_values = self.ref_nodes.failed_node, self.ref_nodes.values
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
        located = bool(node_name or op or src.file)
        traced = self.graph is not None and self.ref_nodes is not None
        checked = [] if located else [vt.NONFINITE_CHECKED_GRAPH] * traced + [vt.NONFINITE_CHECKED_EAGER]
        return Verdict(
            "inputs",
            op=op,
            fx_node=node_name,
            source_file=src.file,
            source_line=src.line,
            source_text=src.text,
            culprit=vt.NONFINITE_EVERYWHERE_CULPRIT,
            summary=vt.nonfinite_everywhere_summary(
                counts,
                served_has=counts[served.rung]["total"] > 0,
                node_name=node_name,
                op=op,
                src=src,
                checked=checked,
            ),
            evidence=self._evidence(
                nonfinite=counts,
                first_nonfinite={"op": op, "fx_node": node_name, **({"checked": checked} if checked else {})},
            ),
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
