"""Where the paged decode kernel's time goes beyond reading its bytes: the counters' memset, the merge, the math.

In the cells where cuDNN is far from the device's streaming ceiling (batch 1 / 32k, batch 8 / 4k), our kernel takes
~6 us more than a kernel that only reads the same (page, head) tiles with the same programs
(``probe_paged_read_floor.py``). This probe times, in the benchmark's interleaved rounds, with cuDNN on the dense
copy in every round:

- ``ours``: the op as served (its plan, its allocations: ``torch.zeros`` for the counters is a memset node);
- ``kept scratch``: the same launches with the scratch and counters allocated once (the last split resets the
  counters, so they stay zero between calls);
- ``no merge``: the split kernel alone (partial results written, no merge, no counters);
- ``read floor``: ``probe_paged_read_floor.head_read`` with the same programs and step.

    python benchmarks/probe_paged_parts.py [--rounds 10] [--cells 1x32768,8x4096,...]

Needs a CUDA device; prints its figures.
"""

from __future__ import annotations

import functools
import os
import random
import statistics
import sys
from typing import Any

import torch
import triton

from inferensics.kernels._triton import paged_attention as pa
from inferensics.kernels._triton.device_facts import sm_count
from inferensics.kernels.samples import bytes_moved, make_args

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_kernels import _sdpa, measure
from probe_paged_read_floor import HEAD_DIM, KV_HEADS, PAGE, PAGE_WORDS, head_read, run_cells


class Parts:
    """The op's two launches under ``plan`` with scratch allocated once (``_launch``'s arguments, rebuilt)."""

    def __init__(self, args: tuple[Any, ...], plan: pa.Plan) -> None:
        q, table = args[0], args[3]
        self.args, self.plan = args, plan
        b, n_heads, d = q.shape
        self.group = n_heads // KV_HEADS
        self.block_n = max(plan.block_n, PAGE)
        self.splits, self.chunk = pa.split_plan(
            b, KV_HEADS, table.shape[1] * PAGE, sm_count(q.device), plan.waves, plan.min_split, self.block_n
        )
        self.out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
        self.acc = torch.empty((b * n_heads * self.splits, d), dtype=torch.float32, device=q.device)
        self.ml = torch.empty((b * n_heads * self.splits, 2), dtype=torch.float32, device=q.device)
        self.count = torch.zeros(b * KV_HEADS, dtype=torch.int32, device=q.device)
        self.grid = (KV_HEADS, b, self.splits) if plan.kv_fast else (b, KV_HEADS, self.splits)

    def split(self, last_merges: bool) -> None:
        q, k, v, table, lens, scale = self.args
        o = self.out
        pa._split_kernel[self.grid](
            q, k, v, table, lens, o, self.acc, self.ml, self.count, scale * 1.4426950408889634, self.chunk,
            self.splits, KV_HEADS, q.stride(0), q.stride(1), k.stride(0), k.stride(1), k.stride(2),
            v.stride(0), v.stride(1), v.stride(2), table.stride(0), o.stride(0), o.stride(1),
            GROUP=self.group, BLOCK_G=max(16, triton.next_power_of_2(self.group)),
            BLOCK_GM=triton.next_power_of_2(self.group), HEAD_DIM=HEAD_DIM, PAGE=PAGE, SINGLE=self.splits == 1,
            SB=pa.MERGE_SPLITS, LAST_MERGES=last_merges, IEEE=pa.interpreting(), BLOCK_N=self.block_n,
            KV_FAST=self.plan.kv_fast, EMULATE_RNE=pa.interpreting(), PDL=False,
            PREFETCH_PAGES=self.plan.prefetch_pages,
            num_warps=self.plan.warps, num_stages=self.plan.stages,
        )  # fmt: skip

    def merge(self) -> None:
        b, n_heads = self.out.shape[0], self.out.shape[1]
        pa._merge_kernel[(b, n_heads)](
            self.acc, self.ml, self.out, n_heads, self.splits, self.out.stride(0), self.out.stride(1),
            HEAD_DIM=HEAD_DIM, SB=pa.KERNEL_MERGE_SPLITS, EMULATE_RNE=pa.interpreting(), num_warps=4,
        )  # fmt: skip

    def kept(self) -> torch.Tensor:
        """The served plan's launches (merge kernel without PDL) over the kept scratch."""
        if self.plan.merge_kernel and self.splits > 1:
            self.split(False)
            self.merge()
        else:
            self.split(True)
        return self.out

    def floor(self) -> Any:
        """``head_read`` cut into this plan's programs and step."""
        _, k, v, table, _, _ = self.args
        b, per_seq = table.shape
        per_split = self.chunk // PAGE
        splits = -(-per_seq // per_split)
        out = torch.empty(b * KV_HEADS * splits, dtype=torch.int32, device=k.device)
        kw, vw = k.view(torch.int32).reshape(-1), v.view(torch.int32).reshape(-1)
        return functools.partial(
            head_read[(b, KV_HEADS, splits)], kw, vw, table, out, per_seq, per_split, splits,
            page_w=PAGE_WORDS, row_w=KV_HEADS * HEAD_DIM // 2, head_w=HEAD_DIM // 2, pages_c=self.block_n // PAGE,
            page_t=PAGE, heads=KV_HEADS, num_warps=self.plan.warps, num_stages=self.plan.stages,
        )  # fmt: skip


def cell(b: int, ctx: int, rounds: int, rng: random.Random) -> None:
    from torch.nn.attention import SDPBackend

    shape = {"batch": b, "context": ctx, "q_heads": 32, "kv_heads": KV_HEADS, "head_dim": HEAD_DIM, "page": PAGE}
    args = make_args("paged_decode_attention", shape, torch.bfloat16, torch.device("cuda"), seed=b + ctx)
    q, k_cache, v_cache, block_table, lens, scale = args
    lens.fill_(ctx)
    k_dense = k_cache[block_table.long()].reshape(b, -1, KV_HEADS, HEAD_DIM)[:, :ctx].transpose(1, 2).contiguous()
    v_dense = v_cache[block_table.long()].reshape(b, -1, KV_HEADS, HEAD_DIM)[:, :ctx].transpose(1, 2).contiguous()
    plan, _ = pa.choose_plan(q.device, b, KV_HEADS, block_table.shape[1] * PAGE)
    parts = Parts(args, plan)
    ours = functools.partial(pa.run_with_plan, *args, plan)
    torch.testing.assert_close(parts.kept().clone(), ours(), rtol=0, atol=0)
    fns = {
        "cudnn": functools.partial(_sdpa, SDPBackend.CUDNN_ATTENTION, q.unsqueeze(2), k_dense, v_dense, scale),
        "ours": ours,
        "kept scratch": parts.kept,
        "no merge": functools.partial(parts.split, False),
        "read floor": parts.floor(),
    }
    samples, _ = measure(fns, rounds, 10 if b * ctx <= 8 * 4096 else 3, rng)
    moved = bytes_moved("paged_decode_attention", args, q)
    print(f"## batch {b} context {ctx}: {plan}, {parts.splits} splits of {parts.chunk} tokens")
    for name, s in samples.items():
        med = statistics.median(s)
        rs = [c / o for c, o in zip(samples["cudnn"], s, strict=True)]
        print(f"   {name:<14} {med:10.2f} us  {moved / med / 1e6:5.2f} TB/s  cudnn/this {statistics.median(rs):.3f} "
              f"[{min(rs):.3f}-{max(rs):.3f}]", flush=True)  # fmt: skip
    del fns, parts, args, k_cache, v_cache, k_dense, v_dense
    torch.cuda.empty_cache()


def main() -> None:
    run_cells(__doc__ or "", "1x1024,1x4096,1x32768,8x1024,8x4096,8x32768,64x1024,64x4096,64x32768", cell)


if __name__ == "__main__":
    main()
