"""Session 19 sweep (issue 23): the persistent grid (Plan.persistent: a fixed number of programs, each an equal
stream-K share of all (sequence, KV head) steps, the last sharer merging) against the incumbent plans and cuDNN
SDPA on the dense copy, in the same process, interleaved (CUDA-graph replays, shuffled rounds; session 15's method).

Stage 1 per cell: the incumbent, and persistent grids of 2-5 programs a multiprocessor x kernel configuration
(step, warps, stages, prefetched page numbers), 5 rounds. Stage 3: cuDNN, the incumbent and the three fastest
persistent grids of stage 1, 10 fresh rounds. Every candidate's output is checked against cuDNN's first.

A cell is won when the fastest persistent grid of stage 3 beats the incumbent in every one of its 10 rounds and by
>= 0.5 % in the median of the per-round ratios (incumbent time / persistent time): beyond the round-to-round
spread. Writes the cells to argv[1] (JSON) and the won cells' rows (``paged`` rows of 11 fields) to argv[1] with
.tables.json, for s19_attn_merge_tables.py.

Run from a tree with the importable package and benchmarks/ (gpu/attn19): python3 s19_attn_sweep.py OUT.json [cells]
"""

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
from inferensics.kernels._triton import paged_persistent as pp
from inferensics.kernels._triton.device_facts import sm_count
from inferensics.kernels.samples import bytes_moved, make_args

# (step, warps, stages, prefetched page numbers) -> programs a multiprocessor. Registers and shared memory
# (Triton 3.6, sm_90, compiled offline): 64-token steps 80-96 registers and 38.9 KB at 2-4 stages (5 programs a
# multiprocessor fit), 71.7 KB at 5 stages or with prefetched pages (3 fit); 32-token steps 113 registers, 21.5 KB (4).
CONFIGS = {
    (64, 4, 2, False): (2, 3, 4, 5),
    (64, 4, 3, False): (2, 3, 4, 5),
    (64, 4, 4, False): (2, 3, 4, 5),
    (64, 4, 5, False): (2, 3),
    (64, 4, 3, True): (2, 3),
    (32, 4, 4, False): (3, 4),
}


def med(x: list[float]) -> float:
    return statistics.median(x)


def ratios(num: list[float], den: list[float]) -> list[float]:
    return [a / b for a, b in zip(num, den, strict=True)]


def spread(r: list[float]) -> str:
    return f"{med(r):.3f} [{min(r):.3f}-{max(r):.3f}]"


def compiled_resources() -> list[str]:
    # What the device's Triton built for the persistent kernel (registers, spills, shared memory per config).
    lines = []
    try:
        for cache in pp._persistent_kernel.device_caches.values():
            for k in cache[0].values():
                c = k.src.constants if hasattr(k.src, "constants") else {}
                pick = {
                    n: v for n, v in c.items() if isinstance(n, str) and n in ("BLOCK_N", "UNROLL", "PREFETCH_PAGES")
                }
                lines.append(f"  {pick} stages {k.metadata.num_stages}: {k.n_regs} regs, {k.n_spills} spills, "
                             f"{k.metadata.shared} B shared")  # fmt: skip
    except Exception as exc:  # only a report
        lines.append(f"  (not read: {type(exc).__name__}: {exc})")
    return lines


def main() -> None:
    out_path = sys.argv[1]
    # The cells short of cuDNN in session 15 first (a run cut short keeps the cells it finished).
    cells = [(8, 4096), (64, 4096), (8, 32768), (64, 32768), (1, 32768), (8, 1024), (64, 1024), (1, 1024), (1, 4096)]
    if len(sys.argv) > 2:
        cells = [tuple(int(v) for v in c.split("x")) for c in sys.argv[2].split(",")]
    rng = random.Random(19)
    sms = sm_count(torch.device("cuda"))
    print(f"# {torch.cuda.get_device_name()} {sms} SMs load {os.getloadavg()[0]:.2f} "
          f"{time.strftime('%H:%M:%S', time.gmtime())}")  # fmt: skip
    result: dict[str, object] = {}
    summary = []
    wins: list[list[object]] = []
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
        moved = bytes_moved("paged_decode_attention", args, q)
        calls = 10 if b * ctx <= 8 * 4096 else 3
        max_tokens = block_table.shape[1] * 16
        key = pa.plan_key(b, 8, max_tokens)
        inc = pa.H200_PLANS[key]
        inc_name = f"INC {_plan_name(inc)}"
        first = {inc_name: (args, inc)}
        seen = set()
        for (n, w, st, pf), per_sm in CONFIGS.items():
            for c in per_sm:
                p = pa.Plan(block_n=n, warps=w, stages=st, prefetch_pages=pf, persistent=c)
                programs, slots, touched = pp.stream_plan(b * 8, -(-max_tokens // n), round(c * sms))
                if (n, w, st, pf, programs) not in seen:  # grids capped at one program a step launch the same work
                    seen.add((n, w, st, pf, programs))
                    first[f"{_plan_name(p)} ({programs} programs, {slots} slots, {touched} units)"] = (args, p)
        s1 = _stage(peer, first, ref, 5, calls, rng)
        ranked = _best({n: s for n, s in s1.items() if n != "cudnn"})
        print(f"\n## b={b} ctx={ctx} stage 1, 5 rounds (cudnn {med(s1['cudnn']):.2f} us)")
        for name, us in ranked:
            print(f"  {us:9.2f} us  cudnn/ours {spread(ratios(s1['cudnn'], s1[name]))}  {name}")
        finalists = {inc_name: first[inc_name]}
        for name, _ in [r for r in ranked if r[0] != inc_name][:3]:
            finalists[name] = first[name]
        s3 = _stage(peer, finalists, ref, 10, calls, rng)
        ranked3 = _best({n: s for n, s in s3.items() if n != "cudnn"})
        cudnn_us = med(s3["cudnn"])
        print(f"## b={b} ctx={ctx} stage 3, 10 rounds (cudnn {cudnn_us:.2f} us, {moved / cudnn_us / 1e6:.2f} TB/s)")
        for name, us in ranked3:
            print(f"  {us:9.2f} us {moved / us / 1e6:5.2f} TB/s  cudnn/ours {spread(ratios(s3['cudnn'], s3[name]))}"
                  f"  inc/ours {spread(ratios(s3[inc_name], s3[name]))}  {name}")  # fmt: skip
        best_name = next(n for n, _ in ranked3 if n != inc_name)
        best = finalists[best_name][1]
        paired = ratios(s3[inc_name], s3[best_name])
        won = min(paired) > 1.0 and med(paired) >= 1.005
        result[key] = {
            "cell": [b, ctx],
            "cudnn_us": cudnn_us,
            "bytes": moved,
            "incumbent": inc_name,
            "best_persistent": best_name,
            "won": won,
            "stage3": {
                n: {
                    "us": med(s3[n]),
                    "cudnn_over": spread(ratios(s3["cudnn"], s3[n])),
                    "inc_over": spread(ratios(s3[inc_name], s3[n])),
                    "samples": s3[n],
                }
                for n in s3
                if n != "cudnn"
            },
            "cudnn_samples": s3["cudnn"],
            "stage1": {n: med(s) for n, s in s1.items()},
        }
        row = [key, 4.0, 64, best.block_n, best.warps, best.stages, True, False, False, best.prefetch_pages]
        if won:
            wins.append([*row, best.persistent])
        line = (
            f"b={b} ctx={ctx}: cudnn {cudnn_us:.2f} us; incumbent {med(s3[inc_name]):.2f} us "
            f"(cudnn/ours {spread(ratios(s3['cudnn'], s3[inc_name]))}); persistent {best_name} "
            f"{med(s3[best_name]):.2f} us (cudnn/ours {spread(ratios(s3['cudnn'], s3[best_name]))}; "
            f"inc/persistent {spread(paired)}) -> {'WIN' if won else 'no win'} [{time.time() - t0:.0f} s]"
        )
        summary.append(line)
        print(line, flush=True)
        with open(out_path, "w") as f:
            json.dump(result, f, indent=1)
        with open(out_path.replace(".json", ".tables.json"), "w") as f:
            json.dump({"when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "paged": wins}, f, indent=1)
        del k_dense, v_dense, peer, first, finalists, s1, s3
        torch.cuda.empty_cache()
    print("\n# persistent kernel as compiled here")
    print("\n".join(compiled_resources()))
    print("\n# summary (stage 3, 10 rounds: median [min-max] of per-round ratios)")
    for line in summary:
        print(line)


if __name__ == "__main__":
    main()
