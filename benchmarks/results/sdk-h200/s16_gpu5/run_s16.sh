#!/bin/bash
# Session 16 on the H200 (issue 25 point 10, engineer gpu5). STEPS picks: percall (diag_s16.py --part percall,
# both modes), tail (diag_s16.py --part tail, default mode), pilot (a short study), default / ro (the studies).
# Logs into $OUT as it goes; the TARGETS blocks last.
set -u
D=$(cd "$(dirname "$0")" && pwd)
HERE=$D/tree
OUT=${OUT:-/tmp/sdk-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1 PYTORCH_NVML_BASED_CUDA_CHECK=1
export PYTHONPATH="${PYTHONPATH:-}:$HERE:$HERE/benchmarks"
STEPS=${STEPS:-"percall tail"}
{
  date -u; nproc; uptime; lscpu | grep -iE "model name|numa|MHz|^CPU\(s\)"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
  cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null
} > "$OUT/env.txt" 2>&1
cd "$HERE/benchmarks"
STUDY=(--device cuda --hidden 4096 --layers 4 --tokens 8 --dtype bfloat16 --vocab 32000 --decode-steps 64
       --no-control --fork)
# The two studies (session 16): both protocols in every process, 2 x BLOCKS blocks of 6 per variant (BLOCKS=8 ran), a true A/A.
FINAL=(--reqs 4 --rounds 2 --warmup-rounds 1 --bursts 4 --interleave --blocks ${BLOCKS:-10} --block-reqs 6 --aa)
for step in $STEPS; do
  echo "== $step $(date -u +%T) $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/env.txt"
  case $step in
    percall)
      timeout 150 python3 "$D/diag_s16.py" --part percall --mode default --bursts ${BURSTS:-60} --jsonl "$OUT/diag.jsonl" >> "$OUT/diag.log" 2>&1
      timeout 200 python3 "$D/diag_s16.py" --part percall --mode reduce-overhead --bursts ${BURSTS:-60} --jsonl "$OUT/diag.jsonl" >> "$OUT/diag.log" 2>&1 ;;
    tail)
      timeout 120 python3 "$D/diag_s16.py" --part tail --mode default --reqs ${TAIL_REQS:-40} --jsonl "$OUT/diag.jsonl" >> "$OUT/diag.log" 2>&1 ;;
    pilot)
      timeout $((${BUDGET_PILOT:-60} + 40)) python3 bench_sdk_study.py "${STUDY[@]}" --mode default --procs ${PROCS_PILOT:-3} \
        --reqs 20 --rounds 1 --warmup-rounds 1 --bursts 4 --interleave --blocks 20 --block-reqs 3 \
        --seed 161 --budget-s ${BUDGET_PILOT:-60} --jsonl "$OUT/pilot.jsonl" > "$OUT/pilot.log" 2>&1 ;;
    default)
      timeout $((${BUDGET_DEF:-240} + 40)) python3 bench_sdk_study.py "${STUDY[@]}" "${FINAL[@]}" --mode default --procs ${PROCS:-16} \
        --seed ${SEED_DEF:-162} --budget-s ${BUDGET_DEF:-240} --jsonl "$OUT/study_default.jsonl" > "$OUT/study_default.log" 2>&1 ;;
    ro)
      timeout $((${BUDGET_RO:-240} + 40)) python3 bench_sdk_study.py "${STUDY[@]}" "${FINAL[@]}" --mode reduce-overhead --procs ${PROCS_RO:-16} \
        --seed ${SEED_RO:-163} --budget-s ${BUDGET_RO:-240} --jsonl "$OUT/study_ro.jsonl" > "$OUT/study_ro.log" 2>&1 ;;
  esac
  echo "   $step rc=$? $(date -u +%T)" >> "$OUT/env.txt"
done
grep -h -A8 "^TARGETS" "$OUT"/study_*.log "$OUT"/pilot.log > "$OUT/targets.txt" 2>/dev/null
cat "$OUT/env.txt"; grep -v Warning "$OUT/diag.log" 2>/dev/null; cat "$OUT/targets.txt" 2>/dev/null
true
