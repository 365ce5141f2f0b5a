"""Paged decode attention on a persistent grid: a fixed number of programs, each given an equal share of the work.

The split kernel (``paged_attention.py``) launches one program per (KV head, sequence, split), so the last wave of
programs can leave multiprocessors idle while it drains, and programs keep being launched as others finish. Here
the grid is a fixed number of programs (about the resident slots: ``per_sm`` × multiprocessors), and the work is
cut stream-K style. Number the (sequence, KV head) units ``u = sequence × KV heads + KV head``, give each the
block table's width in steps of ``BLOCK_N`` tokens (an upper bound of every sequence's length, known without a
device sync), and lay the units' steps end to end: ``T = units × steps``. Program ``p`` takes steps
``[⌊pT/P⌋, ⌊(p+1)T/P⌋)``, so every program gets the same number of steps (±1) whatever the batch and context,
and may serve the end of one unit and the start of the next. A unit that one program serves whole is written
normalised. The units shared by several programs get a partial result from each, in slot ``p − (its first
program)`` of ``slots`` per unit; each sharing program counts itself on the unit's counter, and the last to count
merges them (``paged_merge.merge_group``) and resets the counter. The owner of step ``x`` is
``⌊((x+1)P − 1) / T⌋`` (:func:`step_owner`), so every program computes the same sharing counts without talking.

Positions past a sequence's length are skipped, not balanced: ragged batches load the programs unevenly, as they
do the split kernel.

No measured table row uses it: on the H200 it tied the split kernel at best (batch 64, context 32k) and lost
elsewhere (``benchmarks/results/kernels-h200/session19_attention.md``); a plan can still ask for it.
"""

# Triton's convention: compile-time constants are UPPER_CASE parameters, and kernels take many arguments;
# kernel parameters stay unannotated (Triton resolves annotations itself, and only constexpr ones may be).
# mypy: disable-error-code="no-untyped-def,untyped-decorator,misc"
# ruff: noqa: N803, PLR0917

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch.library import wrap_triton

from inferensics.kernels._triton.device_facts import sm_count
from inferensics.kernels._triton.paged_merge import merge_group
from inferensics.kernels._triton.rounding import interpreting, round_to

MERGE_SPLITS = 8
"""Partial results the merging program combines per step (a group's query heads at once)."""
MAX_UNROLL = 4
"""Most units a share may touch for the unit loop to be unrolled (a dynamic loop beyond: more registers)."""


def step_owner(x: int, total: int, programs: int) -> int:
    """The program whose share holds step ``x`` of ``total`` (shares ``[⌊pT/P⌋, ⌊(p+1)T/P⌋)``, ``P ≤ T``)."""
    return ((x + 1) * programs - 1) // total


def stream_plan(units: int, steps: int, programs: int) -> tuple[int, int, int]:
    """``(programs, slots, units a share touches)``: no more programs than steps, the partial-result slots a unit
    needs at most, and the most units one program's share touches.

    Shares are at least ``L = ⌊T/P⌋`` steps long. Besides the share holding a unit's first step, the shares of a
    unit start on its other ``steps − 1`` steps, at least ``L`` apart: at most ``⌈(steps − 1) / L⌉`` of them. The
    longest share, ``⌈T/P⌉`` steps, touches at most ``⌈(⌈T/P⌉ − 1) / steps⌉ + 1`` units.
    """
    total = units * steps
    programs = max(1, min(programs, total))
    slots = triton.cdiv(steps - 1, total // programs) + 1
    return programs, slots, triton.cdiv(triton.cdiv(total, programs) - 1, steps) + 1


@triton.jit
def _serve_unit(
    q_ptr, k_ptr, v_ptr, table_ptr, lens_ptr, out_ptr, acc_ptr, ml_ptr, count_ptr,
    scale_log2, u, p, lo, hi, total, steps, programs, slots, n_kv,
    q_sb, q_sh, k_sp, k_st, k_sh, v_sp, v_st, v_sh, t_sb, o_sb, o_sh,
    GROUP: tl.constexpr, BLOCK_G: tl.constexpr, BLOCK_GM: tl.constexpr, HEAD_DIM: tl.constexpr,
    PAGE: tl.constexpr, BLOCK_N: tl.constexpr, SB: tl.constexpr, IEEE: tl.constexpr, EMULATE_RNE: tl.constexpr,
    PREFETCH_PAGES: tl.constexpr,
):  # fmt: skip
    # Program p's steps of unit u (the split kernel's step loop, kept apart so that kernel's code stays exactly
    # what its tables measured), then the normalised output or a partial result and, for the last sharer, the merge.
    g = tl.arange(0, BLOCK_G)
    d = tl.arange(0, HEAD_DIM)
    gmask = g < GROUP
    pj = tl.arange(0, BLOCK_N // PAGE)
    n_heads = n_kv * GROUP
    b = (u // n_kv).to(tl.int64)
    kvh = u % n_kv
    first = u * steps
    start = (tl.maximum(lo, first) - first) * BLOCK_N
    end = tl.minimum((tl.minimum(hi, first + steps) - first) * BLOCK_N, tl.load(lens_ptr + b))
    heads = kvh * GROUP + g
    q = tl.load(q_ptr + b * q_sb + heads[:, None] * q_sh + d[None, :], mask=gmask[:, None], other=0.0)
    m = tl.full([BLOCK_G], float("-inf"), tl.float32)
    s = tl.zeros([BLOCK_G], tl.float32)
    acc = tl.zeros([BLOCK_G, HEAD_DIM], tl.float32)
    k_base = k_ptr + kvh * k_sh
    v_base = v_ptr + kvh * v_sh
    table_row = table_ptr + b * t_sb
    if PREFETCH_PAGES:
        pidx = start // PAGE + pj
        pages_next = tl.load(table_row + pidx, mask=pidx * PAGE < end, other=0)
    for n in range(start, end, BLOCK_N):
        t = n + tl.arange(0, BLOCK_N)
        tmask = t < end
        if PREFETCH_PAGES:
            pages = pages_next.to(tl.int64)
            pidx = (n + BLOCK_N) // PAGE + pj
            pages_next = tl.load(table_row + pidx, mask=pidx * PAGE < end, other=0)
        else:
            pidx = n // PAGE + pj
            pages = tl.load(table_row + pidx, mask=pidx * PAGE < end, other=0).to(tl.int64)
        page = tl.reshape(tl.broadcast_to(pages[:, None], (BLOCK_N // PAGE, PAGE)), (BLOCK_N,))
        slot = t % PAGE
        k = tl.load(k_base + page[:, None] * k_sp + slot[:, None] * k_st + d[None, :], mask=tmask[:, None], other=0.0)
        v = tl.load(v_base + page[:, None] * v_sp + slot[:, None] * v_st + d[None, :], mask=tmask[:, None], other=0.0)
        if IEEE:
            scores = tl.dot(q.to(tl.float32), tl.trans(k.to(tl.float32)), input_precision="ieee")
        else:
            scores = tl.dot(q, tl.trans(k))
        scores = tl.where(tmask[None, :], scores * scale_log2, float("-inf"))
        m_new = tl.maximum(m, tl.max(scores, axis=1))
        alpha = tl.exp2(m - m_new)
        pr = tl.exp2(scores - m_new[:, None])
        s = s * alpha + tl.sum(pr, axis=1)
        if IEEE:
            acc = acc * alpha[:, None] + tl.dot(pr, v.to(tl.float32), input_precision="ieee")
        else:
            acc = acc * alpha[:, None] + tl.dot(pr.to(v.dtype), v)
        m = m_new
    # The programs sharing this unit: the owners of its first and last steps (step_owner).
    p_first = ((first + 1).to(tl.int64) * programs - 1) // total
    p_last = ((first + steps).to(tl.int64) * programs - 1) // total
    if p_first == p_last:
        out = tl.where(s[:, None] > 0, acc / s[:, None], 0.0)
        out = round_to(out, out_ptr.dtype.element_ty, EMULATE_RNE)
        tl.store(out_ptr + b * o_sb + heads[:, None] * o_sh + d[None, :], out, mask=gmask[:, None])
    else:
        row = (b * n_heads + heads) * slots + (p - p_first)
        tl.store(acc_ptr + row[:, None] * HEAD_DIM + d[None, :], acc, mask=gmask[:, None])
        tl.store(ml_ptr + row * 2, m, mask=gmask)
        tl.store(ml_ptr + row * 2 + 1, s, mask=gmask)
        # Every thread's partial stores precede the count (a CTA barrier, then a gpu-scope release by the counting
        # thread); the last sharer to count acquires them all and merges.
        tl.debug_barrier()
        counter = count_ptr + u
        done = tl.atomic_add(counter, 1, sem="acq_rel", scope="gpu")
        if done == p_last - p_first:
            tl.atomic_xchg(counter, 0, sem="relaxed", scope="gpu")  # leave the counter as found
            merge_group(acc_ptr, ml_ptr, out_ptr, b, kvh, n_heads, (p_last - p_first + 1).to(tl.int32), slots,
                        o_sb, o_sh, GROUP, BLOCK_GM, HEAD_DIM, SB, False, EMULATE_RNE)  # fmt: skip


# The grid's counts vary with every batch, context and program count: specialising on them (divisibility by 16,
# == 1) would compile a kernel per shape for nothing.
@triton.jit(do_not_specialize=["units", "steps", "programs", "slots"])
def _persistent_kernel(
    q_ptr, k_ptr, v_ptr, table_ptr, lens_ptr, out_ptr, acc_ptr, ml_ptr, count_ptr,
    scale_log2, units, steps, programs, slots, n_kv,
    q_sb, q_sh, k_sp, k_st, k_sh, v_sp, v_st, v_sh, t_sb, o_sb, o_sh,
    GROUP: tl.constexpr, BLOCK_G: tl.constexpr, BLOCK_GM: tl.constexpr, HEAD_DIM: tl.constexpr,
    PAGE: tl.constexpr, BLOCK_N: tl.constexpr, SB: tl.constexpr, IEEE: tl.constexpr, EMULATE_RNE: tl.constexpr,
    PREFETCH_PAGES: tl.constexpr, UNROLL: tl.constexpr,
):  # fmt: skip
    # UNROLL > 0: no share touches more than UNROLL units, and the unit loop is unrolled (a dynamic loop around the
    # pipelined step loop compiled to 123-161 registers with Triton 3.6 for sm_90, the unrolled one to 80-96, the
    # split kernel's 87: the difference between 3 and 5 programs a multiprocessor).
    p = tl.program_id(0).to(tl.int64)
    total = tl.cast(units, tl.int64) * steps
    lo = (p * total // programs).to(tl.int32)
    hi = ((p + 1) * total // programs).to(tl.int32)
    # Inductor passes a Python float as fp64 (torch 2.11): fp32 as in an eager launch.
    scale_log2 = tl.cast(scale_log2, tl.float32)
    u_end = (hi + steps - 1) // steps
    if UNROLL > 0:
        for i in tl.static_range(UNROLL):
            if lo // steps + i < u_end:
                _serve_unit(
                    q_ptr, k_ptr, v_ptr, table_ptr, lens_ptr, out_ptr, acc_ptr, ml_ptr, count_ptr,
                    scale_log2, lo // steps + i, p, lo, hi, total, steps, programs, slots, n_kv,
                    q_sb, q_sh, k_sp, k_st, k_sh, v_sp, v_st, v_sh, t_sb, o_sb, o_sh,
                    GROUP, BLOCK_G, BLOCK_GM, HEAD_DIM, PAGE, BLOCK_N, SB, IEEE, EMULATE_RNE, PREFETCH_PAGES,
                )  # fmt: skip
    else:
        for u in range(lo // steps, u_end):
            _serve_unit(
                q_ptr, k_ptr, v_ptr, table_ptr, lens_ptr, out_ptr, acc_ptr, ml_ptr, count_ptr,
                scale_log2, u, p, lo, hi, total, steps, programs, slots, n_kv,
                q_sb, q_sh, k_sp, k_st, k_sh, v_sp, v_st, v_sh, t_sb, o_sb, o_sh,
                GROUP, BLOCK_G, BLOCK_GM, HEAD_DIM, PAGE, BLOCK_N, SB, IEEE, EMULATE_RNE, PREFETCH_PAGES,
            )  # fmt: skip


def launch_persistent(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    scale: float,
    out: torch.Tensor,
    *,
    per_sm: float,
    block_n: int,
    warps: int,
    stages: int,
    prefetch_pages: bool,
) -> torch.Tensor:
    """Fill ``out`` with ``round(per_sm × multiprocessors)`` programs (fewer where there are fewer steps);
    ``block_n`` is a multiple of the page."""
    batch, n_heads, head_dim = q.shape
    kv_heads, page = k_cache.shape[2], k_cache.shape[1]
    group = n_heads // kv_heads
    units = batch * kv_heads
    steps = triton.cdiv(max(block_table.shape[1] * page, 1), block_n)
    programs, slots, touched = stream_plan(units, steps, max(1, round(per_sm * sm_count(q.device))))
    if slots > 1:
        acc = torch.empty((batch * n_heads * slots, head_dim), dtype=torch.float32, device=q.device)
        ml = torch.empty((batch * n_heads * slots, 2), dtype=torch.float32, device=q.device)
        count = torch.zeros(units, dtype=torch.int32, device=q.device)
    else:  # every unit served whole by one program: no partial results
        acc = ml = out
        count = seq_lens
    ieee = q.dtype == torch.float32 or interpreting()
    wrap_triton(_persistent_kernel)[(programs,)](
        q, k_cache, v_cache, block_table, seq_lens, out, acc, ml, count,
        scale * 1.4426950408889634, units, steps, programs, slots, kv_heads,
        q.stride(0), q.stride(1), k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        v_cache.stride(0), v_cache.stride(1), v_cache.stride(2), block_table.stride(0), out.stride(0), out.stride(1),
        GROUP=group, BLOCK_G=max(16, triton.next_power_of_2(group)), BLOCK_GM=triton.next_power_of_2(group),
        HEAD_DIM=head_dim, PAGE=page, BLOCK_N=block_n, SB=MERGE_SPLITS, IEEE=ieee, EMULATE_RNE=interpreting(),
        PREFETCH_PAGES=prefetch_pages, UNROLL=touched if touched <= MAX_UNROLL else 0,
        num_warps=warps, num_stages=stages,
    )  # fmt: skip
    return out
