#!/bin/bash
# Final H200 study (issue 25): both modes, interleaved request by request, fresh forked processes,
# decode sizes (hidden 4096, 4 layers, 8 tokens, bf16, LM head 32000).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/sdk-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1 PYTORCH_NVML_BASED_CUDA_CHECK=1
B=${BUDGET_S:-125}
{
  date -u; nproc; uptime; lscpu | grep -iE "model name|numa node0|MHz"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv
  python3 -c "import torch, triton, numpy, pydantic; print('torch', torch.__version__, 'triton', triton.__version__, 'numpy', numpy.__version__, 'pydantic', pydantic.__version__)"
} > "$OUT/env.txt" 2>&1
cd "$HERE/benchmarks"
COMMON=(--device cuda --hidden 4096 --layers 4 --tokens 8 --dtype bfloat16 --vocab 32000
        --decode-steps 64 --reqs 6 --rounds 2 --warmup-rounds 1 --bursts 4 --procs 20 --no-control --fork
        --interleave --budget-s "$B")
python3 bench_sdk_study.py "${COMMON[@]}" --mode reduce-overhead --seed 31 \
  --jsonl "$OUT/study_ro.jsonl" > "$OUT/study_ro.log" 2>&1
echo "reduce-overhead rc=$? $(date -u +%T)" >> "$OUT/env.txt"
python3 bench_sdk_study.py "${COMMON[@]}" --mode default --seed 32 \
  --jsonl "$OUT/study_default.jsonl" > "$OUT/study_default.log" 2>&1
echo "default rc=$? $(date -u +%T)" >> "$OUT/env.txt"
grep -A7 "^TARGETS" "$OUT/study_ro.log" "$OUT/study_default.log" > "$OUT/targets.txt"
