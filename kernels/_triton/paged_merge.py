"""Merging split-K partial results of paged decode attention (flash-decoding's second half).

A split of a (sequence, KV head)'s context leaves, per query head, its unnormalised accumulator, its running max
(log2 domain) and its sum in float32 scratch: ``acc[row, HEAD_DIM]`` and ``ml[row, 2]`` with ``row = (sequence ×
query heads + head) × stride + split``. :func:`merge_group` combines a group's ``splits`` partial results in one
pass, ``SB`` splits a step, rescaling online, and writes the normalised output. The one-launch split kernel and
its second-kernel merge (``paged_attention.py``) use it with ``stride == splits``; the persistent kernel
(``paged_persistent.py``) gives every (sequence, KV head) ``stride`` slots, of which a call fills ``splits``.
"""

# Triton's convention: compile-time constants are UPPER_CASE parameters; kernel parameters stay unannotated.
# mypy: disable-error-code="no-untyped-def,untyped-decorator,misc"
# ruff: noqa: N803, PLR0917

from __future__ import annotations

import triton
import triton.language as tl

from inferensics.kernels._triton.rounding import round_to


@triton.jit
def merge_loads(acc_ptr, ml_ptr, base, gmask, s0, splits, SB: tl.constexpr, HEAD_DIM: tl.constexpr):
    """Running maxima, sums and accumulators of splits ``s0 … s0+SB-1`` of the group's heads (none past
    ``splits``)."""
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
def merge_step(top, num, den, m, s, acc):
    """Fold one step's splits into the running (max, numerator, denominator), rescaling as the max grows."""
    new_top = tl.maximum(top, tl.max(m, axis=1))
    alpha = tl.where(new_top == float("-inf"), 0.0, tl.exp2(top - new_top))
    w = tl.where(m > float("-inf"), tl.exp2(m - new_top[:, None]), 0.0)
    return new_top, num * alpha[:, None] + tl.sum(acc * w[:, :, None], axis=1), den * alpha + tl.sum(s * w, axis=1)


@triton.jit
def merge_group(
    acc_ptr, ml_ptr, out_ptr, b, kvh, n_heads, splits, stride, o_sb, o_sh,
    GROUP: tl.constexpr, BLOCK_GM: tl.constexpr, HEAD_DIM: tl.constexpr, SB: tl.constexpr, PREFETCH: tl.constexpr,
    EMULATE_RNE: tl.constexpr,
):  # fmt: skip
    """Combine the first ``splits`` of the ``stride`` partial-result slots of the group's query heads, SB splits a
    step, in one pass, and store the normalised output."""
    g = tl.arange(0, BLOCK_GM)
    heads = kvh * GROUP + g
    gmask = g < GROUP
    base = (b * n_heads + heads) * stride  # [BLOCK_GM]
    d = tl.arange(0, HEAD_DIM)
    top = tl.full([BLOCK_GM], float("-inf"), tl.float32)
    num = tl.zeros([BLOCK_GM, HEAD_DIM], tl.float32)
    den = tl.zeros([BLOCK_GM], tl.float32)
    if PREFETCH:
        # The next step's loads are issued before this step's sums, so the L2 round trips of consecutive steps
        # overlap (the last step's prefetch is masked off: no traffic). Only in the merge kernel: inlined into the
        # split kernel, the second set of tiles made it spill.
        m, s, acc = merge_loads(acc_ptr, ml_ptr, base, gmask, 0, splits, SB, HEAD_DIM)
        for s0 in range(SB, splits + SB, SB):
            m_next, s_next, acc_next = merge_loads(acc_ptr, ml_ptr, base, gmask, s0, splits, SB, HEAD_DIM)
            top, num, den = merge_step(top, num, den, m, s, acc)
            m, s, acc = m_next, s_next, acc_next
    else:
        for s0 in range(0, splits, SB):
            m, s, acc = merge_loads(acc_ptr, ml_ptr, base, gmask, s0, splits, SB, HEAD_DIM)
            top, num, den = merge_step(top, num, den, m, s, acc)
    out = tl.where(den[:, None] > 0, num / den[:, None], 0.0)
    out = round_to(out, out_ptr.dtype.element_ty, EMULATE_RNE)
    tl.store(out_ptr + b * o_sb + heads[:, None] * o_sh + d[None, :], out, mask=gmask[:, None])
