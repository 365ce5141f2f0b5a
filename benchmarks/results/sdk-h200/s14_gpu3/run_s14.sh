#!/bin/bash
# Session 14 on the H200 (issue 25, point 10; engineer gpu3): STEPS picks what runs (gputest, diag, ro,
# default), in that order; each step under its own timeout, logs into $OUT as it goes.
# The studies run both timing protocols in every process: --interleave's request by request (the per-request
# tail) and --blocks' throughput protocol (blocks of BLOCK_REQS requests, flush + sync once per block).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/sdk-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1 PYTORCH_NVML_BASED_CUDA_CHECK=1
STEPS=${STEPS:-"gputest diag ro default"}
P=${PROCS:-16}; R=${REQS:-6}; NB=${BLOCKS:-5}; K=${BLOCK_REQS:-6}
{
  date -u; nproc; uptime; lscpu | grep -iE "model name|numa node0|MHz"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv
  python3 -c "import torch, triton, numpy, pydantic; print('torch', torch.__version__, 'triton', triton.__version__, 'numpy', numpy.__version__, 'pydantic', pydantic.__version__)"
} > "$OUT/env.txt" 2>&1
cd "$HERE/benchmarks"
COMMON=(--device cuda --hidden 4096 --layers 4 --tokens 8 --dtype bfloat16 --vocab 32000
        --decode-steps 64 --reqs "$R" --rounds 2 --warmup-rounds 1 --bursts 4 --procs "$P" --no-control --fork
        --interleave --blocks "$NB" --block-reqs "$K")
for step in $STEPS; do
  case $step in
    gputest)
      cd "$HERE" && timeout ${T_TEST:-150} python3 -m pytest -q -x -p no:cacheprovider tests/test_fingerprint.py \
        -k "compiled or synchronization or backlog" \
        > "$OUT/gpu_tests.log" 2>&1
      echo "gputest rc=$? $(date -u +%T)" >> "$OUT/env.txt"; cd "$HERE/benchmarks" ;;
    diag)
      PYTHONPATH="${PYTHONPATH:-}:$HERE/benchmarks" timeout ${T_DIAG:-90} python3 "$HERE/diag_fp_tail.py" \
        --mode reduce-overhead --reqs ${DIAG_REQS:-16} > "$OUT/diag_reduce-overhead.log" 2>&1
      echo "diag rc=$? $(date -u +%T)" >> "$OUT/env.txt" ;;
    ro)
      timeout $((${BUDGET_RO:-150} + 25)) python3 bench_sdk_study.py "${COMMON[@]}" --mode reduce-overhead \
        --seed ${SEED_RO:-51} --budget-s ${BUDGET_RO:-150} --jsonl "$OUT/study_ro.jsonl" > "$OUT/study_ro.log" 2>&1
      echo "reduce-overhead rc=$? $(date -u +%T)" >> "$OUT/env.txt" ;;
    default)
      timeout $((${BUDGET_DEF:-190} + 25)) python3 bench_sdk_study.py "${COMMON[@]}" --mode default \
        --seed ${SEED_DEF:-52} --budget-s ${BUDGET_DEF:-190} --jsonl "$OUT/study_default.jsonl" \
        > "$OUT/study_default.log" 2>&1
      echo "default rc=$? $(date -u +%T)" >> "$OUT/env.txt" ;;
  esac
done
grep -h -A6 "^TARGETS" "$OUT"/study_*.log > "$OUT/targets.txt" 2>/dev/null
cat "$OUT/env.txt"; tail -4 "$OUT/gpu_tests.log" 2>/dev/null; head -8 "$OUT/diag_reduce-overhead.log" 2>/dev/null
cat "$OUT/targets.txt" 2>/dev/null
true
