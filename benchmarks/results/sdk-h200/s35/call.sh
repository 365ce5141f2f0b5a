#!/bin/bash
# Session 35, one call on the lent GPU (a clean export of main in gpu/s35 with .whl, carried by the run tool):
#   cd gpu/s35 && MC_S=0 SUITE_S=420 WALK_S=0 DIAG_S=60 REG_S=60 bash benchmarks/results/sdk-h200/s35/call.sh
# Session 34's script (failures written as they happen by s34/failures_now.py) plus REG_S: the registry's eager
# cost on CUDA (bench_registry_dispatch.py: the public call, which now skips the dispatcher in plain eager, against
# torch.ops.inferensics.<op> and the provider called directly). The suite includes this session's dynamic-shape
# paged attention (one graph for every batch and context: tests/kernels/test_dynamic_shapes.py).
set -o pipefail
export PYTHONUNBUFFERED=1 INFERENSICS_JOURNAL_DIR=off
ROOT=$PWD
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
mkdir -p /tmp/ns33 && ln -sfn "$ROOT" /tmp/ns33/inferensics
export PYTHONPATH=/tmp/site:/tmp/ns33:$ROOT:$ROOT/benchmarks/results/sdk-h200/s34  # failures_now.py
W=(-W "ignore::DeprecationWarning" -W "ignore::FutureWarning" -W "ignore::UserWarning")
{ nvidia-smi --query-gpu=name,driver_version --format=csv; python3 -c "import torch, triton; print(torch.__version__, triton.__version__)"; } > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
[ "${MC_S:-300}" != 0 ] && timeout ${MC_S:-300} python3 -m pytest -q -p no:cacheprovider "${W[@]}" tests/kernels/test_memcheck.py > "$OUT/memcheck.log" 2>&1 &
MC=$!; [ "${MC_S:-300}" = 0 ] && MC=
FAIL_LOG=$OUT/failures.log TORCHINDUCTOR_COMPILE_THREADS=1 timeout ${SUITE_S:-320} python3 -m pytest -v --tb=short -rfE -p failures_now --durations=12 -p no:cacheprovider -n 12 "${W[@]}" tests/kernels \
  --ignore=tests/kernels/test_cli.py --ignore=tests/kernels/test_compile_events.py --ignore=tests/kernels/test_public_api.py \
  --ignore=tests/kernels/test_memcheck.py > "$OUT/kernels.log" 2>&1
echo "kernels rc=$?"; grep -cE " PASSED " "$OUT/kernels.log"; grep -E " (FAILED|ERROR) |passed|failed" "$OUT/kernels.log" | tail -25; grep "^== " "$OUT/failures.log"
[ -n "$MC" ] && wait $MC; echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|passed|failed" "$OUT/memcheck.log" | tail -3
if [ "${REG_S:-0}" != 0 ]; then  # session 35: the registry's eager cost on CUDA (public call vs dispatcher vs direct)
  timeout ${REG_S} python3 benchmarks/bench_registry_dispatch.py --device cuda --dtype bfloat16 --rounds 9 2>&1 | grep -v Warn | tee "$OUT/registry.log" | tail -8
fi
if [ "${WALK_S:-150}" != 0 ]; then
  timeout ${WALK_S:-150} env SUITE=0 STOP_AFTER_HOST=1 OUT=$OUT/walk bash benchmarks/results/bundle-h200/s31_walk.sh > "$OUT/walk.log" 2>&1
  echo "walk rc=$?"; grep -E "^== |rc=|error:|verified|SymInt|timed as|median|Error|kernel evidence" "$OUT/walk.log" | head -40
fi
if [ "${SALT_S:-0}" != 0 ]; then
  echo "== cache keyed on providers (expect '2.0 0', '2.0 1', '3.0 0')"
  for p in twice_fresh twice_fresh thrice_fresh; do TORCHINDUCTOR_CACHE_DIR=/tmp/salt33 timeout ${SALT_S} python3 -m tests.kernels.planted_providers $p 2>&1 | tail -1; done
fi
if [ "${DIAG_S:-0}" != 0 ]; then  # issue 25: where a flush's tail goes (imports bench_sdk_overhead from benchmarks/)
  cd "$ROOT/benchmarks" && PYTHONPATH=$PYTHONPATH:$ROOT/benchmarks timeout ${DIAG_S} python3 results/sdk-h200/s31_lead/diag_tail.py \
    --mode reduce-overhead --reps ${REPS:-10} 2>&1 | grep -v Warning | tee "$OUT/diag_tail.log" | tail -30
fi
