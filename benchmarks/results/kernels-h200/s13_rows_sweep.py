"""Session 13's H200 sweep: the two cells below 1.0x after session 12 (add+RMSNorm at 8192 tokens, SiLU·mul at 8),
with the new two-pass add+RMSNorm kernel and SiLU·mul's shorter-chain options (Triton's own division, the hardware
exp: timed only if the exhaustive check over every 16-bit gate finds them exact), each against Inductor and a
same-bytes copy in shuffled CUDA-graph rounds. Prints TABLE_ROW lines for s12_rows_merge_tables.py. Run from the
repository root:

    python3 benchmarks/results/kernels-h200/s13_rows_sweep.py [ROUNDS]
"""

import random
import sys

sys.path.insert(0, "benchmarks")
import bench_kernels as bench

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 7

# SiLU·mul at 8 tokens (one wave, latency-bound): smaller programs and shorter exact chains.
# (BLOCK, warps, division 0 IEEE / 1 refined reciprocal / 2 guarded / 3 Triton's '/', flat, bf16 multiply, hints,
# fast exp)
GRIDS_8 = [(512, 8), (512, 4), (256, 2), (256, 4), (128, 1), (1024, 8)]
SILU_8 = [(b, w, div, False, True, 0, fx) for b, w in GRIDS_8 for div, fx in ((1, False), (3, False), (1, True),
                                                                             (3, True))]  # fmt: skip
SILU_8 += [(512, 8, 1, True, True, 0, False), (256, 2, 1, True, True, 0, False)]
# 512 and 8192 tokens: the incumbents, and the same grids with the shorter arithmetic (if exact).
SILU_512 = [(2048, 4, 2, False, True, 1, False), (2048, 4, 3, False, True, 1, False),
            (2048, 4, 2, False, True, 1, True), (2048, 4, 3, False, True, 1, True)]  # fmt: skip
SILU_8192 = [(1024, 2, 2, True, True, 0, False), (1024, 2, 3, True, True, 0, False),
             (1024, 2, 2, True, True, 0, True), (1024, 2, 3, True, True, 0, True)]  # fmt: skip

# add+RMSNorm: (rows, warps, early weight, hints, late residual, chunk); chunk 0 = the one-pass kernel.
ADD_8192 = [(1, 16, False, 0, True), (1, 16, False, 0), (1, 8, False, 0, True)]
ADD_8192 += [(1, w, False, 0, late, chunk) for chunk, ws in ((512, (4,)), (1024, (4, 8)), (2048, (4, 8, 16)),
                                                              (4096, (8, 16)))
             for w in ws for late in (False, True)]  # fmt: skip
ADD_512 = [(1, 8, True, 1), (1, 16, False, 0, True), (1, 4, False, 0, True, 1024), (1, 8, False, 0, True, 2048),
           (1, 16, False, 0, True, 4096)]  # fmt: skip

if __name__ == "__main__":
    rng = random.Random(13)
    for cands, tokens in (
        ({"fused_add_rms_norm": ADD_8192}, {"fused_add_rms_norm": [8192]}),
        ({"fused_add_rms_norm": ADD_512}, {"fused_add_rms_norm": [512]}),
        ({"silu_mul": SILU_8}, {"silu_mul": [8]}),
        ({"silu_mul": SILU_512}, {"silu_mul": [512]}),
        ({"silu_mul": SILU_8192}, {"silu_mul": [8192]}),
    ):
        bench.sweep_rows(ROUNDS, [], rng, {}, candidates=cands, tokens_by_op=tokens)
