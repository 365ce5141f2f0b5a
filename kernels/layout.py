"""Layout facts the requirement checks and the Triton launchers share (plain torch; no Triton import)."""

from __future__ import annotations

import itertools

import torch

MAX_HIDDEN = 32768
"""Widest row our norm kernels hold in registers (one program per row)."""


def row_stride(x: torch.Tensor) -> int | None:
    """The stride between rows when ``x``'s leading dimensions collapse into one and its last dimension is
    contiguous; ``None`` otherwise."""
    if x.dim() == 0 or (x.shape[-1] > 1 and x.stride(-1) != 1):
        return None
    dims = [(s, st) for s, st in zip(x.shape[:-1], x.stride()[:-1], strict=True) if s != 1]
    if not dims:
        return x.shape[-1]
    for (_, outer), (size, inner) in itertools.pairwise(dims):
        if outer != inner * size:
            return None
    return dims[-1][1]


def rotary_layout(x: torch.Tensor, cos: torch.Tensor) -> tuple[int, int, int, tuple[int, int, int]] | None:
    """``(outer, positions, heads, (outer, position, head) strides)`` of ``x`` for the rotary kernel, or ``None``.

    Accepted: ``[T, H, D]`` with ``cos`` ``[T, D/2]``, and ``[B, H, S, D]`` with ``cos`` ``[S, D/2]``; the last
    dimension of ``x`` contiguous.
    """
    if x.dim() == 0 or (x.stride(-1) != 1 and x.shape[-1] > 1):
        return None
    if x.dim() == 3 and cos.dim() == 2 and cos.shape[0] == x.shape[0]:
        return 1, x.shape[0], x.shape[1], (0, x.stride(0), x.stride(1))
    if x.dim() == 4 and cos.dim() == 2 and cos.shape[0] == x.shape[2]:
        return x.shape[0], x.shape[2], x.shape[1], (x.stride(0), x.stride(2), x.stride(1))
    return None
