"""SiLU·mul (the SwiGLU gate): ``silu(x[..., :d]) * x[..., d:]``, bit-exact with PyTorch's eager kernels.

Bit-exactness needs the same arithmetic as ATen's CUDA kernel: ``x / (1 + expf(-x))`` in float32 with
libdevice's ``expf`` and an IEEE division, rounded to the input dtype, then the product in float32 rounded
once more.
"""

# Triton's convention: compile-time constants are UPPER_CASE parameters, and kernels take many arguments;
# kernel parameters stay unannotated (Triton resolves annotations itself, and only constexpr ones may be).
# mypy: disable-error-code="no-untyped-def,untyped-decorator,misc"
# ruff: noqa: N803, PLR0917

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch.library import triton_op, wrap_triton

from inferensics.kernels._triton.norm import rows_key
from inferensics.kernels._triton.rounding import exp_f32, fixed_config, interpreting, round_to
from inferensics.kernels.layout import row_stride

BLOCK = 1024
"""Columns of the output one program writes."""


@triton.jit
def _silu_mul_kernel(
    x_ptr, out_ptr, x_stride, d, rows_bucket,
    BLOCK: tl.constexpr, ACCURATE_EXP: tl.constexpr, EMULATE_RNE: tl.constexpr,
):  # fmt: skip
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < d
    gate = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0)
    up = tl.load(x_ptr + row * x_stride + d + cols, mask=mask, other=0.0)
    gate = gate.to(tl.float32)
    up = up.to(tl.float32)
    silu = tl.math.div_rn(gate, 1.0 + exp_f32(-gate, ACCURATE_EXP))
    silu = round_to(silu, x_ptr.dtype.element_ty, EMULATE_RNE).to(tl.float32)
    tl.store(out_ptr + row * d + cols, round_to(silu * up, out_ptr.dtype.element_ty, EMULATE_RNE), mask=mask)


_silu_mul_tuned = triton.autotune(
    configs=[
        triton.Config({"BLOCK": b}, num_warps=w)
        for b, w in ((256, 2), (512, 4), (1024, 4), (1024, 8), (2048, 8), (4096, 8))
    ],
    key=["d", "rows_bucket"],
)(_silu_mul_kernel)


@triton_op("inferensics::silu_mul_triton", mutates_args=())
def silu_mul_triton(x: torch.Tensor) -> torch.Tensor:
    """``silu(x[..., :d]) * x[..., d:]`` by our Triton kernel."""
    d = x.shape[-1] // 2
    out = torch.empty((*x.shape[:-1], d), dtype=x.dtype, device=x.device)
    stride = row_stride(x)
    if stride is None:
        raise ValueError("silu_mul (triton): the leading dimensions must collapse into rows of contiguous columns")
    rows = x.numel() // x.shape[-1] if x.shape[-1] else 0
    if rows == 0 or d == 0:
        return out
    interp = interpreting()
    if fixed_config():
        block = min(BLOCK, triton.next_power_of_2(d))
        wrap_triton(_silu_mul_kernel)[(rows, triton.cdiv(d, block))](
            x, out, stride, d, rows_key(rows), BLOCK=block, ACCURATE_EXP=not interp, EMULATE_RNE=interp, num_warps=4
        )
        return out

    def grid(meta: dict[str, int]) -> tuple[int, int]:
        return rows, triton.cdiv(d, meta["BLOCK"])

    wrap_triton(_silu_mul_tuned)[grid](x, out, stride, d, rows_key(rows), ACCURATE_EXP=True, EMULATE_RNE=False)
    return out
