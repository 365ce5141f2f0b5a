"""Session 15, second visit: the two cells again with the memory placement varied. The first visit's A/A controls
(two CUDA graphs of one and the same function) differed by up to 0.5 % with 95 % intervals excluding 1.00, so part
of a sub-percent ratio is where the buffers landed, not the kernel. Here each provider runs on SETS independent
allocations of the inputs (and its own graph's outputs), all graphs in the same shuffled rounds; per set the
median per-round ratio, and across sets the range of those medians (the placement spread). Providers: Inductor,
the session-14 table entry, the candidate, and the serving path (the registry, with this branch's table).

    python3 benchmarks/results/kernels-h200/s15_rows_placement.py [SETS] [ROUNDS_ADD] [ROUNDS_SILU]
"""

import functools
import random
import statistics
import sys
from typing import Any

import torch

sys.path.insert(0, "benchmarks")
import bench_kernels as bench

from inferensics import kernels
from inferensics.kernels._triton import activation, norm
from inferensics.kernels.samples import make_args

SETS = int(sys.argv[1]) if len(sys.argv) > 1 else 4
ROUNDS_ADD = int(sys.argv[2]) if len(sys.argv) > 2 else 100
ROUNDS_SILU = int(sys.argv[3]) if len(sys.argv) > 3 else 300
DEVICE = torch.device("cuda")


def cell(  # noqa: PLR0917
    op: str, shape: dict[str, int], fn: Any, old: Any, new: Any, rounds: int, calls: int, rng: random.Random
) -> None:
    reg = kernels.registry().op(op)
    compiled = torch.compile(reg.reference, fullgraph=True, dynamic=False)
    fns: dict[str, Any] = {}
    pads = []  # kept alive: each shifts where the next set lands
    for k in range(SETS):
        args = make_args(op, shape, torch.bfloat16, DEVICE, seed=k)
        pads.append(torch.empty(rng.randrange(1, 1 << 20), dtype=torch.uint8, device=DEVICE))
        for name, f in (("inductor", functools.partial(compiled, *args)),
                        ("old", functools.partial(fn, *args, config=old)),
                        ("new", functools.partial(fn, *args, config=new)),
                        ("serving", functools.partial(reg.providers["triton"].fn, *args))):  # fmt: skip
            out = f()
            if name == "inductor":  # the peer: timed as it computes (it skips the reference's bf16 roundings)
                detail = "ok (the peer, not checked)"
            else:
                detail = bench.check(op, out, args)
                if op == "silu_mul" and not torch.equal(out, reg.reference(*args)):
                    detail = "FAIL not bit-exact with eager"
            if k == 0 or not detail.startswith("ok"):
                print(f"# {op} set {k} {name}: {detail}", flush=True)
            if detail.startswith("ok"):
                fns[f"{name}#{k}"] = f
    samples, _ = bench.measure(fns, rounds, calls, rng)
    print(f"## {op} {shape}: {SETS} placements x {rounds} rounds x {calls} calls; old {tuple(old)}, new {tuple(new)}")
    for num, den in (("inductor", "new"), ("inductor", "serving"), ("inductor", "old"), ("old", "new"),
                     ("inductor", "inductor"), ("old", "old")):  # fmt: skip
        per_set = []
        for k in range(SETS):
            j = (k + 1) % SETS if num == den else k  # A/A: the same function on the next placement
            r = [a / b for a, b in zip(samples[f"{num}#{j}"], samples[f"{den}#{k}"], strict=True)]
            per_set.append((statistics.median(r), *bench.median_ci(r)))
        meds = [m for m, _, _ in per_set]
        sets = " ".join(f"{m:.4f}[{lo:.4f}-{hi:.4f}]" for m, lo, hi in per_set)
        aa = " (next placement)" if num == den else ""
        print(f"   {num}/{den}{aa}: median of set medians {statistics.median(meds):.4f}, "
              f"range {min(meds):.4f}-{max(meds):.4f}; per set {sets}", flush=True)  # fmt: skip
    for name in ("inductor", "old", "new", "serving"):
        us = [statistics.median(samples[f"{name}#{k}"]) for k in range(SETS)]
        print(f"   {name:<9} us per set {' '.join(f'{u:.3f}' for u in us)}")


def main() -> None:
    import os

    print(f"# {torch.cuda.get_device_name()} · torch {torch.__version__} · load {os.getloadavg()[0]:.2f}", flush=True)
    rng = random.Random(151)
    silu_new = activation.H200_CONFIGS["bfloat16", 14336, 8]
    cell("silu_mul", {"tokens": 8, "hidden": 14336}, activation.silu_mul_with, (512, 8, 3, False, True, 0, False),
         silu_new, ROUNDS_SILU, 200, rng)  # fmt: skip
    cell("fused_add_rms_norm", {"tokens": 8192, "hidden": 4096}, norm.fused_add_rms_norm_with,
         norm.H200_CONFIGS[True, 4096, 8192], (1, 16, False, 0, False, 4096), ROUNDS_ADD, 20, rng)  # fmt: skip


if __name__ == "__main__":
    main()
