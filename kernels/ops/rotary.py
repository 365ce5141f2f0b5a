"""Rotary position embedding (NeoX half-split): reference, bucket and providers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from inferensics.kernels.decisions import DecisionLog
from inferensics.kernels.layout import rotary_layout as layout
from inferensics.kernels.op import SemanticOp
from inferensics.kernels.ops.common import (
    FLOATS,
    TRITON_PLATFORMS,
    exact_bucket,
    inductor_provider,
    pow2_bucket,
    same_device,
    triton_available,
    triton_fn,
)
from inferensics.kernels.provider import Provider
from inferensics.kernels.requirements import Requirements
from inferensics.kernels.tolerance import ToleranceSpec


def _shape_problem(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> str | None:
    """What keeps the arguments from meaning a rotary embedding, or ``None``: ``x`` not ``[T, H, D]`` or
    ``[B, H, S, D]``, an odd head_dim (the halves cannot pair up), or ``cos``/``sin`` not ``[T, head_dim/2]``
    (``[S, head_dim/2]`` for ``[B, H, S, D]``; broadcast, they would rotate by the wrong angles or give another
    shape)."""
    if x.dim() not in (3, 4):
        return f"needs x of shape [T, H, D] or [B, H, S, D], got shape {tuple(x.shape)}"
    if x.shape[-1] % 2:
        return f"needs an even head_dim (x's last dimension), got shape {tuple(x.shape)}"
    positions = x.shape[0] if x.dim() == 3 else x.shape[2]
    want = (positions, x.shape[-1] // 2)
    if cos.dim() != 2 or sin.dim() != 2 or tuple(cos.shape) != want or tuple(sin.shape) != want:
        where = "T" if x.dim() == 3 else "S"
        return (
            f"needs cos and sin of shape [{where}, head_dim/2] = [{want[0]}, {want[1]}] for x of shape "
            f"{tuple(x.shape)}, got cos {tuple(cos.shape)} and sin {tuple(sin.shape)}"
        )
    return None


def rotary_reference(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate the two halves of ``x``'s last dimension by per-position angles.

    ``x`` is ``[T, H, D]`` (positions first; ``cos``/``sin`` ``[T, D/2]``) or ``[B, H, S, D]`` (``cos``/``sin``
    ``[S, D/2]``). Computed in float32, rounded once to ``x``'s dtype.

    Raises:
        ValueError: The shapes are not those (an odd head_dim, ``cos``/``sin`` of another width or position count).
        TypeError: ``x`` is not floating-point (the result, in its dtype, would be truncated).
    """
    problem = _shape_problem(x, cos, sin)
    if problem is not None:
        raise ValueError(f"rotary_embedding {problem}")
    if not x.is_floating_point():
        raise TypeError(
            f"rotary_embedding needs a floating-point x, got {str(x.dtype).removeprefix('torch.')}: "
            "convert it first (x.float() or x.to(torch.bfloat16))"
        )
    if x.dim() == 3:
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    x1, x2 = x.float().chunk(2, dim=-1)
    cos, sin = cos.float(), sin.float()
    rotated = torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)
    return rotated.type_as(x)


def rotary_bucket(args: Sequence[Any]) -> str:
    """``dtype/h<heads>/d<head_dim>/t<positions x batch, rounded up to a power of two>``."""
    x = args[0]
    if x.dim() < 3:
        return f"{str(x.dtype).removeprefix('torch.')}/other"
    heads = x.shape[1]
    per_row = heads * x.shape[-1]
    rows = x.numel() // per_row if isinstance(per_row, int) and per_row > 0 else x.numel()
    dims = f"h{exact_bucket(heads)}/d{exact_bucket(x.shape[-1])}"
    return f"{str(x.dtype).removeprefix('torch.')}/{dims}/t{pow2_bucket(rows)}"


def _layout(args: Sequence[Any]) -> str | None:
    x, cos, sin = args
    if x.dim() not in (3, 4) or x.shape[-1] % 2:
        return "x must be [T, H, D] or [B, H, S, D] with an even head_dim"
    if not x.is_floating_point():
        return "x must be floating-point"
    half = x.shape[-1] // 2
    for t in (cos, sin):
        if t.dim() != 2 or t.shape[1] != half or (half > 1 and t.stride(1) != 1):
            return f"cos and sin must be [T, {half}] ([S, {half}] for [B,H,S,D]) with contiguous rows"
    if cos.stride(0) != sin.stride(0) or cos.shape != sin.shape:
        return "cos and sin must have the same shape and strides"
    if layout(x, cos) is None:
        return "x's positions do not match cos, or its last dimension is strided"
    return same_device(args)


def register(log: DecisionLog) -> list[SemanticOp]:
    """Create the op and its providers."""
    op = SemanticOp(
        "rotary_embedding",
        "(Tensor x, Tensor cos, Tensor sin) -> Tensor",
        rotary_reference,
        tolerance=ToleranceSpec(exact_when_exact=True),
        bucket=rotary_bucket,
        doc="NeoX rotary embedding of [T,H,D] or [B,H,S,D] by per-position cos/sin",
        log=log,
    )
    op.register(inductor_provider(op.reference), enabled=False)
    if triton_available():
        req = Requirements(
            platforms=TRITON_PLATFORMS,
            min_capability=(8, 0),
            dtypes=FLOATS,
            accuracy="tolerant",
            checks=(_layout,),
            signature_checks=True,  # read dtypes, sizes, strides and devices only
            notes=(
                "x [T,H,D] or [B,H,S,D], last dim contiguous",
                "cos/sin [T, D/2] ([S, D/2] for [B,H,S,D]), rows contiguous",
            ),
        )
        op.register(Provider("triton", "triton", triton_fn("rotary", "rotary_triton"), req, "one program per position"))
    return [op]
