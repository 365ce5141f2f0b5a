#!/bin/bash
# Lead's final H200 visit, session 14: (1) the whole kernel suite on merged main (xdist 12, PDL compiled test
# included) beside memcheck; (2) optional SDK study (STUDY=default|ro|none).
set -o pipefail
export PYTHONUNBUFFERED=1
H=$(cd "$(dirname "$0")" && pwd)/tree
cd "$H"
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv; uptime; nproc; date -u
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; } >"$OUT/env.log" 2>&1
if [ "${SUITE:-1}" = 1 ]; then
echo "== memcheck + suite $(date -u +%T)"
timeout "${MC_S:-150}" python3 -m pytest -q -p no:cacheprovider -p no:benchmark -rfEsP tests/kernels/test_memcheck.py >"$OUT/memcheck.log" 2>&1 &
MC=$!
TORCHINDUCTOR_COMPILE_THREADS=1 timeout "${SUITE_S:-200}" python3 -m pytest -v -p no:cacheprovider -p no:benchmark \
  -n 12 -rfEs --durations=10 tests/kernels \
  --ignore=tests/kernels/test_cli.py --ignore=tests/kernels/test_compile_events.py \
  --ignore=tests/kernels/test_public_api.py --ignore=tests/kernels/test_memcheck.py >"$OUT/suite.log" 2>&1
echo "# suite exit $? ($(date -u +%T)); per file:" >>"$OUT/suite.log"
grep -oE "(PASSED|FAILED|SKIPPED|ERROR) tests/kernels/[a-z_]+\.py" "$OUT/suite.log" | sort | uniq -c >>"$OUT/suite.log"
wait $MC; echo "# memcheck exit $? ($(date -u +%T))" >>"$OUT/memcheck.log"
tail -25 "$OUT/suite.log" | grep -vE " PASSED "; grep -E "ERROR SUMMARY|passed|failed|exit" "$OUT/memcheck.log" | tail -5
fi
if [ "${STUDY:-none}" != none ]; then
  echo "== study $STUDY $(date -u +%T)"
  cd "$H/benchmarks"
  timeout $((${BUDGET:-150} + 20)) python3 bench_sdk_study.py --device cuda --hidden 4096 --layers 4 --tokens 8 \
    --dtype bfloat16 --vocab 32000 --decode-steps 64 --reqs 6 --rounds 2 --warmup-rounds 1 --bursts 4 \
    --procs "${PROCS:-16}" --no-control --fork --interleave --blocks 5 --block-reqs 6 --mode "$STUDY" \
    --seed "${SEED:-61}" --budget-s "${BUDGET:-150}" --jsonl "$OUT/study_$STUDY.jsonl" >"$OUT/study_$STUDY.log" 2>&1
  echo "study rc=$? $(date -u +%T)"; grep -A8 "^TARGETS" "$OUT/study_$STUDY.log" | tail -20
fi
echo "== done $(date -u +%T)"
