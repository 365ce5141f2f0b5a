"""Paged-KV decode attention: split-K (flash-decoding) over a block table, grouped-query heads.

Kernel 1 runs one program per (sequence, KV head, split): it loads the query rows of the KV head's group
once, walks its split of the context ``BLOCK_N`` tokens at a time through the block table (each token's
page looked up, its row read in place, no gather copy), and keeps an online softmax. With one split it
writes the normalised output; otherwise each split's unnormalised accumulator, running max and sum go to a
float32 scratch that kernel 2 merges. The split count is chosen from the block table's width (an upper
bound of the context, known without a device sync) and the multiprocessor count.
"""

# Triton's convention: compile-time constants are UPPER_CASE parameters, and kernels take many arguments;
# kernel parameters stay unannotated (Triton resolves annotations itself, and only constexpr ones may be).
# mypy: disable-error-code="no-untyped-def,untyped-decorator,misc"
# ruff: noqa: N803, PLR0917

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl
from torch.library import triton_op, wrap_triton

from inferensics.kernels._triton.rounding import fixed_config, interpreting, round_to

BLOCK_N = 64
"""Context tokens per inner step in the interpreter (on a GPU the autotuner picks 32, 64 or 128)."""
CHUNK_ALIGN = 128
"""Split lengths are multiples of this (the largest tuned ``BLOCK_N``)."""
MIN_SPLIT_TOKENS = 128
"""Fewest context tokens a split is given (shorter splits cost more in the merge than they save)."""
WAVES = 4
"""Programs per multiprocessor the split count aims for."""


@functools.cache
def _sm_count(index: int) -> int:
    return int(torch.cuda.get_device_properties(index).multi_processor_count)


def sm_count(device: torch.device) -> int:
    """Multiprocessors of ``device`` (132 assumed for the interpreter, an H100/H200's count)."""
    if device.type != "cuda":
        return 132
    return _sm_count(device.index if device.index is not None else torch.cuda.current_device())


def split_plan(batch: int, kv_heads: int, max_tokens: int, sms: int) -> tuple[int, int]:
    """``(splits, tokens per split)`` for a launch: enough programs to fill the machine, none too short."""
    by_length = max(1, triton.cdiv(max_tokens, MIN_SPLIT_TOKENS))
    by_occupancy = max(1, triton.cdiv(WAVES * sms, max(1, batch * kv_heads)))
    splits = min(by_length, by_occupancy)
    chunk = triton.cdiv(triton.cdiv(max(max_tokens, 1), splits), CHUNK_ALIGN) * CHUNK_ALIGN
    return triton.cdiv(max(max_tokens, 1), chunk), chunk


@triton.jit
def _split_kernel(
    q_ptr, k_ptr, v_ptr, table_ptr, lens_ptr, out_ptr, acc_ptr, ml_ptr,
    scale_log2, chunk,
    q_sb, q_sh, k_sp, k_st, k_sh, v_sp, v_st, v_sh, t_sb, o_sb, o_sh,
    GROUP: tl.constexpr, BLOCK_G: tl.constexpr, HEAD_DIM: tl.constexpr, PAGE: tl.constexpr,
    BLOCK_N: tl.constexpr, SPLITS: tl.constexpr, IEEE: tl.constexpr, EMULATE_RNE: tl.constexpr,
):  # fmt: skip
    b = tl.program_id(0).to(tl.int64)
    kvh = tl.program_id(1)
    split = tl.program_id(2)
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
    for n in range(start, end, BLOCK_N):
        t = n + tl.arange(0, BLOCK_N)
        tmask = t < end
        # One table entry per page of the step, broadcast to its tokens (not one load per token).
        pidx = n // PAGE + tl.arange(0, BLOCK_N // PAGE)
        pages = tl.load(table_ptr + b * t_sb + pidx, mask=pidx * PAGE < end, other=0).to(tl.int64)
        page = tl.reshape(tl.broadcast_to(pages[:, None], (BLOCK_N // PAGE, PAGE)), (BLOCK_N,))
        slot = t % PAGE
        k = tl.load(k_ptr + page[:, None] * k_sp + slot[:, None] * k_st + kvh * k_sh + d[None, :],
                    mask=tmask[:, None], other=0.0)  # fmt: skip
        if IEEE:
            scores = tl.dot(q.to(tl.float32), tl.trans(k.to(tl.float32)), input_precision="ieee")
        else:
            scores = tl.dot(q, tl.trans(k))
        scores = tl.where(tmask[None, :], scores * scale_log2, float("-inf"))
        m_new = tl.maximum(m, tl.max(scores, axis=1))
        alpha = tl.exp2(m - m_new)
        p = tl.exp2(scores - m_new[:, None])
        s = s * alpha + tl.sum(p, axis=1)
        v = tl.load(v_ptr + page[:, None] * v_sp + slot[:, None] * v_st + kvh * v_sh + d[None, :],
                    mask=tmask[:, None], other=0.0)  # fmt: skip
        if IEEE:
            acc = acc * alpha[:, None] + tl.dot(p, v.to(tl.float32), input_precision="ieee")
        else:
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m = m_new
    if SPLITS == 1:
        out = tl.where(s[:, None] > 0, acc / s[:, None], 0.0)
        out = round_to(out, out_ptr.dtype.element_ty, EMULATE_RNE)
        tl.store(out_ptr + b * o_sb + heads[:, None] * o_sh + d[None, :], out,
                 mask=gmask[:, None])  # fmt: skip
    else:
        row = (b * (tl.num_programs(1) * GROUP) + heads) * SPLITS + split
        tl.store(acc_ptr + row[:, None] * HEAD_DIM + d[None, :], acc, mask=gmask[:, None])
        tl.store(ml_ptr + row * 2, m, mask=gmask)
        tl.store(ml_ptr + row * 2 + 1, s, mask=gmask)


_split_tuned = triton.autotune(
    configs=[
        triton.Config({"BLOCK_N": n}, num_warps=w, num_stages=st)
        for n, w, st in (
            (32, 4, 3),
            (64, 4, 2),
            (64, 4, 3),
            (64, 4, 4),
            (64, 8, 3),
            (128, 4, 3),
            (128, 8, 3),
            (128, 8, 4),
        )
    ],
    key=["chunk", "GROUP", "HEAD_DIM", "SPLITS"],
)(_split_kernel)


@triton.jit
def _merge_kernel(
    acc_ptr, ml_ptr, out_ptr, n_heads, o_sb, o_sh,
    SPLITS: tl.constexpr, BLOCK_S: tl.constexpr, HEAD_DIM: tl.constexpr, EMULATE_RNE: tl.constexpr,
):  # fmt: skip
    b = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1)
    sp = tl.arange(0, BLOCK_S)
    smask = sp < SPLITS
    row = (b * n_heads + h) * SPLITS + sp
    m = tl.load(ml_ptr + row * 2, mask=smask, other=float("-inf"))
    s = tl.load(ml_ptr + row * 2 + 1, mask=smask, other=0.0)
    top = tl.max(m, axis=0)
    w = tl.where(m > float("-inf"), tl.exp2(m - top), 0.0)
    d = tl.arange(0, HEAD_DIM)
    acc = tl.load(acc_ptr + row[:, None] * HEAD_DIM + d[None, :], mask=smask[:, None], other=0.0)
    num = tl.sum(acc * w[:, None], axis=0)
    den = tl.sum(s * w, axis=0)
    out = tl.where(den > 0, num / den, 0.0)
    tl.store(out_ptr + b * o_sb + h * o_sh + d, round_to(out, out_ptr.dtype.element_ty, EMULATE_RNE))


@triton_op("inferensics::paged_decode_attention_triton", mutates_args=())
def paged_decode_attention_triton(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    scale: float,
) -> torch.Tensor:
    """Decode attention of ``q`` (``B × Hq × D``) over paged caches (``pages × page × Hkv × D``)."""
    batch, n_heads, head_dim = q.shape
    kv_heads, page = k_cache.shape[2], k_cache.shape[1]
    group = n_heads // kv_heads
    out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    if q.numel() == 0:
        return out
    max_tokens = block_table.shape[1] * page
    splits, chunk = split_plan(batch, kv_heads, max_tokens, sm_count(q.device))
    if splits > 1:
        acc = torch.empty((batch * n_heads * splits, head_dim), dtype=torch.float32, device=q.device)
        ml = torch.empty((batch * n_heads * splits, 2), dtype=torch.float32, device=q.device)
    else:
        acc = ml = out  # unused by the single-split path
    # float32 inputs, and every dtype in the interpreter (whose 16-bit dots are not trustworthy), take
    # float32 dots at full precision.
    ieee = q.dtype == torch.float32 or interpreting()
    args = (
        q, k_cache, v_cache, block_table, seq_lens, out, acc, ml,
        scale * 1.4426950408889634, chunk,
        q.stride(0), q.stride(1), k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        v_cache.stride(0), v_cache.stride(1), v_cache.stride(2), block_table.stride(0), out.stride(0), out.stride(1),
    )  # fmt: skip
    meta = {"GROUP": group, "BLOCK_G": max(16, triton.next_power_of_2(group)), "HEAD_DIM": head_dim, "PAGE": page,
            "SPLITS": splits, "IEEE": ieee}  # fmt: skip
    if fixed_config():
        wrap_triton(_split_kernel)[(batch, kv_heads, splits)](
            *args, **meta, BLOCK_N=BLOCK_N, EMULATE_RNE=interpreting()
        )
    else:
        wrap_triton(_split_tuned)[(batch, kv_heads, splits)](*args, **meta, EMULATE_RNE=False)
    if splits > 1:
        wrap_triton(_merge_kernel)[(batch, n_heads)](
            acc, ml, out, n_heads, out.stride(0), out.stride(1),
            SPLITS=splits, BLOCK_S=triton.next_power_of_2(splits), HEAD_DIM=head_dim,
            EMULATE_RNE=interpreting(), num_warps=4,
        )  # fmt: skip
    return out
