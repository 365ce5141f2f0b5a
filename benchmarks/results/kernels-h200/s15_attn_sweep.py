"""Session 15 sweep (issue 23; ran at commit 41be768, whose Plan.tma was reverted after it): tensor-descriptor (TMA)
loads of each (page, head) tile against the incumbent plans and cuDNN SDPA on the dense copy, in the same process,
interleaved (CUDA-graph replays, shuffled rounds).

Stage 1 per cell: the incumbent, and TMA kernels (step x stages) at the incumbent's split plan. Stage 2: the fastest
TMA kernel x split counts (waves, including counts that fill 2-6 resident programs a multiprocessor) x merge
placement. Stage 3: cuDNN, the incumbent and the three fastest of stages 1-2, 10 rounds. Prints a summary and writes
the best TMA plan per cell (and whether it beat the incumbent in stage 3) to argv[1] (JSON).

Run from a tree with the importable package and benchmarks/ (gpu/attn4): python3 s15_attn_sweep.py OUT.json [cells]
"""

import dataclasses
import functools
import json
import os
import random
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "benchmarks"))
from bench_kernels import _best, _plan_name, _sdpa, _stage
from torch.nn.attention import SDPBackend

from inferensics.kernels._triton import paged_attention as pa
from inferensics.kernels._triton.device_facts import sm_count
from inferensics.kernels.samples import make_args


def med(x: list[float]) -> float:
    return statistics.median(x)


def spread(samples: dict[str, list[float]], name: str) -> str:
    r = [c / o for c, o in zip(samples["cudnn"], samples[name], strict=True)]
    return f"{med(r):.3f} [{min(r):.3f}-{max(r):.3f}]"


def fill(units: int, sms: int, max_splits: int) -> list[float]:
    out = []
    for c in (2, 3, 4, 5, 6):
        for k in range(1, 5):
            splits = min(max_splits, k * c * sms // units)
            if splits >= 1:
                out.append(round((splits * units - 0.5) / sms, 4))
    return sorted(set(out))


def main() -> None:
    out_path = sys.argv[1]
    # The cells short of cuDNN in session 14 first (a run cut short keeps the cells it finished).
    cells = [(64, 32768), (8, 32768), (1, 32768), (8, 4096), (64, 4096), (8, 1024), (64, 1024), (1, 1024), (1, 4096)]
    if len(sys.argv) > 2:
        cells = [tuple(int(v) for v in c.split("x")) for c in sys.argv[2].split(",")]
    rng = random.Random(15)
    sms = sm_count(torch.device("cuda"))
    print(f"# {torch.cuda.get_device_name()} load {os.getloadavg()[0]:.2f} {time.strftime('%H:%M:%S', time.gmtime())}")
    result: dict[str, object] = {}
    summary = []
    for b, ctx in cells:
        t0 = time.time()
        shape = {"batch": b, "context": ctx, "q_heads": 32, "kv_heads": 8, "head_dim": 128, "page": 16}
        args = make_args("paged_decode_attention", shape, torch.bfloat16, torch.device("cuda"), seed=b + ctx)
        q, k_cache, v_cache, block_table, lens, scale = args
        lens.fill_(ctx)
        k_dense = k_cache[block_table.long()].reshape(b, -1, 8, 128)[:, :ctx].transpose(1, 2).contiguous()
        v_dense = v_cache[block_table.long()].reshape(b, -1, 8, 128)[:, :ctx].transpose(1, 2).contiguous()
        peer = functools.partial(_sdpa, SDPBackend.CUDNN_ATTENTION, q.unsqueeze(2), k_dense, v_dense, scale)
        ref = peer().squeeze(2).float()
        calls = 10 if b * ctx <= 8 * 4096 else 3
        max_tokens = block_table.shape[1] * 16
        key = pa.plan_key(b, 8, max_tokens)
        inc = pa.H200_PLANS[key]
        first = {f"INC {_plan_name(inc)}": (args, inc)}
        for n, st in ((64, 2), (64, 3), (64, 4), (32, 3), (32, 4), (128, 2), (128, 3), (16, 4)):
            p = dataclasses.replace(inc, block_n=n, stages=st, tma=True, prefetch_pages=False)
            first[_plan_name(p)] = (args, p)
        s1 = _stage(peer, first, ref, 5, calls, rng)
        ranked = _best({n: s for n, s in s1.items() if n != "cudnn"})
        print(f"\n## b={b} ctx={ctx} stage 1 (cudnn {med(s1['cudnn']):.2f} us)")
        for name, us in ranked:
            print(f"  {us:9.2f} us  cudnn/ours {spread(s1, name)}  {name}")
        tops = [first[n][1] for n, _ in ranked if "tma" in n][:1]
        second = {}
        seen = set()
        for t in tops:
            for waves in sorted({2, 3, 4, 6, 8, 16, inc.waves, *fill(b * 8, sms, max(1, max_tokens // 64))}):
                for merge_kernel, pdl in ((False, False), (True, False), (True, True)):
                    p = dataclasses.replace(t, waves=waves, min_split=64, merge_kernel=merge_kernel, pdl=pdl)
                    splits, chunk = pa.split_plan(b, 8, max_tokens, sms, p.waves, p.min_split, p.block_n)
                    merge = splits > 1 and p.merge_kernel
                    launch = (p.block_n, p.stages, splits, chunk, merge, merge and p.pdl, p.kv_fast)
                    if launch in seen:
                        continue
                    seen.add(launch)
                    second[f"{_plan_name(p)} ({splits} splits)"] = (args, p)
        s2 = _stage(peer, second, ref, 5, calls, rng)
        ranked2 = _best({n: s for n, s in s2.items() if n != "cudnn"})
        print(f"## b={b} ctx={ctx} stage 2 (cudnn {med(s2['cudnn']):.2f} us), top 8 of {len(ranked2)}")
        for name, us in ranked2[:8]:
            print(f"  {us:9.2f} us  cudnn/ours {spread(s2, name)}  {name}")
        finalists = {}
        inc_name = next(iter(first))
        finalists[inc_name] = first[inc_name]
        for name, _ in ranked2[:3]:
            finalists[name] = second[name]
        for name, _ in ranked[:2]:
            finalists.setdefault(name, first[name])
        s3 = _stage(peer, finalists, ref, 10, calls, rng)
        ranked3 = _best({n: s for n, s in s3.items() if n != "cudnn"})
        print(f"## b={b} ctx={ctx} stage 3, 10 rounds (cudnn {med(s3['cudnn']):.2f} us)")
        for name, us in ranked3:
            print(f"  {us:9.2f} us  cudnn/ours {spread(s3, name)}  {name}")
        best_name = ranked3[0][0]
        best = finalists[best_name][1]
        result[key] = {
            "cell": [b, ctx],
            "best": best_name,
            "row": [
                key,
                round(best.waves, 4),
                best.min_split,
                best.block_n,
                best.warps,
                best.stages,
                best.kv_fast,
                best.merge_kernel,
                best.pdl,
                best.prefetch_pages,
                best.tma,
            ],
            "cudnn_us": med(s3["cudnn"]),
            "stage3": {n: {"us": med(s3[n]), "cudnn_over": spread(s3, n)} for n in s3 if n != "cudnn"},
            "incumbent": inc_name,
        }
        line = (
            f"b={b} ctx={ctx}: cudnn {med(s3['cudnn']):.2f} us; incumbent {med(s3[inc_name]):.2f} "
            f"({spread(s3, inc_name)}); best {best_name} {ranked3[0][1]:.2f} ({spread(s3, best_name)}) "
            f"[{time.time() - t0:.0f} s]"
        )
        summary.append(line)
        print(line, flush=True)
        with open(out_path, "w") as f:
            json.dump(result, f, indent=1)
        del k_dense, v_dense, peer, first, second, finalists, s1, s2, s3
        torch.cuda.empty_cache()
    print("\n# summary (cudnn/ours median [min-max] over 10 rounds of stage 3)")
    for line in summary:
        print(line)


if __name__ == "__main__":
    main()
