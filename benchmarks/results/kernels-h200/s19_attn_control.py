"""Session 19 control (issue 23): the persistent kernel given the incumbent's own work decomposition. With as many
programs as the incumbent plan launches (splits x units), each stream-K share is one of the incumbent's splits (or
within a step of it), so the persistent kernel does the incumbent's work in its own code: the gap between the two
is what the persistent code costs, apart from its grid. cuDNN, the incumbent and that control in the same
shuffled rounds (10), CUDA-graph replays, outputs checked against cuDNN first.

Run from a tree with the importable package and benchmarks/ (gpu/attn19): python3 s19_attn_control.py OUT.json
"""

import functools
import json
import os
import random
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "benchmarks"))
from bench_kernels import _plan_name, _sdpa, _stage
from s19_attn_sweep import med, ratios, spread
from torch.nn.attention import SDPBackend

from inferensics.kernels._triton import paged_attention as pa
from inferensics.kernels._triton import paged_persistent as pp
from inferensics.kernels._triton.device_facts import sm_count
from inferensics.kernels.samples import bytes_moved, make_args


def main() -> None:
    cells = [(8, 4096), (64, 4096), (8, 32768), (64, 32768), (1, 32768), (8, 1024), (64, 1024), (1, 1024), (1, 4096)]
    rng = random.Random(191)
    sms = sm_count(torch.device("cuda"))
    print(f"# {torch.cuda.get_device_name()} {sms} SMs load {os.getloadavg()[0]:.2f} {time.strftime('%H:%M:%S')}")
    result = {}
    for b, ctx in cells:
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
        splits, chunk = pa.split_plan(b, 8, max_tokens, sms, inc.waves, inc.min_split, inc.block_n)
        control = pa.Plan(
            block_n=inc.block_n, warps=inc.warps, stages=inc.stages, prefetch_pages=inc.prefetch_pages,
            persistent=splits * b * 8 / sms,
        )  # fmt: skip
        steps = -(-max_tokens // inc.block_n)
        programs, slots, _ = pp.stream_plan(b * 8, steps, round(control.persistent * sms))
        names = {
            f"INC {_plan_name(inc)} ({splits} splits of {chunk} tokens)": (args, inc),
            f"CONTROL {_plan_name(control)} ({programs} programs, shares of {b * 8 * steps / programs:.1f} steps "
            f"= {b * 8 * steps * inc.block_n / programs:.0f} tokens, {slots} slots)": (args, control),
        }
        s = _stage(peer, names, ref, 10, calls, rng)
        inc_name = next(iter(names))
        cudnn_us = med(s["cudnn"])
        print(f"\n## b={b} ctx={ctx} 10 rounds (cudnn {cudnn_us:.2f} us, {moved / cudnn_us / 1e6:.2f} TB/s)")
        for name in names:
            if name in s:
                us = med(s[name])
                print(f"  {us:9.2f} us {moved / us / 1e6:5.2f} TB/s  cudnn/ours {spread(ratios(s['cudnn'], s[name]))}"
                      f"  inc/ours {spread(ratios(s[inc_name], s[name]))}  {name}")  # fmt: skip
        result[key] = {"cell": [b, ctx], "bytes": moved, "samples": s, "names": list(names)}
        with open(sys.argv[1], "w") as f:
            json.dump(result, f, indent=1)
        del k_dense, v_dense, peer
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
