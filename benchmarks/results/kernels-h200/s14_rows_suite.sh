#!/bin/bash
# Session 14's second H200 visit (rows3): the whole kernel test suite on the GPU with the shipped tables, under
# pytest-xdist (12 workers; the pytest-benchmark plugin off: it warns under xdist, and warnings are errors here).
# test_memcheck.py ran in the first visit (s14_rows_run.sh). Run from gpu/rows3/ in /work/main, with $OUT set.
# Session 14 ran it with SUITE_S=100 (cut after 197 of 252 tests, all passed, in -q mode: which ones not known);
# it now prints one line a test (-v) and per-file counts at the end, so a cut run still says what ran. The whole
# suite needs more than 100 s on 12 workers: give it SUITE_S=240.
set -o pipefail
export PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv; uptime; date -u; } \
  >"$OUT/s14_rows_suite_env.log" 2>&1
TORCHINDUCTOR_COMPILE_THREADS=1 timeout "${SUITE_S:-240}" python3 -m pytest -v -p no:cacheprovider -p no:benchmark \
  -n 12 -rfEs --durations=10 tests/kernels \
  --ignore=tests/kernels/test_cli.py --ignore=tests/kernels/test_compile_events.py \
  --ignore=tests/kernels/test_public_api.py --ignore=tests/kernels/test_memcheck.py 2>&1 \
  | tee "$OUT/s14_rows_differential.log" | grep -vE "^\[gw[0-9]+\].* PASSED " | tail -30
echo "# suite exit $? ($(date -u +%T)); per file:" | tee -a "$OUT/s14_rows_differential.log"
grep -oE "(PASSED|FAILED|SKIPPED|ERROR) tests/kernels/[a-z_]+\.py" "$OUT/s14_rows_differential.log" | sort | uniq -c \
  | tee -a "$OUT/s14_rows_differential.log"
if [ -n "${BENCH_S:-}" ]; then  # a second bench of the 12 row cells with the shipped tables, when time allows
  timeout "$BENCH_S" python3 benchmarks/bench_kernels.py --rounds 10 --only elementwise 2>&1 \
    | tee "$OUT/s14_rows_bench2.log" | grep -E "^(fused_add|silu_mul|rms_norm|rotary)\S* +(vs|tokens=\S+ +inductor)"
fi
