#!/bin/bash
# Session 15 on the H200 (issue 25 point 10, engineer gpu4). STEPS picks: diag (micro + blocks, pinned and
# not), default (the study, --mode default), ro (the study, --mode reduce-overhead). Logs into $OUT as it goes.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)/tree
OUT=${OUT:-/tmp/sdk-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1 PYTORCH_NVML_BASED_CUDA_CHECK=1
export PYTHONPATH="${PYTHONPATH:-}:$HERE:$HERE/benchmarks"
STEPS=${STEPS:-"diag"}
snap() { echo "== $1 $(date -u +%T)"; uptime; head -1 /proc/stat; grep -E "^cpu(0|8|9) " /proc/stat; }
{
  date -u; nproc; uptime; lscpu | grep -iE "model name|numa|MHz|^CPU\(s\)"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
  awk 'NR==1{print "interrupts header cols", NF} NR>1{s0+=$2; s8+=$10} END{print "irq total cpu0", s0, "cpu8", s8}' /proc/interrupts
} > "$OUT/env.txt" 2>&1
cd "$HERE/benchmarks"
COMMON=(--device cuda --hidden 4096 --layers 4 --tokens 8 --dtype bfloat16 --vocab 32000
        --decode-steps 64 --reqs 6 --rounds 2 --warmup-rounds 1 --bursts ${BURSTS:-8} --no-control
        --fork --interleave --blocks ${BLOCKS:-5} --block-reqs 6)
for step in $STEPS; do
  case $step in
    diag)
      snap micro >> "$OUT/env.txt"
      timeout 60 python3 diag_default.py --part micro --jsonl "$OUT/diag.jsonl" > "$OUT/diag.log" 2>&1
      for i in $(seq 1 ${DIAG_PROCS:-4}); do
        if [ $((i % 2)) = 1 ]; then PIN=""; else PIN=${DIAG_PIN:-8,9}; fi
        snap "blocks $i pin=$PIN" >> "$OUT/env.txt"
        timeout ${T_PROC:-70} python3 diag_default.py --part blocks --seed $i --sweeps ${SWEEPS:-10} ${PIN:+--pin $PIN} \
          --jsonl "$OUT/diag.jsonl" >> "$OUT/diag.log" 2>&1
        echo "blocks $i rc=$?" >> "$OUT/diag.log"
      done
      snap "diag end" >> "$OUT/env.txt"
      if [ "${PIN_STUDY:-}" = auto ]; then  # pin the studies where the pinned diag processes swung less
        PIN_STUDY=$(python3 diag_default.py --pick-pin "$OUT/diag.jsonl" 2>>"$OUT/diag.log"); echo "PIN_STUDY=$PIN_STUDY" >> "$OUT/env.txt"
      fi ;;
    default)
      timeout $((${BUDGET_DEF:-150} + 25)) python3 bench_sdk_study.py "${COMMON[@]}" --mode default --procs ${PROCS:-16} ${PIN_STUDY:+--pin $PIN_STUDY} \
        --seed ${SEED_DEF:-152} --budget-s ${BUDGET_DEF:-150} --jsonl "$OUT/study_default.jsonl" > "$OUT/study_default.log" 2>&1
      echo "default rc=$? $(date -u +%T)" >> "$OUT/env.txt" ;;
    ro)
      timeout $((${BUDGET_RO:-80} + 25)) python3 bench_sdk_study.py "${COMMON[@]}" --mode reduce-overhead --procs ${PROCS_RO:-8} ${PIN_STUDY:+--pin $PIN_STUDY} \
        --seed ${SEED_RO:-151} --budget-s ${BUDGET_RO:-80} --jsonl "$OUT/study_ro.jsonl" > "$OUT/study_ro.log" 2>&1
      echo "ro rc=$? $(date -u +%T)" >> "$OUT/env.txt" ;;
  esac
done
grep -h -A8 "^TARGETS" "$OUT"/study_*.log > "$OUT/targets.txt" 2>/dev/null
cat "$OUT/env.txt" | grep -vE "^cpu" | tail -20; cat "$OUT/diag.log" 2>/dev/null | grep -v Warning; cat "$OUT/targets.txt" 2>/dev/null
true
