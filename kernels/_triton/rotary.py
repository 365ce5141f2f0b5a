"""Rotary position embedding (NeoX half-split form) over ``[..., positions, heads, head_dim]`` layouts.

One program rotates every head of one position (a block of heads at a time), loading that position's
cosine and sine once. Arithmetic in float32, one rounding to the input dtype.
"""

# Triton's convention: compile-time constants are UPPER_CASE parameters, and kernels take many arguments;
# kernel parameters stay unannotated (Triton resolves annotations itself, and only constexpr ones may be).
# mypy: disable-error-code="no-untyped-def,untyped-decorator,misc"
# ruff: noqa: N803, PLR0917

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch.library import triton_op

from inferensics.kernels._triton.launches import launch
from inferensics.kernels._triton.norm import rows_key
from inferensics.kernels._triton.rounding import fixed_config, interpreting, is_sm90, round_to
from inferensics.kernels._triton.tables import entries
from inferensics.kernels.layout import rotary_layout as layout


@triton.jit(do_not_specialize=["n_pos", "rows_bucket"])
def _rotary_kernel(
    x_ptr, cos_ptr, sin_ptr, out_ptr,
    n_pos, n_heads, rows_bucket, s_outer, s_pos, s_head, o_outer, o_pos, o_head, cs_stride,
    HALF: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr, GRID3: tl.constexpr, EMULATE_RNE: tl.constexpr,
):  # fmt: skip
    # GRID3: a (positions, head blocks, outer) grid, no division to find the position; otherwise positions and
    # outer share the first axis (outer beyond the third axis' 65,535).
    if GRID3:
        pos = tl.program_id(0).to(tl.int64)
        outer = tl.program_id(2).to(tl.int64)
    else:
        pid = tl.program_id(0).to(tl.int64)
        outer = pid // n_pos
        pos = pid % n_pos
    heads = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    cols = tl.arange(0, BLOCK_D)
    cmask = cols < HALF
    c = tl.load(cos_ptr + pos * cs_stride + cols, mask=cmask, other=0.0).to(tl.float32)
    s = tl.load(sin_ptr + pos * cs_stride + cols, mask=cmask, other=0.0).to(tl.float32)
    mask = (heads[:, None] < n_heads) & cmask[None, :]
    src = x_ptr + outer * s_outer + pos * s_pos + heads[:, None] * s_head + cols[None, :]
    x1 = tl.load(src, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(src + HALF, mask=mask, other=0.0).to(tl.float32)
    dst = out_ptr + outer * o_outer + pos * o_pos + heads[:, None] * o_head + cols[None, :]
    dtype = out_ptr.dtype.element_ty
    tl.store(dst, round_to(x1 * c[None, :] - x2 * s[None, :], dtype, EMULATE_RNE), mask=mask)
    tl.store(dst + HALF, round_to(x2 * c[None, :] + x1 * s[None, :], dtype, EMULATE_RNE), mask=mask)


_rotary_tuned = triton.autotune(
    configs=[triton.Config({"BLOCK_H": h}, num_warps=w) for h, w in ((1, 1), (2, 2), (4, 4), (8, 4), (16, 8), (32, 8))],
    key=["n_heads", "HALF", "rows_bucket"],
)(_rotary_kernel)


H200_CONFIGS: dict[tuple[int, int, int], tuple[int, int, bool]] = {
    (int(r[0]), int(r[1]), int(r[2])): (int(r[3]), int(r[4]), bool(r[5]) if len(r) > 5 else False)
    for r in entries("rotary_embedding")
}
"""Measured ``(BLOCK_H, num_warps, 3-D grid)`` on compute capability 9.0, keyed by (heads, head_dim / 2, positions
bucket) (``tables.py``); other shapes and GPUs use Triton's autotuner."""


_MAX_GRID_YZ = 65535


def rotary_with(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, config: tuple[int, ...] | None = None
) -> torch.Tensor:
    """Rotary by our kernel under an explicit ``(BLOCK_H, num_warps[, 3-D grid])`` (``None``: the measured table or the
    autotuner), for the benchmark's sweep; serving goes through the op."""
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    shape = layout(x, cos)
    if shape is None:
        raise ValueError("rotary (triton): x must be [T, H, D] (cos [T, D/2]) or [B, H, S, D] (cos [S, D/2])")
    outer, n_pos, n_heads, strides = shape
    n_heads = int(n_heads)  # the head blocks are sized by it: a compile specialises on it (a guard)
    if x.numel() == 0:
        return out
    o = layout(out, cos)
    assert o is not None
    half = int(x.shape[-1]) // 2
    block_d = triton.next_power_of_2(half)
    args = (x, cos, sin, out, n_pos, n_heads, rows_key(outer * n_pos), *strides, *o[3], cos.stride(0))
    if config is None and is_sm90(x.device):
        config = H200_CONFIGS.get((n_heads, half, rows_key(outer * n_pos)))
    if config is None and fixed_config():
        config = (min(triton.next_power_of_2(n_heads), max(1, 4096 // (2 * block_d))), 4)
    if config is not None:
        block_h, warps, *rest = config
        blocks = triton.cdiv(n_heads, block_h)
        grid3 = bool(rest and rest[0]) and outer <= _MAX_GRID_YZ and blocks <= _MAX_GRID_YZ
        grid = (n_pos, blocks, outer) if grid3 else (outer * n_pos, blocks)
        launch(_rotary_kernel, grid,
            *args, HALF=half, BLOCK_H=block_h, BLOCK_D=block_d, GRID3=grid3, EMULATE_RNE=interpreting(),
            num_warps=warps,
        )  # fmt: skip
        return out

    def tuned_grid(meta: dict[str, int]) -> tuple[int, int]:
        return outer * n_pos, triton.cdiv(n_heads, meta["BLOCK_H"])

    launch(_rotary_tuned, tuned_grid, *args, HALF=half, BLOCK_D=block_d, GRID3=False, EMULATE_RNE=False)
    return out


@triton_op("inferensics::rotary_triton", mutates_args=())
def rotary_triton(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate ``x`` by per-position angles (``cos``/``sin`` of ``head_dim / 2`` columns) by our Triton kernel."""
    return rotary_with(x, cos, sin)


DIRECT = {"rotary_triton": rotary_with}
"""The op's Python body, which an eager call runs without the op's dispatch (``ops/common.py``'s ``triton_fn``)."""
