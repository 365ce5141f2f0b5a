#!/bin/bash
# Lead's H200 visit, session 16, merged main: (1) the whole kernel suite (xdist 12) beside memcheck; (2) the
# default-mode study with the A/A control artifact (own backend through compile_fx, no counting wrapper).
set -o pipefail
export PYTHONUNBUFFERED=1
D=$(cd "$(dirname "$0")" && pwd); H=$D/tree
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $D/whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$H:$H/benchmarks
cd "$H"
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv; uptime; nproc; date -u
  python3 -c "import torch, triton, pydantic; print('torch', torch.__version__, 'triton', triton.__version__, 'pydantic', pydantic.__version__)"; } >"$OUT/env.log" 2>&1
if [ "${SUITE:-1}" = 1 ]; then
echo "== memcheck + suite $(date -u +%T)"
timeout "${MC_S:-150}" python3 -m pytest -q -p no:benchmark -rfEsP tests/kernels/test_memcheck.py >"$OUT/memcheck.log" 2>&1 &
MC=$!
TORCHINDUCTOR_COMPILE_THREADS=1 timeout "${SUITE_S:-220}" python3 -m pytest -v -p no:benchmark \
  -n 12 -rfEs --durations=10 tests/kernels \
  --ignore=tests/kernels/test_cli.py --ignore=tests/kernels/test_compile_events.py \
  --ignore=tests/kernels/test_public_api.py --ignore=tests/kernels/test_memcheck.py >"$OUT/suite.log" 2>&1
echo "# suite exit $? ($(date -u +%T)); per file:" >>"$OUT/suite.log"
grep -oE "(PASSED|FAILED|SKIPPED|ERROR) tests/kernels/[a-z_]+\.py" "$OUT/suite.log" | sort | uniq -c >>"$OUT/suite.log"
wait $MC; echo "# memcheck exit $? ($(date -u +%T))" >>"$OUT/memcheck.log"
tail -25 "$OUT/suite.log" | grep -vE " PASSED "; grep -E "ERROR SUMMARY|passed|failed|exit" "$OUT/memcheck.log" | tail -5
fi
if [ "${STUDY:-1}" = 1 ]; then
  echo "== control study $(date -u +%T)"
  cd "$H/benchmarks"
  export TORCHINDUCTOR_COMPILE_THREADS=1 PYTORCH_NVML_BASED_CUDA_CHECK=1
  timeout $((${BUDGET:-170} + 40)) python3 bench_sdk_study.py --device cuda --hidden 4096 --layers 4 --tokens 8 \
    --dtype bfloat16 --vocab 32000 --decode-steps 64 --fork --reqs 4 --rounds 2 --warmup-rounds 1 --bursts 4 \
    --interleave --blocks ${BLOCKS:-10} --block-reqs 6 --aa --mode default --procs "${PROCS:-8}" \
    --seed "${SEED:-164}" --budget-s "${BUDGET:-170}" --jsonl "$OUT/study_control.jsonl" >"$OUT/study_control.log" 2>&1
  echo "study rc=$? $(date -u +%T)"; grep -A12 "^TARGETS" "$OUT/study_control.log" | tail -24
fi
true
