#!/bin/bash
# Session 41, one call on the lent GPU. main exported as gpu/s41 (with .whl), and the commit before this session's
# kernel registry changes (2551dca) as gpu/s41h, both carried by the run tool:
#   cd gpu/s41 && SUITE_S=400 bash benchmarks/results/kernels-h200/s41/call.sh
# After 62f8150 (dispatch keys that widen for checks reading scalars or alignment, qualify running providers on copies,
# a bucket's shapes decided together): the eager-plan tests, the kernel suite (test_qualify's CUDA-graph timing tests
# among them), then the registry's dispatch cost on the device, this tree against gpu/s41h alternately (ROUNDS each).
export PYTHONUNBUFFERED=1 INFERENSICS_JOURNAL_DIR=off
ROOT=$PWD
HEAD_TREE=${HEAD_TREE:-$ROOT/../s41h}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
W=(-W "ignore::DeprecationWarning" -W "ignore::FutureWarning" -W "ignore::UserWarning")
use_tree() { mkdir -p /tmp/ns && ln -sfn "$1" /tmp/ns/inferensics; export PYTHONPATH=/tmp/site:/tmp/ns:$1:$1/benchmarks/results/sdk-h200/s34; }
use_tree "$ROOT"
{ date -u; nproc; nvidia-smi --query-gpu=name,driver_version --format=csv; python3 -c "import torch, triton; print(torch.__version__, triton.__version__)"; } > $OUT/env.txt; cat $OUT/env.txt
timeout ${PLANS_S:-150} python3 -m pytest -q -rfE -p no:cacheprovider "${W[@]}" tests/kernels/test_eager_plans.py \
  tests/kernels/test_direct_calls.py tests/kernels/test_nested_compile_decisions.py tests/kernels/test_eager_fast_path.py \
  tests/kernels/test_dispatch_checks.py tests/kernels/test_dynamic_bucket_policy.py tests/kernels/test_qualify_gate.py \
  > $OUT/plans.log 2>&1; echo "plans rc=$?"; tail -6 $OUT/plans.log
if [ "${SUITE_S:-0}" != 0 ]; then
  FAIL_LOG=$OUT/failures.log TORCHINDUCTOR_COMPILE_THREADS=1 timeout $SUITE_S python3 -m pytest -q --tb=short -rfE -p failures_now -p no:cacheprovider -n 12 "${W[@]}" tests/kernels \
    --ignore=tests/kernels/test_cli.py --ignore=tests/kernels/test_compile_events.py --ignore=tests/kernels/test_public_api.py \
    --ignore=tests/kernels/test_memcheck.py --ignore=tests/kernels/test_qualify_store_retry.py --ignore=tests/kernels/test_cli_store_flags.py \
    --ignore=tests/kernels/test_cli_refusals.py > "$OUT/kernels.log" 2>&1
  echo "kernels rc=$?"; grep -E " (FAILED|ERROR) |passed|failed" "$OUT/kernels.log" | tail -25; grep "^== " "$OUT/failures.log" 2>/dev/null
fi
if [ "${BENCH:-1}" != 0 ]; then
  for r in 1 2; do
    for tree in now head; do
      if [ $tree = now ]; then use_tree "$ROOT"; else use_tree "$HEAD_TREE"; fi
      (cd /tmp/ns/inferensics && timeout ${BENCH_S:-60} python3 -W ignore benchmarks/bench_registry_dispatch.py --device cuda --dtype bfloat16 \
        --rounds ${ROUNDS:-5}) > $OUT/registry_${tree}_$r.log 2>&1; echo "reg $tree $r rc=$?"; tail -8 $OUT/registry_${tree}_$r.log
    done
  done
  use_tree "$ROOT"
fi
true
