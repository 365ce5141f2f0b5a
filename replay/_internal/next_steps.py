"""What on-call does next about a verdict: 2–4 steps for its category, naming the verdict's own op, node, pass,
shape or kernel, with the torch.compile/Inductor setting that works around or confirms it, the inferensics command
that confirms it, and what to attach to a bug report. A fault of the model's own math (non-finite in fp64 too, or
wrong in the serving dtype alone) gets the guard of its op: the denominator of a division, the row max before an exp,
a clamp before a log or sqrt; a wider dtype only where the serving dtype is at fault, and one wider than it.

Every setting named here exists in the torch this was written against (2.13): ``torch._inductor.config``'s
``emulate_precision_casts``, ``pattern_matcher``, ``max_fusion_size``, ``epilogue_fusion``, ``aggressive_fusion``
and the ``post_grad_custom_*_pass`` slots; ``torch._inductor.lowering.make_fallback``;
``torch._inductor.decomposition.decompositions``; ``TORCH_LOGS`` artifacts ``output_code``, ``fusion``,
``post_grad_graphs``, ``graph_code``, ``aot_graphs``, ``dynamic``, ``guards``; ``TORCHINDUCTOR_FORCE_DISABLE_CACHES``;
``TORCHDYNAMO_REPRO_AFTER``/``TORCHDYNAMO_REPRO_LEVEL`` (the accuracy minifier). tests/replay/test_next_steps.py
checks them against the installed torch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from inferensics.replay._internal import verdict_text as vt
from inferensics.replay._internal.verdict import Verdict
from inferensics.schema import columns as col


@dataclass(frozen=True)
class Replayed:
    """What the steps need beyond the verdict: the request and the bundle it was replayed against."""

    request_id: str
    """The request's id (the inferensics commands name it)."""
    request: Mapping[str, Any]
    """The store's row of the request (its host, start time and model)."""
    out: str = ""
    """The ``--out`` folder the reports went to, or ``""``."""
    repro: bool = False
    """Whether a ``repro.py`` is written for this verdict (a graph diverged)."""
    torch_version: str = ""
    """The torch this replay ran."""
    dynamic: Any = None
    """The bundle's ``torch.compile(dynamic=...)``."""
    customisations: Sequence[Mapping[str, Any]] = ()
    """The bundle's recorded compiler customisations (its manifest's)."""


def next_steps(verdict: Verdict, replayed: Replayed) -> list[str]:
    """The verdict's next steps, the one to take first first: the build history to replay when it was not, the
    request's shape to qualify when the bundle never did, then the category's own."""
    steps = _by_category(verdict, replayed)
    if verdict.evidence.get("fp64_error") and verdict.category != "none":
        steps.insert(0, _judged_without_fp64(verdict, replayed))
    unqualified = verdict.evidence.get("unqualified_shape")
    if unqualified:
        said = vt.unqualified_shape_text(unqualified["request"], unqualified["qualified"])
        # A shapes file holds the request's shape as its host recorded it (what --shapes-from-service reads), which
        # a request of several tensors (a KV cache beside the tokens) does not spell out.
        recorded = str(replayed.request.get(col.SHAPE) or "")
        add = f"add the request's shape {recorded}" if recorded else "add it"
        steps.insert(
            0,
            f"{said}: {add} to the build's --shapes and rebuild (or serve it from a bundle built on it) so that "
            "qualification checks it",
        )
    missing = verdict.evidence.get("build_history_not_replayed")
    if missing:
        steps.insert(
            0,
            f"make the build's inputs function importable and replay it again with the bundle's build history "
            f"(`{_replay(replayed)} --import-path DIR`, DIR the folder that holds it): without that history a fault "
            "specialised to the bundle's built shapes is not told apart",
        )
    return steps


def _by_category(v: Verdict, r: Replayed) -> list[str]:
    return _STEPS_BY_CATEGORY.get(v.category, _lowering)(v, r)


# -- shared wording --------------------------------------------------------------------------------------------------
def _replay(r: Replayed) -> str:
    return f"inferensics replay {r.request_id}"


def _at(v: Verdict) -> str:
    """``node mul_1 (aten.mul) at model.py:12``, as much of it as the verdict knows."""
    parts = [f"node {v.fx_node}" if v.fx_node else "", f"({v.op})" if v.op and v.fx_node else v.op]
    where = " ".join(p for p in parts if p)
    return where + (f" at {v.location}" if v.location else "")


def _kernel(v: Verdict) -> str:
    line = v.evidence.get("output_code_line") or 0
    return f"kernel {v.kernel}" + (f" (output code line {line})" if line else "") if v.kernel else "the generated code"


def _overload(v: Verdict) -> str:
    """The op as Python names it: ``torch.ops.aten.sum.dim_IntList`` (its overload where the ladder found it)."""
    found = str(v.evidence.get("op_overload") or v.op or "aten.OP")
    return f"torch.ops.{found.replace('::', '.')}"


def _bug_report(v: Verdict, r: Replayed, to: str, *, first: str = "") -> str:
    """Where to report it, what to attach, and where those files come from; ``first``: the shapes the compiled
    graph must be called at before the request's for the repro (which compiles at the request's alone) to fail."""
    folder = r.out or "DIR"
    files = (
        f"{folder}/repro.py, {folder}/repro_inputs.pt, {folder}/verdict.json" if r.repro else f"{folder}/verdict.json"
    )
    made = "" if r.out else f" (`{_replay(r)} --no-record --out DIR` writes them)"
    run = f"; `python {folder}/repro.py` exits 1 while the fault is there" if r.repro else ""
    if r.repro and first:
        run = f"; {folder}/repro.py compiles at the request's shape alone: call its compiled module at {first} first"
    torch_said = f"torch {r.torch_version}" if r.torch_version else "the torch version"
    about = f" about {_at(v)}" if _at(v) else ""
    return f"report it to {to}{about}: attach {files}{made} and say {torch_said}{run}"


def _minifier(r: Replayed) -> list[str]:
    """The accuracy minifier run on ``repro.py``; none where no repro is written (no graph was captured)."""
    folder = r.out or "DIR"
    return (
        [
            f"shrink it with Inductor's accuracy minifier: `TORCHDYNAMO_REPRO_AFTER=aot TORCHDYNAMO_REPRO_LEVEL=4 "
            f"python {folder}/repro.py` writes a minimal repro of the diverging subgraph"
        ]
        if r.repro
        else []
    )


# -- the model's own math: what guards its op ------------------------------------------------------------------------
_FAMILIES: Final[dict[str, frozenset[str]]] = {
    "division": frozenset({"div", "divide", "true_divide", "floor_divide", "reciprocal", "rsqrt", "remainder", "fmod"}),
    "exp": frozenset({"exp", "exp2", "expm1"}),
    "softmax": frozenset({"softmax", "_softmax", "log_softmax", "_log_softmax", "logsumexp"}),
    "domain": frozenset({"log", "log2", "log10", "log1p", "logit", "sqrt", "acos", "asin", "acosh", "atanh"}),
    "pow": frozenset({"pow", "float_power"}),
    "matmul": frozenset(
        {"mm", "bmm", "addmm", "baddbmm", "addbmm", "matmul", "linear", "einsum", "mv", "addmv", "dot"}
    ),
    "fill": frozenset({"masked_fill", "where", "full", "full_like", "new_full", "fill", "index_put", "scatter"}),
    "variance": frozenset({"var", "std", "var_mean", "std_mean"}),
}
"""The ops whose non-finite values one guard prevents, by the name :func:`_op_base` gives them."""

_DOMAIN_GUARD: Final = {
    "sqrt": "sqrt of a negative is NaN: clamp its input (`torch.sqrt(x.clamp_min(0))`)",
    "log1p": "log1p of -1 is -inf and below it NaN: clamp its input (`torch.log1p(x.clamp_min(-1 + 1e-6))`)",
    "acos": "acos outside [-1, 1] is NaN: clamp its input (`x.clamp(-1, 1)`)",
    "asin": "asin outside [-1, 1] is NaN: clamp its input (`x.clamp(-1, 1)`)",
    "atanh": "atanh of ±1 is inf and outside [-1, 1] NaN: clamp its input (`x.clamp(-1 + 1e-6, 1 - 1e-6)`)",
    "acosh": "acosh below 1 is NaN: clamp its input (`x.clamp_min(1)`)",
    "logit": "logit of 0 or 1 is inf and outside [0, 1] NaN: pass it an eps (`torch.logit(x, eps=1e-6)`)",
}
"""What clamps each op of the ``domain`` family; the logs (the rest) take the log's."""


def _op_base(op: str) -> str:
    """``div`` of ``aten.div``, ``aten.div.Tensor``, ``aten::div_`` or ``torch.ops.aten.div``; ``""`` for an op
    outside ATen (a custom op's name says nothing sure of its math) or none."""
    namespace, _, rest = op.removeprefix("torch.ops.").replace("::", ".").partition(".")
    if namespace not in ("aten", "prims"):
        return ""
    base = rest.split(".")[0]
    return base[:-1] if base.endswith("_") and not base.endswith("__") else base


def _op_family(op: str) -> str:
    """The key of :data:`_FAMILIES` that holds ``op`` (scaled dot-product attention is a softmax), or ``""``."""
    base = _op_base(op)
    if base.startswith("_scaled_dot_product") or base == "scaled_dot_product_attention":
        return "softmax"
    return next((family for family, names in _FAMILIES.items() if base in names), "")


def _denominator_example(op: str) -> str:
    base = _op_base(op)
    if base == "rsqrt":
        return "`torch.rsqrt(x + eps)`"
    if base == "reciprocal":
        return "`torch.reciprocal(x.clamp_min(eps))`"
    return "`x / d.clamp_min(1e-12)` or `x / (d + eps)`; torch.nn.functional.normalize does so for a row's norm"


def _guard_everywhere(op: str) -> str:
    """Why ``op`` turns non-finite where it does in fp64 too, and the guard: its inputs' values are the fault, not
    the dtype, so the guard is on those values (a wider dtype would not help)."""
    family = _op_family(op)
    if family == "division":
        return (
            "a zero denominator, such as an all-zero row's norm, gives inf, and 0/0 NaN: guard the denominator there, "
            f"add an eps or clamp_min it ({_denominator_example(op)})"
        )
    if family == "exp":
        return (
            "exp overflows past about 709, in fp64 too: subtract the row max before exp there "
            "(`torch.exp(x - x.amax(dim=-1, keepdim=True))`), or call torch.softmax / torch.logsumexp, which do"
        )
    if family == "softmax":
        return (
            f"{op} subtracts the row max itself, so only a row that is all -inf (fully masked) or holds inf gives "
            "NaN: mask with torch.finfo(dtype).min instead of -inf, which leaves no row all -inf"
        )
    if family == "domain":
        return _DOMAIN_GUARD.get(
            _op_base(op), "log of 0 is -inf and of a negative NaN: clamp its input (`torch.log(x.clamp_min(1e-12))`)"
        )
    if family == "pow":
        return (
            "a negative base to a fractional power is NaN and a large power overflows, in fp64 too: clamp the base "
            "there (`x.clamp_min(0) ** p`) or bound the exponent"
        )
    if family == "matmul":
        return "its inputs are large enough that the product overflows, in fp64 too: normalise or scale them down"
    if family == "fill":
        return (
            f"{op} writes a non-finite constant there (a -inf attention mask, say) that reaches the output (a softmax "
            "over a fully masked row gives NaN): fill with torch.finfo(dtype).min instead"
        )
    if family == "variance":
        return (
            "a var or std with correction=1 over a single element divides by zero: pass correction=0 "
            "(unbiased=False) or reduce over more than one element"
        )
    return "guard it there: keep its input in the op's domain and range (clamp it, or add an eps to a denominator)"


def _guard_in_dtype(op: str, dtype: str, how: str) -> str:
    """How to keep ``op`` right in the serving ``dtype`` where fp64 is right (``how``: ``overflows`` or ``loses
    precision``): the dtype's range or precision is the fault, so a wider dtype fixes it, or a rewrite that stays
    in range. Wider than float32 is float64: telling a float32 model to compute in float32 changes nothing."""
    wider, cast = ("float64", ".double()") if dtype == "float32" else ("float32", ".float()")
    upcast = f"compute that line in {wider} (`{cast}` on its inputs, the result cast back)"
    if how != "overflows":
        return f"{upcast} or rewrite it to lose less precision"
    family = _op_family(op)
    if family == "exp":
        return (
            "subtract the row max before exp (`torch.exp(x - x.amax(dim=-1, keepdim=True))`), or call torch.softmax "
            f"/ torch.logsumexp, which do; or {upcast}"
        )
    if family == "matmul" and dtype == "float16":
        return (
            "scale an operand down before the product (q by 1/sqrt(d) before q @ k.T, not the product after), "
            f"or {upcast}: float16 overflows past 65504"
        )
    if family == "division":
        tiny = "; an eps of 1e-8 is 0 in float16" if dtype == "float16" else ""
        return f"guard the denominator (add an eps or clamp_min it{tiny}), or {upcast}"
    if family == "domain":
        return f"clamp its input into the op's domain (a value that rounds to 0 or below in {dtype}), or {upcast}"
    return f"{upcast} or rewrite it to stay in range"


# -- per category ----------------------------------------------------------------------------------------------------
def _none(v: Verdict, r: Replayed) -> list[str]:
    if v.not_reproduced and v.evidence.get("fp64_error"):
        # Re-executed "within tolerance" of eager in the serving dtype, fp64 having no path: the steps say so.
        return [*_not_reproduced(r)[:3], _no_fp64_path(v, r)]
    if v.not_reproduced:
        return _not_reproduced(r)
    if v.culprit == vt.NO_FP64_CULPRIT:
        return _no_fp64(v, r)
    model = str(r.request.get(col.MODEL) or "")
    return [
        f"nothing to fix in the compiled path: request {r.request_id} re-executed against its bundle agrees with fp64 "
        "within tolerance",
        "if it was reported wrong, check the code around the compiled graph (pre- and post-processing, in-place "
        "changes of the output) and that its captured inputs are what the client sent",
        "`inferensics requests --failing" + (f" --model {model}" if model else "") + "` lists the requests that did "
        "fail",
    ]


def _no_fp64_path(v: Verdict, r: Replayed) -> str:
    """The step that gives the model the float64 path its fp64 reference lacked, so a replay can check eager."""
    dtype = str(v.evidence.get("serving_dtype") or "the serving dtype")
    at = v.evidence.get("fp64_raised_at") or {}
    op, node = str(at.get("op") or ""), str(at.get("fx_node") or "")
    what = (op + (f" (node {node})" if node else "")) if op else (f"node {node}" if node else "the model")
    where = f" at {v.location}" if v.location and v.culprit == vt.NO_FP64_CULPRIT else ""
    return (
        f"{what}{where} has no float64 path (eager fp64 raised {v.evidence.get('fp64_error')}): give it one (a "
        f"float64 kernel, or a cast to {dtype} and back around it) and `{_replay(r)} --what-if --no-record` checks "
        f"eager {dtype} itself against fp64, which this replay could not"
    )


def _judged_without_fp64(v: Verdict, r: Replayed) -> str:
    dtype = str(v.evidence.get("serving_dtype") or "the serving dtype")
    return (
        f"every rung was judged against eager {dtype}, not fp64, which could not run; the compiled path diverges "
        f"from eager {dtype}, which the steps below follow. {_no_fp64_path(v, r)}"
    )


def _no_fp64(v: Verdict, r: Replayed) -> list[str]:
    """fp64 could not run and the served output agrees with eager in the serving dtype."""
    dtype = str(v.evidence.get("serving_dtype") or "the serving dtype")
    model = str(r.request.get(col.MODEL) or "")
    return [
        _no_fp64_path(v, r),
        f"nothing to change in the compiler or the bundle: the served output agrees with eager {dtype} (rung "
        "served), and the inputs are not at fault (eager ran them)",
        f"if it was reported wrong, eager {dtype} may be wrong itself: check the model's math there against a "
        "reference, and the code around the compiled graph (pre- and post-processing); `inferensics requests "
        "--failing" + (f" --model {model}" if model else "") + "` lists the requests that did fail",
    ]


def _not_reproduced(r: Replayed) -> list[str]:
    """A failure the replay did not reproduce."""
    host, ts = str(r.request.get(col.HOST) or "?"), str(r.request.get(col.TS) or "?")
    model = str(r.request.get(col.MODEL) or "")
    return [
        f"replay it a few more times (`{_replay(r)} --no-record`): a fault that comes and goes is nondeterministic",
        f"check the health of host {host} and its device around {ts} (ECC and Xid errors, thermal throttling)",
        f"look for other failing requests on host {host} at that time (`inferensics requests --failing"
        + (f" --model {model}" if model else "")
        + "`): several at once point at the host or at concurrency",
        "check the code around the compiled graph (pre- and post-processing, in-place changes of the output)",
    ]


def _inputs(v: Verdict, r: Replayed) -> list[str]:
    if v.culprit == vt.NONFINITE_EVERYWHERE_CULPRIT and not _at(v):
        checked = (v.evidence.get("first_nonfinite") or {}).get("checked") or ["the fp64 run"]
        return [
            "the model's math turns non-finite on these inputs, in fp64 too, but no single op was located: "
            f"neither {' nor '.join(checked)} turned non-finite, so the output's non-finite values come from code "
            "outside the ops looked at (a Python constant, code after the graph); guard them there, or reject such "
            "inputs upstream",
            "nothing to change in the compiler or the bundle: eager in fp64 gives the same non-finite values",
            f"`{_replay(r)} --export DIR` writes the captured inputs, to see which values do it",
        ]
    if v.culprit == vt.NONFINITE_EVERYWHERE_CULPRIT:
        return [
            f"the model's math turns non-finite on these inputs, in fp64 too: {_at(v) or 'its first op'} is the first "
            f"to; {_guard_everywhere(v.op)}, or reject such inputs upstream",
            "nothing to change in the compiler or the bundle: eager in fp64 gives the same non-finite values",
            f"`{_replay(r)} --export DIR` writes the captured inputs, to see which values do it",
        ]
    bad = (v.evidence.get("bad_inputs") or [{}])[0]
    if bad.get("valid_range"):
        what = f"input {bad['tensor']} holds {bad['count']} values outside {bad['valid_range']} at {bad['positions']}"
    elif bad.get("tensor"):
        what = f"input {bad['tensor']} holds {bad['count']} non-finite values at {bad['positions']}"
    else:
        what = v.culprit + (f" ({v.evidence['error']})" if v.evidence.get("error") else "")
    return [
        f"fix the caller: {what}; validate it where requests enter the service"
        + (f" (the model reads it at {v.location}: `{v.source_text}`)" if v.location else ""),
        "nothing to change in the compiler or the bundle: eager in fp64 fails the same way on these inputs",
        f"`{_replay(r)} --export DIR` writes the captured inputs, to hand to whoever sent them",
    ]


def _source_op(v: Verdict, r: Replayed) -> list[str]:
    dtype = str(v.evidence.get("serving_dtype") or "the serving dtype")
    eager = v.evidence.get("nonfinite", {}).get(f"eager {dtype}", {})
    how = "overflows" if eager.get("total") else "loses precision"
    line = f" at {v.location} (`{v.source_text}`)" if v.location else ""
    return [
        f"fix the model's code{line}: {v.op or 'its op'} {how} in {dtype}; {_guard_in_dtype(v.op, dtype, how)}",
        f"no compiler setting changes this: eager {dtype} is already wrong against fp64 (rung eager), so there is "
        "nothing to report to PyTorch and no bundle to rebuild for it",
        f"after the fix, `{_replay(r)} --what-if --no-record` from the changed code replays the request against "
        "the same bundle (a what-if: the code differs from the build's) to confirm",
    ]


def _kernel_provider(v: Verdict, r: Replayed) -> list[str]:
    p = v.evidence.get("provider") or {}
    op, provider = p.get("op", v.op), p.get("provider", "its provider")
    where = f"{p.get('provider_function', '')} at {p.get('provider_file', '')}:{p.get('provider_line', '')}"
    return [
        f"confirm: `inferensics kernels list` shows {op}'s providers in order; {provider} ({where}) is wrong on "
        f"this call (bucket {p.get('bucket', '?')}) and {op}'s reference is right",
        f"work around it: `inferensics kernels qualify --op {op} --out EVIDENCE` on this device (its accuracy gate "
        f"refuses a wrong provider per bucket), then `inferensics bundle build ... --kernel-evidence EVIDENCE` so "
        f"hosts serve {op} without {provider}",
        _bug_report(v, r, f"the owner of provider {provider}"),
    ]


def _decomposition(v: Verdict, r: Replayed) -> list[str]:
    custom = v.evidence.get("customisation") or {}
    if custom:
        fix = (
            f"the bundle's customisation {custom['import_path']} replaces {custom['target']}'s decomposition"
            + (f" ({custom['source_file']}:{custom['source_line']})" if custom.get("source_file") else "")
            + f": fix it and rebuild, or rebuild without `--decomposition {custom['target']}=...`"
        )
    else:
        fix = (
            f"work around it: before the first compile, `torch._inductor.decomposition.decompositions.pop("
            f"{_overload(v)}, None)` (Inductor then lowers {v.op} or calls ATen's kernel), or give a correct one "
            f"with `inferensics bundle build ... --decomposition {_overload(v).removeprefix('torch.ops.')}="
            "module:function`"
        )
    return [
        f'confirm: `torch.compile(model, backend="aot_eager_decomp_partition")` reproduces it and '
        f'`backend="aot_eager"` does not (as its rungs did): the decomposition of {v.op or "an op"} is wrong '
        f"at {_at(v)}",
        fix,
        _bug_report(v, r, "PyTorch (torch._decomp / torch._refs)" if not custom else "the customisation's owner"),
    ]


def _graph_pass(v: Verdict, r: Replayed) -> list[str]:
    if v.culprit == vt.AOT_EAGER_CULPRIT:
        return [
            'confirm: `torch.compile(model, backend="aot_eager")` reproduces it; `backend="eager"` tells '
            "Dynamo's capture from AOTAutograd's",
            f"`TORCH_LOGS=graph_code,aot_graphs` prints both graphs; compare them around {_at(v)}",
            _bug_report(v, r, "PyTorch (Dynamo/AOTAutograd)"),
        ]
    slot, _, name = v.culprit.partition("=")
    if slot.startswith("pattern_matcher"):
        return [
            "work around it: `torch._inductor.config.pattern_matcher = False` (in a bundle: `inferensics bundle "
            "build ... --option pattern_matcher=false`); the rung `inductor pattern_matcher=False` passed",
            f"`TORCH_LOGS=post_grad_graphs` prints the graph after the pattern passes: look at {_at(v)}",
            _bug_report(v, r, "PyTorch (Inductor pattern matcher)"),
        ]
    recorded = next((c for c in r.customisations if c.get("kind") == "fx_pass" and c.get("target") == slot), None)
    owner = (
        f"the bundle's customisation {recorded['import_path']} runs as {slot}: fix it and rebuild the bundle"
        if recorded
        else f"{name or 'the pass'} is installed as {slot} by the serving code: fix it there"
    )
    return [
        f"work around it: compile without it (`torch._inductor.config.{slot} = None`); the rung "
        f"`inductor without {v.culprit}` passed",
        f"`TORCH_LOGS=post_grad_graphs` prints the graph after {name or slot}: see what it rewrote at {_at(v)}",
        owner,
    ]


def _schedule(v: Verdict, r: Replayed) -> list[str]:
    # The rung that passed also refused every fusion in Inductor's scheduler (ta.fusion_disabled), which these
    # options alone leave on in places: the step says so rather than claim the options were what passed.
    return [
        'work around it: compile with fusion off, `options={"max_fusion_size": 1, "epilogue_fusion": False, '
        '"aggressive_fusion": False}` (in a bundle: `inferensics bundle build ... --option max_fusion_size=1 '
        "--option epilogue_fusion=false --option aggressive_fusion=false`); the rung that passed had these and "
        "every scheduler fusion refused, which they alone do not do everywhere: check the request with them",
        f"`TORCH_LOGS=fusion,output_code` shows what {_kernel(v)} fused around {_at(v)}",
        *_minifier(r),
        _bug_report(v, r, "PyTorch (Inductor scheduler)"),
    ]


def _lowering(v: Verdict, r: Replayed) -> list[str]:
    if v.culprit == vt.SIGNED_CODEGEN_CULPRIT:
        differing = ", ".join(v.evidence.get("differing_kernels") or []) or "none named"
        return [
            "compare the build's compiler with this one: `inferensics bundle show BUNDLE` lists the torch version and "
            f"settings the bundle was built with; this replay ran torch {r.torch_version or '?'}",
            f"the kernels that differ from a fresh compile: {differing} (both codes' sha256 are in the evidence)",
            "rebuild the bundle with the compiler the hosts run (`inferensics bundle build ...`); its qualification "
            "checks every shape against fp64",
        ]
    if v.culprit == vt.SIGNED_UNTOLD_CULPRIT:
        differing = ", ".join(v.evidence.get("differing_kernels") or []) or "none named"
        return [
            f"meanwhile: {_kernel(v)} of the signed artifact computes {_at(v) or 'the request'} wrong at this shape",
            f"the kernels that differ from a fresh compile without the build history: {differing}",
        ]
    if "emulate_precision_casts" in v.culprit:
        return [
            "work around it: `torch._inductor.config.emulate_precision_casts = True` (in a bundle: `inferensics "
            "bundle build ... --option emulate_precision_casts=true`); the rung with it passed",
            f"`TORCH_LOGS=output_code` prints {_kernel(v)}, which computes {_at(v)} without the intermediate casts",
            _bug_report(v, r, "PyTorch (Inductor codegen)"),
        ]
    steps = []
    if v.culprit.startswith("lowering of "):
        steps.append(
            f"work around it: before compiling, make Inductor call ATen's kernel for {v.op} instead of its lowering: "
            f"`torch._inductor.lowering.make_fallback({_overload(v)}, warn=False, override_decomp=True)`; the rung "
            f"with {v.op} as a fallback passed"
        )
    steps.append(f"`TORCH_LOGS=output_code` prints {_kernel(v)}, which computes {_at(v) or 'the diverging node'}")
    if v.culprit.startswith("lowering of "):
        steps.append(_bug_report(v, r, "PyTorch (Inductor lowering)"))
        return steps
    # No rung fixed it: the ladder ruled out what it switched off, and named no part of Inductor.
    steps += _minifier(r)
    steps.append(_bug_report(v, r, "PyTorch (Inductor)"))
    return steps


def _shape_specialization(v: Verdict, r: Replayed) -> list[str]:
    unqualified = v.evidence.get("unqualified_shape") or {}
    request = unqualified.get("request")
    built = unqualified.get("qualified") or v.evidence.get("bundle_build_history") or []
    shape = vt.shape_text(request) if request else "the request's shape"
    on = ", ".join(vt.shape_text(s) for s in built) or "its qualified shapes"
    steps = (
        []
        if unqualified
        else [
            f"confirm: `inferensics bundle build ... --shapes FILE` with the build's shapes ({on}) in that order and "
            f"{shape} last: its qualification compiles them in order and refuses to sign when {shape} is wrong "
            "against fp64",
        ]
    )
    steps += [
        f"`TORCH_LOGS=dynamic,guards` shows the size hints and the guards that let {shape} through the graph compiled "
        f"at {on}; {_kernel(v)} computes {_at(v)}",
    ]
    if r.dynamic is not False:
        fallback = (
            f", or make Inductor call ATen's kernel for {v.op}, whose lowering the ladder found at fault "
            f"(`torch._inductor.lowering.make_fallback({_overload(v)}, warn=False, override_decomp=True)`)"
            if v.culprit.startswith("lowering of ")
            else ""
        )
        steps.append(
            f"work around it: build the bundle `--static` (a graph per shape, {shape} compiled for itself){fallback}"
        )
    steps.append(_bug_report(v, r, "PyTorch (Inductor dynamic shapes)", first=on))
    return steps


def _artifact_mismatch(v: Verdict, r: Replayed) -> list[str]:
    host = str(r.request.get(col.HOST) or "the serving host")
    keys = ", ".join(str(k)[:16] for k in (v.evidence.get("served_fx_cache_keys") or [])[:2])
    differing = ", ".join(v.evidence.get("differing_kernels") or []) or v.kernel or "none named"
    constants = v.evidence.get("differing_constants") or {}
    changed = f" (constants {constants['served']} served, {constants['fresh']} now)" if constants else ""
    return [
        f"confirm and work around it: serve on host {host} with `TORCHINDUCTOR_FORCE_DISABLE_CACHES=1` (or purge its "
        "$TORCHINDUCTOR_CACHE_DIR)" + (f"; the served FX graph cache keys: {keys}" if keys else ""),
        f"the kernels that differ from a fresh compile: {differing}{changed}, at {_at(v) or 'the request graph'}",
        "serve from a signed bundle (`inferensics bundle build`, then `inferensics bundle verify BUNDLE` on hosts): "
        "a verified bundle hit runs exactly the signed artifact, never a local cache entry",
    ]


_STEPS_BY_CATEGORY: Final[dict[str, Callable[[Verdict, Replayed], list[str]]]] = {
    "none": _none,
    "inputs": _inputs,
    "source_op": _source_op,
    "kernel_provider": _kernel_provider,
    "decomposition": _decomposition,
    "graph_pass": _graph_pass,
    "schedule": _schedule,
    "shape_specialization": _shape_specialization,
    "artifact_mismatch": _artifact_mismatch,
    "lowering": _lowering,
}
"""Each verdict category's next steps (a category without an entry reads as a lowering fault)."""
