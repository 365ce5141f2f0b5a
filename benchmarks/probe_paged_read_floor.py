"""How fast can any kernel merely read a paged KV cache, against cuDNN's whole attention on the same KV stored dense?

Issue 23 asks paged decode attention to run at >= 1.0x cuDNN SDPA on the dense copy. This probe times kernels that
do nothing but read the bytes the attention must read, in the benchmark's interleaved rounds (CUDA-graph replays,
shuffled order each round, cuDNN in every round):

- ``flat``: K and V read straight through as flat arrays (the same bytes, no table: the device's streaming ceiling);
- ``pages``: the scattered pages read through the block table, a whole 32 KB page (all KV heads) per load group,
  one program per (sequence, split): the friendliest pattern a paged kernel can have;
- ``head``: the attention kernel's own pattern, one program per (sequence, KV head, split), each page's 16 rows of
  256 bytes of its head (2 KB apart);
- ``pages``/``head`` again through a contiguous table (the same pages copied in sequence order), to split the cost
  of scatter from that of the pattern.

Each family's configurations are swept (programs a multiprocessor, warps, load size, stages) in stage 1 (3 rounds),
and each family's best runs with cuDNN and our kernel in stage 2 (``--rounds`` fresh rounds). Ratios are per round,
cuDNN time / this time, median [min-max]. If no read-only kernel of the scattered pages beats cuDNN's attention in a
cell, no paged attention kernel of this kind can reach 1.0x there: it must read those bytes and also compute.

    python benchmarks/probe_paged_read_floor.py [--rounds 10] [--cells 1x32768,8x4096,...]

Needs a CUDA device (Triton); prints its figures.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import torch
import triton
import triton.language as tl

from inferensics.kernels.samples import bytes_moved, make_args

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_kernels import _sdpa, measure

PAGE = 16
KV_HEADS = 8
HEAD_DIM = 128
PAGE_WORDS = PAGE * KV_HEADS * HEAD_DIM // 2  # a page of one cache in int32 words (bf16 pairs)
HEAD_WORDS = HEAD_DIM // 2


@triton.jit
def flat_read(k_ptr, v_ptr, out_ptr, n, per_prog, block_w: tl.constexpr):  # noqa: PLR0917
    pid = tl.program_id(0)
    start = pid.to(tl.int64) * per_prog
    offs = tl.arange(0, block_w)
    acc = tl.zeros([block_w], dtype=tl.int32)
    for i in range(0, per_prog, block_w):
        idx = start + i + offs
        m = idx < n
        acc += tl.load(k_ptr + idx, mask=m, other=0)
        acc += tl.load(v_ptr + idx, mask=m, other=0)
    tl.store(out_ptr + pid, tl.sum(acc, axis=0))


@triton.jit
def pages_read(  # noqa: PLR0917
    k_ptr,
    v_ptr,
    table_ptr,
    out_ptr,
    per_seq,
    per_split,
    splits,
    page_w: tl.constexpr,
    block_w: tl.constexpr,
):
    b = tl.program_id(0)
    s = tl.program_id(1)
    j0 = s * per_split
    j1 = tl.minimum(j0 + per_split, per_seq)
    offs = tl.arange(0, block_w)
    acc = tl.zeros([block_w], dtype=tl.int32)
    for j in range(j0, j1):
        base = tl.load(table_ptr + b * per_seq + j).to(tl.int64) * page_w
        for c in tl.static_range(0, page_w, block_w):
            acc += tl.load(k_ptr + base + c + offs)
            acc += tl.load(v_ptr + base + c + offs)
    tl.store(out_ptr + b * splits + s, tl.sum(acc, axis=0))


@triton.jit
def head_read(  # noqa: PLR0917
    k_ptr, v_ptr, table_ptr, out_ptr, per_seq, per_split, splits,
    page_w: tl.constexpr, row_w: tl.constexpr, head_w: tl.constexpr, pages_c: tl.constexpr, page_t: tl.constexpr,
    heads: tl.constexpr,
):  # fmt: skip
    b = tl.program_id(0)
    h = tl.program_id(1)
    s = tl.program_id(2)
    j0 = s * per_split
    j1 = tl.minimum(j0 + per_split, per_seq)
    rows = tl.arange(0, pages_c * page_t)
    cols = tl.arange(0, head_w)
    pg = rows // page_t
    t = rows % page_t
    acc = tl.zeros([pages_c * page_t, head_w], dtype=tl.int32)
    for j in range(j0, j1, pages_c):
        jj = j + pg
        m = jj < j1
        page = tl.load(table_ptr + b * per_seq + jj, mask=m, other=0).to(tl.int64)
        off = page * page_w + t * row_w + h * head_w
        ptrs = off[:, None] + cols[None, :]
        acc += tl.load(k_ptr + ptrs, mask=m[:, None], other=0)
        acc += tl.load(v_ptr + ptrs, mask=m[:, None], other=0)
    tl.store(out_ptr + (b * heads + h) * splits + s, tl.sum(tl.sum(acc, axis=1), axis=0))


def _flat(k: torch.Tensor, v: torch.Tensor, programs: int, block: int, warps: int) -> Any:
    kw, vw = k.view(torch.int32).reshape(-1), v.view(torch.int32).reshape(-1)
    n = kw.numel()
    per_prog = -(-n // programs)
    per_prog = -(-per_prog // block) * block
    out = torch.empty(programs, dtype=torch.int32, device=k.device)
    return functools.partial(flat_read[(programs,)], kw, vw, out, n, per_prog, block_w=block, num_warps=warps)


def _splits(units: int, per_seq: int, programs: int) -> tuple[int, int]:
    splits = max(1, min(per_seq, round(programs / units)))
    per_split = -(-per_seq // splits)
    return -(-per_seq // per_split), per_split


def _pages(  # noqa: PLR0917
    k: torch.Tensor, v: torch.Tensor, table: torch.Tensor, programs: int, block: int, warps: int
) -> Any:
    b, per_seq = table.shape
    splits, per_split = _splits(b, per_seq, programs)
    out = torch.empty(b * splits, dtype=torch.int32, device=k.device)
    kw, vw = k.view(torch.int32).reshape(-1), v.view(torch.int32).reshape(-1)
    return functools.partial(
        pages_read[(b, splits)], kw, vw, table, out, per_seq, per_split, splits,
        page_w=PAGE_WORDS, block_w=block, num_warps=warps,
    )  # fmt: skip


def _head(  # noqa: PLR0917
    k: torch.Tensor, v: torch.Tensor, table: torch.Tensor, programs: int, pages: int, warps: int, stages: int
) -> Any:
    b, per_seq = table.shape
    splits, per_split = _splits(b * KV_HEADS, per_seq, programs)
    per_split = -(-per_split // pages) * pages
    splits = -(-per_seq // per_split)
    out = torch.empty(b * KV_HEADS * splits, dtype=torch.int32, device=k.device)
    kw, vw = k.view(torch.int32).reshape(-1), v.view(torch.int32).reshape(-1)
    return functools.partial(
        head_read[(b, KV_HEADS, splits)], kw, vw, table, out, per_seq, per_split, splits,
        page_w=PAGE_WORDS, row_w=KV_HEADS * HEAD_WORDS, head_w=HEAD_WORDS, pages_c=pages, page_t=PAGE, heads=KV_HEADS,
        num_warps=warps, num_stages=stages,
    )  # fmt: skip


def candidates(  # noqa: PLR0917
    k: torch.Tensor, v: torch.Tensor, table: torch.Tensor, k_seq: torch.Tensor, v_seq: torch.Tensor, table_seq: Any
) -> dict[str, dict[str, Any]]:
    """Every family's configurations, by family then name."""
    sms = torch.cuda.get_device_properties(k.device).multi_processor_count
    fams: dict[str, dict[str, Any]] = {f: {} for f in ("flat", "pages", "pages contiguous", "head", "head contiguous")}
    for per_sm, block, warps in itertools.product((2, 4, 8, 16), (2048, 4096), (4, 8)):
        fams["flat"][f"flat {per_sm}/SM b{block} w{warps}"] = _flat(k, v, per_sm * sms, block, warps)
    for per_sm, block, warps in itertools.product((2, 4, 8), (2048, 4096), (4, 8)):
        name = f"{per_sm}/SM b{block} w{warps}"
        fams["pages"][f"pages {name}"] = _pages(k, v, table, per_sm * sms, block, warps)
        fams["pages contiguous"][f"pages contig {name}"] = _pages(k_seq, v_seq, table_seq, per_sm * sms, block, warps)
    for per_sm, pages, warps, stages in itertools.product((4, 8), (1, 4), (4,), (1, 3)):
        name = f"{per_sm}/SM p{pages} w{warps} st{stages}"
        fams["head"][f"head {name}"] = _head(k, v, table, per_sm * sms, pages, warps, stages)
        contig = _head(k_seq, v_seq, table_seq, per_sm * sms, pages, warps, stages)
        fams["head contiguous"][f"head contig {name}"] = contig
    return fams


def _ratios(samples: dict[str, list[float]], peer: str, name: str) -> tuple[float, float, float]:
    rs = [p / o for p, o in zip(samples[peer], samples[name], strict=True)]
    return statistics.median(rs), min(rs), max(rs)


def cell(b: int, ctx: int, rounds: int, rng: random.Random) -> None:
    from torch.nn.attention import SDPBackend

    from inferensics.kernels._triton import paged_attention as pa

    shape = {"batch": b, "context": ctx, "q_heads": 32, "kv_heads": KV_HEADS, "head_dim": HEAD_DIM, "page": PAGE}
    args = make_args("paged_decode_attention", shape, torch.bfloat16, torch.device("cuda"), seed=b + ctx)
    q, k_cache, v_cache, block_table, lens, scale = args
    lens.fill_(ctx)
    per_seq = block_table.shape[1]
    order = block_table.long().reshape(-1)
    k_seq, v_seq = k_cache[order].contiguous(), v_cache[order].contiguous()
    table_seq = torch.arange(b * per_seq, device="cuda", dtype=torch.int32).reshape(b, per_seq)
    k_dense = k_seq.reshape(b, -1, KV_HEADS, HEAD_DIM)[:, :ctx].transpose(1, 2).contiguous()
    v_dense = v_seq.reshape(b, -1, KV_HEADS, HEAD_DIM)[:, :ctx].transpose(1, 2).contiguous()
    moved = bytes_moved("paged_decode_attention", args, q)
    calls = 10 if b * ctx <= 8 * 4096 else 3
    cudnn = functools.partial(_sdpa, SDPBackend.CUDNN_ATTENTION, q.unsqueeze(2), k_dense, v_dense, scale)
    plan, _ = pa.choose_plan(q.device, b, KV_HEADS, per_seq * PAGE)
    ours = functools.partial(pa.run_with_plan, *args, plan)
    fams = candidates(k_cache, v_cache, block_table, k_seq, v_seq, table_seq)
    best: dict[str, str] = {}
    for fam, fns in fams.items():
        samples, _ = measure({"cudnn": cudnn, **fns}, 3, calls, rng)
        ranked = sorted(fns, key=lambda n: statistics.median(samples[n]))
        best[fam] = ranked[0]
        print(f"# stage 1 b={b} ctx={ctx} {fam}: cudnn {statistics.median(samples['cudnn']):.2f} us; "
              + "; ".join(f"{n} {statistics.median(samples[n]):.2f}" for n in ranked[:3]), flush=True)  # fmt: skip
    finals = {"cudnn": cudnn, "ours": ours, **{best[f]: fams[f][best[f]] for f in fams}}
    samples, _ = measure(finals, rounds, calls, rng)
    print(f"## batch {b} context {ctx} ({moved / 1e6:.1f} MB must move; ours: {plan})")
    for name in finals:
        med = statistics.median(samples[name])
        r, lo, hi = _ratios(samples, "cudnn", name)
        print(f"   {name:<36} {med:10.2f} us  {moved / med / 1e6:5.2f} TB/s  cudnn/this {r:.3f} [{lo:.3f}-{hi:.3f}]",
              flush=True)  # fmt: skip
    del fams, finals, args, k_cache, v_cache, k_seq, v_seq, k_dense, v_dense
    torch.cuda.empty_cache()


def run_cells(doc: str, default_cells: str, cell_fn: Callable[[int, int, int, random.Random], None]) -> None:
    """A probe's command line: ``--rounds`` and ``--cells`` (``batch x context``, comma-separated), then ``cell_fn``
    per cell after a header line (device, versions, load, time)."""
    name = os.path.basename(sys.argv[0])
    ap = argparse.ArgumentParser(description=doc.split("\n", maxsplit=1)[0])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--cells", default=default_cells, help="batch x context, comma-separated")
    ns = ap.parse_args()
    if not torch.cuda.is_available():
        print(f"{name} needs a CUDA device", file=sys.stderr)
        raise SystemExit(2)
    print(f"# {torch.cuda.get_device_name()} · torch {torch.__version__} · triton {triton.__version__} · "
          f"load {os.getloadavg()[0]:.2f} · {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}")  # fmt: skip
    rng = random.Random(0)
    for c in ns.cells.split(","):
        b, ctx = (int(x) for x in c.split("x"))
        cell_fn(b, ctx, ns.rounds, rng)


def main() -> None:
    run_cells(__doc__ or "", "1x32768,8x4096,8x32768,64x1024,64x4096,64x32768", cell)


if __name__ == "__main__":
    main()
