#!/bin/bash
# Session 15's second H200 visit (rows4): the two cells with the memory placement varied (s15_rows_placement.py:
# 4 independent allocations a provider, A/A across placements), with this branch's table (SiLU·mul at 8 tokens:
# the hardware exp); the GPU tests of the SiLU·mul table entries (bit-exact on every sample, exhaustive over every
# bf16 gate); the bench's 8-token cells with 200 calls a graph. Each step under its own limit, logs to $OUT.
set -o pipefail
export PYTHONUNBUFFERED=1
END=$((SECONDS + ${BUDGET_S:-70}))
cap() { local l=$((END - SECONDS)); echo $(( l < $1 ? (l > 5 ? l : 5) : $1 )); }
D=benchmarks/results/kernels-h200
export TORCHINDUCTOR_CACHE_DIR=/tmp/ind15; mkdir -p $TORCHINDUCTOR_CACHE_DIR
echo "== placement ($(date -u +%T), load $(cut -d' ' -f1 /proc/loadavg))"
timeout $(cap 35) python3 $D/s15_rows_placement.py 4 100 300 2>&1 | tee "$OUT/s15_rows_placement.log" | grep -vE "set 0 (inductor|old|new|serving): ok"
echo "== GPU tests of the SiLU·mul table ($(date -u +%T))"
timeout $(cap 25) python3 -m pytest -q -p no:benchmark tests/kernels/test_silu_exhaustive.py tests/kernels/test_row_configs.py \
  -k "table" 2>&1 | tee "$OUT/s15_rows_silu_tests.log" | tail -4
echo "== bench 8 tokens ($(date -u +%T))"
timeout $(cap 30) python3 benchmarks/bench_kernels.py --rounds 200 --calls 200 --only elementwise --tokens 8 2>&1 \
  | tee "$OUT/s15_rows_bench_t8.log" | grep -E "^(silu|fused|rms|rot)" | grep -vE "eager"
echo "== done ($(date -u +%T))"
