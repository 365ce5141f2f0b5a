"""The verdict in words: each category's culprit and summary as people read them.

The ladder (:mod:`inferensics.replay._internal.investigate`) finds the fault and its numbers; this module says
it. What to do about each verdict lives beside it, in :mod:`inferensics.replay._internal.next_steps`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Final

from inferensics.bundle.shapes import input_shape_text, qualified_text
from inferensics.replay._internal.graph_probe import SourceLine
from inferensics.replay._internal.tolerance import EAGER_LIMIT, RATIO_LIMIT

AOT_EAGER_CULPRIT: Final = "Dynamo/AOTAutograd tracing (aot_eager)"
AOT_EAGER_SUMMARY: Final = "aot_eager already diverges: the traced graph differs from eager"

SHAPE_SPECIALISED_SUMMARY: Final = (
    "the artifact compiled for the serving history diverges at this shape; a compile at this shape is right"
)
"""A compile after the serving history diverges where a compile at the request's shape alone is right."""

STALE_ENTRY_CULPRIT: Final = "served artifact"
STALE_ENTRY_SUMMARY: Final = (
    "the served artifact diverges while the same compiler, compiling now, is right: a stale or poisoned cache entry"
)

SIGNED_SHAPE_CULPRIT: Final = "the bundle's artifact, compiled for other shapes (its qualified shapes)"
SIGNED_SHAPE_SUMMARY: Final = (
    "the bundle's signed artifact (a verified hit) diverges at this shape, which its build never ran; a compile "
    "here is right: the artifact is specialised to the shapes it was built on"
)
SIGNED_CODEGEN_CULPRIT: Final = "code generation of the bundle's build, not reproduced by this compiler"
SIGNED_CODEGEN_SUMMARY: Final = (
    "the bundle's signed artifact (a verified hit, not a stale cache entry) diverges, while this compiler, after "
    "the bundle's build history, generates code that is right: the build's compiler differed (another torch build, "
    "or a compiler patch or setting the manifest does not record); the differing kernels are in the evidence"
)
SIGNED_UNTOLD_CULPRIT: Final = "code generation of the bundle's build (its build history not replayed)"
SIGNED_UNTOLD_SUMMARY: Final = (
    "the bundle's signed artifact (a verified hit, not a stale cache entry) diverges, while a fresh compile without "
    "the bundle's build history is right: a specialisation to the shapes the bundle was built on is neither ruled "
    "out nor claimed"
)
"""A verified hit that diverges where a fresh compile is right, when the build history could not be replayed."""

HISTORY_MISSING_NOTE: Final = "[build history not replayed: no shape-specialisation verdict without it]"
"""The bracket a verdict's summary carries when the bundle's build history was not replayed (the reason, and
what to do, are the verdict's ``build history`` line)."""


def num(x: float) -> float | str:
    """A figure as the verdict's JSON holds it: rounded, or ``inf``/``nan`` spelled out."""
    return round(x, 3) if math.isfinite(x) else str(x)


def located_summary(category: str, culprit: str, node_name: str, op: str) -> str:
    """The default summary of a verdict localised to a node."""
    return f"{category}: {culprit}" + (f", first diverging node {node_name} ({op})" if node_name else "")


def none_summary(ratio: float, dtype: str) -> str:
    """The served output agrees with fp64 within tolerance."""
    return (
        f"the served output is within tolerance of fp64 (ratio {num(ratio)} against eager's own error, limit "
        f"{RATIO_LIMIT}); compared: eager fp64, eager {dtype}, served"
    )


# -- inputs ---------------------------------------------------------------------------------------------------------
def nonfinite_input_summary(first: Mapping[str, Any]) -> str:
    """A non-finite input that makes fp64 non-finite too."""
    return (
        f"input {first['tensor']} holds {first['count']} non-finite values at {first['positions']}; "
        "fp64 eager gives non-finite output too, so no compiler path is at fault"
    )


def raised_input_summary(detail: Mapping[str, Any], error: str) -> str:
    """A request that raises: the input out of range when one is found, else the error every path raises."""
    if detail:
        where = f"outside {detail['valid_range']} at {detail['positions']}"
        return f"input {detail['tensor']} holds {detail['count']} values {where}"
    return f"every path raises on this request: {error}"


def raised_without_node_summary(
    raised: str, *, fp64_only: bool, error: str, traced: bool, located: bool, op: str, src: SourceLine
) -> str:
    """A request that raises where no FX node names the op: what running it eagerly found, and what it did not."""
    no_node = (
        "no FX node: it raised outside the graph Dynamo traced"
        if traced
        else "no FX node: Dynamo could not trace the request with these inputs"
    )
    if not located:
        where = f"not located: {no_node}, and running it eagerly again did not raise"
    elif op and src.file:
        where = f"located by running it eagerly ({no_node})"
    elif op:
        where = (
            f"located by running it eagerly ({no_node}); {op} was reached through torch's own modules only, "
            "from no line of the model's code"
        )
    elif src.file:
        where = f"raised outside any operator, at the model's line ({no_node})"
    else:
        where = (
            f"not located: {no_node}, no operator raised when it ran eagerly, and no frame of the traceback is "
            "the model's own code"
        )
    return f"{raised} raised on this request{'' if fp64_only else ', in fp64 too'}: {error}; {where}"


# -- no fp64 reference -----------------------------------------------------------------------------------------------
NO_FP64_CULPRIT: Final = "no fp64 reference (the model has no float64 path); the served output agrees with eager"
"""A request whose fp64 reference raised while eager in the serving dtype ran it, and whose served output agrees
with that eager run: no compiler fault found, eager's own accuracy unchecked."""


def _raised_at(op: str, node_name: str, src: SourceLine) -> str:
    """`` at aten.foo (node x, model.py:12)``, as much as is known, or ``""``."""
    said = ", ".join(
        p for p in (f"node {node_name}" if node_name else "", f"{src.file}:{src.line}" if src.file else "") if p
    )
    return (f" at {op}" if op else "") + (f" ({said})" if said else "")


def no_fp64_note(error: str, dtype: str) -> str:
    """The bracket before the summary of a verdict judged against eager in ``dtype`` because fp64 could not run."""
    return (
        f"[no fp64 reference: eager fp64 raised {error}; every rung was judged against eager {dtype}, whose own "
        "accuracy is unchecked] "
    )


def no_fp64_agrees_summary(error: str, dtype: str, ratio: float, *, op: str, node_name: str, src: SourceLine) -> str:
    """The fp64 reference could not run, eager in ``dtype`` did, and the served output agrees with it."""
    return (
        f"the fp64 reference could not run: eager fp64 raised {error}{_raised_at(op, node_name, src)}, while eager "
        f"{dtype} ran the request: the model has no float64 path there, and the inputs are not at fault; judged "
        f"against eager {dtype} instead, the served output agrees with it ({num(ratio)} × {dtype} rounding, limit "
        f"{RATIO_LIMIT}): no compiler fault found; eager {dtype}'s own accuracy is not checked"
    )


NONFINITE_EVERYWHERE_CULPRIT: Final = "the model on these inputs (non-finite in fp64 eager too)"


NONFINITE_CHECKED_GRAPH: Final = "the fp64 value of each node of the request's graph"
NONFINITE_CHECKED_EAGER: Final = "each operator's result in an fp64 eager run"
"""What the search for the first non-finite op looks at: the request graph's nodes (where Dynamo traced it), then the
operators of an fp64 eager run."""


def nonfinite_everywhere_summary(
    counts: Mapping[str, Mapping[str, int]],
    *,
    served_has: bool,
    node_name: str,
    op: str,
    src: SourceLine,
    checked: Sequence[str] = (),
) -> str:
    """Non-finite output where fp64 has it too: every path's counts and the first op that turned non-finite, or,
    where none was located, what was checked (``checked``)."""
    described = ", ".join(f"{path} {said(c)}" for path, c in counts.items())
    where = (
        f"first non-finite value from {op or 'an op'}"
        + (f" (node {node_name})" if node_name else "")
        + (f" at {src.file}:{src.line}: {src.text}" if src.file else "")
    )
    if checked:
        where = f"no single op was located: neither {' nor '.join(checked)} turned non-finite"
    return (
        "non-finite output in every path, fp64 eager included"
        if served_has
        else "non-finite output in fp64 and eager (the served output has none)"
    ) + f" ({described}): not the compiler, the inputs and the model produce it; {where}"


# -- source op and kernel provider ----------------------------------------------------------------------------------
SOURCE_OP_CULPRIT: Final = "model code"


def source_op_summary(
    src: SourceLine, dtype: str, ratio: float, counts: Mapping[str, Mapping[str, int]], *, size: int, node_name: str
) -> str:
    """Eager in the serving dtype is wrong against fp64: the model's own math, with each path's non-finite counts
    (``counts`` holds ``fp64`` and ``eager <dtype>``)."""
    eager_bad, ref_bad = counts[f"eager {dtype}"], counts["fp64"]
    where = f" at {src.file}:{src.line}" + (f" (`{src.text}`)" if src.text else "") if src.file else ""
    if eager_bad["total"]:
        ref_said = f"fp64 {share(ref_bad, size, like=eager_bad)}" if ref_bad["total"] else "fp64 is finite everywhere"
        what = f"overflows{where}: eager {dtype} gives {share(eager_bad, size)} and {ref_said}"
    else:
        what = f"loses precision{where}: eager {dtype} is {num(ratio)} rounding units from fp64 (limit {EAGER_LIMIT})"
    return f"your model's own math {what} — not a compiler fault" + (
        f"; the first wrong op is {node_name}" if node_name else ""
    )


def provider_culprit(served: Mapping[str, Any]) -> str:
    """``provider triton (triton) of mylib::rms_norm, bucket …`` from a served decision's dict."""
    return f"provider {served['provider']} ({served['kind']}) of {served['op']}, bucket {served['bucket']}"


def provider_summary(served: Mapping[str, Any], *, compiled: bool, src: SourceLine) -> str:
    """A registry provider that serves a call wrong where its reference is right."""
    where = f"{served['provider_file']}:{served['provider_line']}" if served["provider_file"] else "unknown file"
    return (
        f"{served['op']} was served by provider {served['provider']} ({served['provider_function']} at {where})"
        f"{' in the compiled graph' if compiled else ''}; with the reference provider the request is right"
        + (f"; called at {src.file}:{src.line}" if src.file else "")
    )


# -- non-finite counts ----------------------------------------------------------------------------------------------
def share(counts: Mapping[str, int], size: int, *, like: Mapping[str, int] | None = None) -> str:
    """``NaN in 256/256 outputs``; ``in 192/256`` when ``like`` is non-finite the same way (``and fp64 in …``)."""
    kinds = [label for key, label in (("nan", "NaN"), ("inf", "inf")) if counts[key]]
    same = like is not None and kinds == [label for key, label in (("nan", "NaN"), ("inf", "inf")) if like[key]]
    if same:
        return f"in {counts['total']}/{size}"
    what = " or ".join(kinds)
    detail = f" (NaN {counts['nan']}, inf {counts['inf']})" if len(kinds) > 1 else ""
    return f"{what} in {counts['total']}/{size} outputs{detail}"


def said(counts: Mapping[str, int]) -> str:
    """``8 NaN``, ``2 inf``, ``8 NaN and 2 inf`` or ``none``."""
    parts = [f"{counts[k]} {label}" for k, label in (("nan", "NaN"), ("inf", "inf")) if counts[k]]
    return " and ".join(parts) or "none"


# -- what the executor adds -----------------------------------------------------------------------------------------
def not_reproduced_text(recorded: Mapping[str, Any], ratio: str) -> tuple[str, str]:
    """The culprit and summary of a request whose row recorded an error or non-finite output (``recorded``: its
    ``error``, ``nan`` and ``inf``) that re-executing the bundle on its captured inputs does not give; ``ratio``:
    the re-executed rung's figure as a parenthesis, or ``""``."""
    counts = " and ".join(f"{n} {label}" for n, label in ((recorded["nan"], "NaN"), (recorded["inf"], "inf")) if n)
    found = [f"the request raised {recorded['error']}"] if recorded["error"] else []
    found += [f"the served output had {counts}"] if counts else []
    what = " and ".join(found)
    culprit = f"not reproduced: {what}; the re-executed bundle is finite and within tolerance"
    return culprit, (
        f"not reproduced: {what}; re-executing the same bundle on the captured inputs is finite and within "
        f"tolerance{ratio}: suspect nondeterminism, hardware, concurrency or code outside the compiled graph "
        "(post-processing, the serving loop)"
    )


def shape_text(shape: Any) -> str:
    """A request's input shape as a shape distribution and the request page write it (``2x11x16``); a tuple of them
    where it has several tensors (``(4x120, 2x4x4x128x16)``), as a graph's sizes at one call read
    (:mod:`inferensics.schema.shape_text`)."""
    if isinstance(shape, list | tuple) and shape and isinstance(shape[0], list | tuple):
        return "(" + ", ".join(shape_text(s) for s in shape) + ")"
    return input_shape_text(shape)


def unqualified_shape_text(request: Any, qualified: list[list[int]]) -> str:
    """The request's input shape was never qualified by the bundle: ``request input shape 4x13 was never qualified by
    this bundle (qualified: input shapes 4x8)``, the bundle's input shapes as ``bundle verify``'s ``qualified:``
    line writes them."""
    several = bool(request) and isinstance(request[0], list | tuple)
    said = (
        f"request input shapes {shape_text(request)} were"
        if several
        else f"request input shape {shape_text(request)} was"
    )
    return f"{said} never qualified by this bundle (qualified: {qualified_text(qualified)})"
