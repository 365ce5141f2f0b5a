"""SiLU·mul (SwiGLU gate): reference, bucket and providers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch.nn import functional as F  # noqa: N812 - the conventional alias

from inferensics.kernels.decisions import DecisionLog
from inferensics.kernels.layout import row_stride
from inferensics.kernels.op import SemanticOp
from inferensics.kernels.ops.common import (
    FLOATS,
    TRITON_PLATFORMS,
    inductor_provider,
    rows_bucket,
    triton_available,
    triton_fn,
)
from inferensics.kernels.provider import Provider
from inferensics.kernels.requirements import Requirements
from inferensics.kernels.tolerance import ToleranceSpec


def silu_mul_reference(x: torch.Tensor) -> torch.Tensor:
    """``silu(x[..., :d]) * x[..., d:]`` for a last dimension of ``2d``."""
    if x.dim() == 0 or x.shape[-1] % 2:
        raise ValueError(f"silu_mul needs an even last dimension, got shape {tuple(x.shape)}")
    d = x.shape[-1] // 2
    return F.silu(x[..., :d]) * x[..., d:]


def _layout(args: Sequence[Any]) -> str | None:
    x = args[0]
    if x.dim() == 0 or x.shape[-1] % 2:
        return "needs an even last dimension"
    if row_stride(x) is None:
        return "leading dimensions do not collapse into rows of contiguous columns"
    return None


def register(log: DecisionLog) -> list[SemanticOp]:
    """Create the op and its providers."""
    op = SemanticOp(
        "silu_mul",
        "(Tensor x) -> Tensor",
        silu_mul_reference,
        tolerance=ToleranceSpec(exact_when_exact=True),
        bucket=rows_bucket,
        doc="silu(x[..., :d]) * x[..., d:] (bit-exact with eager)",
        log=log,
    )
    op.register(inductor_provider(op.reference), enabled=False)
    if triton_available():
        req = Requirements(
            platforms=TRITON_PLATFORMS,
            min_capability=(8, 0),
            dtypes=FLOATS,
            accuracy="exact",
            checks=(_layout,),
            signature_checks=True,  # read dtypes, sizes, strides and devices only
            notes=("even last dim", "rows of contiguous columns"),
        )
        op.register(
            Provider(
                "triton", "triton", triton_fn("activation", "silu_mul_triton"), req, "libdevice expf, IEEE division"
            )
        )
    return [op]
