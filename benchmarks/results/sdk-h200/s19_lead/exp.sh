#!/bin/bash
set -u
export PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1 PYTORCH_NVML_BASED_CUDA_CHECK=1
D=$(cd "$(dirname "$0")" && pwd); H=$D/tree
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $D/whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$H:$H/benchmarks
cd "$H/benchmarks"
{ date -u; uptime; } > "$OUT/exp_env.txt"
FLUSH_S=${FLUSH_S:-30} timeout $((${BUDGET:-185} + 40)) python3 $D/exp_flush.py --device cuda --hidden 4096 --layers 4 --tokens 8 \
  --dtype bfloat16 --vocab 32000 --decode-steps 64 --no-control --fork --reqs 4 --rounds 2 --warmup-rounds 1 --bursts 4 \
  --interleave --blocks 8 --block-reqs 6 --aa --mode default --procs 16 --seed 194 --budget-s ${BUDGET:-185} \
  --jsonl "$OUT/study_default_flush30.jsonl" > "$OUT/study_default_flush30.log" 2>&1
echo "rc=$? $(date -u +%T)" >> "$OUT/exp_env.txt"
grep -A10 "^TARGETS (default; protocol 'block'" "$OUT/study_default_flush30.log"
grep -B1 -A3 "instrumented + fingerprint vs plain\|no fingerprint, vs plain\|A/A: plain" "$OUT/study_default_flush30.log" | grep -E "within-round|per process" | tail -12
