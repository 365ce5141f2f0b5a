"""fp64-anchored comparison: a candidate's error against fp64 measured against eager's own error.

A flat ``rtol=atol=1e-2`` misses faults that touch a few elements or stay below 1 %; an error ratio
does not: fault-free compiles sit near 1, faulty ones hundreds of times over. Both the RMSE ratio (a
fault spread thin) and the max-abs ratio (a fault in a few elements) are taken, and the larger decides.
Each ratio divides by eager's error on the same ops and inputs, so the allowance is per op and per
dtype by construction; a floor of one unit of the dtype's rounding keeps exact eager results from
making every candidate infinitely wrong.

One rule for the two places that judge compiled numerics: a bundle's qualification (each shape's compiled
output, :mod:`inferensics.bundle.accuracy`) and replay's ladder (each rung), which imports it from here.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Any, Final

import torch

RATIO_LIMIT: Final = 10.0
"""A candidate passes while its error ratio against eager stays at or below this."""
EAGER_LIMIT: Final = 1000.0
"""Eager (or one eager op) is wrong against fp64 when its error exceeds the dtype's own rounding by this."""
WORST_KEPT: Final = 5
"""Worst elements kept as evidence per comparison."""
LOGITS_MIN_VOCAB: Final = 16
"""A leaf whose last dimension is at least this large also gets per-position KL and top-k figures."""


@dataclass(frozen=True)
class Comparison:
    """One candidate against the fp64 reference, anchored on eager in the serving dtype."""

    rung: str
    """What ran (``inductor``, ``aot_eager``, ``inductor max_fusion_size=1``, ...)."""
    ratio: float
    """max(RMSE ratio, max-abs ratio); ``inf`` when the candidate adds non-finite values."""
    rmse: float
    max_abs: float
    anchor_rmse: float
    anchor_max_abs: float
    nonfinite_new: int
    """Elements non-finite here while fp64 and eager are finite."""
    worst: list[dict[str, Any]] = field(default_factory=list)
    """The largest errors: leaf, index, value, fp64 value."""
    mean_kl: float | None = None
    """Mean per-position KL(fp64 ‖ candidate) over softmax of the last dimension (logit-like leaves)."""
    top1_agree: float | None = None
    """Fraction of positions whose argmax equals fp64's."""
    top5_contains: float | None = None
    """Fraction of positions whose fp64 argmax is in the candidate's top 5."""

    @property
    def passed(self) -> bool:
        """Within tolerance: no new non-finite values and the ratio at most :data:`RATIO_LIMIT`."""
        return self.nonfinite_new == 0 and self.ratio <= RATIO_LIMIT

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "rung": self.rung,
            "passed": self.passed,
            "ratio": _finite(self.ratio),
            "rmse": _finite(self.rmse),
            "max_abs": _finite(self.max_abs),
            "anchor_rmse": _finite(self.anchor_rmse),
            "anchor_max_abs": _finite(self.anchor_max_abs),
            "nonfinite_new": self.nonfinite_new,
            "worst": self.worst,
            "mean_kl": None if self.mean_kl is None else _finite(self.mean_kl),
            "top1_agree": self.top1_agree,
            "top5_contains": self.top5_contains,
        }


def _finite(x: float) -> float | str:
    return x if math.isfinite(x) else str(x)


def float_leaves(value: Any) -> list[torch.Tensor]:
    """The floating-point tensors inside an output (tensors, tuples, dicts, HF ModelOutputs)."""
    from torch.utils._pytree import tree_flatten

    if hasattr(value, "to_tuple") and callable(value.to_tuple):
        value = value.to_tuple()
    leaves, _ = tree_flatten(value)
    return [t.detach() for t in leaves if isinstance(t, torch.Tensor) and t.is_floating_point()]


def compare(rung: str, candidate: Any, reference: Any, anchor: Any) -> Comparison:
    """Compare ``candidate`` with the fp64 ``reference``, anchored on eager's output ``anchor``."""
    cands, refs, anchors = float_leaves(candidate), float_leaves(reference), float_leaves(anchor)
    if not (len(cands) == len(refs) == len(anchors)):
        return Comparison(rung, math.inf, math.inf, math.inf, 0.0, 0.0, 0, [{"error": "output structure differs"}])
    rmse = max_abs = a_rmse = a_max = 0.0
    ratio = 0.0
    nonfinite_new = 0
    worst: list[tuple[float, dict[str, Any]]] = []
    kls: list[float] = []
    top1: list[float] = []
    top5: list[float] = []
    for i, (c, r, a) in enumerate(zip(cands, refs, anchors, strict=True)):
        if c.shape != r.shape:
            return Comparison(rung, math.inf, math.inf, math.inf, 0.0, 0.0, 0, [{"leaf": i, "error": "shape differs"}])
        c64, r64, a64 = c.double().cpu(), r.double().cpu(), a.double().cpu()
        ok = torch.isfinite(r64) & torch.isfinite(a64)
        new_bad = ok & ~torch.isfinite(c64)
        nonfinite_new += int(new_bad.sum())
        both = ok & torch.isfinite(c64)
        err_c = (c64 - r64).abs().where(both, torch.zeros((), dtype=torch.float64))
        err_a = (a64 - r64).abs().where(ok, torch.zeros((), dtype=torch.float64))
        n = max(int(both.sum()), 1)
        leaf_rmse = float(err_c.pow(2).sum().div(n).sqrt())
        leaf_max = float(err_c.max()) if err_c.numel() else 0.0
        leaf_a_rmse = float(err_a.pow(2).sum().div(max(int(ok.sum()), 1)).sqrt())
        leaf_a_max = float(err_a.max()) if err_a.numel() else 0.0
        eps = torch.finfo(c.dtype).eps
        ref_ok = r64.abs().where(ok, torch.zeros((), dtype=torch.float64))
        floor_rmse = eps * float(ref_ok.pow(2).sum().div(max(int(ok.sum()), 1)).sqrt()) + 1e-300
        floor_max = eps * (float(ref_ok.max()) if ref_ok.numel() else 0.0) + 1e-300
        leaf_ratio = max(leaf_rmse / max(leaf_a_rmse, floor_rmse), leaf_max / max(leaf_a_max, floor_max))
        rmse, max_abs = max(rmse, leaf_rmse), max(max_abs, leaf_max)
        a_rmse, a_max = max(a_rmse, leaf_a_rmse), max(a_max, leaf_a_max)
        ratio = max(ratio, leaf_ratio)
        score = err_c.where(~new_bad, torch.full((), math.inf, dtype=torch.float64)).flatten()
        for idx in torch.topk(score, min(WORST_KEPT, score.numel())).indices.tolist():
            pos = tuple(int(p) for p in torch.unravel_index(torch.tensor(idx), c.shape))
            entry = {
                "leaf": i,
                "index": list(pos),
                "value": _finite(float(c64.flatten()[idx])),
                "fp64": _finite(float(r64.flatten()[idx])),
                "eager": _finite(float(a64.flatten()[idx])),
            }
            worst.append((float(score[idx]), entry))
        if c.dim() >= 2 and c.shape[-1] >= LOGITS_MIN_VOCAB and bool(both.all()):
            kl, t1, t5 = _logit_figures(c64, r64)
            kls.append(kl)
            top1.append(t1)
            top5.append(t5)
    worst.sort(key=lambda e: -e[0])
    if nonfinite_new:
        ratio = math.inf
    return Comparison(
        rung,
        ratio,
        rmse,
        max_abs,
        a_rmse,
        a_max,
        nonfinite_new,
        [e for _, e in worst[:WORST_KEPT] if _ > 0],
        max(kls) if kls else None,
        min(top1) if top1 else None,
        min(top5) if top5 else None,
    )


def _logit_figures(cand: torch.Tensor, ref: torch.Tensor) -> tuple[float, float, float]:
    logp = torch.log_softmax(ref.flatten(0, -2), dim=-1)
    logq = torch.log_softmax(cand.flatten(0, -2), dim=-1)
    kl = float((logp.exp() * (logp - logq)).sum(-1).mean())
    ref_top = logp.argmax(-1)
    top1 = float((logq.argmax(-1) == ref_top).double().mean())
    k = min(5, logq.shape[-1])
    top5 = float((logq.topk(k, dim=-1).indices == ref_top[:, None]).any(-1).double().mean())
    return kl, top1, top5


@dataclass(frozen=True)
class EagerCheck:
    """Eager in the serving dtype against fp64, measured in units of the dtype's own rounding."""

    ratio: float
    """RMSE of eager's error divided by the RMSE of rounding fp64 to the dtype; ``inf`` on new non-finites."""
    nonfinite_new: int
    """Elements non-finite in eager while finite in fp64."""

    @property
    def wrong(self) -> bool:
        """Beyond what rounding explains (:data:`EAGER_LIMIT`) or non-finite where fp64 is finite."""
        return self.nonfinite_new > 0 or self.ratio > EAGER_LIMIT


def check_eager(value: Any, reference: Any) -> EagerCheck:
    """How far ``value`` (serving dtype) is from the fp64 ``reference`` in rounding units."""
    vals, refs = float_leaves(value), float_leaves(reference)
    worst = 0.0
    bad = 0
    for v, r in zip(vals, refs, strict=False):
        if v.shape != r.shape:
            continue
        v64, r64 = v.double().cpu(), r.double().cpu()
        ok = torch.isfinite(r64)
        bad += int((ok & ~torch.isfinite(v64)).sum())
        both = ok & torch.isfinite(v64)
        if not bool(both.any()):
            continue
        err = (v64 - r64)[both]
        rounding = r64[both].to(v.dtype).double() - r64[both]
        eps = torch.finfo(v.dtype).eps
        floor = float(rounding.pow(2).mean().sqrt()) + eps * float(r64[both].abs().mean()) / 8 + 1e-300
        worst = max(worst, float(err.pow(2).mean().sqrt()) / floor)
    return EagerCheck(math.inf if bad else worst, bad)


def fp64_model(model: Any) -> Any:
    """A float64 copy of a module (a plain function is used as is): the anchor both sides compare against."""
    if isinstance(model, torch.nn.Module):
        return copy.deepcopy(model).double()
    return model


def to_fp64(value: Any) -> Any:
    """A copy of ``value`` with its floating tensors in float64 and its other tensors copied: each reference run
    gets inputs of its own (a model that changes its inputs in place would change the next run's)."""
    from torch.utils._pytree import tree_map

    def one(t: Any) -> Any:
        if not isinstance(t, torch.Tensor):
            return t
        return t.to(torch.float64, copy=True) if t.is_floating_point() else t.clone()

    return tree_map(one, value)
