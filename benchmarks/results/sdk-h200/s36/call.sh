#!/bin/bash
# Session 36, one call on the lent GPU (a clean export of main in gpu/s36 with .whl, carried by the run tool):
#   cd gpu/s36 && SUITE_S=300 BENCH_S=150 RO_S=150 DEF_S=0 bash benchmarks/results/sdk-h200/s36/call.sh
# Steps, each skipped when its budget is 0:
#   SUITE_S  the kernel suite at HEAD (or SUITE_TESTS) (session 35's selection: less the CLI, compile-event, public-API and memcheck
#            files, which need the store), failures written as they happen by s34/failures_now.py;
#   BENCH_S  bench_kernels.py, paged attention (no Flex) and the row ops, 10 rounds each, against their peers;
#   RO_S     bench_sdk_study.py, reduce-overhead, 16 fresh processes (session 21's protocol), budget RO_S seconds;
#   DEF_S    the same study in the default mode.
set -o pipefail
export PYTHONUNBUFFERED=1 INFERENSICS_JOURNAL_DIR=off
ROOT=$PWD
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
mkdir -p /tmp/ns33 && ln -sfn "$ROOT" /tmp/ns33/inferensics
export PYTHONPATH=/tmp/site:/tmp/ns33:$ROOT:$ROOT/benchmarks/results/sdk-h200/s34  # failures_now.py
W=(-W "ignore::DeprecationWarning" -W "ignore::FutureWarning" -W "ignore::UserWarning")
{ date -u; nproc; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
  python3 -c "import torch, triton; print(torch.__version__, triton.__version__)"; } > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
if [ "${SUITE_S:-300}" != 0 ]; then
  FAIL_LOG=$OUT/failures.log TORCHINDUCTOR_COMPILE_THREADS=1 timeout ${SUITE_S:-300} python3 -m pytest -v --tb=short -rfE -p failures_now --durations=12 -p no:cacheprovider -n 12 "${W[@]}" ${SUITE_TESTS:-tests/kernels} \
    --ignore=tests/kernels/test_cli.py --ignore=tests/kernels/test_compile_events.py --ignore=tests/kernels/test_public_api.py \
    --ignore=tests/kernels/test_memcheck.py > "$OUT/kernels.log" 2>&1
  echo "kernels rc=$?"; grep -E " (FAILED|ERROR) |passed|failed" "$OUT/kernels.log" | tail -25; grep "^== " "$OUT/failures.log"
fi
if [ "${BENCH_S:-0}" != 0 ]; then
  timeout ${BENCH_S} python3 benchmarks/bench_kernels.py --rounds 10 --only attention --no-flex > "$OUT/bench_attention.log" 2>&1
  echo "attention bench rc=$?"; grep -A14 "^# targets" "$OUT/bench_attention.log"
  timeout ${BENCH_S} python3 benchmarks/bench_kernels.py --rounds 10 --only elementwise > "$OUT/bench_rows.log" 2>&1
  echo "rows bench rc=$?"; grep -A20 "^# targets" "$OUT/bench_rows.log"
fi
STUDY=(--device cuda --hidden 4096 --layers 4 --tokens 8 --dtype bfloat16 --vocab 32000 --decode-steps 64
       --no-control --fork --reqs 4 --rounds 2 --warmup-rounds 1 --bursts 4 --interleave --blocks 8 --block-reqs 6 --aa)
cd "$ROOT/benchmarks"; export PYTHONPATH=$PYTHONPATH:$ROOT/benchmarks PYTORCH_NVML_BASED_CUDA_CHECK=1
if [ "${RO_S:-0}" != 0 ]; then
  TORCHINDUCTOR_COMPILE_THREADS=1 timeout $((RO_S + 40)) python3 bench_sdk_study.py "${STUDY[@]}" --mode reduce-overhead --procs 16 \
    --seed ${SEED_RO:-361} --budget-s $RO_S --jsonl "$OUT/study_ro.jsonl" > "$OUT/study_ro.log" 2>&1
  echo "study ro rc=$?"; grep -A10 "^TARGETS" "$OUT/study_ro.log"
fi
if [ "${DEF_S:-0}" != 0 ]; then
  TORCHINDUCTOR_COMPILE_THREADS=1 timeout $((DEF_S + 40)) python3 bench_sdk_study.py "${STUDY[@]}" --blocks 16 --mode default --procs 16 \
    --seed ${SEED_DEF:-362} --budget-s $DEF_S --jsonl "$OUT/study_default.jsonl" > "$OUT/study_default.log" 2>&1
  echo "study default rc=$?"; grep -A10 "^TARGETS" "$OUT/study_default.log"
fi
true
