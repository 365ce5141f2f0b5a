"""RMSNorm and fused residual-add + RMSNorm: one program per row, the row held in registers.

Semantics are the reference's (``inferensics.kernels.ops.norm``): statistics in float32, the normalised row
rounded to the input dtype before the weight multiplies it, and for the fused form the residual sum kept in
float32 for the statistics and rounded once for the residual output.
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

from inferensics.kernels._triton.rounding import fixed_config, interpreting, round_to
from inferensics.kernels.layout import row_stride


def _launch_params(n: int) -> tuple[int, int]:
    block = triton.next_power_of_2(max(n, 1))
    # 16-byte accesses per thread for 16-bit data: 8 elements a thread, 32 threads a warp.
    warps = max(1, min(16, block // 256))
    return block, warps


def rows_key(rows: int) -> int:
    """Power-of-two bucket of a row count: the autotuner's key, so serving shapes share tunings."""
    return 1 << max(0, (rows - 1).bit_length())


@triton.jit
def _rms_norm_kernel(
    x_ptr, w_ptr, out_ptr, res_ptr, res_out_ptr,
    x_stride, res_stride, n_cols, eps, rows_bucket,
    BLOCK: tl.constexpr, HAS_RESIDUAL: tl.constexpr, EMULATE_RNE: tl.constexpr,
):  # fmt: skip
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float32)
    if HAS_RESIDUAL:
        r = tl.load(res_ptr + row * res_stride + cols, mask=mask, other=0.0)
        r = r.to(tl.float32)
        x = x + r
        tl.store(res_out_ptr + row * n_cols + cols, round_to(x, res_out_ptr.dtype.element_ty, EMULATE_RNE), mask=mask)
    mean_sq = tl.sum(x * x, axis=0) / n_cols
    rstd = tl.rsqrt(mean_sq + eps)
    normed = round_to(x * rstd, x_ptr.dtype.element_ty, EMULATE_RNE).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * n_cols + cols, round_to(normed * w, out_ptr.dtype.element_ty, EMULATE_RNE), mask=mask)


_rms_norm_tuned = triton.autotune(
    configs=[triton.Config({}, num_warps=w) for w in (2, 4, 8, 16)],
    key=["n_cols", "rows_bucket", "HAS_RESIDUAL"],
)(_rms_norm_kernel)


def _launch(m: int, n: int, args: tuple[object, ...], has_residual: bool) -> None:
    block, warps = _launch_params(n)
    if fixed_config():
        wrap_triton(_rms_norm_kernel)[(m,)](
            *args, rows_key(m), BLOCK=block, HAS_RESIDUAL=has_residual, EMULATE_RNE=interpreting(), num_warps=warps
        )
    else:
        wrap_triton(_rms_norm_tuned)[(m,)](
            *args, rows_key(m), BLOCK=block, HAS_RESIDUAL=has_residual, EMULATE_RNE=False
        )


def _rows(x: torch.Tensor) -> tuple[int, int, int]:
    stride = row_stride(x)
    if stride is None:
        raise ValueError("rms_norm (triton): the leading dimensions must collapse into rows of contiguous columns")
    n = x.shape[-1]
    return (x.numel() // n if n else 0), n, stride


@triton_op("inferensics::rms_norm_triton", mutates_args=())
def rms_norm_triton(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm of the last dimension of ``x`` by our Triton kernel."""
    out = torch.empty(x.shape, dtype=torch.result_type(x, weight), device=x.device)
    m, n, stride = _rows(x)
    if m == 0 or n == 0:
        return out
    _launch(m, n, (x, weight, out, x, out, stride, stride, n, eps), has_residual=False)
    return out


@triton_op("inferensics::fused_add_rms_norm_triton", mutates_args=())
def fused_add_rms_norm_triton(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """``residual + x`` (returned as the new residual) and its RMSNorm, in one pass."""
    out = torch.empty(x.shape, dtype=torch.result_type(x, weight), device=x.device)
    res_out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    m, n, stride = _rows(x)
    _, _, res_stride = _rows(residual)
    if m == 0 or n == 0:
        return out, res_out
    _launch(m, n, (x, weight, out, residual, res_out, stride, res_stride, n, eps), has_residual=True)
    return out, res_out
