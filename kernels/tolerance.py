"""Op-aware accuracy: how close a provider's output must be to the reference's.

Three kinds of rule (research notes §2.4): ``exact`` for formula-identical arithmetic (SiLU·mul), ``close``
(``|a - e| <= atol + rtol * |e|``) with a per-dtype table for pointwise ops and norms, and ``rmse`` for
reductions whose order a kernel may change (attention): the candidate's RMSE against a float64 run of the
reference may be at most ``k`` times the reference's own, plus a floor. Non-finite values must agree
exactly in every kind: a NaN where the reference has a number (or the reverse) always fails.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import torch

RuleKind = Literal["exact", "close", "rmse"]

DTYPE_TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float64: (1e-8, 1e-8),
    torch.float32: (1e-5, 1.3e-6),
    torch.float16: (1e-3, 1e-3),
    torch.bfloat16: (1e-3, 1.6e-2),
}
"""``(atol, rtol)`` per dtype for pointwise ops (vLLM IR's ``DEFAULT_TOLERANCES``)."""

NORM_TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    **DTYPE_TOLERANCES,
    torch.float16: (1e-2, 1e-2),
    torch.bfloat16: (1e-2, 1e-2),
}
"""``(atol, rtol)`` per dtype for normalisations and softmax (16-bit: 1e-2 / 1e-2)."""


@dataclass(frozen=True, slots=True)
class Rule:
    """One accuracy rule."""

    kind: RuleKind
    atol: float = 0.0
    rtol: float = 0.0
    k: float = 3.0

    def describe(self) -> str:
        """The rule in words, e.g. ``close atol=0.001 rtol=0.016``."""
        if self.kind == "exact":
            return "exact"
        if self.kind == "close":
            return f"close atol={self.atol:g} rtol={self.rtol:g}"
        return f"rmse <= {self.k:g} x reference's vs fp64 + atol={self.atol:g}"


@dataclass(frozen=True, slots=True)
class ToleranceSpec:
    """An op's accuracy rules.

    Attributes:
        exact_when_exact: Providers declaring ``exact`` accuracy must match the reference bit for bit.
        table: ``(atol, rtol)`` per dtype for the ``close`` rule.
        rmse_k: When set, tolerant providers are judged by the fp64-anchored RMSE ratio with this ``k``.
        rmse_floor: Absolute RMSE always allowed (an output the reference gets exactly right).
    """

    exact_when_exact: bool = True
    table: dict[torch.dtype, tuple[float, float]] | None = None
    rmse_k: float | None = None
    rmse_floor: float = 1e-6

    def rule(self, dtype: torch.dtype, accuracy: str) -> Rule:
        """The rule for outputs of ``dtype`` from a provider with ``accuracy`` mode."""
        if accuracy == "exact" and self.exact_when_exact:
            return Rule("exact")
        atol, rtol = (self.table or DTYPE_TOLERANCES).get(dtype, (0.0, 0.0))
        if self.rmse_k is not None:
            return Rule("rmse", atol=self.rmse_floor, k=self.rmse_k)
        return Rule("close", atol=atol, rtol=rtol)

    def describe(self) -> dict[str, Any]:
        """JSON-ready form."""
        table = self.table or DTYPE_TOLERANCES
        return {
            "exact_when_exact": self.exact_when_exact,
            "table": {str(d).removeprefix("torch."): list(v) for d, v in table.items()},
            "rmse_k": self.rmse_k,
            "rmse_floor": self.rmse_floor,
        }


@dataclass(frozen=True, slots=True)
class Verdict:
    """The outcome of comparing one output with the reference."""

    passed: bool
    max_abs_err: float
    mismatched: int
    detail: str


def _nonfinite_mismatch(out: torch.Tensor, ref: torch.Tensor) -> int:
    o_nan, r_nan = out.isnan(), ref.isnan()
    o_inf, r_inf = out.isinf(), ref.isinf()
    bad = (o_nan != r_nan) | (o_inf != r_inf) | (o_inf & r_inf & (out != ref))
    return int(bad.sum())


def compare(out: torch.Tensor, ref: torch.Tensor, rule: Rule, ref64: torch.Tensor | None = None) -> Verdict:
    """Judge ``out`` against ``ref`` (and ``ref64``, the reference run in float64, for ``rmse``)."""
    if out.shape != ref.shape:
        return Verdict(False, math.inf, out.numel(), f"shape {tuple(out.shape)} != {tuple(ref.shape)}")
    if out.dtype != ref.dtype:
        return Verdict(False, math.inf, out.numel(), f"dtype {out.dtype} != {ref.dtype}")
    if out.numel() == 0:
        return Verdict(True, 0.0, 0, "empty")
    o, r = out.detach().double().cpu(), ref.detach().double().cpu()
    nonfinite = _nonfinite_mismatch(o, r)
    finite = o.isfinite() & r.isfinite()
    diff = (o - r).abs().where(finite, torch.zeros((), dtype=torch.float64))
    max_abs = float(diff.max()) if diff.numel() else 0.0
    if rule.kind == "exact":
        same = (o == r) | (o.isnan() & r.isnan())
        mismatched = int((~same).sum())
        return Verdict(mismatched == 0, max_abs, mismatched, f"{mismatched} elements differ")
    if rule.kind == "close":
        bad = (diff > rule.atol + rule.rtol * r.abs().where(finite, torch.zeros((), dtype=torch.float64))) & finite
        mismatched = int(bad.sum()) + nonfinite
        return Verdict(mismatched == 0, max_abs, mismatched, f"{mismatched} elements outside {rule.describe()}")
    if ref64 is None:
        raise ValueError("the rmse rule needs the float64 reference")
    a = ref64.detach().double().cpu()
    ok = finite & a.isfinite()
    err_out = float(((o - a)[ok] ** 2).mean().sqrt()) if ok.any() else 0.0
    err_ref = float(((r - a)[ok] ** 2).mean().sqrt()) if ok.any() else 0.0
    limit = rule.k * err_ref + rule.atol
    passed = nonfinite == 0 and err_out <= limit
    return Verdict(passed, max_abs, nonfinite, f"rmse {err_out:.3g} vs limit {limit:.3g} (reference's {err_ref:.3g})")
