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

from inferensics.kernels._triton.rounding import fixed_config, interpreting, is_sm90, round_to
from inferensics.kernels._triton.tables import entries
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
    x_stride, res_stride, n_rows, n_cols, eps, rows_bucket,
    BLOCK: tl.constexpr, ROWS: tl.constexpr, HAS_RESIDUAL: tl.constexpr, EVEN: tl.constexpr,
    EMULATE_RNE: tl.constexpr,
):  # fmt: skip
    # ROWS rows a program, each held whole in registers; EVEN: the row fills BLOCK exactly (no column mask).
    rows = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    rmask = rows < n_rows
    if EVEN:  # noqa: SIM108 (a constexpr branch: only one side is compiled)
        mask = tl.broadcast_to(rmask[:, None], (ROWS, BLOCK))
    else:
        mask = rmask[:, None] & (cols < n_cols)[None, :]
    x = tl.load(x_ptr + rows[:, None] * x_stride + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    if HAS_RESIDUAL:
        r = tl.load(res_ptr + rows[:, None] * res_stride + cols[None, :], mask=mask, other=0.0)
        r = r.to(tl.float32)
        x = x + r
        res = round_to(x, res_out_ptr.dtype.element_ty, EMULATE_RNE)
        tl.store(res_out_ptr + rows[:, None] * n_cols + cols[None, :], res, mask=mask)
    mean_sq = tl.sum(x * x, axis=1) / n_cols
    rstd = tl.rsqrt(mean_sq + eps)
    normed = round_to(x * rstd[:, None], x_ptr.dtype.element_ty, EMULATE_RNE).to(tl.float32)
    if EVEN:
        w = tl.load(w_ptr + cols).to(tl.float32)
    else:
        w = tl.load(w_ptr + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
    result = round_to(normed * w[None, :], out_ptr.dtype.element_ty, EMULATE_RNE)
    tl.store(out_ptr + rows[:, None] * n_cols + cols[None, :], result, mask=mask)


_rms_norm_tuned = triton.autotune(
    configs=[triton.Config({"ROWS": 1}, num_warps=w) for w in (2, 4, 8, 16)],
    key=["n_cols", "rows_bucket", "HAS_RESIDUAL"],
)(_rms_norm_kernel)

H200_CONFIGS: dict[tuple[bool, int, int], tuple[int, int]] = {
    (bool(r[0]), int(r[1]), int(r[2])): (int(r[3]), int(r[4])) for r in entries("rms_norm")
}
"""Measured ``(rows a program, num_warps)`` on compute capability 9.0, keyed by (residual?, columns, rows bucket)
(``tables.py``); other shapes and GPUs use Triton's autotuner."""


def measured_config(device: torch.device, has_residual: bool, n: int, m: int) -> tuple[int, int] | None:
    """The H200 table's configuration for this shape, if it applies on ``device``."""
    if not H200_CONFIGS or not is_sm90(device):
        return None
    return H200_CONFIGS.get((has_residual, n, rows_key(m)))


def _launch(
    m: int, n: int, args: tuple[object, ...], has_residual: bool, config: tuple[int, int] | None = None
) -> None:
    block, warps = _launch_params(n)
    even = block == n
    if config is None and not fixed_config():
        config = measured_config(args[0].device, has_residual, n, m)  # type: ignore[attr-defined]
    if config is not None or fixed_config():
        rows, warps = config or (1, warps)
        wrap_triton(_rms_norm_kernel)[(triton.cdiv(m, rows),)](
            *args[:7], m, *args[7:], rows_key(m), BLOCK=block, ROWS=rows, HAS_RESIDUAL=has_residual, EVEN=even,
            EMULATE_RNE=interpreting(), num_warps=warps,
        )  # fmt: skip
    else:
        wrap_triton(_rms_norm_tuned)[lambda meta: (triton.cdiv(m, meta["ROWS"]),)](
            *args[:7], m, *args[7:], rows_key(m), BLOCK=block, HAS_RESIDUAL=has_residual, EVEN=even, EMULATE_RNE=False
        )


def _rows(x: torch.Tensor) -> tuple[int, int, int]:
    stride = row_stride(x)
    if stride is None:
        raise ValueError("rms_norm (triton): the leading dimensions must collapse into rows of contiguous columns")
    n = x.shape[-1]
    return (x.numel() // n if n else 0), n, stride


def rms_norm_with(
    x: torch.Tensor, weight: torch.Tensor, eps: float, config: tuple[int, int] | None = None
) -> torch.Tensor:
    """RMSNorm by our kernel under an explicit ``(rows a program, num_warps)`` (``None``: the table or the
    autotuner), for the benchmark's sweep; serving goes through the op."""
    out = torch.empty(x.shape, dtype=torch.result_type(x, weight), device=x.device)
    m, n, stride = _rows(x)
    if m == 0 or n == 0:
        return out
    _launch(m, n, (x, weight, out, x, out, stride, stride, n, eps), False, config)
    return out


def fused_add_rms_norm_with(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float, config: tuple[int, int] | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Fused add + RMSNorm by our kernel under an explicit configuration (see :func:`rms_norm_with`)."""
    out = torch.empty(x.shape, dtype=torch.result_type(x, weight), device=x.device)
    res_out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    m, n, stride = _rows(x)
    _, _, res_stride = _rows(residual)
    if m == 0 or n == 0:
        return out, res_out
    _launch(m, n, (x, weight, out, residual, res_out, stride, res_stride, n, eps), True, config)
    return out, res_out


@triton_op("inferensics::rms_norm_triton", mutates_args=())
def rms_norm_triton(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm of the last dimension of ``x`` by our Triton kernel."""
    return rms_norm_with(x, weight, eps)


@triton_op("inferensics::fused_add_rms_norm_triton", mutates_args=())
def fused_add_rms_norm_triton(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """``residual + x`` (returned as the new residual) and its RMSNorm, in one pass."""
    return fused_add_rms_norm_with(x, residual, weight, eps)
