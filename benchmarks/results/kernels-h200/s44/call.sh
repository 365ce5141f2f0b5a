#!/bin/bash
# Session 44, one call on the lent GPU: main exported as gpu/s44 (with .whl: pydantic and its kin), carried by the run tool:
#   cd gpu/s44 && SUITE_S=330 bash benchmarks/results/kernels-h200/s44/call.sh
# At 043b9f6, after 0eb1848 (an op's bucket function that raises served by the reference and counted, register(before=) checked first,
# qualify's own-code faults in one line): the eager-plan and dispatch tests, then the kernel suite less the store files.
export PYTHONUNBUFFERED=1 INFERENSICS_JOURNAL_DIR=off
ROOT=$PWD
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
W=(-W "ignore::DeprecationWarning" -W "ignore::FutureWarning" -W "ignore::UserWarning")
mkdir -p /tmp/ns && ln -sfn "$ROOT" /tmp/ns/inferensics
export PYTHONPATH=/tmp/site:/tmp/ns:$ROOT:$ROOT/benchmarks/results/sdk-h200/s34
{ date -u; nproc; nvidia-smi --query-gpu=name,driver_version --format=csv; python3 -c "import torch, triton; print(torch.__version__, triton.__version__)"; } > $OUT/env.txt; cat $OUT/env.txt
timeout ${PLANS_S:-150} python3 -m pytest -q -rfE -p no:cacheprovider "${W[@]}" tests/kernels/test_eager_plans.py \
  tests/kernels/test_direct_calls.py tests/kernels/test_nested_compile_decisions.py tests/kernels/test_eager_fast_path.py \
  tests/kernels/test_dispatch_checks.py tests/kernels/test_dynamic_bucket_policy.py tests/kernels/test_qualify_gate.py \
  tests/kernels/test_own_code_faults.py > $OUT/plans.log 2>&1; echo "plans rc=$?"; tail -6 $OUT/plans.log
if [ "${SUITE_S:-0}" != 0 ]; then
  FAIL_LOG=$OUT/failures.log TORCHINDUCTOR_COMPILE_THREADS=1 timeout $SUITE_S python3 -m pytest -q --tb=short -rfE -p failures_now -p no:cacheprovider -n 12 "${W[@]}" tests/kernels \
    --ignore=tests/kernels/test_cli.py --ignore=tests/kernels/test_compile_events.py --ignore=tests/kernels/test_public_api.py \
    --ignore=tests/kernels/test_memcheck.py --ignore=tests/kernels/test_qualify_store_retry.py --ignore=tests/kernels/test_cli_store_flags.py \
    --ignore=tests/kernels/test_cli_refusals.py > "$OUT/kernels.log" 2>&1
  echo "kernels rc=$?"; grep -E " (FAILED|ERROR) |passed|failed" "$OUT/kernels.log" | tail -25; grep "^== " "$OUT/failures.log" 2>/dev/null
fi
true
