"""SiLU·mul (the SwiGLU gate): ``silu(x[..., :d]) * x[..., d:]``, bit-exact with PyTorch's eager kernels.

Bit-exactness needs the same arithmetic as ATen's CUDA kernel: ``x / (1 + expf(-x))`` in float32 with
libdevice's ``expf`` and an IEEE division, rounded to the input dtype, then the product in float32 rounded
once more. Cheaper formulations that give the same bits for 16-bit dtypes (a refined-reciprocal division, an
approximate division redone exactly near rounding midpoints, the product in the 16-bit dtype) are launch-table
options, each enabled only where the exhaustive check over every 16-bit input held on the GPU.
"""

# Triton's convention: compile-time constants are UPPER_CASE parameters, and kernels take many arguments;
# kernel parameters stay unannotated (Triton resolves annotations itself, and only constexpr ones may be).
# mypy: disable-error-code="no-untyped-def,untyped-decorator,misc"
# ruff: noqa: N803, PLR0917

from __future__ import annotations

import struct
from typing import NamedTuple

import torch
import triton
import triton.language as tl
from torch.library import triton_op

from inferensics.kernels._triton.launches import launch
from inferensics.kernels._triton.norm import rows_key
from inferensics.kernels._triton.rounding import exp_f32, fixed_config, interpreting, is_sm90, round_to
from inferensics.kernels._triton.tables import entries
from inferensics.kernels.layout import row_stride

BLOCK = 1024
"""Columns of the output one program writes."""

DIV_IEEE, DIV_FAST, DIV_GUARDED, DIV_FULL = 0, 1, 2, 3
"""How the kernel divides ``x / (1 + expf(-x))``: the IEEE division (``div.rn``); a refined reciprocal with one
residual correction (:func:`_div_fast`); the hardware's approximate division with the IEEE division redone only
for elements whose approximate quotient lies within a few float32 units of a rounding midpoint of the 16-bit
output (:func:`_div_guarded_bf16`, :func:`_div_guarded_f16`); or Triton's own float32 ``/`` (``div.full.f32``,
within 2 units in the last place: Inductor's division), usable only where the exhaustive check finds that it
rounds the same."""


class SiluConfig(NamedTuple):
    """One launch configuration of the SiLU·mul kernel (the launch tables' value)."""

    block: int
    """Output columns a program writes."""
    warps: int
    """``num_warps``."""
    div: int = DIV_IEEE
    """:data:`DIV_IEEE`, :data:`DIV_FAST` or :data:`DIV_GUARDED`."""
    flat: bool = False
    """One-dimensional grid, column blocks of a row consecutive (programs running together read neighbouring
    memory); otherwise a (rows, column blocks) grid with the row varying fastest."""
    native_mul: bool = False
    """Multiply the rounded silu by ``up`` in the 16-bit dtype (one rounding of an exact product: the same bits as
    the float32 product rounded once) instead of converting both to float32."""
    hints: int = 0
    """Cache hints: bit 0 streams the stores (``.cs``), bit 1 loads with ``evict_first``."""
    fast_exp: bool = False
    """The hardware's ``ex2.approx`` for ``exp`` instead of libdevice's ``expf`` (fewer dependent instructions);
    usable only where the exhaustive check finds the rounded result unchanged."""


def as_config(config: tuple[int, ...] | SiluConfig) -> SiluConfig:
    """A configuration tuple (the tables' trailing fields may be absent) as :class:`SiluConfig`."""
    if isinstance(config, SiluConfig):
        return config
    block, warps, *rest = config
    div, flat, native_mul, hints, fast_exp = [*rest, *[DIV_IEEE, False, False, 0, False][len(rest) :]][:5]
    return SiluConfig(int(block), int(warps), int(div), bool(flat), bool(native_mul), int(hints), bool(fast_exp))


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


def _guarded_division_ptx(midpoint: int, low_bits: int, tiny: float) -> str:
    # Four quotients an instance (Triton's ``pack``): $0-$3 out, $4-$7 numerators, $8-$11 denominators.
    keep = (1 << low_bits) - 1
    lines = ["{", ".reg .f32 q<4>, a<4>;", ".reg .b32 t<4>;", ".reg .pred p;"]
    lines += [f"div.approx.ftz.f32 q{i}, ${4 + i}, ${8 + i};" for i in range(4)]
    # Near a midpoint: the low bits within 8 units of it (2 ulp can be 4 units across a binade edge).
    lines += [f"mov.b32 t{i}, q{i};" for i in range(4)]
    lines += [f"add.u32 t{i}, t{i}, {(1 << low_bits) - midpoint + 8};" for i in range(4)]
    lines += [f"and.b32 t{i}, t{i}, {keep};" for i in range(4)]
    lines += ["setp.le.u32 p, t0, 16;"] + [f"setp.le.or.u32 p, t{i}, 16, p;" for i in range(1, 4)]
    # Tiny, zero or NaN quotients (every divisor >= 2**64, inf or NaN gives one): the exact path.
    lines += [f"abs.f32 a{i}, q{i};" for i in range(4)]
    lines += [f"setp.ltu.or.f32 p, a{i}, 0f{_f32_bits(tiny):08X}, p;" for i in range(4)]
    lines += ["@!p bra SILU_DONE_${:uid};"]
    lines += [f"div.rn.f32 q{i}, ${4 + i}, ${8 + i};" for i in range(4)]
    lines += ["SILU_DONE_${:uid}:"] + [f"mov.f32 ${i}, q{i};" for i in range(4)] + ["}"]
    # One line: PTX ends statements with ``;``, and under torch.compile Inductor copies this constant into the
    # generated module as ``tl.constexpr(<repr>)`` inside a '''-quoted string, where a ``\n`` escape of the repr
    # would become a line break inside a string literal (a SyntaxError when the module loads).
    return " ".join(lines)


def _f32_bits(v: float) -> int:
    return int.from_bytes(struct.pack("<f", v), "little")


# The guarded divisions: div.approx.ftz.f32 (a reciprocal and a multiply) is within 2 units in the last place of
# the exact quotient for divisors in [2**-126, 2**126] (PTX ISA), so its rounding to the 16-bit output can differ
# from the IEEE quotient's only when its bit pattern lies within a few units of a rounding midpoint of the output
# format (low 16 bits 0x8000 for bfloat16; low 13 bits 0x1000 for float16). A group of four quotients with such an
# element, or with a quotient below 2**-56 in magnitude (every divisor >= 2**64, where the approximation's range
# ends, gives one; so do subnormal and float16-subnormal results, whose rounding position moves) or NaN, branches
# to div.rn.f32 for all four. Checked exhaustively over all 65,536 inputs of each dtype
# (tests/kernels/test_silu_exhaustive.py).
_GUARDED_BF16 = tl.constexpr(_guarded_division_ptx(0x8000, 16, 2.0**-56))
_GUARDED_F16 = tl.constexpr(_guarded_division_ptx(0x1000, 13, 2.0**-14))


@triton.jit
def _div_guarded_bf16(x, d):
    return tl.inline_asm_elementwise(_GUARDED_BF16, "=f,=f,=f,=f,f,f,f,f,f,f,f,f", [x, d], dtype=tl.float32,
                                     is_pure=True, pack=4)  # fmt: skip


@triton.jit
def _div_guarded_f16(x, d):
    return tl.inline_asm_elementwise(_GUARDED_F16, "=f,=f,=f,=f,f,f,f,f,f,f,f,f", [x, d], dtype=tl.float32,
                                     is_pure=True, pack=4)  # fmt: skip


@triton.jit
def _div_guarded(x, d, dtype: tl.constexpr, EMULATE_RNE: tl.constexpr):
    # Inline PTX does not run in the interpreter, which keeps the IEEE division; 32-bit outputs need the exact
    # quotient itself.
    if EMULATE_RNE:
        return tl.math.div_rn(x, d)
    if dtype == tl.bfloat16:
        return _div_guarded_bf16(x, d)
    if dtype == tl.float16:
        return _div_guarded_f16(x, d)
    return tl.math.div_rn(x, d)


@triton.jit
def _mul_native(silu, up, dtype: tl.constexpr, EMULATE_RNE: tl.constexpr):
    # The product of two 16-bit floats is exact in float32, so one rounding in the 16-bit dtype gives the same
    # bits as the float32 product rounded once. The interpreter converts by truncation: float32 and round by hand.
    if EMULATE_RNE:
        return round_to(silu.to(tl.float32) * up.to(tl.float32), dtype, EMULATE_RNE)
    return (silu * up).to(dtype)


@triton.jit(do_not_specialize=["rows_bucket"])
def _silu_mul_kernel(
    x_ptr, out_ptr, x_stride, rows_bucket,
    D: tl.constexpr, BLOCK: tl.constexpr, EVEN: tl.constexpr, DIV: tl.constexpr, FLAT: tl.constexpr,
    NATIVE_MUL: tl.constexpr, LOAD_POLICY: tl.constexpr, STORE_MODIFIER: tl.constexpr, ACCURATE_EXP: tl.constexpr,
    EMULATE_RNE: tl.constexpr,
):  # fmt: skip
    # EVEN: BLOCK divides D (no column mask). FLAT: a 1-D grid, the column blocks of one row consecutive.
    if FLAT:
        n_blocks: tl.constexpr = (D + BLOCK - 1) // BLOCK
        pid = tl.program_id(0)
        row = pid // n_blocks
        cols = (pid - row * n_blocks) * BLOCK + tl.arange(0, BLOCK)
        row = row.to(tl.int64)
    else:
        row = tl.program_id(0).to(tl.int64)
        cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    src = x_ptr + row * x_stride + cols
    if EVEN:
        gate = tl.load(src, eviction_policy=LOAD_POLICY)
        up = tl.load(src + D, eviction_policy=LOAD_POLICY)
    else:
        gate = tl.load(src, mask=cols < D, other=0.0, eviction_policy=LOAD_POLICY)
        up = tl.load(src + D, mask=cols < D, other=0.0, eviction_policy=LOAD_POLICY)
    g = gate.to(tl.float32)
    den = 1.0 + exp_f32(-g, ACCURATE_EXP)
    if DIV == 1:
        silu = _div_fast(g, den)
    elif DIV == 2:
        silu = _div_guarded(g, den, x_ptr.dtype.element_ty, EMULATE_RNE)
    elif DIV == 3:
        silu = g / den
    else:
        silu = tl.math.div_rn(g, den)
    silu = round_to(silu, x_ptr.dtype.element_ty, EMULATE_RNE)
    if NATIVE_MUL:
        result = _mul_native(silu, up, out_ptr.dtype.element_ty, EMULATE_RNE)
    else:
        result = round_to(silu.to(tl.float32) * up.to(tl.float32), out_ptr.dtype.element_ty, EMULATE_RNE)
    dst = out_ptr + row * D + cols
    if EVEN:
        tl.store(dst, result, cache_modifier=STORE_MODIFIER)
    else:
        tl.store(dst, result, mask=cols < D, cache_modifier=STORE_MODIFIER)


_silu_mul_tuned = triton.autotune(
    configs=[
        triton.Config({"BLOCK": b}, num_warps=w)
        for b, w in ((256, 2), (512, 4), (1024, 4), (1024, 8), (2048, 8), (4096, 8))
    ],
    key=["D", "rows_bucket"],
)(_silu_mul_kernel)


H200_CONFIGS: dict[tuple[str, int, int], SiluConfig] = {
    (str(r[0]), int(r[1]), int(r[2])): as_config(tuple(r[3:])) for r in entries("silu_mul")
}
"""Measured configurations on compute capability 9.0, keyed by (dtype, d, rows bucket) (``tables.py``); other
shapes and GPUs use Triton's autotuner."""

_MAX_FLAT_PROGRAMS = 2**31 - 1


def silu_mul_with(x: torch.Tensor, config: tuple[int, ...] | SiluConfig | None = None) -> torch.Tensor:
    """SiLU·mul by our kernel under an explicit configuration (``None``: the measured table or the autotuner),
    for the benchmark's sweep and the exhaustive check; serving goes through the op."""
    last = int(x.shape[-1])  # ``d`` is a constexpr of the kernel: a compile specialises on it (a guard)
    d = last // 2
    out = torch.empty((*x.shape[:-1], d), dtype=x.dtype, device=x.device)
    stride = row_stride(x)
    if stride is None:
        raise ValueError("silu_mul (triton): the leading dimensions must collapse into rows of contiguous columns")
    rows = x.numel() // last if last else 0
    if rows == 0 or d == 0:
        return out
    interp = interpreting()
    if config is None and is_sm90(x.device):
        config = H200_CONFIGS.get((str(x.dtype).removeprefix("torch."), d, rows_key(rows)))
    if config is None and fixed_config():
        config = SiluConfig(min(BLOCK, triton.next_power_of_2(d)), 4)
    if config is not None:
        c = as_config(config)
        n_blocks = triton.cdiv(d, c.block)
        flat = c.flat and rows * n_blocks <= _MAX_FLAT_PROGRAMS
        grid = (rows * n_blocks,) if flat else (rows, n_blocks)
        launch(_silu_mul_kernel, grid,
            x, out, stride, rows_key(rows), D=d, BLOCK=c.block, EVEN=d % c.block == 0, DIV=c.div, FLAT=flat,
            NATIVE_MUL=c.native_mul, LOAD_POLICY="evict_first" if c.hints & 2 else "",
            STORE_MODIFIER=".cs" if c.hints & 1 else "", ACCURATE_EXP=not (interp or c.fast_exp), EMULATE_RNE=interp,
            num_warps=c.warps,
        )  # fmt: skip
        return out

    def grid_fn(meta: dict[str, int]) -> tuple[int, int]:
        return rows, triton.cdiv(d, meta["BLOCK"])

    launch(_silu_mul_tuned, grid_fn,
        x, out, stride, rows_key(rows), D=d, EVEN=False, DIV=DIV_IEEE, FLAT=False, NATIVE_MUL=False, LOAD_POLICY="",
        STORE_MODIFIER="", ACCURATE_EXP=True, EMULATE_RNE=False,
    )  # fmt: skip
    return out


@triton_op("inferensics::silu_mul_triton", mutates_args=())
def silu_mul_triton(x: torch.Tensor) -> torch.Tensor:
    """``silu(x[..., :d]) * x[..., d:]`` by our Triton kernel."""
    return silu_mul_with(x)


DIRECT = {"silu_mul_triton": silu_mul_with}
"""The op's Python body, which an eager call runs without the op's dispatch (``ops/common.py``'s ``triton_fn``)."""
