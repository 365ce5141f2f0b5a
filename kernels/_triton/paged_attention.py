"""Paged-KV decode attention: split-K (flash-decoding) over a block table, grouped-query heads.

One launch. Each program serves one (KV head, sequence, split): it loads the query rows of the KV head's group
once (one KV read serves every query head of the group), walks its split of the context ``BLOCK_N`` tokens at a
time through the block table (each page looked up once, its rows read in place, no gather copy; a step's keys
and values loaded together), and keeps an online softmax. With one split it writes the normalised output.
Otherwise each split stores its unnormalised accumulator, running max and sum to a float32 scratch and counts
itself done on a per-(sequence, KV head) counter (kept zeroed between calls: ``counters.py``); the split that
finishes last merges the group's splits and writes the output (no second kernel; a plan may ask for the merge as a
second kernel instead, one program per query head, which measured faster where one sequence's many splits would
leave the merge to a few programs). By default the KV head is the fastest grid axis, so the programs that run
together read neighbouring rows of the same pages. Page and head strides are arguments: a cache stored NHD
(``[pages, page, Hkv, D]``) and one stored HND (``[pages, Hkv, page, D]`` seen through ``transpose(1, 2)``) run the
same code, at the same speed.

The split count comes from the block table's width (an upper bound of the context, known without a device
sync) and the multiprocessor count; launch configurations come from a table measured on an H200 by
``benchmarks/bench_kernels.py --sweep`` (other GPUs fall back to Triton's autotuner).

Under ``torch.compile`` a call with fixed sizes is traced in (a ``triton_op``: Inductor launches the kernel from its
own code). Where the compile leaves the batch or the block table's width symbolic, the graph calls the kernel as an
opaque op that reads the sizes and picks the plan when it runs: tracing it in would pin the graph to one batch
and width, a recompile for each (Dynamo stops recompiling after ``recompile_limit`` and runs the frame eagerly).
"""

# Triton's convention: compile-time constants are UPPER_CASE parameters, and kernels take many arguments;
# kernel parameters stay unannotated (Triton resolves annotations itself, and only constexpr ones may be).
# mypy: disable-error-code="no-untyped-def,untyped-decorator,misc"
# ruff: noqa: N803, PLR0917

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
import triton
import triton.language as tl
from torch.library import custom_op, triton_op
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

from inferensics.kernels._torch_adapter import symbolic, tracing
from inferensics.kernels._triton.counters import COUNTERS
from inferensics.kernels._triton.device_facts import cuda_index, device_facts, sm_count
from inferensics.kernels._triton.launches import launch
from inferensics.kernels._triton.rounding import fixed_config, interpreting, round_to
from inferensics.kernels._triton.tables import entries

BLOCK_N = 64
"""Context tokens per inner step in the interpreter and for the fixed configuration."""
CHUNK_ALIGN = 128
"""Split lengths are multiples of this under the autotuner (its largest ``BLOCK_N``); a plan aligns to its own."""
MERGE_SPLITS = 8
"""Splits the merging program combines per step (a group's query heads at once)."""
KERNEL_MERGE_SPLITS = 32
"""Splits a program of the second-kernel merge combines per step (one query head)."""


@dataclass(frozen=True)
class Plan:
    """How one call is cut up and launched.

    Attributes:
        waves: Programs per multiprocessor the split count aims for (fractional values pick a split count that
            fills the resident slots of a kernel that fits a few programs per multiprocessor).
        min_split: Fewest context tokens a split is given (shorter splits cost more in the merge than they save).
        block_n: Context tokens per inner step.
        warps: ``num_warps`` of the split kernel.
        stages: ``num_stages`` (software-pipelining depth) of the split kernel. The page-table load takes a stage
            of its own, so keys and values get one shared-memory buffer up to 4 stages at a 64-token step (the next
            step's copy overlaps only the current step's math) and two at 5 (fewer programs fit a multiprocessor).
        kv_fast: Whether the KV head is the fastest grid axis (else the sequence).
        merge_kernel: Merge the splits in a second kernel (one program per query head) instead of in the
            last split of each group.
        pdl: Launch the merge kernel as a programmatic dependent launch (Hopper): it is scheduled while the split
            kernel still runs and waits on the split kernel's completion in the device, not on the host's launch
            of it. Only with ``merge_kernel``; never in the interpreter.
        prefetch_pages: Load the next step's page numbers during this step (a loop-carried vector), so the K/V
            copies do not wait on a table load of their own step: Triton's pipeliner then gives keys and values
            ``stages - 1`` shared-memory buffers (without it the table load takes a pipeline stage, and a 64-token
            step gets one buffer up to 4 stages).
    """

    waves: float = 4
    min_split: int = 128
    block_n: int = 64
    warps: int = 4
    stages: int = 2
    kv_fast: bool = True
    merge_kernel: bool = False
    pdl: bool = False
    prefetch_pages: bool = False


DEFAULT_PLAN = Plan()
"""Used where no measured plan applies (and in the interpreter)."""


def _plan_of(row: list[Any]) -> Plan:
    # [key, waves, min_split, block_n, warps, stages, kv_fast, merge_kernel?, pdl?, prefetch_pages?] (older rows
    # are shorter)
    min_split, block_n, warps, stages = (int(v) for v in row[2:6])
    merge_kernel, pdl, prefetch = (bool(row[i]) if len(row) > i else False for i in (7, 8, 9))
    return Plan(float(row[1]), min_split, block_n, warps, stages, bool(row[6]), merge_kernel, pdl, prefetch)


H200_PLANS: dict[str, Plan] = {str(r[0]): _plan_of(r) for r in entries("paged")}
"""Measured plans for compute capability 9.0, keyed by :func:`plan_key` (``tables.py``)."""


def plan_key(batch: int, kv_heads: int, max_tokens: int) -> str:
    """``"p<programs bucket>/t<context bucket>"``: powers of two of batch × KV heads and of the table's tokens.

    The caches' layout is not part of the key: the plans serve NHD and HND storage alike (measured equal).
    """
    return f"p{1 << max(0, (batch * kv_heads - 1).bit_length())}/t{1 << max(0, (max_tokens - 1).bit_length())}"


def choose_plan(device: torch.device, batch: int, kv_heads: int, max_tokens: int) -> tuple[Plan, bool]:
    """``(plan, measured)``: the H200 table's plan for this shape on a compute-capability-9.0 GPU, else the default."""
    if device.type == "cuda" and not interpreting() and device_facts(cuda_index(device))[1] == (9, 0):
        plan = H200_PLANS.get(plan_key(batch, kv_heads, max_tokens))
        if plan is not None:
            return plan, True
    return DEFAULT_PLAN, False


def split_plan(
    batch: int,
    kv_heads: int,
    max_tokens: int,
    sms: int,
    waves: float = 4,
    min_split: int = 128,
    align: int = CHUNK_ALIGN,
) -> tuple[int, int]:
    """``(splits, tokens per split)`` for a launch: enough programs to fill the machine, none too short; split
    lengths are multiples of ``align`` (the step, itself a multiple of the page)."""
    by_length = max(1, triton.cdiv(max_tokens, min_split))
    by_occupancy = max(1, math.ceil(waves * sms / max(1, batch * kv_heads)))
    splits = min(by_length, by_occupancy)
    chunk = triton.cdiv(triton.cdiv(max(max_tokens, 1), splits), align) * align
    return triton.cdiv(max(max_tokens, 1), chunk), chunk


@triton.jit
def _merge_loads(acc_ptr, ml_ptr, base, gmask, s0, splits, SB: tl.constexpr, HEAD_DIM: tl.constexpr):
    # Running maxima, sums and accumulators of splits s0 … s0+SB-1 of the group's heads (none past `splits`).
    sp = tl.arange(0, SB)
    d = tl.arange(0, HEAD_DIM)
    smask = gmask[:, None] & (s0 + sp[None, :] < splits)
    row = base[:, None] + s0 + sp[None, :]  # [BLOCK_GM, SB]
    m = tl.load(ml_ptr + row * 2, mask=smask, other=float("-inf"), cache_modifier=".cg")
    s = tl.load(ml_ptr + row * 2 + 1, mask=smask, other=0.0, cache_modifier=".cg")
    acc = tl.load(acc_ptr + row[:, :, None] * HEAD_DIM + d[None, None, :], mask=smask[:, :, None], other=0.0,
                  cache_modifier=".cg")  # fmt: skip
    return m, s, acc


@triton.jit
def _merge_step(top, num, den, m, s, acc):
    # Fold one step's splits into the running (max, numerator, denominator), rescaling as the max grows.
    new_top = tl.maximum(top, tl.max(m, axis=1))
    alpha = tl.where(new_top == float("-inf"), 0.0, tl.exp2(top - new_top))
    w = tl.where(m > float("-inf"), tl.exp2(m - new_top[:, None]), 0.0)
    return new_top, num * alpha[:, None] + tl.sum(acc * w[:, :, None], axis=1), den * alpha + tl.sum(s * w, axis=1)


@triton.jit
def _merge_group(
    acc_ptr, ml_ptr, out_ptr, b, kvh, n_heads, splits, o_sb, o_sh,
    GROUP: tl.constexpr, BLOCK_GM: tl.constexpr, HEAD_DIM: tl.constexpr, SB: tl.constexpr, PREFETCH: tl.constexpr,
    EMULATE_RNE: tl.constexpr,
):  # fmt: skip
    # Combine the `splits` partial results of the group's query heads, SB splits a step, in one pass.
    g = tl.arange(0, BLOCK_GM)
    heads = kvh * GROUP + g
    gmask = g < GROUP
    base = (b * n_heads + heads) * splits  # [BLOCK_GM]
    d = tl.arange(0, HEAD_DIM)
    top = tl.full([BLOCK_GM], float("-inf"), tl.float32)
    num = tl.zeros([BLOCK_GM, HEAD_DIM], tl.float32)
    den = tl.zeros([BLOCK_GM], tl.float32)
    if PREFETCH:
        # The next step's loads are issued before this step's sums, so the L2 round trips of consecutive steps
        # overlap (the last step's prefetch is masked off: no traffic). Only in the merge kernel: inlined into the
        # split kernel, the second set of tiles made it spill.
        m, s, acc = _merge_loads(acc_ptr, ml_ptr, base, gmask, 0, splits, SB, HEAD_DIM)
        for s0 in range(SB, splits + SB, SB):
            m_next, s_next, acc_next = _merge_loads(acc_ptr, ml_ptr, base, gmask, s0, splits, SB, HEAD_DIM)
            top, num, den = _merge_step(top, num, den, m, s, acc)
            m, s, acc = m_next, s_next, acc_next
    else:
        for s0 in range(0, splits, SB):
            m, s, acc = _merge_loads(acc_ptr, ml_ptr, base, gmask, s0, splits, SB, HEAD_DIM)
            top, num, den = _merge_step(top, num, den, m, s, acc)
    out = tl.where(den[:, None] > 0, num / den[:, None], 0.0)
    out = round_to(out, out_ptr.dtype.element_ty, EMULATE_RNE)
    tl.store(out_ptr + b * o_sb + heads[:, None] * o_sh + d[None, :], out, mask=gmask[:, None])


@triton.jit
def _split_kernel(
    q_ptr, k_ptr, v_ptr, table_ptr, lens_ptr, out_ptr, acc_ptr, ml_ptr, count_ptr,
    scale_log2, chunk, splits, n_kv,
    q_sb, q_sh, k_sp, k_st, k_sh, v_sp, v_st, v_sh, t_sb, o_sb, o_sh,
    GROUP: tl.constexpr, BLOCK_G: tl.constexpr, BLOCK_GM: tl.constexpr, HEAD_DIM: tl.constexpr,
    PAGE: tl.constexpr, BLOCK_N: tl.constexpr, SINGLE: tl.constexpr, SB: tl.constexpr, KV_FAST: tl.constexpr,
    LAST_MERGES: tl.constexpr, IEEE: tl.constexpr, EMULATE_RNE: tl.constexpr, PDL: tl.constexpr = False,
    PREFETCH_PAGES: tl.constexpr = False,
):  # fmt: skip
    # KV_FAST: the KV head is the fastest grid axis (programs launched together read neighbouring rows of the
    # same pages); else the sequence is. PDL: the merge kernel follows as a programmatic dependent launch, and
    # may be scheduled as soon as every program of this one has started (it waits for this grid's completion).
    if PDL:
        gdc_launch_dependents()
    if KV_FAST:
        kvh = tl.program_id(0)
        b = tl.program_id(1).to(tl.int64)
    else:
        b = tl.program_id(0).to(tl.int64)
        kvh = tl.program_id(1)
    split = tl.program_id(2)
    # Inductor passes a Python float as fp64 (torch 2.11): fp32 as in an eager launch, or the running max would
    # change type in the loop (and the bits would differ from eager).
    scale_log2 = tl.cast(scale_log2, tl.float32)
    seq_len = tl.load(lens_ptr + b)
    start = split * chunk
    end = tl.minimum(start + chunk, seq_len)
    g = tl.arange(0, BLOCK_G)
    d = tl.arange(0, HEAD_DIM)
    heads = kvh * GROUP + g
    gmask = g < GROUP
    q = tl.load(q_ptr + b * q_sb + heads[:, None] * q_sh + d[None, :], mask=gmask[:, None], other=0.0)
    m = tl.full([BLOCK_G], float("-inf"), tl.float32)
    s = tl.zeros([BLOCK_G], tl.float32)
    acc = tl.zeros([BLOCK_G, HEAD_DIM], tl.float32)
    k_base = k_ptr + kvh * k_sh
    v_base = v_ptr + kvh * v_sh
    pj = tl.arange(0, BLOCK_N // PAGE)
    table_row = table_ptr + b * t_sb
    if PREFETCH_PAGES:
        pidx = start // PAGE + pj
        pages_next = tl.load(table_row + pidx, mask=pidx * PAGE < end, other=0)
    for n in range(start, end, BLOCK_N):
        t = n + tl.arange(0, BLOCK_N)
        tmask = t < end
        # One table entry per page of the step, broadcast to its tokens (not one load per token).
        if PREFETCH_PAGES:
            pages = pages_next.to(tl.int64)
            pidx = (n + BLOCK_N) // PAGE + pj
            pages_next = tl.load(table_row + pidx, mask=pidx * PAGE < end, other=0)
        else:
            pidx = n // PAGE + pj
            pages = tl.load(table_row + pidx, mask=pidx * PAGE < end, other=0).to(tl.int64)
        page = tl.reshape(tl.broadcast_to(pages[:, None], (BLOCK_N // PAGE, PAGE)), (BLOCK_N,))
        slot = t % PAGE
        # Keys and values of the step are both requested before either is used.
        k = tl.load(k_base + page[:, None] * k_sp + slot[:, None] * k_st + d[None, :], mask=tmask[:, None], other=0.0)
        v = tl.load(v_base + page[:, None] * v_sp + slot[:, None] * v_st + d[None, :], mask=tmask[:, None], other=0.0)
        if IEEE:
            scores = tl.dot(q.to(tl.float32), tl.trans(k.to(tl.float32)), input_precision="ieee")
        else:
            scores = tl.dot(q, tl.trans(k))
        scores = tl.where(tmask[None, :], scores * scale_log2, float("-inf"))
        m_new = tl.maximum(m, tl.max(scores, axis=1))
        alpha = tl.exp2(m - m_new)
        p = tl.exp2(scores - m_new[:, None])
        s = s * alpha + tl.sum(p, axis=1)
        if IEEE:
            acc = acc * alpha[:, None] + tl.dot(p, v.to(tl.float32), input_precision="ieee")
        else:
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m = m_new
    if SINGLE:
        out = tl.where(s[:, None] > 0, acc / s[:, None], 0.0)
        out = round_to(out, out_ptr.dtype.element_ty, EMULATE_RNE)
        tl.store(out_ptr + b * o_sb + heads[:, None] * o_sh + d[None, :], out, mask=gmask[:, None])
    else:
        n_heads = n_kv * GROUP
        row = (b * n_heads + heads) * splits + split
        tl.store(acc_ptr + row[:, None] * HEAD_DIM + d[None, :], acc, mask=gmask[:, None])
        tl.store(ml_ptr + row * 2, m, mask=gmask)
        tl.store(ml_ptr + row * 2 + 1, s, mask=gmask)
        if LAST_MERGES:
            # Every thread's partial stores precede the count (a CTA barrier, then a gpu-scope release by the
            # counting thread); the last split to count acquires them all and merges.
            tl.debug_barrier()
            counter = count_ptr + b * n_kv + kvh
            done = tl.atomic_add(counter, 1, sem="acq_rel", scope="gpu")
            if done == splits - 1:
                tl.atomic_xchg(counter, 0, sem="relaxed", scope="gpu")  # leave the counter as found
                _merge_group(acc_ptr, ml_ptr, out_ptr, b, kvh, n_heads, splits, o_sb, o_sh,
                             GROUP, BLOCK_GM, HEAD_DIM, SB, False, EMULATE_RNE)  # fmt: skip


@triton.jit
def _merge_kernel(
    acc_ptr, ml_ptr, out_ptr, n_heads, splits, o_sb, o_sh,
    HEAD_DIM: tl.constexpr, SB: tl.constexpr, EMULATE_RNE: tl.constexpr, PDL: tl.constexpr = False,
):  # fmt: skip
    # The second-kernel merge: one program per (sequence, query head), a group of one.
    b = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1)
    if PDL:
        gdc_wait()  # the split kernel's partial results, complete and visible
    _merge_group(acc_ptr, ml_ptr, out_ptr, b, h, n_heads, splits, o_sb, o_sh, 1, 1, HEAD_DIM, SB, True, EMULATE_RNE)


_split_tuned = triton.autotune(
    configs=[
        triton.Config({"BLOCK_N": n}, num_warps=w, num_stages=st)
        for n, w, st in ((32, 4, 3), (64, 4, 2), (64, 4, 3), (64, 8, 3), (128, 4, 3), (128, 8, 3), (128, 8, 4))
    ],
    key=["chunk", "GROUP", "HEAD_DIM", "SINGLE", "LAST_MERGES"],
)(_split_kernel)


def _launch(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    scale: float,
    plan: Plan | None,
) -> torch.Tensor:
    """Run the kernel under ``plan`` (``None``: Triton's autotuner picks the step and warps)."""
    # The split plan (how many splits, how long) and the constexprs follow from these sizes: traced into a graph
    # (paged_decode_attention_traced), it specialises on them (int() of a symbolic size is a guard), so a graph
    # never runs another size's plan; paged_decode_attention_triton calls the opaque op where batch or width vary.
    batch, n_heads, head_dim = (int(v) for v in q.shape)
    kv_heads, page = int(k_cache.shape[2]), int(k_cache.shape[1])
    group = n_heads // kv_heads
    out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    if q.numel() == 0:
        return out
    max_tokens = int(block_table.shape[1]) * page
    p = plan or DEFAULT_PLAN
    block_n = max(p.block_n, page)  # a step covers whole pages
    align = block_n if plan is not None else CHUNK_ALIGN
    splits, chunk = split_plan(batch, kv_heads, max_tokens, sm_count(q.device), p.waves, p.min_split, align)
    if splits > 1:
        acc = torch.empty((batch * n_heads * splits, head_dim), dtype=torch.float32, device=q.device)
        ml = torch.empty((batch * n_heads * splits, 2), dtype=torch.float32, device=q.device)
        if p.merge_kernel:
            count = seq_lens  # unused: the merge kernel counts nothing
        elif tracing((q,)) or torch.compiler.is_compiling():
            count = torch.zeros(batch * kv_heads, dtype=torch.int32, device=q.device)  # a traced graph's own buffer
        else:
            count = COUNTERS.take(q.device, batch * kv_heads)  # zeroed, and left zeroed by the last split
    else:
        acc = ml = out  # unused by the single-split path
        count = seq_lens
    # float32 inputs, and every dtype in the interpreter (whose 16-bit dots are not trustworthy), take
    # float32 dots at full precision.
    ieee = q.dtype == torch.float32 or interpreting()
    args = (
        q, k_cache, v_cache, block_table, seq_lens, out, acc, ml, count,
        scale * 1.4426950408889634, chunk, splits, kv_heads,
        q.stride(0), q.stride(1), k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        v_cache.stride(0), v_cache.stride(1), v_cache.stride(2), block_table.stride(0), out.stride(0), out.stride(1),
    )  # fmt: skip
    meta = {
        "GROUP": group, "BLOCK_G": max(16, triton.next_power_of_2(group)), "BLOCK_GM": triton.next_power_of_2(group),
        "HEAD_DIM": head_dim, "PAGE": page, "SINGLE": splits == 1, "SB": MERGE_SPLITS,
        "LAST_MERGES": not p.merge_kernel, "IEEE": ieee,
    }  # fmt: skip
    kv_fast = plan.kv_fast if plan is not None else True
    grid = (kv_heads, batch, splits) if kv_fast else (batch, kv_heads, splits)
    pdl = splits > 1 and p.merge_kernel and p.pdl and not interpreting()
    if plan is not None:
        launch(_split_kernel, grid,
            *args, **meta, BLOCK_N=block_n, KV_FAST=kv_fast, EMULATE_RNE=interpreting(), PDL=pdl,
            PREFETCH_PAGES=plan.prefetch_pages,
            num_warps=plan.warps, num_stages=plan.stages,
        )  # fmt: skip
    else:
        launch(_split_tuned, grid, *args, **meta, KV_FAST=True, EMULATE_RNE=False)
    if splits > 1 and p.merge_kernel:
        launch(_merge_kernel, (batch, n_heads),
            acc, ml, out, n_heads, splits, out.stride(0), out.stride(1),
            HEAD_DIM=head_dim, SB=KERNEL_MERGE_SPLITS, EMULATE_RNE=interpreting(), num_warps=4,
            # Under torch.compile the launch is Inductor's, which takes no launch_pdl (traced, the argument would
            # reach Inductor's launcher: the fake-tensor check covers AOTAutograd's trace, where Dynamo's
            # is_compiling() is false on some torch versions): the kernel then waits on a
            # plain stream order (griddepcontrol.wait returns at once when the launch was not a dependent one).
            **({"PDL": True} if pdl else {}),
            **({"launch_pdl": True} if pdl and not torch.compiler.is_compiling() and not tracing((q,)) else {}),
        )  # fmt: skip
    return out


def run_with_plan(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    scale: float,
    plan: Plan,
) -> torch.Tensor:
    """The kernel under an explicit plan (the benchmark's sweep; serving goes through the op)."""
    return _launch(q, k_cache, v_cache, block_table, seq_lens, scale, plan)


def _serve(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    scale: float,
) -> torch.Tensor:
    batch, kv_heads = int(q.shape[0]), int(k_cache.shape[2])  # guards when traced: see _launch
    max_tokens = int(block_table.shape[1]) * int(k_cache.shape[1])
    plan, measured = choose_plan(q.device, batch, kv_heads, max_tokens)
    use = plan if measured or fixed_config() else None
    return _launch(q, k_cache, v_cache, block_table, seq_lens, scale, use)


# The kernel as Inductor sees it: traced into the graph, which launches it itself (fixed sizes only: the trace
# specialises on the plan's sizes).
paged_decode_attention_traced = triton_op("inferensics::paged_decode_attention_triton", mutates_args=())(_serve)
# The kernel as an opaque call in the graph: sizes and plan are read when it runs, so one graph serves every batch
# size and table width.
paged_decode_attention_runtime = custom_op("inferensics::paged_decode_attention_runtime", mutates_args=())(_serve)


@paged_decode_attention_runtime.register_fake
def _runtime_fake(q: torch.Tensor, *_: Any) -> torch.Tensor:
    return q.new_empty(q.shape)


def paged_decode_attention_triton(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    scale: float,
) -> torch.Tensor:
    """Decode attention of ``q`` (``B × Hq × D``) over paged caches (``pages × page × Hkv × D``).

    Eager, and in a graph compiled for fixed sizes, the kernel is traced in. Where a compile leaves the batch or
    the block table's width symbolic (dynamic shapes: decode batches and contexts vary), tracing it in would
    specialise the graph on both (the split plan follows from them), one recompile per size; the graph calls it
    opaquely instead, and the plan is chosen per call as in eager.
    """
    call = paged_decode_attention_traced
    if symbolic(q.shape[0]) or symbolic(block_table.shape[1]):
        call = paged_decode_attention_runtime
    out: torch.Tensor = call(q, k_cache, v_cache, block_table, seq_lens, scale)
    return out


DIRECT = {"paged_decode_attention_triton": _serve}
"""The op's Python body, which an eager call runs without the op's dispatch (``ops/common.py``'s ``triton_fn``)."""
