#!/bin/bash
# Session 13 on the H200 (issue 25, point 10): STEPS picks what runs (diag, ro, default), in that order;
# each step under its own timeout, logs into $OUT as it goes.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/sdk-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1 PYTORCH_NVML_BASED_CUDA_CHECK=1
STEPS=${STEPS:-"diag ro default"}
B=${BUDGET_S:-90}; P=${PROCS:-16}; R=${REQS:-6}
{
  date -u; nproc; uptime; lscpu | grep -iE "model name|numa node0|MHz"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv
  python3 -c "import torch, triton, numpy, pydantic; print('torch', torch.__version__, 'triton', triton.__version__, 'numpy', numpy.__version__, 'pydantic', pydantic.__version__)"
} > "$OUT/env.txt" 2>&1
cd "$HERE/benchmarks"
COMMON=(--device cuda --hidden 4096 --layers 4 --tokens 8 --dtype bfloat16 --vocab 32000
        --decode-steps 64 --reqs "$R" --rounds 2 --warmup-rounds 1 --bursts 4 --procs "$P" --no-control --fork
        --interleave --budget-s "$B")
for step in $STEPS; do
  case $step in
    diag)
      for m in reduce-overhead default; do
        PYTHONPATH="${PYTHONPATH:-}:$HERE/benchmarks" timeout 100 python3 "$HERE/diag_fp_tail.py" --mode $m --reqs 20 > "$OUT/diag_$m.log" 2>&1
        echo "diag $m rc=$? $(date -u +%T)" >> "$OUT/env.txt"
      done ;;
    ro)
      timeout $((B + 60)) python3 bench_sdk_study.py "${COMMON[@]}" --mode reduce-overhead --seed ${SEED_RO:-41} \
        --jsonl "$OUT/study_ro.jsonl" > "$OUT/study_ro.log" 2>&1
      echo "reduce-overhead rc=$? $(date -u +%T)" >> "$OUT/env.txt" ;;
    default)
      timeout $((B + 60)) python3 bench_sdk_study.py "${COMMON[@]}" --reqs "${REQS_DEF:-$R}" --mode default --seed ${SEED_DEF:-42} \
        --jsonl "$OUT/study_default.jsonl" > "$OUT/study_default.log" 2>&1
      echo "default rc=$? $(date -u +%T)" >> "$OUT/env.txt" ;;
    gputest)
      cd "$HERE" && timeout 120 python3 -m pytest -q -x -p no:cacheprovider tests/test_fingerprint.py \
        -k "compiled or synchronization or backlog or zero_copy or written or flush_builds or round_trip" \
        > "$OUT/gpu_tests.log" 2>&1
      echo "gputest rc=$? $(date -u +%T)" >> "$OUT/env.txt"; cd "$HERE/benchmarks" ;;
  esac
done
grep -h -A7 "^TARGETS" "$OUT"/study_*.log > "$OUT/targets.txt" 2>/dev/null
true
