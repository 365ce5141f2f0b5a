"""What page scatter costs the paged decode kernel: the same KV read through a scattered and a contiguous block table.

``make_args`` scatters every sequence's pages over the cache (a random permutation, as an allocator leaves them).
This probe copies the pages so that each sequence's pages are consecutive (block table ``arange``) and times our
kernel under its measured plan on both, with cuDNN SDPA on the dense copy, in the benchmark's interleaved rounds
(CUDA-graph replays, shuffled order each round). If the contiguous table closes the gap to cuDNN, the remainder is
the cost of reading scattered pages, not of the kernel's streaming.

    python benchmarks/probe_paged_scatter.py [--rounds 10] [--cells 8x4096,8x32768,64x4096,64x32768]

Needs a CUDA device.
"""

from __future__ import annotations

import argparse
import functools
import os
import random
import statistics
import sys
import time

import torch

from inferensics.kernels.samples import bytes_moved, make_args

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_kernels import _sdpa, measure


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument(
        "--cells", default="1x32768,8x4096,8x32768,64x4096,64x32768", help="batch x context, comma-separated"
    )
    ns = ap.parse_args()
    if not torch.cuda.is_available():
        print("probe_paged_scatter needs a CUDA device", file=sys.stderr)
        raise SystemExit(2)
    from torch.nn.attention import SDPBackend

    from inferensics.kernels._triton import paged_attention as pa

    print(f"# {torch.cuda.get_device_name()} · torch {torch.__version__} · load {os.getloadavg()[0]:.2f} · "
          f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}")  # fmt: skip
    rng = random.Random(0)
    for cell in ns.cells.split(","):
        b, ctx = (int(v) for v in cell.split("x"))
        shape = {"batch": b, "context": ctx, "q_heads": 32, "kv_heads": 8, "head_dim": 128, "page": 16}
        args = make_args("paged_decode_attention", shape, torch.bfloat16, torch.device("cuda"), seed=b + ctx)
        q, k_cache, v_cache, block_table, lens, scale = args
        lens.fill_(ctx)
        per_seq = block_table.shape[1]
        order = block_table.long().reshape(-1)  # sequence 0's pages, then sequence 1's, ...
        k_seq, v_seq = k_cache[order].contiguous(), v_cache[order].contiguous()
        table_seq = torch.arange(b * per_seq, device="cuda", dtype=torch.int32).reshape(b, per_seq)
        k_dense = k_seq.reshape(b, -1, 8, 128)[:, :ctx].transpose(1, 2).contiguous()
        v_dense = v_seq.reshape(b, -1, 8, 128)[:, :ctx].transpose(1, 2).contiguous()
        plan, _ = pa.choose_plan(q.device, b, 8, per_seq * 16)
        scattered = functools.partial(pa.run_with_plan, *args, plan)
        contiguous = functools.partial(pa.run_with_plan, q, k_seq, v_seq, table_seq, lens, scale, plan)
        torch.testing.assert_close(contiguous(), scattered(), rtol=0, atol=0)
        fns = {
            "ours scattered": scattered,
            "ours contiguous": contiguous,
            "cudnn": functools.partial(_sdpa, SDPBackend.CUDNN_ATTENTION, q.unsqueeze(2), k_dense, v_dense, scale),
        }
        samples, _ = measure(fns, ns.rounds, 10 if b * ctx <= 8 * 4096 else 3, rng)
        moved = bytes_moved("paged_decode_attention", args, q)
        print(f"## batch {b} context {ctx}, plan {plan}")
        for name, s in samples.items():
            med = statistics.median(s)
            ratios = [c / o for c, o in zip(samples["cudnn"], s, strict=True)]
            print(f"   {name:<16} {med:10.2f} us  {moved / med / 1e6:5.2f} TB/s  cudnn/this "
                  f"{statistics.median(ratios):.3f} [{min(ratios):.3f}-{max(ratios):.3f}]", flush=True)  # fmt: skip
        del fns, args, k_cache, v_cache, k_seq, v_seq, k_dense, v_dense, scattered, contiguous
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
