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
from inferensics.kernels._triton.rounding import exp_f32, fixed_config, interpreting, is_sm90, round_to
from inferensics.kernels._triton.tables import entries
from inferensics.kernels.layout import row_stride

BLOCK = 1024
"""Columns of the output one program writes."""


@triton.jit
def _div_fast(x, d):
    # x / d for d >= 1 (d = 1 + exp(-x)): a refined reciprocal and one residual correction (Markstein), with
    # the cases it cannot take handled apart: d == 1 (x itself, inf included), d == inf (x * 0: -0 or NaN), a zero
    # quotient (the correction would lose its sign),
    # d above 2**64 (numerator and denominator scaled by 2**-64, exactly, so the reciprocal stays normal).
    # Whether it rounds like the IEEE division is checked exhaustively over every 16-bit input on the GPU
    # (tests/kernels/test_silu_exhaustive.py); the launch tables enable it only where that held.
    big = d > 18446744073709551616.0
    s = tl.where(big, 5.421010862427522e-20, 1.0)
    xs = x * s
    ds = d * s
    y = 1.0 / ds
    y = tl.fma(tl.fma(-ds, y, 1.0), y, y)
    q = xs * y
    q = tl.where(q == 0.0, q, tl.fma(tl.fma(-ds, q, xs), y, q))  # a zero keeps its sign
    q = tl.where(d == 1.0, x, q)
    return tl.where(d == float("inf"), x * 0.0, q)


@triton.jit
def _silu_mul_kernel(
    x_ptr, out_ptr, x_stride, d, rows_bucket,
    BLOCK: tl.constexpr, EVEN: tl.constexpr, FAST_DIV: tl.constexpr, ACCURATE_EXP: tl.constexpr,
    EMULATE_RNE: tl.constexpr,
):  # fmt: skip
    # EVEN: BLOCK divides d (no column mask). FAST_DIV: the quotient by one reciprocal refinement and one
    # residual correction instead of the IEEE division's full sequence (see _div_rn_fast).
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        gate = tl.load(x_ptr + row * x_stride + cols)
        up = tl.load(x_ptr + row * x_stride + d + cols)
    else:
        gate = tl.load(x_ptr + row * x_stride + cols, mask=cols < d, other=0.0)
        up = tl.load(x_ptr + row * x_stride + d + cols, mask=cols < d, other=0.0)
    gate = gate.to(tl.float32)
    up = up.to(tl.float32)
    den = 1.0 + exp_f32(-gate, ACCURATE_EXP)
    if FAST_DIV:  # noqa: SIM108 (a constexpr branch: only one side is compiled)
        silu = _div_fast(gate, den)
    else:
        silu = tl.math.div_rn(gate, den)
    silu = round_to(silu, x_ptr.dtype.element_ty, EMULATE_RNE).to(tl.float32)
    result = round_to(silu * up, out_ptr.dtype.element_ty, EMULATE_RNE)
    if EVEN:
        tl.store(out_ptr + row * d + cols, result)
    else:
        tl.store(out_ptr + row * d + cols, result, mask=cols < d)


_silu_mul_tuned = triton.autotune(
    configs=[
        triton.Config({"BLOCK": b}, num_warps=w)
        for b, w in ((256, 2), (512, 4), (1024, 4), (1024, 8), (2048, 8), (4096, 8))
    ],
    key=["d", "rows_bucket"],
)(_silu_mul_kernel)


H200_CONFIGS: dict[tuple[str, int, int], tuple[int, int, bool]] = {
    (str(r[0]), int(r[1]), int(r[2])): (int(r[3]), int(r[4]), bool(r[5])) for r in entries("silu_mul")
}
"""Measured ``(BLOCK, num_warps, fast division)`` on compute capability 9.0, keyed by (dtype, d, rows bucket)
(``tables.py``); other shapes and GPUs use Triton's autotuner."""


def silu_mul_with(x: torch.Tensor, config: tuple[int, int, bool] | None = None) -> torch.Tensor:
    """SiLU·mul by our kernel under an explicit ``(BLOCK, num_warps, fast division)`` (``None``: the measured
    table or the autotuner), for the benchmark's sweep and the exhaustive check; serving goes through the op."""
    d = x.shape[-1] // 2
    out = torch.empty((*x.shape[:-1], d), dtype=x.dtype, device=x.device)
    stride = row_stride(x)
    if stride is None:
        raise ValueError("silu_mul (triton): the leading dimensions must collapse into rows of contiguous columns")
    rows = x.numel() // x.shape[-1] if x.shape[-1] else 0
    if rows == 0 or d == 0:
        return out
    interp = interpreting()
    if config is None and is_sm90(x.device):
        config = H200_CONFIGS.get((str(x.dtype).removeprefix("torch."), d, rows_key(rows)))
    if config is None and fixed_config():
        config = (min(BLOCK, triton.next_power_of_2(d)), 4, False)
    if config is not None:
        block, warps, fast = config
        wrap_triton(_silu_mul_kernel)[(rows, triton.cdiv(d, block))](
            x, out, stride, d, rows_key(rows), BLOCK=block, EVEN=d % block == 0, FAST_DIV=fast,
            ACCURATE_EXP=not interp, EMULATE_RNE=interp, num_warps=warps,
        )  # fmt: skip
        return out

    def grid(meta: dict[str, int]) -> tuple[int, int]:
        return rows, triton.cdiv(d, meta["BLOCK"])

    wrap_triton(_silu_mul_tuned)[grid](
        x, out, stride, d, rows_key(rows), EVEN=False, FAST_DIV=False, ACCURATE_EXP=True, EMULATE_RNE=False
    )
    return out


@triton_op("inferensics::silu_mul_triton", mutates_args=())
def silu_mul_triton(x: torch.Tensor) -> torch.Tensor:
    """``silu(x[..., :d]) * x[..., d:]`` by our Triton kernel."""
    return silu_mul_with(x)
