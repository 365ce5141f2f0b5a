#!/bin/bash
# Session 35, second call: the kernel tests that failed in the first, after their fixes (and the compile-id fix).
set -o pipefail
export PYTHONUNBUFFERED=1 INFERENSICS_JOURNAL_DIR=off
ROOT=$PWD
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
mkdir -p /tmp/ns33 && ln -sfn "$ROOT" /tmp/ns33/inferensics
export PYTHONPATH=/tmp/site:/tmp/ns33:$ROOT:$ROOT/benchmarks/results/sdk-h200/s34
W=(-W "ignore::DeprecationWarning" -W "ignore::FutureWarning" -W "ignore::UserWarning")
FAIL_LOG=$OUT/failures2.log TORCHINDUCTOR_COMPILE_THREADS=1 timeout ${SUITE_S:-300} python3 -m pytest -v --tb=short -rfE -p failures_now -p no:cacheprovider -n 8 "${W[@]}" \
  ${TESTS:-tests/kernels/test_dynamic_shapes.py tests/kernels/test_eager_fast_path.py} > "$OUT/kernels2.log" 2>&1
echo "rc=$?"; grep -E " (FAILED|ERROR) |passed|failed" "$OUT/kernels2.log" | tail -15; grep "^== " "$OUT/failures2.log" 2>/dev/null
