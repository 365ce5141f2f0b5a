#!/bin/bash
# Session 40, one call on the lent GPU (main exported as gpu/s40 with .whl, carried by the run tool):
#   cd gpu/s40 && SUITE_S=420 PROBE=0 BENCH=0 bash benchmarks/results/kernels-h200/s40/call.sh
# After this session's changes (kernels qualify: the reference winning takes out every provider it beats as clearly;
# the host SDK's exporter holding records in an outage; replay's verdicts): the eager-plan and direct-call tests, the
# SDK's CUDA tests, and the kernel suite (SUITE_S seconds; test_qualify's CUDA-graph timing tests among them).
export PYTHONUNBUFFERED=1 INFERENSICS_JOURNAL_DIR=off
ROOT=$PWD
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
mkdir -p /tmp/ns && ln -sfn "$ROOT" /tmp/ns/inferensics
export PYTHONPATH=/tmp/site:/tmp/ns:$ROOT:$ROOT/benchmarks/results/sdk-h200/s34
{ date -u; nproc; nvidia-smi --query-gpu=name,driver_version --format=csv; python3 -c "import torch, triton; print(torch.__version__, triton.__version__)"; } > $OUT/env.txt; cat $OUT/env.txt
W=(-W "ignore::DeprecationWarning" -W "ignore::FutureWarning" -W "ignore::UserWarning")
timeout ${PLANS_S:-150} python3 -m pytest -q -rfE -p no:cacheprovider "${W[@]}" tests/kernels/test_eager_plans.py \
  tests/kernels/test_direct_calls.py tests/kernels/test_nested_compile_decisions.py tests/kernels/test_eager_fast_path.py \
  > $OUT/plans.log 2>&1; echo "plans rc=$?"; tail -6 $OUT/plans.log
timeout ${SDK_S:-150} python3 -m pytest -q -rfE -p no:cacheprovider "${W[@]}" tests/collector/host/test_fingerprint.py \
  tests/collector/host/test_graph_counts.py -k "not store" > $OUT/sdk_cuda.log 2>&1; echo "sdk rc=$?"; tail -6 $OUT/sdk_cuda.log
if [ "${PROBE:-1}" != 0 ]; then
  timeout 150 python3 -W ignore benchmarks/results/kernels-h200/s37/probe_eager.py > $OUT/probe.log 2>&1; echo "probe rc=$?"
  grep -E "^===|us/call" $OUT/probe.log
fi
if [ "${BENCH:-1}" != 0 ]; then
  timeout 150 python3 -W ignore benchmarks/bench_registry_dispatch.py --device cuda --dtype bfloat16 --rounds ${ROUNDS:-5} > $OUT/registry.log 2>&1
  echo "reg rc=$?"; cat $OUT/registry.log | tail -30
fi
if [ "${SUITE_S:-0}" != 0 ]; then
  FAIL_LOG=$OUT/failures.log TORCHINDUCTOR_COMPILE_THREADS=1 timeout $SUITE_S python3 -m pytest -q --tb=short -rfE -p failures_now -p no:cacheprovider -n 12 "${W[@]}" tests/kernels \
    --ignore=tests/kernels/test_cli.py --ignore=tests/kernels/test_compile_events.py --ignore=tests/kernels/test_public_api.py \
    --ignore=tests/kernels/test_memcheck.py --ignore=tests/kernels/test_qualify_store_retry.py --ignore=tests/kernels/test_cli_store_flags.py > "$OUT/kernels.log" 2>&1
  echo "kernels rc=$?"; grep -E " (FAILED|ERROR) |passed|failed" "$OUT/kernels.log" | tail -25; grep "^== " "$OUT/failures.log" 2>/dev/null
fi
true
