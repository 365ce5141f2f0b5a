"""One call each of the paged decode kernel and cuDNN SDPA per cell, for Nsight Compute to profile.

Only the calls between ``cudaProfilerStart`` and ``cudaProfilerStop`` are profiled (warm-ups and input
preparation are not), so run it under ``ncu --profile-from-start off``:

    ncu --clock-control none --profile-from-start off --section SpeedOfLight --section MemoryWorkloadAnalysis \\
        --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats \\
        python benchmarks/profile_paged.py --cells 8x32768,64x32768 [--tables SWEEP.json]

Per cell it profiles our kernel under the committed plan, under the plan a sweep wrote to ``--tables`` (when
given and different), and cuDNN on the same KV stored dense. Needs a CUDA device.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys

import torch
from torch.nn import functional as F  # noqa: N812

from inferensics.kernels.samples import make_args


def _cudnn(q4: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        return F.scaled_dot_product_attention(q4, k, v, scale=scale, enable_gqa=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cells", default="8x32768,64x32768", help="batch x context, comma-separated")
    ap.add_argument("--tables", default=None, help="a sweep's tables (JSON): also profile its plan per cell")
    ns = ap.parse_args()
    if not torch.cuda.is_available():
        print("profile_paged needs a CUDA device", file=sys.stderr)
        raise SystemExit(2)
    from inferensics.kernels._triton import paged_attention as pa

    swept: dict[str, pa.Plan] = {}
    if ns.tables:
        with open(ns.tables) as f:
            swept = {str(r[0]): pa._plan_of(r) for r in json.load(f).get("paged", [])}
    for cell in ns.cells.split(","):
        b, ctx = (int(v) for v in cell.split("x"))
        shape = {"batch": b, "context": ctx, "q_heads": 32, "kv_heads": 8, "head_dim": 128, "page": 16}
        args = make_args("paged_decode_attention", shape, torch.bfloat16, torch.device("cuda"), seed=b + ctx)
        q, k_cache, v_cache, block_table, lens, scale = args
        lens.fill_(ctx)
        k_dense = k_cache[block_table.long()].reshape(b, -1, 8, 128)[:, :ctx].transpose(1, 2).contiguous()
        v_dense = v_cache[block_table.long()].reshape(b, -1, 8, 128)[:, :ctx].transpose(1, 2).contiguous()
        key = pa.plan_key(b, 8, block_table.shape[1] * 16)
        runs = {}
        for label, plan in (("committed", pa.H200_PLANS.get(key)), ("swept", swept.get(key))):
            if plan is not None and plan not in [p for _, p in runs.values()]:
                runs[label] = (functools.partial(pa.run_with_plan, *args, plan), plan)

        cudnn = functools.partial(_cudnn, q.unsqueeze(2), k_dense, v_dense, scale)

        for fn, _ in runs.values():
            fn()
        cudnn()
        torch.cuda.synchronize()
        for label, (fn, plan) in runs.items():
            print(f"# cell {b}x{ctx}: ours ({label}) {plan}", flush=True)
            torch.cuda.profiler.start()
            fn()
            torch.cuda.synchronize()
            torch.cuda.profiler.stop()
        print(f"# cell {b}x{ctx}: cudnn", flush=True)
        torch.cuda.profiler.start()
        cudnn()
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
        del k_dense, v_dense, args, k_cache, v_cache, cudnn, runs
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
