#!/bin/bash
# Session 31, call 1 (from a clean export of main in gpu/s31, the run tool carrying it):
#   cd gpu/s31 && bash benchmarks/results/sdk-h200/s31_lead/call1.sh
# (1) bundles and kernel evidence on CUDA (the fault suite goes in call 2) (benchmarks/results/bundle-h200/s31_walk.sh); (2) the flush's tail
# after the device (diag_tail.py), reduce-overhead then default mode.
ROOT=$PWD
SUITE=0 bash benchmarks/results/bundle-h200/s31_walk.sh > "$OUT/walk.log" 2>&1
echo "walk rc=$?"; grep -E "^== |rc=|error:|verified|accuracy|Error|FAILED|passed|failed" "$OUT/walk.log" | head -60
mkdir -p /tmp/ns31 && ln -sfn "$ROOT" /tmp/ns31/inferensics
export PYTHONPATH=/tmp/site:/tmp/ns31 PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
cd "$ROOT/benchmarks"
for m in reduce-overhead default; do
  timeout ${DIAG_S:-150} python3 results/sdk-h200/s31_lead/diag_tail.py --mode $m --reps ${REPS:-25} 2>&1 | grep -v Warning | tee -a "$OUT/diag_tail.log"
done
