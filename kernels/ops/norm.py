"""RMSNorm and fused residual-add + RMSNorm: references, buckets and providers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from inferensics.kernels.decisions import DecisionLog
from inferensics.kernels.layout import MAX_HIDDEN, row_stride
from inferensics.kernels.op import SemanticOp
from inferensics.kernels.ops.common import (
    FLOATS,
    TRITON_PLATFORMS,
    inductor_provider,
    rows_bucket,
    same_device,
    triton_available,
    triton_fn,
)
from inferensics.kernels.provider import Provider
from inferensics.kernels.requirements import Requirements
from inferensics.kernels.tolerance import NORM_TOLERANCES, ToleranceSpec


def _floating(op: str, **tensors: torch.Tensor) -> None:
    # The result is rounded to x's dtype: an integer x would come back truncated (RMSNorm of [3, 4] as [0, 1]).
    for name, t in tensors.items():
        if not t.is_floating_point():
            raise TypeError(
                f"{op} needs a floating-point {name}, got {str(t.dtype).removeprefix('torch.')}: "
                f"convert it first ({name}.float() or {name}.to(torch.bfloat16))"
            )


def rms_norm_reference(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm of the last dimension: statistics in float32, the normalised values rounded to ``x``'s dtype,
    then multiplied by ``weight`` (the result has the promoted dtype of ``x`` and ``weight``).

    Raises:
        TypeError: ``x`` is not a floating-point tensor.
    """
    _floating("rms_norm", x=x)
    xf = x.float()
    normed = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return normed.type_as(x) * weight


def fused_add_rms_norm_reference(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(rms_norm(x + residual), x + residual)``: the sum in float32 feeds the statistics, and is rounded to
    ``x``'s dtype once for the returned residual.

    Raises:
        TypeError: ``x`` or ``residual`` is not a floating-point tensor.
    """
    _floating("fused_add_rms_norm", x=x, residual=residual)
    s = x.float() + residual.float()
    normed = s * torch.rsqrt(s.pow(2).mean(-1, keepdim=True) + eps)
    return normed.type_as(x) * weight, s.to(x.dtype)


def _rows_layout(args: Sequence[Any]) -> str | None:
    x, weight = args[0], args[-2]
    if not all(t.is_floating_point() for t in args[:-2]):
        return "x and residual must be floating-point"  # the reference refuses the call, naming the dtype
    if x.dim() == 0:
        return "0-dim input (no row to normalise)"
    if x.shape[-1] > MAX_HIDDEN:
        return f"last dimension {x.shape[-1]} > {MAX_HIDDEN}"
    if weight.dim() != 1 or weight.shape[0] != x.shape[-1] or (weight.numel() > 1 and weight.stride(0) != 1):
        return f"weight must be a contiguous vector of {x.shape[-1]}"
    for t in args[:-2]:
        if t.shape != x.shape:
            return "x and residual shapes differ"
        if row_stride(t) is None:
            return "leading dimensions do not collapse into rows of contiguous columns"
    return same_device(args)


def register(log: DecisionLog) -> list[SemanticOp]:
    """Create the two norm ops and their providers."""
    tol = ToleranceSpec(table=NORM_TOLERANCES)
    rms = SemanticOp(
        "rms_norm",
        "(Tensor x, Tensor weight, float eps) -> Tensor",
        rms_norm_reference,
        tolerance=tol,
        bucket=rows_bucket,
        doc="RMSNorm of the last dimension (float32 statistics)",
        log=log,
    )
    fused = SemanticOp(
        "fused_add_rms_norm",
        "(Tensor x, Tensor residual, Tensor weight, float eps) -> (Tensor, Tensor)",
        fused_add_rms_norm_reference,
        tolerance=tol,
        bucket=rows_bucket,
        doc="residual add then RMSNorm; returns (normed, new residual)",
        log=log,
    )
    for op in (rms, fused):
        op.register(inductor_provider(op.reference), enabled=False)
    if triton_available():
        req = Requirements(
            platforms=TRITON_PLATFORMS,
            min_capability=(8, 0),
            dtypes=FLOATS,
            accuracy="batch_invariant",
            checks=(_rows_layout,),
            signature_checks=True,  # read dtypes, sizes, strides and devices only
            notes=("rows of contiguous columns, last dim <= 32768", "weight a contiguous vector"),
        )
        rms.register(Provider("triton", "triton", triton_fn("norm", "rms_norm_triton"), req, "one program per row"))
        fused.register(
            Provider("triton", "triton", triton_fn("norm", "fused_add_rms_norm_triton"), req, "one program per row")
        )
    return [rms, fused]
