#!/bin/bash
# Session 38, one call on the lent GPU (main exported as gpu/s38 with .whl, carried by the run tool):
#   cd gpu/s38 && bash benchmarks/results/kernels-h200/s38/call.sh
# On an H200: issue 25's default-mode study first (sdk-h200/s38/call.sh, DEF_S seconds), then the eager-plan tests
# and the registry bench. On another card: the eager-plan tests, the kernel suite (SUITE_S seconds), the eager probe
# (s37/probe_eager.py: direct = the plan path now) and the registry bench (direct, body, op, ...).
export PYTHONUNBUFFERED=1 INFERENSICS_JOURNAL_DIR=off
ROOT=$PWD
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
mkdir -p /tmp/ns && ln -sfn "$ROOT" /tmp/ns/inferensics
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv; python3 -c "import torch, triton; print(torch.__version__, triton.__version__)"; } > $OUT/env.txt; cat $OUT/env.txt
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
W=(-W "ignore::DeprecationWarning" -W "ignore::FutureWarning" -W "ignore::UserWarning")
plans() {
  PYTHONPATH=/tmp/site:/tmp/ns:$ROOT timeout ${1:-120} python3 -m pytest -q -rfE -p no:cacheprovider "${W[@]}" \
    tests/kernels/test_eager_plans.py tests/kernels/test_direct_calls.py > $OUT/plans.log 2>&1; echo "plans rc=$?"; tail -15 $OUT/plans.log
}
bench() {
  PYTHONPATH=/tmp/site:/tmp/ns:$ROOT timeout 150 python3 -W ignore benchmarks/bench_registry_dispatch.py --device cuda --dtype bfloat16 --rounds ${ROUNDS:-7} > $OUT/registry.log 2>&1; echo "reg rc=$?"; cat $OUT/registry.log
}
if [[ "$name" == *H200* ]]; then
  DEF_S=${DEF_S:-360} bash benchmarks/results/sdk-h200/s38/call.sh
  plans 60; ROUNDS=5 bench
  exit 0
fi
plans 120
if [ "${PROBE:-1}" != 0 ]; then
  PYTHONPATH=/tmp/site:/tmp/ns:$ROOT timeout 150 python3 -W ignore benchmarks/results/kernels-h200/s37/probe_eager.py > $OUT/probe.log 2>&1; echo "probe rc=$?"
  grep -E "^===|us/call" $OUT/probe.log
fi
[ "${BENCH:-1}" != 0 ] && bench
SUITE_S=${SUITE_S:-0} BENCH_S=0 RO_S=0 DEF_S=0 bash benchmarks/results/sdk-h200/s36/call.sh
