#!/bin/bash
# Session 15's one H200 visit (rows4): the two row cells left at "1.00x" (add+RMSNorm 8192, SiLU·mul 8) measured
# with the power to tell a 0.5 % gap from noise (A/A controls, hundreds of rounds, 95 % intervals of the median
# per-round ratio) beside launch-parameter candidates; then all 12 row cells by bench_kernels.py with many rounds
# (small shapes: 200 calls a graph, so the graph launch is amortised); then compute-sanitizer memcheck over every
# candidate configuration. Run from a tree holding inferensics/ (kernels, schema), benchmarks/ and tests/ (gpu/rows4/
# in /work/main), with $OUT set; every step under its own time limit, each log written as it goes.
set -o pipefail
export PYTHONUNBUFFERED=1
END=$((SECONDS + ${BUDGET_S:-215}))
cap() { local l=$((END - SECONDS)); echo $(( l < $1 ? (l > 5 ? l : 5) : $1 )); }
D=benchmarks/results/kernels-h200
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv; uptime;
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; nproc; date -u;
} >"$OUT/s15_rows_env.log" 2>&1
export TORCHINDUCTOR_CACHE_DIR=/tmp/ind15; mkdir -p $TORCHINDUCTOR_CACHE_DIR
echo "== cells ($(date -u +%T))"
timeout $(cap 75) python3 $D/s15_rows_cells.py 300 400 200 2>&1 | tee "$OUT/s15_rows_cells.log" | grep -E "^(##|   |# (silu|incumb|serving))"
echo "== bench 8,512 tokens ($(date -u +%T))"
timeout $(cap 50) python3 benchmarks/bench_kernels.py --rounds 200 --calls 200 --only elementwise --tokens 8,512 2>&1 \
  | tee "$OUT/s15_rows_bench_small.log" | grep -vE "^ +\(|autotuned|^    |eager|measured table"
echo "== bench 8192 tokens ($(date -u +%T))"
timeout $(cap 50) python3 benchmarks/bench_kernels.py --rounds 150 --calls 20 --only elementwise --tokens 8192 2>&1 \
  | tee "$OUT/s15_rows_bench_8192.log" | grep -vE "^ +\(|autotuned|^    |eager|measured table"
echo "== memcheck of the candidates ($(date -u +%T))"
T=$(which compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
INFERENSICS_KERNELS_FIXED_CONFIG=1 PYTHONPATH=$PYTHONPATH:$PWD timeout $(cap 60) $T --tool memcheck --leak-check no \
  python3 $D/s15_rows_memcheck_driver.py >"$OUT/s15_rows_memcheck.log" 2>&1
echo "# exit $?" >>"$OUT/s15_rows_memcheck.log"; tail -4 "$OUT/s15_rows_memcheck.log"
echo "== done ($(date -u +%T))"
