#!/bin/bash
# Lead's H200 visit, session 21 (issue 25 point 10): session 17's run.sh with REQS, ROUNDS, BURSTS_S settable (more block pairs per process).
# STEPS: percall (diag_s16.py --part percall, reduce-overhead), ro / default (the studies, gpu5's protocol).
# BLOCK_REQS (default 6): requests a block of the throughput protocol (session 18: 18, about one flush interval of requests).
set -u
export PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1 PYTORCH_NVML_BASED_CUDA_CHECK=1
D=$(cd "$(dirname "$0")" && pwd); H=$D/tree
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $D/whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$H:$H/benchmarks
{ date -u; nproc; uptime; lscpu | grep -iE "model name|numa|MHz|^CPU\(s\)"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
  python3 -c "import torch, triton, pydantic; print('torch', torch.__version__, 'triton', triton.__version__, 'pydantic', pydantic.__version__)"
  cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null; } >"$OUT/env.txt" 2>&1
cd "$H/benchmarks"
STUDY=(--device cuda --hidden 4096 --layers 4 --tokens 8 --dtype bfloat16 --vocab 32000 --decode-steps 64
       --no-control --fork --reqs ${REQS:-4} --rounds ${ROUNDS:-2} --warmup-rounds 1 --bursts ${BURSTS_S:-4} --interleave --blocks ${BLOCKS:-8}
       --block-reqs ${BLOCK_REQS:-6} --aa)
for step in ${STEPS:-percall ro default}; do
  echo "== $step $(date -u +%T) $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/env.txt"
  case $step in
    percall)
      timeout ${PERCALL_S:-120} python3 diag_s16.py --part percall --mode reduce-overhead --bursts ${BURSTS:-60} \
        --jsonl "$OUT/diag.jsonl" >> "$OUT/diag.log" 2>&1 ;;
    ro)
      timeout $((${BUDGET_RO:-170} + 40)) python3 bench_sdk_study.py "${STUDY[@]}" --mode reduce-overhead --procs ${PROCS_RO:-16} \
        --seed ${SEED_RO:-173} --budget-s ${BUDGET_RO:-170} --jsonl "$OUT/study_ro${TAG:-}.jsonl" > "$OUT/study_ro${TAG:-}.log" 2>&1 ;;
    default)
      timeout $((${BUDGET_DEF:-200} + 40)) python3 bench_sdk_study.py "${STUDY[@]}" --blocks ${BLOCKS_DEF:-8} --mode default --procs ${PROCS_DEF:-16} \
        --seed ${SEED_DEF:-172} --budget-s ${BUDGET_DEF:-200} --jsonl "$OUT/study_default${TAG:-}.jsonl" > "$OUT/study_default${TAG:-}.log" 2>&1 ;;
  esac
  echo "   $step rc=$? $(date -u +%T)" >> "$OUT/env.txt"
done
grep -h -A8 "^TARGETS" "$OUT"/study_*.log > "$OUT/targets.txt" 2>/dev/null
cat "$OUT/env.txt"; grep -v Warning "$OUT/diag.log" 2>/dev/null | head -40; cat "$OUT/targets.txt" 2>/dev/null
true
