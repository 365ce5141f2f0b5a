"""Session 12's second H200 sweep: the cells still below 1.0x after the first (SiLU·mul at 8 tokens, SiLU·mul and
add+RMSNorm at 8192), narrowed to the candidates the first sweep pointed at. Run from the repository root:

    python3 benchmarks/results/kernels-h200/s12_rows_sweep2.py
"""

import random
import sys

sys.path.insert(0, "benchmarks")
import bench_kernels as bench

SILU = [
    (1024, 8, 1, False, False, 0),  # run 1's picks, for reference
    (1024, 4, 2, True, True, 1),
    (2048, 4, 2, True, True, 0),
    # 8 tokens: one wave, latency-bound: fewer elements a thread, no branches (fast division), bf16 multiply
    (1024, 8, 1, False, True, 0),
    (1024, 16, 1, False, True, 0),
    (1024, 16, 0, False, False, 0),
    (512, 8, 1, False, True, 0),
    (512, 4, 1, False, True, 0),
    (1024, 8, 0, False, True, 0),
    (2048, 16, 1, False, True, 0),
    # 512 / 8192: 16-32 elements a thread won run 1; the (rows, blocks) grid won for the IEEE kernel
    (2048, 4, 2, False, True, 0),
    (2048, 4, 2, True, True, 1),
    (2048, 4, 2, False, True, 1),
    (1024, 2, 2, True, True, 0),
    (2048, 2, 2, True, True, 0),
    (4096, 4, 2, True, True, 0),
    (1024, 4, 2, False, True, 1),
]
ADD_RMS = [
    (1, 16, False, 0),  # run 1's pick
    (1, 16, False, 0, True),
    (1, 32, False, 0),
    (1, 32, False, 0, True),
    (1, 8, False, 0, True),
    (1, 16, True, 0, True),
    (1, 16, False, 1, True),
]

if __name__ == "__main__":
    bench.sweep_rows(
        5,
        [],
        random.Random(0),
        {},
        candidates={"silu_mul": SILU, "fused_add_rms_norm": ADD_RMS},
        tokens_by_op={"silu_mul": [8, 512, 8192], "fused_add_rms_norm": [8192]},
    )
