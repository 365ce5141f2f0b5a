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

from typing import NamedTuple

import torch
import triton
import triton.language as tl
from torch.library import triton_op

from inferensics.kernels._torch_adapter import hint
from inferensics.kernels._triton.device_facts import sm_count
from inferensics.kernels._triton.launches import launch
from inferensics.kernels._triton.rounding import fixed_config, interpreting, is_sm90, round_to
from inferensics.kernels._triton.tables import entries
from inferensics.kernels.layout import row_stride


def _launch_params(n: int) -> tuple[int, int]:
    block = triton.next_power_of_2(max(n, 1))
    # 16-byte accesses per thread for 16-bit data: 8 elements a thread, 32 threads a warp.
    warps = max(1, min(16, block // 256))
    return block, warps


def rows_key(rows: int) -> int:
    """Power-of-two bucket of a row count: the autotuner's key, so serving shapes share tunings. A symbolic count
    (a compile under dynamic shapes) takes the bucket of its hint, without a guard: the bucket picks a tuning,
    never the result, so the graph stays general."""
    known = hint(rows)
    return 1 << max(0, (int(known) if known is not None else 1) - 1).bit_length()


@triton.jit(do_not_specialize=["n_rows", "rows_bucket"])
def _rms_norm_kernel(
    x_ptr, w_ptr, out_ptr, res_ptr, res_out_ptr,
    x_stride, res_stride, n_rows, n_cols, eps, rows_bucket,
    BLOCK: tl.constexpr, ROWS: tl.constexpr, HAS_RESIDUAL: tl.constexpr, EVEN: tl.constexpr,
    EARLY_WEIGHT: tl.constexpr, LATE_RESIDUAL: tl.constexpr, LOAD_POLICY: tl.constexpr, STORE_MODIFIER: tl.constexpr,
    EMULATE_RNE: tl.constexpr,
):  # fmt: skip
    # ROWS rows a program, each held whole in registers; EVEN: the row fills BLOCK exactly (no column mask; with
    # one row a program no mask at all, the grid having exactly one program a row). EARLY_WEIGHT: the weight is
    # loaded before the row, so its latency overlaps the row's load and the reduction.
    rows = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    if EARLY_WEIGHT:
        w = _load_weight(w_ptr, cols, n_cols, EVEN)
    rmask = rows < n_rows
    mask = rmask[:, None] & (cols < n_cols)[None, :]
    if EVEN:
        if ROWS == 1:
            x = tl.load(x_ptr + rows[:, None] * x_stride + cols[None, :], eviction_policy=LOAD_POLICY)
        else:
            mask = tl.broadcast_to(rmask[:, None], (ROWS, BLOCK))
            x = tl.load(x_ptr + rows[:, None] * x_stride + cols[None, :], mask=mask, other=0.0,
                        eviction_policy=LOAD_POLICY)  # fmt: skip
    else:
        x = tl.load(x_ptr + rows[:, None] * x_stride + cols[None, :], mask=mask, other=0.0, eviction_policy=LOAD_POLICY)
    x = x.to(tl.float32)
    if HAS_RESIDUAL:
        if EVEN and ROWS == 1:
            r = tl.load(res_ptr + rows[:, None] * res_stride + cols[None, :], eviction_policy=LOAD_POLICY)
        else:
            r = tl.load(res_ptr + rows[:, None] * res_stride + cols[None, :], mask=mask, other=0.0,
                        eviction_policy=LOAD_POLICY)  # fmt: skip
        x = x + r.to(tl.float32)
        if not LATE_RESIDUAL:
            res = round_to(x, res_out_ptr.dtype.element_ty, EMULATE_RNE)
            _store(res_out_ptr + rows[:, None] * n_cols + cols[None, :], res, mask, EVEN and ROWS == 1, STORE_MODIFIER)
    mean_sq = tl.sum(x * x, axis=1) / n_cols
    # eps as fp32 in every kernel here: Inductor (torch 2.11) passes a Python float as fp64, which would take the
    # reduction to fp64 and the bits away from an eager launch.
    rstd = tl.rsqrt(mean_sq + tl.cast(eps, tl.float32))
    normed = round_to(x * rstd[:, None], x_ptr.dtype.element_ty, EMULATE_RNE).to(tl.float32)
    if not EARLY_WEIGHT:
        w = _load_weight(w_ptr, cols, n_cols, EVEN)
    result = round_to(normed * w[None, :], out_ptr.dtype.element_ty, EMULATE_RNE)
    if HAS_RESIDUAL and LATE_RESIDUAL:  # both outputs written together, after the reduction
        res = round_to(x, res_out_ptr.dtype.element_ty, EMULATE_RNE)
        _store(res_out_ptr + rows[:, None] * n_cols + cols[None, :], res, mask, EVEN and ROWS == 1, STORE_MODIFIER)
    _store(out_ptr + rows[:, None] * n_cols + cols[None, :], result, mask, EVEN and ROWS == 1, STORE_MODIFIER)


@triton.jit
def _load_weight(w_ptr, cols, n_cols, EVEN: tl.constexpr):
    if EVEN:
        return tl.load(w_ptr + cols).to(tl.float32)
    return tl.load(w_ptr + cols, mask=cols < n_cols, other=0.0).to(tl.float32)


@triton.jit
def _store(ptrs, values, mask, UNMASKED: tl.constexpr, STORE_MODIFIER: tl.constexpr):
    if UNMASKED:
        tl.store(ptrs, values, cache_modifier=STORE_MODIFIER)
    else:
        tl.store(ptrs, values, mask=mask, cache_modifier=STORE_MODIFIER)


@triton.jit
def _add_rms_norm_two_pass_kernel(
    x_ptr, w_ptr, out_ptr, res_ptr, res_out_ptr,
    x_stride, res_stride, N_COLS: tl.constexpr, eps,
    CHUNK: tl.constexpr, EVEN: tl.constexpr, LATE_RESIDUAL: tl.constexpr, STORE_MODIFIER: tl.constexpr,
    EMULATE_RNE: tl.constexpr,
):  # fmt: skip
    # One row a program, CHUNK columns a step, two passes over the row (Inductor's looped reduction): the first
    # loads x and the residual (kept in L2: evict_last) and accumulates the float32 sum of squares per lane; the
    # second loads them again (from L2, evict_first), recomputes the same float32 sum and writes both outputs.
    # LATE_RESIDUAL: the new residual is written in the second pass beside the normalised row, else in the first.
    # N_COLS is a compile-time constant, as in Inductor's kernel: the loops unroll, and the output rows, which start
    # at row * N_COLS, are known 16-byte aligned, so the stores are 16-byte vectors (with N_COLS unspecialised they
    # were one 2-byte store an element behind a shared-memory layout conversion: the form sessions 12-13 measured).
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, CHUNK)
    x_row = x_ptr + row * x_stride
    r_row = res_ptr + row * res_stride
    o_row = row * N_COLS
    acc = tl.zeros([CHUNK], dtype=tl.float32)
    for start in tl.range(0, N_COLS, CHUNK):
        c = start + cols
        if EVEN:
            s = tl.load(x_row + c, eviction_policy="evict_last").to(tl.float32)
            s += tl.load(r_row + c, eviction_policy="evict_last").to(tl.float32)
        else:
            s = tl.load(x_row + c, mask=c < N_COLS, other=0.0, eviction_policy="evict_last").to(tl.float32)
            s += tl.load(r_row + c, mask=c < N_COLS, other=0.0, eviction_policy="evict_last").to(tl.float32)
        acc += s * s
        if not LATE_RESIDUAL:
            _store(res_out_ptr + o_row + c, round_to(s, res_out_ptr.dtype.element_ty, EMULATE_RNE), c < N_COLS, EVEN,
                   STORE_MODIFIER)  # fmt: skip
    rstd = tl.rsqrt(tl.sum(acc, axis=0) / N_COLS + tl.cast(eps, tl.float32))
    for start in tl.range(0, N_COLS, CHUNK):
        c = start + cols
        if EVEN:
            s = tl.load(x_row + c, eviction_policy="evict_first").to(tl.float32)
            s += tl.load(r_row + c, eviction_policy="evict_first").to(tl.float32)
            w = tl.load(w_ptr + c, eviction_policy="evict_last").to(tl.float32)
        else:
            s = tl.load(x_row + c, mask=c < N_COLS, other=0.0, eviction_policy="evict_first").to(tl.float32)
            s += tl.load(r_row + c, mask=c < N_COLS, other=0.0, eviction_policy="evict_first").to(tl.float32)
            w = tl.load(w_ptr + c, mask=c < N_COLS, other=0.0, eviction_policy="evict_last").to(tl.float32)
        normed = round_to(s * rstd, x_ptr.dtype.element_ty, EMULATE_RNE).to(tl.float32)
        _store(out_ptr + o_row + c, round_to(normed * w, out_ptr.dtype.element_ty, EMULATE_RNE), c < N_COLS, EVEN,
               STORE_MODIFIER)  # fmt: skip
        if LATE_RESIDUAL:  # after the normalised row, as Inductor orders its two stores
            _store(res_out_ptr + o_row + c, round_to(s, res_out_ptr.dtype.element_ty, EMULATE_RNE), c < N_COLS, EVEN,
                   STORE_MODIFIER)  # fmt: skip


@triton.jit
def _add_rms_norm_persistent_kernel(
    x_ptr, w_ptr, out_ptr, res_ptr, res_out_ptr,
    x_stride, res_stride, n_rows, n_cols, eps,
    BLOCK: tl.constexpr, LATE_RESIDUAL: tl.constexpr, STORE_MODIFIER: tl.constexpr, EMULATE_RNE: tl.constexpr,
):  # fmt: skip
    # A persistent grid (a few programs a multiprocessor), each taking rows pid, pid + programs, ...: one row at a
    # time held whole in registers as in the one-pass kernel, with the next row's loads issued before this row's
    # reduction and stores, so every program keeps a row's bytes in flight while it finishes the last one. The
    # arithmetic is the one-pass kernel's, step for step.
    pid = tl.program_id(0)
    step = tl.num_programs(0)
    cols = tl.arange(0, BLOCK)
    cmask = cols < n_cols
    w = tl.load(w_ptr + cols, mask=cmask, other=0.0).to(tl.float32)
    row = pid.to(tl.int64)
    m = cmask & (row + tl.zeros([BLOCK], tl.int64) < n_rows)  # a vector mask (the interpreter rejects scalar & vector)
    x = tl.load(x_ptr + row * x_stride + cols, mask=m, other=0.0)
    r = tl.load(res_ptr + row * res_stride + cols, mask=m, other=0.0)
    for _ in range(pid, n_rows, step):
        nxt = row + step
        m_next = cmask & (nxt + tl.zeros([BLOCK], tl.int64) < n_rows)
        x_next = tl.load(x_ptr + nxt * x_stride + cols, mask=m_next, other=0.0)
        r_next = tl.load(res_ptr + nxt * res_stride + cols, mask=m_next, other=0.0)
        s = x.to(tl.float32) + r.to(tl.float32)
        o_row = row * n_cols
        if not LATE_RESIDUAL:
            tl.store(res_out_ptr + o_row + cols, round_to(s, res_out_ptr.dtype.element_ty, EMULATE_RNE), mask=cmask,
                     cache_modifier=STORE_MODIFIER)  # fmt: skip
        rstd = tl.rsqrt(tl.sum(s * s, axis=0) / n_cols + tl.cast(eps, tl.float32))
        normed = round_to(s * rstd, x_ptr.dtype.element_ty, EMULATE_RNE).to(tl.float32)
        result = round_to(normed * w, out_ptr.dtype.element_ty, EMULATE_RNE)
        if LATE_RESIDUAL:
            tl.store(res_out_ptr + o_row + cols, round_to(s, res_out_ptr.dtype.element_ty, EMULATE_RNE), mask=cmask,
                     cache_modifier=STORE_MODIFIER)  # fmt: skip
        tl.store(out_ptr + o_row + cols, result, mask=cmask, cache_modifier=STORE_MODIFIER)
        x, r, row = x_next, r_next, nxt


class NormConfig(NamedTuple):
    """One launch configuration of the RMSNorm kernel (the launch tables' value)."""

    rows: int
    """Rows a program."""
    warps: int
    """``num_warps``."""
    early_weight: bool = False
    """Load the weight before the row."""
    hints: int = 0
    """Cache hints: bit 0 streams the stores (``.cs``), bit 1 loads with ``evict_first``."""
    late_residual: bool = False
    """Store the new residual after the reduction, beside the normalised row, instead of before it."""
    chunk: int = 0
    """Fused add + RMSNorm only: ``0`` holds the row in registers (one pass); otherwise columns a step of the
    two-pass kernel, which reads the row twice (the second time from L2) and holds only ``chunk`` columns."""
    persistent: int = 0
    """Fused add + RMSNorm only, with ``chunk`` 0: programs a multiprocessor of the persistent kernel (a grid of
    that many programs per multiprocessor, each looping over rows with the next row's loads in flight); ``0``:
    one program a row."""


def as_config(config: tuple[int, ...] | NormConfig) -> NormConfig:
    """A configuration tuple (the tables' trailing fields may be absent) as :class:`NormConfig`."""
    if isinstance(config, NormConfig):
        return config
    rows, warps, *rest = config
    early, hints, late, chunk, persistent = [*rest, *[False, 0, False, 0, 0][len(rest) :]][:5]
    return NormConfig(int(rows), int(warps), bool(early), int(hints), bool(late), int(chunk), int(persistent))


INTERPRETER_SMS = 4
"""Multiprocessors assumed for the persistent grid in Triton's interpreter (no device to ask)."""


_rms_norm_tuned = triton.autotune(
    configs=[triton.Config({"ROWS": 1}, num_warps=w) for w in (2, 4, 8, 16)],
    key=["n_cols", "rows_bucket", "HAS_RESIDUAL"],
)(_rms_norm_kernel)

H200_CONFIGS: dict[tuple[bool, int, int], NormConfig] = {
    (bool(r[0]), int(r[1]), int(r[2])): as_config(tuple(r[3:])) for r in entries("rms_norm")
}
"""Measured configurations on compute capability 9.0, keyed by (residual?, columns, rows bucket)
(``tables.py``); other shapes and GPUs use Triton's autotuner."""


def measured_config(device: torch.device, has_residual: bool, n: int, m: int) -> NormConfig | None:
    """The H200 table's configuration for this shape, if it applies on ``device``."""
    if not H200_CONFIGS or not is_sm90(device):
        return None
    return H200_CONFIGS.get((has_residual, n, rows_key(m)))


def _launch(
    m: int, n: int, args: tuple[object, ...], has_residual: bool, config: tuple[int, ...] | NormConfig | None = None
) -> None:
    block, warps = _launch_params(n)
    even = block == n
    if config is None and not fixed_config():
        config = measured_config(args[0].device, has_residual, n, m)  # type: ignore[attr-defined]
    if config is not None or fixed_config():
        c = as_config(config or (1, warps))
        if has_residual and c.chunk:
            chunk = min(c.chunk, block)
            launch(_add_rms_norm_two_pass_kernel, (m,),
                *args, CHUNK=chunk, EVEN=n % chunk == 0, LATE_RESIDUAL=c.late_residual,
                STORE_MODIFIER=".cs" if c.hints & 1 else "", EMULATE_RNE=interpreting(), num_warps=c.warps,
            )  # fmt: skip
            return
        if has_residual and c.persistent:
            programs = torch.sym_min(m, c.persistent * sm_count(args[0].device, INTERPRETER_SMS))  # type: ignore[attr-defined,no-untyped-call]
            launch(_add_rms_norm_persistent_kernel, (programs,),
                *args[:7], m, *args[7:], BLOCK=block, LATE_RESIDUAL=c.late_residual,
                STORE_MODIFIER=".cs" if c.hints & 1 else "", EMULATE_RNE=interpreting(), num_warps=c.warps,
            )  # fmt: skip
            return
        launch(_rms_norm_kernel, (triton.cdiv(m, c.rows),),
            *args[:7], m, *args[7:], rows_key(m), BLOCK=block, ROWS=c.rows, HAS_RESIDUAL=has_residual, EVEN=even,
            EARLY_WEIGHT=c.early_weight, LATE_RESIDUAL=c.late_residual,
            LOAD_POLICY="evict_first" if c.hints & 2 else "", STORE_MODIFIER=".cs" if c.hints & 1 else "",
            EMULATE_RNE=interpreting(), num_warps=c.warps,
        )  # fmt: skip
    else:
        launch(_rms_norm_tuned, lambda meta: (triton.cdiv(m, meta["ROWS"]),),
            *args[:7], m, *args[7:], rows_key(m), BLOCK=block, HAS_RESIDUAL=has_residual, EVEN=even,
            EARLY_WEIGHT=False, LATE_RESIDUAL=False, LOAD_POLICY="", STORE_MODIFIER="", EMULATE_RNE=False,
        )  # fmt: skip


def _rows(x: torch.Tensor) -> tuple[int, int, int]:
    stride = row_stride(x)
    if stride is None:
        raise ValueError("rms_norm (triton): the leading dimensions must collapse into rows of contiguous columns")
    n = int(x.shape[-1])  # the block is sized by it: a compile specialises on the columns (a guard)
    return (x.numel() // n if n else 0), n, stride


def rms_norm_with(
    x: torch.Tensor, weight: torch.Tensor, eps: float, config: tuple[int, ...] | NormConfig | None = None
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
    x: torch.Tensor,
    residual: torch.Tensor,
    weight: torch.Tensor,
    eps: float,
    config: tuple[int, ...] | NormConfig | None = None,
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


DIRECT = {"rms_norm_triton": rms_norm_with, "fused_add_rms_norm_triton": fused_add_rms_norm_with}
"""Each op's Python body, which an eager call runs without the op's dispatch (``ops/common.py``'s ``triton_fn``)."""
