#!/bin/bash
# Session 14's one H200 visit (rows3): Inductor's code and chosen config for add+RMSNorm at 8192 tokens + our
# candidates swept against it -> merge into the launch tables -> bench (all 12 row cells) -> the whole kernel test
# suite (pytest-xdist, 8 workers, Inductor compiling in-process) beside test_memcheck.py (compute-sanitizer
# memcheck over every Triton kernel).
# Run from a tree holding inferensics/ (kernels, schema), benchmarks/ and tests/ (gpu/rows3/ in /work/main), with
# $OUT set; every step under its own time limit, each log written as it goes. (Session 14 ran it without
# -p no:benchmark: the image's pytest-benchmark warns under xdist and the warning is an error here, so the suite
# stopped at configuration; s14_rows_suite.sh ran it in a second visit.)
set -o pipefail
export PYTHONUNBUFFERED=1
END=$((SECONDS + ${BUDGET_S:-255}))
left() { echo $((END - SECONDS)); }
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv; uptime;
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)";
  python3 -c "import xdist; print('pytest-xdist', xdist.__version__)"; nproc; date -u; } >"$OUT/s14_rows_env.log" 2>&1
echo "== sweep ($(date -u +%T))"
mkdir -p /tmp/ind14
TORCHINDUCTOR_CACHE_DIR=/tmp/ind14 timeout 80 python3 benchmarks/results/kernels-h200/s14_rows_sweep.py 15 "$OUT" 2>&1 \
  | tee "$OUT/s14_rows_sweep.log" | grep -E "^(##|TABLE |# inductor kernel|#   (LAUNCHED|offered|chosen)|# best_config|# ours)"
python3 benchmarks/results/kernels-h200/s14_rows_merge_tables.py "$OUT/s14_rows_sweep.log" \
  inferensics/kernels/_triton/h200_tables.json "$OUT/h200_tables.json"
echo "== bench ($(date -u +%T), $(left) s left)"
timeout 75 python3 benchmarks/bench_kernels.py --rounds 10 --only elementwise 2>&1 | tee "$OUT/s14_rows_bench.log" \
  | grep -vE "^ +\(|autotuned|^    "
echo "== suite + memcheck ($(date -u +%T), $(left) s left)"
T=$(($(left) - 4))
timeout $T python3 -m pytest -q -p no:cacheprovider -rfEsP tests/kernels/test_memcheck.py >"$OUT/s14_rows_memcheck.log" 2>&1 &
MC=$!
TORCHINDUCTOR_COMPILE_THREADS=1 timeout $T python3 -m pytest -q -p no:cacheprovider -p no:benchmark -n 8 -rfEs --durations=15 tests/kernels \
  --ignore=tests/kernels/test_cli.py --ignore=tests/kernels/test_compile_events.py \
  --ignore=tests/kernels/test_public_api.py --ignore=tests/kernels/test_memcheck.py 2>&1 \
  | tee "$OUT/s14_rows_differential.log" | tail -25
echo "# suite exit $?" | tee -a "$OUT/s14_rows_differential.log"
wait $MC; echo "# memcheck test exit $?" >>"$OUT/s14_rows_memcheck.log"
grep -E "passed|failed|ERROR SUMMARY|samples|launches|exit" "$OUT/s14_rows_memcheck.log" | tail -14
echo "== done ($(date -u +%T), $(left) s left)"
