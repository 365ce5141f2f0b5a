#!/bin/bash
# Session 19 (lead): default mode with --diagnose (request protocol): where the launch-bound host's cost goes.
set -u
export PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1 PYTORCH_NVML_BASED_CUDA_CHECK=1
D=$(cd "$(dirname "$0")" && pwd); H=$D/tree
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $D/whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$H:$H/benchmarks
cd "$H/benchmarks"
{ date -u; uptime; nvidia-smi --query-gpu=name,clocks.sm --format=csv; } > "$OUT/diag_env.txt" 2>&1
timeout $((${BUDGET:-200} + 40)) python3 bench_sdk_study.py --device cuda --hidden 4096 --layers 4 --tokens 8 --dtype bfloat16 \
  --vocab 32000 --decode-steps 64 --no-control --fork --reqs 4 --rounds 2 --warmup-rounds 1 --bursts 4 --aa --diagnose \
  --mode default --procs ${PROCS:-10} --seed 193 --budget-s ${BUDGET:-200} --jsonl "$OUT/study_default_diag.jsonl" \
  > "$OUT/study_default_diag.log" 2>&1
echo "rc=$? $(date -u +%T)" >> "$OUT/diag_env.txt"
grep -v "Warning\|warn(" "$OUT/study_default_diag.log" | tail -60
