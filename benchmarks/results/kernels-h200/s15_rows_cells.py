"""Session 15's H200 measurement of the two row cells that sat a hair below 1.00x Inductor in session 14:
add+RMSNorm at 8192 tokens (hidden 4096) and SiLU·mul at 8 tokens (intermediate 14336), bf16.

For each cell, in the same shuffled CUDA-graph rounds (``bench_kernels.measure``): Inductor's kernel, a second
graph of the same compiled function (an A/A control: its ratio to the first is what the method calls noise), the
incumbent (the launch table's configuration), a second graph of the incumbent (A/A), the existing-kernel
candidate configurations left (same kernels, other launch parameters; SiLU·mul arithmetic variants only where
the exhaustive 16-bit check is exact for bf16), and a same-bytes copy. Every output is checked first (SiLU·mul:
equal bits to eager; add+RMSNorm: the op's tolerance rule). Per candidate: median µs, Inductor/this and
incumbent/this as the median of per-round ratios with a distribution-free 95 % interval (``median_ci``).
Run from the repository root:

    python3 benchmarks/results/kernels-h200/s15_rows_cells.py [ROUNDS_ADD] [ROUNDS_SILU] [SILU_CALLS]
"""

import functools
import math
import random
import statistics
import sys
from typing import Any

import torch

sys.path.insert(0, "benchmarks")
import bench_kernels as bench

from inferensics import kernels
from inferensics.kernels._triton import activation, norm
from inferensics.kernels.samples import bytes_moved, make_args

ROUNDS_ADD = int(sys.argv[1]) if len(sys.argv) > 1 else 300
ROUNDS_SILU = int(sys.argv[2]) if len(sys.argv) > 2 else 400
SILU_CALLS = int(sys.argv[3]) if len(sys.argv) > 3 else 200
DEVICE = torch.device("cuda")

# (rows, warps, early weight, hints (bit 0 .cs stores), late residual, chunk)
ADD_CANDIDATES = [
    (1, 16, False, 0, True, 4096),
    (1, 16, False, 0, False, 4096),
    (1, 16, False, 1, True, 2048),
    (1, 16, False, 0),  # one pass, the row in registers
    (1, 16, True, 0),
]
# (block, warps, division, flat grid, 16-bit multiply, hints, hardware exp); division 3 = Triton's '/'
SILU_CANDIDATES = [
    (512, 8, 3, False, True, 0, True),
    (512, 4, 3, False, True, 0, False),
    (512, 4, 3, False, True, 0, True),
    (1024, 4, 3, False, True, 0, False),  # Inductor's grid: 112 programs of 4 warps
    (1024, 4, 3, True, True, 0, False),
    (1024, 8, 3, False, True, 0, False),
    (1024, 8, 3, False, True, 0, True),
    (2048, 8, 3, False, True, 0, False),  # 56 programs
    (2048, 4, 3, False, True, 0, True),
    (256, 4, 3, False, True, 0, False),  # 448 programs
    (512, 8, 3, True, True, 0, False),
    (512, 8, 3, False, False, 0, False),
    (512, 8, 2, False, True, 0, False),  # the guarded division
]


def verdict_line(num: list[float], den: list[float], label: str) -> str:
    r = [a / b for a, b in zip(num, den, strict=True)]
    lo, hi = bench.median_ci(r)
    geo = math.exp(statistics.fmean(math.log(x) for x in r))
    return f"{label} {statistics.median(r):.4f}x ci95 [{lo:.4f}-{hi:.4f}] geo {geo:.4f}"


def run_cell(  # noqa: PLR0917
    op: str, shape: dict[str, int], fn: Any, incumbent: Any, candidates: list[Any], rounds: int,
    calls: int, rng: random.Random,
) -> None:  # fmt: skip
    reg = kernels.registry().op(op)
    args = make_args(op, shape, torch.bfloat16, DEVICE)
    compiled = torch.compile(reg.reference, fullgraph=True, dynamic=False)
    _, code = bench.inductor_kernels(compiled, args)
    launches = [ln for ln in code.splitlines() if ".run(" in ln]
    print(f"# {op} {shape}: inductor launches {launches}", flush=True)
    eager = reg.reference(*args)
    moved = bytes_moved(op, args, eager)
    src = torch.empty(moved // 4, dtype=torch.bfloat16, device=DEVICE).normal_()
    dst = torch.empty_like(src)
    fns: dict[str, Any] = {
        "inductor": functools.partial(compiled, *args),
        "inductor-again": functools.partial(compiled, *args),
        "copy": functools.partial(dst.copy_, src),
    }
    serving = reg.providers["triton"].fn
    print(f"# serving path: {bench.check(op, serving(*args), args)}", flush=True)
    fns["serving"] = functools.partial(serving, *args)
    for name, c in [("incumbent", incumbent), ("incumbent-again", incumbent)] + [(repr(c), c) for c in candidates]:
        try:
            out = fn(*args, config=c)
        except Exception as exc:
            print(f"# {name}: failed ({type(exc).__name__}: {str(exc).splitlines()[0][:160]}), left out")
            continue
        if op == "silu_mul":
            ok = torch.equal(out, eager)
            detail = "bit-exact with eager" if ok else "NOT bit-exact with eager"
        else:
            detail = bench.check(op, out, args)
            ok = detail.startswith("ok")
        print(f"# {name} {c}: {detail}", flush=True)
        if ok:
            fns[name] = functools.partial(fn, *args, config=c)
    samples, modes = bench.measure(fns, rounds, calls, rng)
    ind, inc = samples["inductor"], samples["incumbent"]
    print(f"## {op} {shape} ({moved / 1e6:.2f} MB, {rounds} rounds x {calls} calls a graph): "
          f"inductor {statistics.median(ind):.3f} us, incumbent {statistics.median(inc):.3f} us")  # fmt: skip
    for name, us in bench._best(samples):
        s = samples[name]
        print(f"   {name:<38} {us:9.3f} us {moved / us / 1e6:5.2f} TB/s  "
              f"{verdict_line(ind, s, 'inductor/this')}  {verdict_line(inc, s, 'incumbent/this')}  "
              f"{modes[name]}", flush=True)  # fmt: skip


def main() -> None:
    import os
    import time

    import triton

    print(f"# {torch.cuda.get_device_name()} · torch {torch.__version__} · triton {triton.__version__} · "
          f"load {os.getloadavg()[0]:.2f} · {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}")  # fmt: skip
    rng = random.Random(15)
    exact = set()
    for div, native, fast_exp in sorted({(c[2], c[4], c[6]) for c in SILU_CANDIDATES}):
        bad = bench.silu_exhaustive_mismatches(torch.bfloat16, (1024, 4, div, True, native, 0, fast_exp))
        print(f"# silu_mul exhaustive over bf16 gates: division {div}, 16-bit multiply {native}, fast exp "
              f"{fast_exp}: {bad} mismatches{'' if bad == 0 else ', left out'}")  # fmt: skip
        if bad == 0:
            exact.add((div, native, fast_exp))
    silu_candidates = [c for c in SILU_CANDIDATES if (c[2], c[4], c[6]) in exact]
    add_inc = norm.H200_CONFIGS[True, 4096, 8192]
    silu_inc = activation.H200_CONFIGS["bfloat16", 14336, 8]
    print(f"# incumbents: add+RMSNorm 8192 {tuple(add_inc)}; SiLU·mul 8 {tuple(silu_inc)}", flush=True)
    run_cell("silu_mul", {"tokens": 8, "hidden": 14336}, activation.silu_mul_with, silu_inc, silu_candidates,
             ROUNDS_SILU, SILU_CALLS, rng)  # fmt: skip
    run_cell("fused_add_rms_norm", {"tokens": 8192, "hidden": 4096}, norm.fused_add_rms_norm_with, add_inc,
             ADD_CANDIDATES, ROUNDS_ADD, 20, rng)  # fmt: skip


if __name__ == "__main__":
    main()
