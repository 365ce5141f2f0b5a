"""Paged-KV decode attention: reference, bucket and providers (our split-K kernel, SDPA on a dense copy)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch.nn import functional as F  # noqa: N812 - the conventional alias

from inferensics.kernels.decisions import DecisionLog
from inferensics.kernels.op import SemanticOp
from inferensics.kernels.ops.common import (
    TRITON_PLATFORMS,
    exact_bucket,
    pow2_bucket,
    same_device,
    triton_available,
    triton_fn,
)
from inferensics.kernels.provider import Provider
from inferensics.kernels.requirements import Requirements
from inferensics.kernels.tolerance import NORM_TOLERANCES, ToleranceSpec


def _gather(cache: torch.Tensor, block_table: torch.Tensor) -> torch.Tensor:
    # [B, pages] -> [B, pages * page, Hkv, D]; entries past a sequence's end may be anything (masked later).
    # Every size spelled out: a batch of 0 (or a table 0 pages wide) has no elements to infer a -1 from.
    b, width = block_table.shape
    shape = (b, width * cache.shape[1], cache.shape[2], cache.shape[3])
    if cache.shape[0] == 0:  # no page to read: every sequence is empty (its length masks it), so any value does
        return cache.new_zeros(shape)
    pages = block_table.long().clamp(0, cache.shape[0] - 1)
    return cache[pages].reshape(shape)


def _valid(block_table: torch.Tensor, seq_lens: torch.Tensor, page: int) -> torch.Tensor:
    positions = torch.arange(block_table.shape[1] * page, device=seq_lens.device)
    return positions[None, :] < seq_lens[:, None].long()


def paged_decode_attention_reference(  # noqa: PLR0917 (the op's schema)
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    scale: float,
) -> torch.Tensor:
    """One query token per sequence attending to its paged keys and values.

    Args:
        q: ``[B, Hq, D]``.
        k_cache: ``[pages, page_size, Hkv, D]``; ``Hq`` a multiple of ``Hkv`` (grouped-query attention).
        v_cache: Same layout as ``k_cache``.
        block_table: ``[B, max_pages]`` integer page numbers of each sequence, in order.
        seq_lens: ``[B]`` tokens of each sequence (entries of the table past them are ignored).
        scale: Multiplies the scores (usually ``D ** -0.5``).

    Returns:
        ``[B, Hq, D]`` in ``q``'s dtype; zeros for an empty sequence. Softmax in float32 (float64 for float64).
    """
    b, hq, d = q.shape
    hkv = k_cache.shape[2]
    if not q.is_floating_point():  # the result is in q's dtype: an integer q would come back truncated
        raise TypeError(f"paged_decode_attention needs a floating-point q, got {str(q.dtype).removeprefix('torch.')}")
    if hq % max(hkv, 1):
        raise ValueError(f"query heads {hq} are not a multiple of KV heads {hkv}")
    acc = torch.float64 if q.dtype == torch.float64 else torch.float32
    k = _gather(k_cache, block_table).to(acc)
    v = _gather(v_cache, block_table).to(acc)
    valid = _valid(block_table, seq_lens, k_cache.shape[1])
    qg = q.to(acc).reshape(b, hkv, hq // max(hkv, 1), d)
    scores = torch.einsum("bhgd,bthd->bhgt", qg, k) * scale
    scores = scores.masked_fill(~valid[:, None, None, :], float("-inf"))
    v = v.masked_fill(~valid[:, :, None, None], 0.0)  # tokens past a sequence's end contribute nothing, NaN or not
    probs = torch.softmax(scores, dim=-1)
    probs = torch.where(valid.any(-1)[:, None, None, None], probs, torch.zeros((), dtype=acc, device=q.device))
    out = torch.einsum("bhgt,bthd->bhgd", probs, v)
    return out.reshape(b, hq, d).to(q.dtype)


def sdpa_dense(  # noqa: PLR0917 (the op's schema)
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    scale: float,
) -> torch.Tensor:
    """The vendor path: gather the pages into a dense ``[B, Hkv, T, D]`` copy and call SDPA with a length mask."""
    valid = _valid(block_table, seq_lens, k_cache.shape[1])
    k = _gather(k_cache, block_table).transpose(1, 2)
    v = _gather(v_cache, block_table).masked_fill(~valid[:, :, None, None], 0.0).transpose(1, 2)
    out = F.scaled_dot_product_attention(
        q.unsqueeze(2), k, v, attn_mask=valid[:, None, None, :], scale=scale, enable_gqa=True
    )
    out = torch.where(valid.any(-1)[:, None, None, None], out, torch.zeros((), dtype=out.dtype, device=q.device))
    return out.squeeze(2)


def attention_bucket(args: Sequence[Any]) -> str:
    """``dtype/g<group>/d<head_dim>/b<batch>/ctx<table width x page>`` (batch and context rounded up to 2^k)."""
    q, k_cache, _, table = args[:4]
    if q.dim() != 3 or k_cache.dim() != 4:
        return f"{str(q.dtype).removeprefix('torch.')}/other"
    group = q.shape[1] // max(1, k_cache.shape[2])
    ctx = table.shape[-1] * k_cache.shape[1]
    dt = str(q.dtype).removeprefix("torch.")
    head = f"{dt}/g{exact_bucket(group)}/d{exact_bucket(q.shape[-1])}"
    return f"{head}/b{pow2_bucket(q.shape[0])}/ctx{pow2_bucket(ctx)}"


def _paged_layout(args: Sequence[Any]) -> str | None:
    q, k_cache, v_cache, table, lens = args[:5]
    if q.dim() != 3 or k_cache.dim() != 4 or v_cache.shape != k_cache.shape:
        return "q must be [B, Hq, D] and the caches [pages, page, Hkv, D] alike"
    d = q.shape[-1]
    if d not in (64, 128, 256) or k_cache.shape[-1] != d:
        return f"head_dim {d} not in (64, 128, 256)"
    if k_cache.shape[1] not in (8, 16, 32):
        return f"page size {k_cache.shape[1]} not in (8, 16, 32)"
    if q.shape[1] % k_cache.shape[2]:
        return "query heads are not a multiple of KV heads"
    if q.stride(-1) != 1 or k_cache.stride(-1) != 1 or v_cache.stride(-1) != 1:
        return "head_dim must be contiguous in q and the caches"
    if table.dtype not in (torch.int32, torch.int64) or lens.dtype not in (torch.int32, torch.int64):
        return "block_table and seq_lens must be int32 or int64"
    if table.dim() != 2 or table.shape[0] != q.shape[0] or lens.shape != (q.shape[0],):
        return "block_table must be [B, max_pages] and seq_lens [B]"
    if q.dtype != k_cache.dtype or v_cache.dtype != k_cache.dtype:
        return "q and the caches must share a dtype"
    if not q.is_floating_point():
        return "q and the caches must be floating-point"
    return same_device(args[:5])


def probe_contents(args: Sequence[Any]) -> None:
    """Valid values for a probe's block table and lengths (in place): every sequence fills its table row, whose
    pages are all inside the cache (a kernel reading an out-of-range page would fault the GPU)."""
    _, k_cache, _, table, lens = args[:5]
    pages = k_cache.shape[0]
    if table.numel() and pages:
        table.copy_(torch.arange(table.numel(), device=table.device).reshape(table.shape) % pages)
    lens.fill_(table.shape[1] * k_cache.shape[1] if pages else 0)


def register(log: DecisionLog) -> list[SemanticOp]:
    """Create the op and its providers."""
    op = SemanticOp(
        "paged_decode_attention",
        "(Tensor q, Tensor k_cache, Tensor v_cache, Tensor block_table, Tensor seq_lens, float scale) -> Tensor",
        paged_decode_attention_reference,
        tolerance=ToleranceSpec(exact_when_exact=True, table=NORM_TOLERANCES, rmse_k=3.0),
        bucket=attention_bucket,
        doc="decode attention over a paged KV cache (block table, GQA)",
        log=log,
        contents=probe_contents,
    )
    dense = Requirements(
        dtypes=frozenset({torch.float16, torch.bfloat16, torch.float32}),
        accuracy="tolerant",
        checks=(_paged_layout,),
        signature_checks=True,  # read dtypes, sizes, strides and devices only
        notes=("copies the pages into a dense KV first",),
    )
    op.register(Provider("sdpa", "vendor", sdpa_dense, dense, "dense copy + scaled_dot_product_attention"))
    if triton_available():
        req = Requirements(
            platforms=TRITON_PLATFORMS,
            min_capability=(8, 0),
            dtypes=frozenset({torch.float16, torch.bfloat16, torch.float32}),
            accuracy="tolerant",
            checks=(_paged_layout,),
            signature_checks=True,  # read dtypes, sizes, strides and devices only
            notes=("head_dim 64/128/256, page 8/16/32, GQA", "contiguous head_dim"),
        )
        op.register(
            Provider(
                "triton",
                "triton",
                # Not planned (ops/common.triton_fn): its split launches count on per-stream counters the module
                # keeps, and its second-kernel merge is a programmatic dependent launch, neither of which a plan
                # replays (on an H100, each call paid the signature, about 14 us, for nothing).
                triton_fn("paged_attention", "paged_decode_attention_triton", planned=False),
                req,
                "split-K flash-decoding",
            ),
            before="sdpa",
        )
    return [op]
